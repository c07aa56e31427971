"""Errors a command reports to its user: a stable code, a sentence and an exit code."""

from __future__ import annotations

from enum import StrEnum

from runtime.ledger.coded_error import CodedError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_PARKED = 3


class CliError(CodedError):
    """A user-facing failure: printed as ``maka: error [code]: message``, never as a traceback."""

    def __init__(self, code: StrEnum, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(code, message, text=f"{code}: {message}")
        self.exit_code = exit_code
