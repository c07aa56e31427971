"""Importing a whole new run in one step: the import's fast path.

Re-committing an imported run event by event through the writers costs a transition validation
per event. For a run the store does not hold yet, the same rules can be checked once over the
whole run: every event's lane and writer gate, the writers' shapes (a dispatch is T1, a bound
response outside a bundle is T2 of an operation dispatched before it and not yet settled, a
reconcile fact opens ``[reconcile, (outcome,) decision]``, the terminal event ends the run and
matches the header), the shared scanner over the run (no issue at all, which is what every
tool-bearing write requires of the prefix before it, since issues only accumulate), the recovery
interpretation of every operation with recovery facts, the T1 marker on event 1 only, ids new to
the store and operation ids new to the projection. Rows are then inserted in bulk and the
projections derived with the same code as ``rebuild_projections``.

The fast path never refuses on its own: when any rule fails it writes nothing and answers
``False``, and the caller replays the run through the per-event writers, whose refusal (code and
event) is authoritative. A property test proves both paths accept the same files and leave
identical databases.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from runtime.ledger.codes import Lane
from runtime.ledger.event_model import RuntimeEvent, has_t1_marker, is_terminal
from runtime.ledger.lane_rules import LaneConflict, classify_lane, is_bound_response
from runtime.ledger.store_ports import (
    RunHeader,
    RunStatus,
    StoredEvent,
    StoreRefusal,
    ToolOperationRecord,
)
from runtime.ledger.tool_ledger_scanner import ToolLedgerScanner, plain_lane
from runtime.ledger.workspace_facts import is_workspace_fact, workspace_fact_problem
from storage.ledger.derived_ids import is_derived_operation_id
from storage.ledger.event_rows import any_event_stored, derived_in_run, record_chosen_tool_ids
from storage.ledger.event_writer import Candidate, LedgerTransaction
from storage.ledger.run_ending_writer import check_ending
from storage.ledger.run_header_store import insert_header, set_terminal
from storage.ledger.tool_projection import derive_run_projection, insert_projection_rows

_CHUNK = 500


def _any_stored(
    conn: sqlite3.Connection, table: str, column: str, keys: Iterable[str], where: str = ""
) -> bool:
    values = list(keys)
    also = f" AND {where}" if where else ""
    for start in range(0, len(values), _CHUNK):
        chunk = values[start : start + _CHUNK]
        marks = ", ".join("?" for _ in chunk)
        found = conn.execute(
            f"SELECT 1 FROM {table} WHERE {column} IN ({marks}){also} LIMIT 1", chunk
        ).fetchone()
        if found is not None:
            return True
    return False


def _operations_stored(
    conn: sqlite3.Connection, invocation_id: str, operations: Sequence[ToolOperationRecord]
) -> bool:
    """Whether an operation id of the run is already held (schema 4 has no global index on it,
    storage/ledger/schema_v4.py): a derived id only by a row with a chosen id (their small index) or
    of the run's own invocation; a chosen id by any row (a scan, as the triggers do)."""
    if not operations:
        return False
    derived: list[str] = []
    chosen: list[str] = []
    for record in operations:
        flag = is_derived_operation_id(
            record.operation_id, record.invocation_id, record.provider_tool_call_id
        )
        (derived if flag else chosen).append(record.operation_id)
    if conn.execute(
        "SELECT 1 FROM tool_operations WHERE invocation_id = ? LIMIT 1", (invocation_id,)
    ).fetchone():
        return True
    return _any_stored(
        conn, "tool_operations", "operation_id", derived, "operation_id_derived = 0"
    ) or _any_stored(conn, "tool_operations", "operation_id", chosen)


def _refs(event: RuntimeEvent) -> dict[str, Any]:
    return dict(event.get("refs") or {})


def _dispatch_fact(event: RuntimeEvent) -> dict[str, Any]:
    actions: dict[str, Any] = dict(event.get("actions") or {})
    fact: dict[str, Any] = actions["toolDispatch"]
    return fact


# C901: the writers' gates in one pass, one branch per lane, as the writers apply them.
def _walk(  # noqa: C901
    header: RunHeader, events: Sequence[RuntimeEvent], lanes: Sequence[Lane]
) -> set[str] | None:
    """The writers' gates and shapes over the run; returns the dispatched operation ids, or None
    when some write would be refused."""
    dispatched: dict[str, dict[str, Any]] = {}
    settled: set[str] = set()
    count = len(events)
    index = 0
    while index < count:
        event, lane = events[index], lanes[index]
        if lane is Lane.ORDINARY:
            actions = event.get("actions") or {}
            if "continuationStart" in actions or (has_t1_marker(event) and index != 0):
                return None
            if is_workspace_fact(event) and workspace_fact_problem(event) is not None:
                return None  # the per-event path refuses it with its code
            if is_terminal(event):
                if index != count - 1 or event["partial"]:
                    return None
                try:
                    check_ending(
                        Candidate(event, b"", lane, True),
                        RunStatus(header.status),
                        header.failure_class,
                    )
                except StoreRefusal:
                    return None
        elif lane is Lane.TOOL_DISPATCH:
            fact = _dispatch_fact(event)
            if fact["operationId"] in dispatched:
                return None
            dispatched[fact["operationId"]] = fact
        elif lane is Lane.FUNCTION_RESPONSE and is_bound_response(event):
            if not _settles(event, dispatched, settled):
                return None
        elif lane is Lane.RECONCILE_RESULT:
            span = _bundle_span(events, lanes, index)
            if span == 0:
                return None
            operation_id = _refs(event).get("operationId")
            if operation_id not in dispatched or operation_id in settled:
                return None
            if span == 3 and not _settles(events[index + 1], dispatched, set()):
                return None
            settled.add(str(operation_id))
            index += span
            continue
        elif lane is Lane.RECOVERY_DECISION:
            return None
        index += 1
    return set(dispatched)


def _settles(
    response: RuntimeEvent, dispatched: dict[str, dict[str, Any]], settled: set[str]
) -> bool:
    """A bound response settles an operation dispatched before it and not settled yet."""
    refs = _refs(response)
    content: dict[str, Any] = dict(response.get("content") or {})
    fact = dispatched.get(refs.get("operationId", ""))
    if fact is None or refs["operationId"] in settled:
        return False
    if (
        refs.get("toolCallId") != content.get("id")
        or fact["providerToolCallId"] != content.get("id")
        or fact["toolName"] != content.get("name")
    ):
        return False
    settled.add(refs["operationId"])
    return True


def _bundle_span(events: Sequence[RuntimeEvent], lanes: Sequence[Lane], index: int) -> int:
    """3 for [reconcile, outcome, decision], 2 for [reconcile, decision], 0 for anything else."""
    following = lanes[index + 1 : index + 3]
    if following[:1] == [Lane.RECOVERY_DECISION]:
        return 2
    if following == [Lane.FUNCTION_RESPONSE, Lane.RECOVERY_DECISION] and is_bound_response(
        events[index + 1]
    ):
        return 3
    return 0


def bulk_commit_new_run(
    tx: LedgerTransaction,
    header: RunHeader,
    admitted: RunHeader,
    events: Sequence[RuntimeEvent],
    payloads: Sequence[bytes],
) -> bool:
    """Validate and insert a run the store does not hold; ``False`` = nothing written, use the
    per-event writers. ``header`` is the run's header as the file gives it, ``admitted`` the
    non-terminal header to create first (the ending, if any, then applies ``header``'s status,
    failure class and timestamps, as the run-ending writer does on the per-event path)."""
    conn = tx.conn
    spine = (admitted.session_id, admitted.invocation_id, admitted.run_id, admitted.turn_id)
    ids: list[str] = []
    lanes: list[Lane] = []
    for event in events:
        if (event["sessionId"], event["invocationId"], event["runId"], event["turnId"]) != spine:
            return False
        lane = plain_lane(event) or classify_lane(event)
        if isinstance(lane, LaneConflict):
            return False
        ids.append(event["id"])
        lanes.append(lane)
    if len(set(ids)) != len(ids):
        return False
    operation_ids = _walk(header, events, lanes)
    if operation_ids is None:
        return False
    scanner = ToolLedgerScanner()
    for event in events:
        if scanner.feed(event):
            return False
    scan = scanner.result()
    stored = [
        StoredEvent(seq=i + 1, event=event, payload=payloads[i], committed_at=tx.committed_at)
        for i, event in enumerate(events)
    ]
    try:
        # Interprets every operation's recovery tail (a corrupt one refuses) and gives the rows
        # the online writers would have produced.
        operations, journal = derive_run_projection(stored, scan=scan)
    except StoreRefusal:
        return False
    derived = derived_in_run(events)
    if any_event_stored(conn, events, derived) or _operations_stored(
        conn, admitted.invocation_id, operations
    ):
        return False
    insert_header(conn, admitted)
    committed_at = tx.committed_at
    conn.executemany(
        "INSERT INTO runtime_events (event_id, session_id, invocation_id, run_id, turn_id,"
        " event_seq, lane, terminal, payload, committed_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            (ids[i], *spine, i + 1, lanes[i].value, int(is_terminal(event)), payloads[i],
             committed_at)
            for i, event in enumerate(events)
        ),
    )  # fmt: skip
    record_chosen_tool_ids(conn, events, derived)
    insert_projection_rows(conn, operations, journal)
    if events and is_terminal(events[-1]):
        set_terminal(
            conn,
            header.run_id,
            RunStatus(header.status),
            header.failure_class,
            updated_at=header.updated_at,
            completed_at=header.completed_at
            if header.completed_at is not None
            else header.updated_at,
        )
    tx.cache.forget(admitted.run_id)
    return True
