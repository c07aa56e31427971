"""Changing a store's database behind its back, as another program editing the file would.

Tests of what the store, the doctor and the planner make of rows they did not write use this
instead of the store's own connection (which is private): a separate connection to the same
file, each statement committed at once. The store sees the change like any other writer's
(SQLite's ``data_version`` moves, so its per-run state is read again).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing

from storage.ledger.ledger_store import SqliteLedgerStore
from storage.ledger.sqlite_connection import BUSY_TIMEOUT_MS


def edit_behind_the_back(store: SqliteLedgerStore, statement: str, *args: object) -> None:
    """Run one SQL statement on ``store``'s database file and commit it."""
    with closing(sqlite3.connect(store.path, isolation_level=None)) as conn:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(statement, args)
