"""The one way past ``SqliteLedgerStore``'s public methods, for measurements only.

A benchmark that counts SQLite's page-cache misses (``sqlite3_db_status``) needs the very
connection handle the store works with; no statement may be run through it.
"""

from __future__ import annotations

import sqlite3

from storage.ledger.ledger_store import SqliteLedgerStore


def connection_to_measure(store: SqliteLedgerStore) -> sqlite3.Connection:
    """``store``'s own connection, to read its page-cache counters (never to run SQL)."""
    return store._conn
