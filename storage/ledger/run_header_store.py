"""Sessions and run headers (rows of ``sessions`` and ``runs``).

A header is created non-terminal (``created`` or ``running``), may move ``created`` ->
``running``, and becomes terminal only inside the run-ending transaction that also commits the
terminal event (``run_ending_writer``); so a header can never claim an ending the ledger lacks.
The admission fields (ids, cwd, workspace identity, owner epoch, parent, ``continuationSource``,
``created_at``) never change; ``create_run`` with the same admission fields is an idempotent
retry, with different ones an ``identity_conflict``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from runtime.ledger import codes  # the writers' codes load when a write is refused
from runtime.ledger.codes import StoreCode
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import (
    TERMINAL_RUN_STATUSES,
    RunFact,
    RunHeader,
    RunStatus,
    SessionRecord,
    StoreRefusal,
)

_RUN_COLUMNS = (
    "run_id, session_id, invocation_id, turn_id, status, failure_class, cwd, workspace_identity,"
    " owner_epoch, parent_run_id, continuation_source, created_at, updated_at, completed_at"
)


def _require_text(value: object, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise StoreRefusal(
            codes.WriterRejectionCode.IDENTITY_CONFLICT, f"{name} must be a non-empty string"
        )
    return value


def _require_time(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise StoreRefusal(
            codes.WriterRejectionCode.IDENTITY_CONFLICT, f"{name} must be a non-negative integer"
        )
    return value


# ---- sessions ---------------------------------------------------------------------------------


def _session_from_row(row: Sequence[Any]) -> SessionRecord:
    return SessionRecord(session_id=row[0], cwd=row[1], title=row[2], created_at=row[3])


def insert_session(conn: sqlite3.Connection, session: SessionRecord) -> bool:
    """Create a session; ``False`` for an identical retry, ``identity_conflict`` otherwise."""
    _require_text(session.session_id, "session_id")
    if not isinstance(session.cwd, str) or not isinstance(session.title, str):
        raise StoreRefusal(
            codes.WriterRejectionCode.IDENTITY_CONFLICT, "cwd and title must be strings"
        )
    _require_time(session.created_at, "created_at")
    existing = read_session(conn, session.session_id)
    if existing is not None:
        if existing != session:
            raise StoreRefusal(
                codes.WriterRejectionCode.IDENTITY_CONFLICT,
                f"session {session.session_id} already exists with other values",
            )
        return False
    conn.execute(
        "INSERT INTO sessions (session_id, cwd, title, created_at) VALUES (?, ?, ?, ?)",
        (session.session_id, session.cwd, session.title, session.created_at),
    )
    return True


def name_new_session(
    conn: sqlite3.Connection, session_id: str, title: str, default_title: str
) -> bool:
    """The session's title becomes ``title`` if it has no run yet and still has
    ``default_title`` (a session made by the desktop is named after its folder until its first
    message names it). True when it changed."""
    if not isinstance(title, str) or not title:
        raise StoreRefusal(codes.WriterRejectionCode.IDENTITY_CONFLICT, "a title must be text")
    changed = conn.execute(
        "UPDATE sessions SET title = ? WHERE session_id = ? AND title = ?"
        " AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.session_id = sessions.session_id)",
        (title, session_id, default_title),
    ).rowcount
    return changed == 1


def read_session(conn: sqlite3.Connection, session_id: str) -> SessionRecord | None:
    row = conn.execute(
        "SELECT session_id, cwd, title, created_at FROM sessions WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    return _session_from_row(row) if row is not None else None


def list_sessions(conn: sqlite3.Connection) -> list[SessionRecord]:
    rows = conn.execute(
        "SELECT session_id, cwd, title, created_at FROM sessions ORDER BY created_at, session_id"
    ).fetchall()
    return list(map(SessionRecord._make, rows))  # the columns in the record's order


# ---- run headers ------------------------------------------------------------------------------


def header_from_row(row: Sequence[Any]) -> RunHeader:
    try:
        source = None
        if row[10] is not None:
            import json  # a continuation's header only: a list of sessions does without it

            source = json.loads(row[10])
        return RunHeader(
            run_id=row[0],
            session_id=row[1],
            invocation_id=row[2],
            turn_id=row[3],
            status=RunStatus(row[4]),
            failure_class=row[5],
            cwd=row[6],
            workspace_identity=row[7],
            owner_epoch=row[8],
            parent_run_id=row[9],
            continuation_source=source,
            created_at=row[11],
            updated_at=row[12],
            completed_at=row[13],
        )
    except (ValueError, TypeError) as error:
        raise StoreRefusal(
            StoreCode.STORE_CORRUPT, f"run header {row[0]!r} cannot be read: {error}"
        ) from None


def read_header(conn: sqlite3.Connection, run_id: str) -> RunHeader | None:
    row = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return header_from_row(row) if row is not None else None


def require_header(conn: sqlite3.Connection, run_id: str) -> RunHeader:
    header = read_header(conn, run_id)
    if header is None:
        raise StoreRefusal(StoreCode.RUN_NOT_FOUND, f"run {run_id} has no header")
    return header


def list_session_headers(conn: sqlite3.Connection, session_id: str) -> list[RunHeader]:
    rows = conn.execute(
        f"SELECT {_RUN_COLUMNS} FROM runs WHERE session_id = ? ORDER BY created_at, run_id",
        (session_id,),
    ).fetchall()
    return [header_from_row(row) for row in rows]


def list_headers(
    conn: sqlite3.Connection, statuses: Iterable[RunStatus] | None = None
) -> list[RunHeader]:
    if statuses is None:
        rows = conn.execute(
            f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY created_at, run_id"
        ).fetchall()
    else:
        wanted = sorted({RunStatus(status).value for status in statuses})
        marks = ", ".join("?" for _ in wanted)
        rows = conn.execute(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE status IN ({marks})"
            " ORDER BY created_at, run_id",
            wanted,
        ).fetchall()
    return [header_from_row(row) for row in rows]


def list_run_facts(conn: sqlite3.Connection) -> list[RunFact]:
    """Every run's :data:`RunFact`, in no particular order: the columns a list of sessions needs
    instead of whole headers (``maka sessions`` on 1,000 sessions). A row is refused exactly
    as :func:`header_from_row` refuses it (``store_corrupt``)."""
    rows = conn.execute(
        "SELECT run_id, session_id, status, failure_class, created_at, updated_at,"
        " continuation_source FROM runs"
    ).fetchall()
    statuses: dict[object, RunStatus] = {}
    facts: list[RunFact] = []
    for run_id, session_id, value, failure_class, created_at, updated_at, source in rows:
        status = statuses.get(value)
        try:
            if status is None:
                status = statuses[value] = RunStatus(value)
            if source is not None:
                import json

                json.loads(source)
        except (ValueError, TypeError) as error:
            raise StoreRefusal(
                StoreCode.STORE_CORRUPT, f"run header {run_id!r} cannot be read: {error}"
            ) from None
        facts.append((session_id, run_id, status, failure_class, created_at, updated_at))
    return facts


def _canonical_source(source: Any) -> bytes:
    """Canonical bytes of a continuationSource. The codec (and the pydantic event model behind
    it) is imported here, not with the module: reading headers (``maka sessions``) needs
    neither."""
    from runtime.ledger.canonical_codec import canonical_json_bytes

    return canonical_json_bytes(dict(source))


def _admission(header: RunHeader) -> tuple[object, ...]:
    source = (
        _canonical_source(header.continuation_source)
        if header.continuation_source is not None
        else None
    )
    return (
        header.run_id,
        header.session_id,
        header.invocation_id,
        header.turn_id,
        header.cwd,
        header.workspace_identity,
        header.owner_epoch,
        header.parent_run_id,
        source,
        header.created_at,
    )


def validate_new_header(header: RunHeader) -> bytes | None:
    """Shape checks of a header about to be created; returns the canonical continuationSource."""
    for name in ("run_id", "session_id", "invocation_id", "turn_id"):
        _require_text(getattr(header, name), name)
    if not isinstance(header.cwd, str):
        raise StoreRefusal(codes.WriterRejectionCode.IDENTITY_CONFLICT, "cwd must be a string")
    for name in ("created_at", "updated_at", "owner_epoch"):
        _require_time(getattr(header, name), name)
    if header.completed_at is not None:
        _require_time(header.completed_at, "completed_at")
    try:
        status = RunStatus(header.status)
    except ValueError:
        raise StoreRefusal(
            StoreCode.RUN_STATUS_CONFLICT, f"unknown run status {header.status!r}"
        ) from None
    if status in TERMINAL_RUN_STATUSES:
        raise StoreRefusal(
            StoreCode.RUN_STATUS_CONFLICT,
            "a run header is created non-terminal; its ending is committed with the terminal "
            "event (commit_run_ending)",
        )
    if header.continuation_source is None:
        return None
    try:
        return _canonical_source(header.continuation_source)
    except (LedgerError, TypeError, ValueError) as error:
        raise StoreRefusal(
            codes.WriterRejectionCode.IDENTITY_CONFLICT, f"continuationSource is not JSON: {error}"
        ) from None


def insert_header(conn: sqlite3.Connection, header: RunHeader) -> bool:
    """Create a run header; ``False`` when the same admission already exists."""
    source = validate_new_header(header)
    existing = read_header(conn, header.run_id)
    if existing is not None:
        if _admission(existing) != _admission(header):
            raise StoreRefusal(
                codes.WriterRejectionCode.IDENTITY_CONFLICT,
                f"run {header.run_id} already exists with another admission",
            )
        return False
    if read_session(conn, header.session_id) is None:
        raise StoreRefusal(StoreCode.SESSION_NOT_FOUND, f"session {header.session_id} not found")
    other = conn.execute(
        "SELECT run_id FROM runs WHERE invocation_id = ?", (header.invocation_id,)
    ).fetchone()
    if other is not None:
        raise StoreRefusal(
            codes.ScanIssueCode.INVOCATION_IDENTITY_CONFLICT,
            f"invocation {header.invocation_id} already belongs to run {other[0]}",
        )
    conn.execute(
        f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            header.run_id,
            header.session_id,
            header.invocation_id,
            header.turn_id,
            RunStatus(header.status).value,
            header.failure_class,
            header.cwd,
            header.workspace_identity,
            header.owner_epoch,
            header.parent_run_id,
            source,
            header.created_at,
            header.updated_at,
            header.completed_at,
        ),
    )
    return True


def mark_running(conn: sqlite3.Connection, run_id: str, now: int) -> RunHeader:
    header = require_header(conn, run_id)
    if header.status is RunStatus.RUNNING:
        return header  # an idempotent retry
    if header.status is not RunStatus.CREATED:
        raise StoreRefusal(
            StoreCode.RUN_STATUS_CONFLICT, f"run {run_id} is {header.status}, not created"
        )
    conn.execute(
        "UPDATE runs SET status = 'running', updated_at = ?"
        " WHERE run_id = ? AND status = 'created'",
        (now, run_id),
    )
    return require_header(conn, run_id)


def set_terminal(
    conn: sqlite3.Connection,
    run_id: str,
    status: RunStatus,
    failure_class: str | None,
    *,
    updated_at: int,
    completed_at: int,
) -> None:
    """Only the run-ending writer calls this, in the transaction holding the terminal event."""
    conn.execute(
        "UPDATE runs SET status = ?, failure_class = ?, updated_at = ?, completed_at = ?"
        " WHERE run_id = ?",
        (status.value, failure_class, updated_at, completed_at, run_id),
    )


def restore_open_status(
    conn: sqlite3.Connection, run_id: str, status: RunStatus, updated_at: int
) -> None:
    """Import only: give an imported open run the exported non-terminal status and timestamp."""
    if status in TERMINAL_RUN_STATUSES:
        raise StoreRefusal(StoreCode.RUN_STATUS_CONFLICT, "an ending needs its terminal event")
    conn.execute(
        "UPDATE runs SET status = ?, updated_at = ? WHERE run_id = ?"
        " AND status IN ('created', 'running')",
        (status.value, updated_at, run_id),
    )


def read_owner_epoch(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = 'owner_epoch'").fetchone()
    if row is None:
        raise StoreRefusal(StoreCode.STORE_CORRUPT, "the owner epoch is missing")
    value: int = row[0]
    return value


def raise_owner_epoch(conn: sqlite3.Connection, at_least: int | None = None) -> int:
    """Increment the durable owner epoch (or raise it to ``at_least``); returns the new value."""
    current = read_owner_epoch(conn)
    new = current + 1 if at_least is None else max(current, at_least)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'owner_epoch'", (new,))
    return new
