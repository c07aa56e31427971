"""The checks of opening ``runtime.sqlite`` read-only, without the store's writers.

``open_store`` (``storage/ledger/ledger_store.py``) opens through these; so does a command that only
lists (``maka sessions``: ``storage/sessions/session_listing.py``), which then does not pay for
importing
the writers, the event model and their validators at start-up.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from runtime.ledger.codes import StoreCode
from runtime.ledger.store_ports import StoreRefusal
from storage.ledger.database_choice import DATABASE_URL_VARIABLE, database_url
from storage.ledger.ledger_schema import (
    SCHEMA_VERSION,
    check_tables,
    read_user_version,
    refuse_if_newer,
)
from storage.ledger.sqlite_connection import (
    DATABASE_NAME,
    connect_reader,
    read_file_user_version,
    sqlite_errors,
)

__all__ = [
    "DATABASE_URL_VARIABLE",
    "confirm_version_through_wal",
    "database_url",
    "file_version",
    "open_read_connection",
]


def confirm_version_through_wal(path: Path) -> None:
    """With a ``-wal`` file present the file header may be stale; ask SQLite (read-only)."""
    wal = path.with_name(path.name + "-wal")
    if not wal.exists() or wal.stat().st_size == 0:
        return
    conn = connect_reader(path)
    try:
        with sqlite_errors():
            refuse_if_newer(read_user_version(conn))
    finally:
        conn.close()


def file_version(path: Path) -> int | None:
    """The database's schema version before any connection exists (None: no database yet);
    ``schema_newer_than_program`` leaves the file byte-for-byte untouched."""
    version = read_file_user_version(path)
    if version is not None:
        refuse_if_newer(version)
        confirm_version_through_wal(path)
    return version


def open_read_connection(data_dir: Path) -> tuple[sqlite3.Connection, Path]:
    """A read-only connection to ``<data_dir>/runtime.sqlite`` at this program's schema version:
    ``store_not_found``, ``schema_newer_than_program``, ``schema_upgrade_required``,
    ``store_corrupt`` otherwise."""
    path = Path(data_dir) / DATABASE_NAME
    if file_version(path) is None:
        raise StoreRefusal(StoreCode.STORE_NOT_FOUND, f"no database at {path}")
    conn = connect_reader(path)
    try:
        with sqlite_errors():
            current = read_user_version(conn)
            refuse_if_newer(current)
            if current != SCHEMA_VERSION:
                raise StoreRefusal(
                    StoreCode.SCHEMA_UPGRADE_REQUIRED,
                    f"this data folder was written by an older Maka: its saved data must be "
                    f"upgraded from schema {current} to {SCHEMA_VERSION}, which starting the "
                    f"desktop app or any 'maka run' or 'maka resume' in it does; nothing was "
                    f"changed",
                )
            check_tables(conn)
    except BaseException:
        conn.close()
        raise
    return conn, path
