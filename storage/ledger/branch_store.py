"""Reading and writing ``session_branches`` (schema version 5, ``schema_v5.py``)."""

from __future__ import annotations

import sqlite3

from runtime.ledger import codes  # the writers' codes load when a write is refused
from runtime.ledger.branch_facts import BranchRecord, record_from_bytes
from runtime.ledger.codes import StoreCode
from runtime.ledger.store_ports import SessionRecord, StoreRefusal
from storage.ledger import run_header_store as headers

_COLUMNS = "fact, created_at"


def insert_branch(conn: sqlite3.Connection, session: SessionRecord, record: BranchRecord) -> None:
    """The new session's row and its ``branchStart`` fact (the caller's transaction)."""
    if record.session_id != session.session_id:
        raise StoreRefusal(
            codes.WriterRejectionCode.IDENTITY_CONFLICT, "the fact names another session"
        )
    source = conn.execute(
        "SELECT session_id FROM runs WHERE run_id = ?", (record.source_run_id,)
    ).fetchone()
    if source is None or source[0] != record.source_session_id:
        raise StoreRefusal(
            codes.WriterRejectionCode.IDENTITY_CONFLICT,
            "the branch's source run is not in its session",
        )
    headers.insert_session(conn, session)
    insert_fact(conn, record)


def insert_fact(conn: sqlite3.Connection, record: BranchRecord) -> None:
    """The ``branchStart`` row alone (its session exists: an import inserted it)."""
    conn.execute(
        """INSERT INTO session_branches (session_id, source_session_id, source_run_id,
            source_high_water, boundary_event_id, source_prefix_digest, fact, fact_digest,
            created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (
            record.session_id,
            record.source_session_id,
            record.source_run_id,
            record.source_high_water,
            record.boundary_event_id,
            record.source_prefix_digest,
            record.fact_bytes,
            record.fact_digest,
            record.created_at,
        ),
    )


def source_prefix_digest(conn: sqlite3.Connection, record: BranchRecord) -> str | None:
    """The digest of the source run's events 1..high water as stored now (None: the run or an
    event of the prefix is not here)."""
    return stored_prefix_digest(
        conn, record.source_run_id, record.source_session_id, record.source_high_water
    )


def stored_prefix_digest(
    conn: sqlite3.Connection, run_id: str, session_id: str, high_water: int
) -> str | None:
    """The prefix digest of ``run_id``'s events 1..``high_water`` as stored now (a branch's or a
    continuation's source); None: the run (of that session) or an event of it is not here."""
    from runtime.ledger.canonical_codec import prefix_digest
    from storage.ledger.event_rows import read_invocation_rows

    header = headers.read_header(conn, run_id)
    if header is None or header.session_id != session_id:
        return None
    rows = read_invocation_rows(conn, header.invocation_id)
    chosen = [(row.seq, row.payload) for row in rows if row.seq <= high_water]
    if not chosen or chosen[-1][0] != high_water:
        return None
    identity = {
        "sessionId": header.session_id,
        "invocationId": header.invocation_id,
        "runId": header.run_id,
        "turnId": header.turn_id,
    }
    return prefix_digest(identity, chosen)


def _record(row: tuple[bytes, int]) -> BranchRecord:
    try:
        return record_from_bytes(bytes(row[0]), int(row[1]))
    except ValueError as error:
        raise StoreRefusal(
            StoreCode.STORE_CORRUPT, f"a branchStart fact is damaged: {error}"
        ) from None


def _has_table(conn: sqlite3.Connection) -> bool:
    """A read-only store of an older schema (not yet upgraded) has no branches."""
    return has_table(conn, "session_branches")


def has_table(conn: sqlite3.Connection, table: str) -> bool:
    """Whether the store's schema has ``table`` (a table of a later schema version). Spelled
    as the probe the PostgreSQL connection translates to its own catalogue."""
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()
    return row is not None


def read_branch(conn: sqlite3.Connection, session_id: str) -> BranchRecord | None:
    if not _has_table(conn):
        return None
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM session_branches WHERE session_id = ?", (session_id,)
    ).fetchone()
    return _record(row) if row is not None else None


def list_branches(conn: sqlite3.Connection) -> list[BranchRecord]:
    """Every branch, oldest first."""
    if not _has_table(conn):
        return []
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM session_branches ORDER BY created_at, session_id"
    ).fetchall()
    return [_record(row) for row in rows]
