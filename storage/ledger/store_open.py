"""The checks of opening ``runtime.sqlite`` read-only, without the store's writers.

``open_store`` (``storage/ledger/ledger_store.py``) opens through these; so does a command that only
lists (``maka sessions``: ``storage/sessions/session_listing.py``), which then does not pay for
importing
the writers, the event model and their validators at start-up.
"""

from __future__ import annotations

import os
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
    if version is None:
        # (imported only here: listing a database that is there needs none of it)
        from storage.ledger.store_verification import refuse_lost_database

        refuse_lost_database(path)  # an empty file where the stamp recorded data
    else:
        refuse_if_newer(version)
        confirm_version_through_wal(path)
    return version


def open_read_connection(data_dir: Path) -> tuple[sqlite3.Connection, Path]:
    """A read-only connection to ``<data_dir>/runtime.sqlite`` at this program's schema version:
    ``store_not_found``, ``schema_newer_than_program``, ``schema_upgrade_required``,
    ``store_corrupt`` otherwise."""
    path = Path(data_dir) / DATABASE_NAME
    if file_version(path) is None:
        if os.path.lexists(path):
            raise StoreRefusal(
                StoreCode.STORE_NOT_FOUND,
                f"the database file {path} is empty: nothing was written to it yet",
            )
        raise StoreRefusal(StoreCode.STORE_NOT_FOUND, f"no database at {path}")
    try:
        conn = connect_reader(path)
    except StoreRefusal as refusal:
        raise _disk_full_or(refusal, path) from None
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
    except StoreRefusal as refusal:
        conn.close()
        raise _disk_full_or(refusal, path) from None
    except BaseException:
        conn.close()
        raise
    return conn, path


_FULL_BELOW_BYTES = 64 * 1024  # SQLite's WAL index alone takes 32 KiB


def _disk_full_or(refusal: StoreRefusal, path: Path) -> StoreRefusal:
    """SQLite's bare "disk I/O error" on a reader's first read, said as ``disk_full`` when the
    disk has no room left (the reader had to create the database's WAL index beside it), as a
    writer says it; any other refusal as it is."""
    if refusal.code is not StoreCode.STORE_IO_FAILED:
        return refusal
    import shutil  # (only here: ``maka sessions`` starts without it)

    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        return refusal
    if free >= _FULL_BELOW_BYTES:
        return refusal
    return StoreRefusal(
        StoreCode.DISK_FULL,
        f"the disk is full, so the database {path} could not be read (SQLite creates its index "
        f"file {path.name}-shm beside it to read it: {refusal.message}). Free some space, then "
        "try again; nothing was changed.",
    )
