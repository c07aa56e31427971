"""Session export and import: a JSONL file that is the session's committed ledger, run by run.

File format (``maka export SESSION -o FILE.jsonl``; UTF-8, one JSON value per line, every line
ending in ``\\n``, every line in canonical JSON (RFC 8785)):

1. one session line: ``{"kind":"maka.session.v1","sessionId","cwd","title","createdAt"}``;
2. for each run of the session, oldest first:

   - a header line ``{"kind":"maka.run_header.v1","runId","sessionId","invocationId","turnId",
     "status","cwd","ownerEpoch","createdAt","updatedAt"}`` plus, when set, ``"failureClass"``,
     ``"workspaceIdentity"``, ``"parentRunId"``, ``"continuationSource"``, ``"completedAt"``
     (absent means not set; never ``null``);
   - then the run's events in ``event_seq`` order: exactly the stored canonical bytes of each
     RuntimeEvent (a RuntimeEvent has no ``kind`` key, so the two line types never mix up).

Import (``maka import FILE.jsonl``) is all-or-nothing, in one transaction, and re-commits every
event through the same writers as live code (generic append, T1, T2, recovery bundle, run
ending), so a file can never bring in a fact the writers would refuse. It is idempotent (an
identical file again is a no-op), refuses a file that conflicts with what is stored (another
header or other bytes for a stored id), and refuses a torn last line (no final newline) unless
``accept_torn_tail``: then the valid prefix is imported and the report says how many bytes were
dropped; a run whose terminal event was in the dropped tail is imported as ``running`` (its
ending is not in the file, and a header never claims an ending the ledger lacks).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.ledger.canonical_codec import canonical_json_bytes
from runtime.ledger.codes import Lane, TransferCode, TransitionKind, WriterRejectionCode
from runtime.ledger.event_model import RuntimeEvent, decode_event_json, is_terminal
from runtime.ledger.lane_rules import is_bound_response
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import (
    TERMINAL_RUN_STATUSES,
    CommitResult,
    RunHeader,
    RunStatus,
    SessionRecord,
    StoreRefusal,
)
from storage.event_rows import EVENT_COLUMNS, decode_row
from storage.event_writer import (
    Candidate,
    LedgerTransaction,
    append_generic,
    check_generic,
    prepare_candidate,
)
from storage.recovery_bundle_writer import commit_bundle
from storage.run_ending_writer import check_ending, commit_ending
from storage.run_header_store import (
    insert_header,
    insert_session,
    list_session_headers,
    raise_owner_epoch,
    read_header,
    read_session,
)
from storage.tool_boundary_writer import check_shape, commit_outcome, commit_prepared

SESSION_KIND = "maka.session.v1"
RUN_HEADER_KIND = "maka.run_header.v1"


class TransferError(LedgerError):
    """An export or import refused; ``code`` is a ``TransferCode`` (``line`` is 1-based)."""

    def __init__(self, code: TransferCode, message: str, line: int | None = None) -> None:
        super().__init__(code, message)
        self.line = line


@dataclass(frozen=True, slots=True)
class ImportReport:
    session_id: str
    runs: int
    events_read: int
    events_created: int
    events_existing: int
    dropped_bytes: int


# ---- export -----------------------------------------------------------------------------------


def session_line(session: SessionRecord) -> bytes:
    return canonical_json_bytes(
        {
            "kind": SESSION_KIND,
            "sessionId": session.session_id,
            "cwd": session.cwd,
            "title": session.title,
            "createdAt": session.created_at,
        }
    )


def header_line(header: RunHeader) -> bytes:
    value: dict[str, Any] = {
        "kind": RUN_HEADER_KIND,
        "runId": header.run_id,
        "sessionId": header.session_id,
        "invocationId": header.invocation_id,
        "turnId": header.turn_id,
        "status": RunStatus(header.status).value,
        "cwd": header.cwd,
        "ownerEpoch": header.owner_epoch,
        "createdAt": header.created_at,
        "updatedAt": header.updated_at,
    }
    optional = {
        "failureClass": header.failure_class,
        "workspaceIdentity": header.workspace_identity,
        "parentRunId": header.parent_run_id,
        "continuationSource": dict(header.continuation_source)
        if header.continuation_source is not None
        else None,
        "completedAt": header.completed_at,
    }
    value.update({key: item for key, item in optional.items() if item is not None})
    return canonical_json_bytes(value)


def export_lines(conn: sqlite3.Connection, session_id: str) -> Iterator[bytes]:
    """Every line of the session's export (each without its newline). Call inside one read
    transaction so the file is one consistent snapshot."""
    session = read_session(conn, session_id)
    if session is None:
        raise TransferError(TransferCode.SESSION_NOT_FOUND, f"no session {session_id}")
    yield session_line(session)
    for header in list_session_headers(conn, session_id):
        yield header_line(header)
        rows = conn.execute(
            f"SELECT {EVENT_COLUMNS} FROM runtime_events WHERE invocation_id = ?"
            " ORDER BY event_seq",
            (header.invocation_id,),
        )
        for row in rows:
            yield decode_row(row).payload


# ---- parsing ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _RunBlock:
    header: RunHeader
    events: list[RuntimeEvent] = field(default_factory=list)


@dataclass(slots=True)
class _Parsed:
    session: SessionRecord
    runs: list[_RunBlock]
    dropped_bytes: int
    event_count: int


def _record(value: Mapping[str, Any], keys: set[str], optional: set[str], line: int) -> None:
    present = set(value)
    if not keys <= present or not present <= keys | optional:
        raise TransferError(
            TransferCode.IMPORT_LINE_INVALID,
            f"line {line}: a {value.get('kind')} record needs keys {sorted(keys)}"
            f" (optional {sorted(optional)})",
            line,
        )


def _text(value: Mapping[str, Any], key: str, line: int, *, empty: bool = False) -> str:
    item = value.get(key)
    if not isinstance(item, str) or (not empty and not item):
        raise TransferError(TransferCode.IMPORT_LINE_INVALID, f"line {line}: bad {key}", line)
    return item


def _int(value: Mapping[str, Any], key: str, line: int) -> int:
    item = value.get(key)
    if type(item) is not int or item < 0:
        raise TransferError(TransferCode.IMPORT_LINE_INVALID, f"line {line}: bad {key}", line)
    return item


def _parse_session(value: Mapping[str, Any], line: int) -> SessionRecord:
    _record(value, {"kind", "sessionId", "cwd", "title", "createdAt"}, set(), line)
    return SessionRecord(
        session_id=_text(value, "sessionId", line),
        cwd=_text(value, "cwd", line, empty=True),
        title=_text(value, "title", line, empty=True),
        created_at=_int(value, "createdAt", line),
    )


_HEADER_KEYS = {
    "kind", "runId", "sessionId", "invocationId", "turnId", "status", "cwd", "ownerEpoch",
    "createdAt", "updatedAt",
}  # fmt: skip
_HEADER_OPTIONAL = {
    "failureClass", "workspaceIdentity", "parentRunId", "continuationSource", "completedAt",
}  # fmt: skip


def _parse_header(value: Mapping[str, Any], line: int) -> RunHeader:
    _record(value, _HEADER_KEYS, _HEADER_OPTIONAL, line)
    try:
        status = RunStatus(value["status"])
    except ValueError:
        raise TransferError(
            TransferCode.IMPORT_LINE_INVALID, f"line {line}: bad status", line
        ) from None
    source = value.get("continuationSource")
    if source is not None and not isinstance(source, dict):
        raise TransferError(
            TransferCode.IMPORT_LINE_INVALID, f"line {line}: bad continuationSource", line
        )
    optional_text = {
        key: _text(value, key, line) if key in value else None
        for key in ("failureClass", "workspaceIdentity", "parentRunId")
    }
    return RunHeader(
        run_id=_text(value, "runId", line),
        session_id=_text(value, "sessionId", line),
        invocation_id=_text(value, "invocationId", line),
        turn_id=_text(value, "turnId", line),
        status=status,
        cwd=_text(value, "cwd", line, empty=True),
        owner_epoch=_int(value, "ownerEpoch", line),
        created_at=_int(value, "createdAt", line),
        updated_at=_int(value, "updatedAt", line),
        failure_class=optional_text["failureClass"],
        workspace_identity=optional_text["workspaceIdentity"],
        parent_run_id=optional_text["parentRunId"],
        continuation_source=source,
        completed_at=_int(value, "completedAt", line) if "completedAt" in value else None,
    )


def _invalid(line: int, message: str) -> TransferError:
    return TransferError(TransferCode.IMPORT_LINE_INVALID, f"line {line}: {message}", line)


def _structure(line: int, message: str) -> TransferError:
    return TransferError(TransferCode.IMPORT_STRUCTURE_INVALID, f"line {line}: {message}", line)


def _record_value(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if isinstance(value, dict) and value.get("kind") in (SESSION_KIND, RUN_HEADER_KIND):
        return value
    return None


def _add_record(
    value: dict[str, Any], index: int, session: SessionRecord | None, runs: list[_RunBlock]
) -> SessionRecord | None:
    """Apply one record line; returns the session (set by the first line)."""
    if value["kind"] == SESSION_KIND:
        if index != 1:
            raise _structure(index, "the session line must be the first line")
        return _parse_session(value, index)
    if session is None:
        raise _structure(index, "a run header before the session line")
    header = _parse_header(value, index)
    if header.session_id != session.session_id:
        raise _structure(index, "a run of another session")
    if any(block.header.run_id == header.run_id for block in runs):
        raise _structure(index, f"run {header.run_id} appears twice")
    runs.append(_RunBlock(header))
    return session


def parse_export(data: bytes, *, accept_torn_tail: bool = False) -> _Parsed:
    """Decode and structurally check a whole export file (nothing is written)."""
    dropped = 0
    end = data.rfind(b"\n") + 1
    if end != len(data):
        if not accept_torn_tail:
            line = data.count(b"\n") + 1
            raise TransferError(
                TransferCode.IMPORT_TORN_TAIL,
                f"line {line} is torn (the file does not end with a newline; "
                f"{len(data) - end} bytes); use --accept-torn-tail to import the lines before it",
                line,
            )
        dropped = len(data) - end
    lines = data[:end].split(b"\n")[:-1]
    if not lines:
        raise TransferError(TransferCode.IMPORT_STRUCTURE_INVALID, "the file holds no session")
    session: SessionRecord | None = None
    runs: list[_RunBlock] = []
    events = 0
    for index, raw in enumerate(lines, start=1):
        try:
            event = decode_event_json(raw)
        except LedgerError as error:
            # Not an event: a record line (a RuntimeEvent never has a top-level "kind").
            value = _record_value(raw)
            if value is None:
                raise _invalid(
                    index, f"not a RuntimeEvent ({error.code}): {error.message}"
                ) from None
            session = _add_record(value, index, session, runs)
            continue
        if not runs:
            raise _structure(index, "an event before any run header")
        block = runs[-1]
        if event["runId"] != block.header.run_id:
            raise _structure(index, f"event {event['id']} belongs to another run than its header")
        block.events.append(event)
        events += 1
    if session is None:
        raise _structure(1, "the first line must be the session line")
    return _Parsed(session, runs, dropped, events)


# ---- import -----------------------------------------------------------------------------------


def _import_run(tx: LedgerTransaction, block: _RunBlock, torn: bool) -> tuple[int, int]:
    """Commit one run's events through the writers; returns (created, existing)."""
    header = block.header
    events = block.events
    ends = bool(events) and is_terminal(events[-1])
    final_status = RunStatus(header.status)
    if final_status in TERMINAL_RUN_STATUSES and not ends and not torn:
        raise TransferError(
            TransferCode.IMPORT_STRUCTURE_INVALID,
            f"run {header.run_id} is {final_status} but its terminal event is missing",
        )
    if final_status not in TERMINAL_RUN_STATUSES and ends:
        raise TransferError(
            TransferCode.IMPORT_STRUCTURE_INVALID,
            f"run {header.run_id} has a terminal event but its header is {final_status}",
        )
    admitted = header
    if final_status in TERMINAL_RUN_STATUSES:
        admitted = _replace_status(header, RunStatus.RUNNING)
    stored = read_header(tx.conn, header.run_id)
    if stored is not None and stored != header and not (torn and stored == admitted):
        raise StoreRefusal(
            WriterRejectionCode.IDENTITY_CONFLICT,
            f"run {header.run_id} is stored with another header than the file's",
        )
    if stored is None:
        insert_header(tx.conn, admitted)
    created = existing = 0
    position = 0
    while position < len(events):
        candidates, results = _commit_next(tx, block, position)
        for offset, result in enumerate(results):
            if result.event_seq != position + offset + 1:
                raise StoreRefusal(
                    WriterRejectionCode.IDENTITY_CONFLICT,
                    f"event {events[position + offset]['id']} is stored at event_seq "
                    f"{result.event_seq}, the file has it at {position + offset + 1}",
                )
        for result in results:
            if result.created:
                created += 1
            else:
                existing += 1
        position += candidates
    return created, existing


def _replace_status(header: RunHeader, status: RunStatus) -> RunHeader:
    values = {name: getattr(header, name) for name in RunHeader.__slots__}
    values.update(status=status, failure_class=None, completed_at=None)
    return RunHeader(**values)


def _commit_next(
    tx: LedgerTransaction, block: _RunBlock, position: int
) -> tuple[int, list[CommitResult]]:
    """Commit the transition starting at ``position``; returns (events used, results)."""
    events = block.events
    candidate = prepare_candidate(events[position], decoded=True)
    lane = candidate.lane
    if candidate.terminal:
        if position != len(events) - 1:
            raise StoreRefusal(
                WriterRejectionCode.RUN_SEALED,
                f"event {events[position + 1]['id']} follows the terminal event",
                events[position + 1]["id"],
            )
        header = block.header
        check_ending(candidate, RunStatus(header.status), header.failure_class)
        completed_at = header.completed_at if header.completed_at is not None else header.updated_at
        result = commit_ending(
            tx,
            candidate,
            RunStatus(header.status),
            header.failure_class,
            updated_at=header.updated_at,
            completed_at=completed_at,
        )
        return 1, [result]
    if lane is Lane.TOOL_DISPATCH:
        check_shape([candidate], TransitionKind.T1_PREPARE)
        return 1, [commit_prepared(tx, None, candidate)]
    if lane is Lane.FUNCTION_RESPONSE and is_bound_response(candidate.event):
        check_shape([candidate], TransitionKind.T2_OUTCOME)
        return 1, [commit_outcome(tx, candidate)]
    if lane is Lane.RECONCILE_RESULT:
        return _commit_bundle(tx, events, position, candidate)
    check_generic(candidate)
    return 1, [append_generic(tx, candidate)]


def _commit_bundle(
    tx: LedgerTransaction, events: list[RuntimeEvent], position: int, reconcile: Candidate
) -> tuple[int, list[CommitResult]]:
    following = [
        prepare_candidate(event, decoded=True) for event in events[position + 1 : position + 3]
    ]
    if following and following[0].lane is Lane.RECOVERY_DECISION:
        parts = [reconcile, following[0]]
        outcome = None
    elif len(following) == 2 and following[1].lane is Lane.RECOVERY_DECISION:
        parts = [reconcile, following[0], following[1]]
        outcome = following[0]
    else:
        raise StoreRefusal(
            WriterRejectionCode.TRANSITION_SHAPE_CONFLICT,
            "a reconcile fact must be followed by [outcome,] decision",
            reconcile.event_id,
        )
    check_shape(parts, TransitionKind.RECOVERY_BUNDLE)
    result = commit_bundle(tx, reconcile, outcome, parts[-1])
    # The bundle answers for its decision; the facts before it got consecutive seqs.
    first = result.event_seq - len(parts) + 1
    return len(parts), [CommitResult(result.created, first + index) for index in range(len(parts))]


def import_parsed(tx: LedgerTransaction, parsed: _Parsed) -> ImportReport:
    """Import a parsed file inside ``tx`` (the caller's one write transaction)."""
    highest = max((block.header.owner_epoch for block in parsed.runs), default=0)
    # An imported run must never look like it belongs to a live owner from the future.
    raise_owner_epoch(tx.conn, at_least=highest)
    insert_session(tx.conn, parsed.session)
    created = existing = 0
    torn = parsed.dropped_bytes > 0
    for index, block in enumerate(parsed.runs):
        last = index == len(parsed.runs) - 1
        made, kept = _import_run(tx, block, torn and last)
        created += made
        existing += kept
    return ImportReport(
        session_id=parsed.session.session_id,
        runs=len(parsed.runs),
        events_read=parsed.event_count,
        events_created=created,
        events_existing=existing,
        dropped_bytes=parsed.dropped_bytes,
    )
