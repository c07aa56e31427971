"""Errors a command reports to its user: a stable code, a sentence and an exit code."""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_PARKED = 3


class CliError(Exception):
    """A user-facing failure: printed as ``maka: error [code]: message``, never as a traceback."""

    def __init__(self, code: str, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.exit_code = exit_code
