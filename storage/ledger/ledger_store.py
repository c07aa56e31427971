"""``SqliteLedgerStore``: the SQLite implementation of the ledger ports, and ``open_store``.

One store = one connection to ``<data_dir>/runtime.sqlite``, shared by the threads of a process
behind a re-entrant lock (SQLite serialises writers across processes; the lock serialises this
process's threads on its single connection). Writers are narrow (one per kind of fact,
docs/design/architecture.md principle 3): ``append_event`` (generic), ``commit_tool_prepared`` (T1),
``commit_tool_outcome`` (T2), ``commit_recovery_bundle``, ``commit_run_ending``, plus run-header
and session creation. Each validates its candidates against per-run state and commits in one
``BEGIN IMMEDIATE`` transaction (``event_writer``).

``open_store(data_dir, read_only=True)`` opens ``mode=ro`` with ``query_only``: it works while
another process owns the directory and refuses every write with ``store_read_only``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from runtime.ledger.codes import StoreCode
from runtime.ledger.store_ports import StoreRefusal
from storage.ledger.database_choice import with_way_back
from storage.ledger.ledger_schema import compacts_after, migrate
from storage.ledger.sqlite_connection import DATABASE_NAME, connect_writer, sqlite_errors
from storage.ledger.sqlite_store import SqliteLedgerStore
from storage.ledger.store_creation import (
    create_database,
    os_refusal,
    probe_io_failure,
    remove_abandoned,
)
from storage.ledger.store_open import database_url, file_version, open_read_connection
from storage.ledger.store_verification import damaged, verify_before_write
from storage.private_files import ensure_data_dir

__all__ = ["SqliteLedgerStore", "open_store"]


def open_store(
    data_dir: Path,
    *,
    read_only: bool = False,
    full_rescan: bool = False,
    clock: Callable[[], int] | None = None,
) -> SqliteLedgerStore:
    """Open (and for a writer create and migrate) ``<data_dir>/runtime.sqlite``.

    Refusals: ``schema_newer_than_program`` (the file is left byte-for-byte untouched, and no
    ``-wal``/``-shm`` file is created), ``store_corrupt`` (not a database, or not one of ours),
    ``store_not_found`` / ``schema_upgrade_required`` (read-only opens only), ``store_locked``.
    With ``MAKA_DATABASE_URL=postgresql://...`` (or the data folder's Database setting,
    ``storage/ledger/database_choice.py``) the ledger lives on that PostgreSQL server instead
    (``storage/ledger/postgres_store.py``; the data folder keeps everything else).
    ``full_rescan`` makes every write rescan its whole run instead of using the incremental
    per-run state (a reference mode for tests; never faster).
    """
    url = database_url(data_dir)
    if url is not None:
        # Imported only here: the embedded default never loads psycopg.
        from storage.ledger.postgres_store import open_postgres_store

        try:
            return open_postgres_store(
                url, read_only=read_only, full_rescan=full_rescan, clock=clock
            )
        except StoreRefusal as refusal:
            raise with_way_back(refusal, data_dir) from None
    data_dir = Path(data_dir)
    if read_only:
        conn, path = open_read_connection(data_dir)
        return SqliteLedgerStore(conn, path, read_only=True, clock=clock)
    path = data_dir / DATABASE_NAME
    version = file_version(path)
    try:
        ensure_data_dir(data_dir)
    except OSError as error:
        raise os_refusal(error, f"creating the data folder {data_dir}") from None
    try:
        if version is None:  # no database yet (or an empty file): build it complete, publish it
            create_database(path)
        conn = _writer_connection(path)
    except StoreRefusal as refusal:
        if refusal.code is not StoreCode.STORE_IO_FAILED:
            raise
        raise probe_io_failure(data_dir) or refusal from None
    try:
        # Before the first write (a migration, the owner-epoch bump): a damaged file is
        # refused untouched.
        verify_before_write(path, conn)
        with sqlite_errors():
            version_before = migrate(conn)
        if compacts_after(version_before):
            # The upgrade rebuilt tables: give back their free pages (once; never fails the
            # open). Imported here: opening a current database needs none of it.
            from storage.ledger.upgrade_compaction import compact_after_upgrade

            compact_after_upgrade(conn, path)
        # A first open killed after publishing leaves its temporary name linked to the file.
        remove_abandoned(data_dir, path.name)
    except StoreRefusal as refusal:
        _close_untouched(conn, path)
        if refusal.code is not StoreCode.STORE_IO_FAILED:
            raise
        raise probe_io_failure(data_dir) or refusal from None
    except BaseException:
        _close_untouched(conn, path)
        raise
    return SqliteLedgerStore(conn, path, read_only=False, full_rescan=full_rescan, clock=clock)


def _close_untouched(conn: sqlite3.Connection, path: Path) -> None:
    """Close a writer connection that wrote nothing without SQLite's checkpoint on close: the
    last connection to close copies the WAL's pages into the database file, so a refused
    damaged database (``store_corrupt``, "Nothing was changed") was changed all the same. A
    read-only connection open at that moment makes the writer not the last one, and it cannot
    checkpoint itself. Best effort: where it cannot be opened, the writer just closes."""
    reader: sqlite3.Connection | None = None
    try:
        reader = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        reader.execute("PRAGMA schema_version").fetchone()
    except Exception:  # (a link loop, an unreadable file: the writer just closes)
        pass
    finally:
        conn.close()
        if reader is not None:
            reader.close()


def _writer_connection(path: Path) -> sqlite3.Connection:
    """``connect_writer`` with a read-only file or folder named as such."""
    try:
        return connect_writer(path)
    except StoreRefusal as refusal:
        if refusal.code is StoreCode.STORE_CORRUPT:
            raise damaged(refusal.message) from None
        if refusal.code is StoreCode.STORE_READ_ONLY or not os.access(path.parent, os.W_OK):
            raise StoreRefusal(
                StoreCode.DATA_DIR_READ_ONLY,
                f"the database {path} or its folder cannot be written ({refusal.message}). Give "
                "your user write access to them, or choose another --data-dir.",
            ) from None
        raise
