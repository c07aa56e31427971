"""Errors a command reports to its user: a stable code, a sentence and an exit code."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

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


def refuse_before_a_ledger(data_dir: Path, session_id: str) -> None:
    """``session_not_found`` (exit 2) for a command naming ``session_id`` where no ledger is
    yet: no database file in the data folder, or a PostgreSQL database without Maka's schema.
    Refused before opening the store, which would make an empty one (the data folder, or the
    schema on the server) to say the same."""
    from runtime.ledger.codes import StoreCode
    from storage.ledger.database_choice import no_ledger_yet

    if no_ledger_yet(data_dir):
        raise CliError(
            StoreCode.SESSION_NOT_FOUND,
            f"no session {session_id} (no data in {data_dir})",
            EXIT_USAGE,
        )
    if _server_without_ledger(data_dir):
        raise CliError(
            StoreCode.SESSION_NOT_FOUND,
            f"no session {session_id} (the PostgreSQL database holds no Maka ledger yet)",
            EXIT_USAGE,
        )


def _server_without_ledger(data_dir: Path) -> bool:
    from runtime.ledger.ledger_errors import LedgerError
    from storage.ledger.database_choice import database_url

    try:
        url = database_url(data_dir)
    except LedgerError:
        return False  # (opening the store refuses it, with its code)
    if url is None:
        return False
    from storage.ledger.postgres_store import holds_no_ledger

    return holds_no_ledger(url)


def say_error(code: object, message: str) -> None:
    """A refusal inside a chat (``maka tui``), printed as the ``maka`` command prints it; the
    chat goes on."""
    import sys

    print(f"maka: error [{code}]: {message}", file=sys.stderr, flush=True)
