"""Sessions and run headers read-only, without the store's writers (``maka sessions``).

Opens through the same checks as ``open_store(read_only=True)`` (``storage/ledger/store_open.py``)
and
reads with the header store's own functions, in one snapshot; importing it costs SQLite and the
header rows only. Every run header is read in one query, the first time a session's runs are asked
for (a list asks for every session's), instead of one query per session; a list of sessions
(``list_session_overviews``) reads only the columns of every run it needs
(``list_run_facts``), in one query too.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from runtime.ledger.branch_facts import BranchRecord
from runtime.ledger.store_ports import RunFact, RunHeader, SessionRecord
from storage.ledger import branch_store as branches
from storage.ledger import run_header_store as headers
from storage.ledger.sqlite_connection import read_transaction, sqlite_errors
from storage.ledger.store_open import database_url, open_read_connection


class SessionListing:
    """``list_sessions`` and ``list_session_runs`` of a data directory; use as a context
    manager (``store_not_found`` and the other open refusals come from ``open``)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._runs: dict[str, list[RunHeader]] | None = None

    @classmethod
    def open(cls, data_dir: Path) -> SessionListing:
        url = database_url(data_dir)
        if url is not None:  # the ledger on PostgreSQL (docs/postgres.md); psycopg only then
            from storage.ledger.postgres_store import open_postgres_read_connection

            return cls(open_postgres_read_connection(url))
        conn, _path = open_read_connection(data_dir)
        return cls(conn)

    def __enter__(self) -> SessionListing:
        with sqlite_errors():
            self._snapshot = read_transaction(self._conn)
            self._snapshot.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._snapshot.__exit__(None, None, None)
        finally:
            self._conn.close()

    def list_sessions(self) -> Sequence[SessionRecord]:
        with sqlite_errors():
            return headers.list_sessions(self._conn)

    def list_branches(self) -> Sequence[BranchRecord]:
        """Every branched session's ``branchStart`` fact (none before schema version 5)."""
        with sqlite_errors():
            return branches.list_branches(self._conn)

    def list_session_runs(self, session_id: str) -> Sequence[RunHeader]:
        """The session's runs oldest first (creation time, then id), as
        ``run_header_store.list_session_headers`` orders them."""
        if self._runs is None:
            runs: dict[str, list[RunHeader]] = {}
            with sqlite_errors():
                for header in headers.list_headers(self._conn):  # ordered the same way
                    runs.setdefault(header.session_id, []).append(header)
            self._runs = runs
        return list(self._runs.get(session_id, ()))

    def read_owner_epoch(self) -> int:
        """The data folder's owner epoch: the last start's (startup recovery bumps it)."""
        with sqlite_errors():
            return headers.read_owner_epoch(self._conn)

    def list_run_facts(self) -> Sequence[RunFact]:
        """What a list of sessions needs of every run, in one query (no whole headers)."""
        with sqlite_errors():
            return headers.list_run_facts(self._conn)
