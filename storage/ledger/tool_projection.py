"""The tool projections ``tool_operations`` and ``tool_journal_events``, online and rebuilt.

Both tables are disposable: ``rebuild_projections`` deletes them and derives them again from
``runtime_events`` through the shared scanner and the recovery interpretation, and the online
writers produce exactly the same rows because they follow the same rules:

- journal ids are derived, never chosen: ``<operationId>_prepared`` (T1), ``<operationId>_outcome``
  (the response, from T2 or a completed bundle), ``<eventId>_journal`` (reconcile and decision);
- a journal row's ``committed_at`` is the ``committed_at`` of the event it records;
- ``version`` is 1 at T1 and grows by one per later fact (reconcile, outcome, decision);
- ``current_state``: a valid decision -> ``recovery_completed`` / ``recovery_parked``; else a
  response -> ``outcome_committed``; else ``prepared``.

Only operations with a dispatch are projected. A ledger the scanner or the recovery
interpretation finds corrupt cannot be projected: the rebuild refuses with the issue's code.

Where the journal rows live (schema 6 on SQLite, 3 on PostgreSQL): every operation's
``prepared`` row and its ``outcome_committed`` row hold nothing the operation row does not, but
their ``committed_at`` and ``metadata_json``, so they are stored *on the operation row*
(``prepared_committed_at``, ``prepared_metadata``, ``outcome_committed_at``,
``outcome_metadata``, and ``outcome_after``: how many of the operation's other journal rows come
before its outcome). ``tool_journal_events`` holds only the other rows (reconcile and decision).
A T1 and a T2 then write one table fewer (``storage/ledger/schema_v6.py`` says what it saves;
``bench/bench_step_writes.py`` measures it). Every
reader gets the same records as before: ``read_journal`` and ``read_all_projection_rows`` put the
two rows back in their places, and a row that is absent on the operation (a damaged projection,
an upgrade of one) stays absent, so the doctor's comparison with the derived rows still sees it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from runtime.ledger.canonical_codec import canonical_json_bytes
from runtime.ledger.codes import ScanIssueCode, StoreCode, WriterRejectionCode
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.recovery_bundle import (
    RecoveryCorruption,
    RecoveryValid,
    interpret_scanned_recovery,
)
from runtime.ledger.store_ports import (
    ProjectionCounts,
    StoredEvent,
    StoreRefusal,
    ToolJournalRecord,
    ToolOperationRecord,
)
from runtime.ledger.tool_ledger_scanner import ToolLedgerScan, scan_tool_ledger
from storage.ledger.derived_ids import is_derived_operation_id

PREPARED = "prepared"
OUTCOME_COMMITTED = "outcome_committed"
RECONCILE_OBSERVED = "reconcile_observed"
RECOVERY_COMPLETED = "recovery_completed"
RECOVERY_PARKED = "recovery_parked"

OPERATION_COLUMNS = (
    "operation_id, session_id, invocation_id, run_id, turn_id, provider_tool_call_id, tool_name,"
    " canonical_args_hash, recovery_mode, current_state, call_event_id, dispatch_event_id,"
    " result_event_id, version"
)
JOURNAL_COLUMNS = (
    "journal_event_id, operation_id, invocation_id, run_id, turn_id, state, runtime_event_id,"
    " canonical_args_hash, recovery_mode, metadata_json, committed_at"
)
# The operation's ``prepared`` and ``outcome_committed`` journal rows, kept on its row (above).
ROW_JOURNAL_COLUMNS = (
    "prepared_committed_at, prepared_metadata, outcome_committed_at, outcome_metadata,"
    " outcome_after"
)


# ---- rows -------------------------------------------------------------------------------------


def _operation_values(
    record: ToolOperationRecord, row_journal: tuple[object, ...] = (None,) * 5
) -> tuple[object, ...]:
    return (
        record.operation_id,
        record.session_id,
        record.invocation_id,
        record.run_id,
        record.turn_id,
        record.provider_tool_call_id,
        record.tool_name,
        record.canonical_args_hash,
        record.recovery_mode,
        record.current_state,
        record.call_event_id,
        record.dispatch_event_id,
        record.result_event_id,
        record.version,
        is_derived_operation_id(
            record.operation_id, record.invocation_id, record.provider_tool_call_id
        ),
        *row_journal,
    )


def _journal_values(record: ToolJournalRecord) -> tuple[object, ...]:
    metadata = canonical_json_bytes(dict(record.metadata)) if record.metadata is not None else None
    return (
        record.journal_event_id,
        record.operation_id,
        record.invocation_id,
        record.run_id,
        record.turn_id,
        record.state,
        record.runtime_event_id,
        record.canonical_args_hash,
        record.recovery_mode,
        metadata,
        record.committed_at,
    )


# ``operation_id_derived`` (schema 4) is written, never read: it only keeps operation ids unique
# across the ledger without a global index (storage/ledger/schema_v4.py).
_INSERT_OPERATION = (
    f"INSERT INTO tool_operations ({OPERATION_COLUMNS}, operation_id_derived,"
    f" {ROW_JOURNAL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_JOURNAL = (
    f"INSERT INTO tool_journal_events ({JOURNAL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _insert_journal(conn: sqlite3.Connection, record: ToolJournalRecord) -> None:
    conn.execute(_INSERT_JOURNAL, _journal_values(record))


_OPERATION_WIDTH = len(OPERATION_COLUMNS.split(","))


def _operation_from_row(row: Sequence[Any]) -> ToolOperationRecord:
    return ToolOperationRecord(*row)


def _journal_from_row(row: Sequence[Any]) -> ToolJournalRecord:
    values = list(row)
    values[9] = json.loads(values[9]) if values[9] is not None else None
    return ToolJournalRecord(*values)


def read_operation(
    conn: sqlite3.Connection, operation_id: str, invocation_id: str | None = None
) -> ToolOperationRecord | None:
    """The operation row of ``operation_id``. Operations are indexed by their invocation
    (schema 4): a writer, which knows the run, passes ``invocation_id``; without it the table
    is scanned (a reader asking by operation id alone, e.g. a test or an operator's tool)."""
    if invocation_id is None:
        row = conn.execute(
            f"SELECT {OPERATION_COLUMNS} FROM tool_operations WHERE operation_id = ?",
            (operation_id,),
        ).fetchone()
    else:
        row = conn.execute(
            f"SELECT {OPERATION_COLUMNS} FROM tool_operations"
            " WHERE invocation_id = ? AND operation_id = ?",
            (invocation_id, operation_id),
        ).fetchone()
    return _operation_from_row(row) if row is not None else None


def read_session_operations(conn: sqlite3.Connection, session_id: str) -> list[ToolOperationRecord]:
    rows = conn.execute(
        f"SELECT {OPERATION_COLUMNS} FROM tool_operations WHERE session_id = ?"
        " ORDER BY operation_id",
        (session_id,),
    ).fetchall()
    return [_operation_from_row(row) for row in rows]


def read_journal(
    conn: sqlite3.Connection, operation_id: str, invocation_id: str | None = None
) -> list[ToolJournalRecord]:
    """The journal of ``operation_id`` in order; without ``invocation_id`` its operation row is
    found by the operation id alone (as ``read_operation`` finds it), and names the invocation."""
    columns = f"SELECT {OPERATION_COLUMNS}, {ROW_JOURNAL_COLUMNS} FROM tool_operations"
    if invocation_id is None:
        row = conn.execute(f"{columns} WHERE operation_id = ?", (operation_id,)).fetchone()
    else:
        row = conn.execute(
            f"{columns} WHERE invocation_id = ? AND operation_id = ?",
            (invocation_id, operation_id),
        ).fetchone()
    if row is None:
        return []
    invocation_id = _operation_from_row(row[:_OPERATION_WIDTH]).invocation_id
    rows = conn.execute(
        f"SELECT {JOURNAL_COLUMNS} FROM tool_journal_events"
        " WHERE invocation_id = ? AND operation_id = ? ORDER BY journal_seq",
        (invocation_id, operation_id),
    ).fetchall()
    return _whole_journal(row, [_journal_from_row(stored) for stored in rows])


def _whole_journal(
    row: Sequence[Any], stored: Sequence[ToolJournalRecord]
) -> list[ToolJournalRecord]:
    """One operation's journal: the rows kept on its operation ``row`` (``OPERATION_COLUMNS``
    then ``ROW_JOURNAL_COLUMNS``) put back among its ``stored`` rows (in ``journal_seq``
    order)."""
    operation = _operation_from_row(row[:_OPERATION_WIDTH])
    prepared_at, prepared_meta, outcome_at, outcome_meta, outcome_after = row[_OPERATION_WIDTH:]
    journal: list[ToolJournalRecord] = []
    if prepared_at is not None:
        journal.append(
            _row_journal(
                operation, PREPARED, operation.dispatch_event_id, prepared_meta, prepared_at
            )
        )
    if outcome_at is None or operation.result_event_id is None:
        return journal + list(stored)
    after = min(max(int(outcome_after or 0), 0), len(stored))
    outcome = _row_journal(
        operation, OUTCOME_COMMITTED, operation.result_event_id, outcome_meta, outcome_at
    )
    return [*journal, *stored[:after], outcome, *stored[after:]]


def _row_journal(
    operation: ToolOperationRecord,
    state: str,
    event_id: str,
    metadata: bytes | None,
    committed_at: int,
) -> ToolJournalRecord:
    suffix = "prepared" if state == PREPARED else "outcome"
    return ToolJournalRecord(
        journal_event_id=f"{operation.operation_id}_{suffix}",
        operation_id=operation.operation_id,
        invocation_id=operation.invocation_id,
        run_id=operation.run_id,
        turn_id=operation.turn_id,
        state=state,
        runtime_event_id=event_id,
        canonical_args_hash=operation.canonical_args_hash,
        recovery_mode=operation.recovery_mode,
        metadata=json.loads(metadata) if metadata is not None else None,
        committed_at=int(committed_at),
    )


def list_unsettled(
    conn: sqlite3.Connection, session_id: str | None = None
) -> list[ToolOperationRecord]:
    """Operations whose T1 committed and nothing settled them yet (state ``prepared``)."""
    sql = f"SELECT {OPERATION_COLUMNS} FROM tool_operations WHERE current_state = 'prepared'"
    params: tuple[str, ...] = ()
    if session_id is not None:
        sql += " AND session_id = ?"
        params = (session_id,)
    rows = conn.execute(sql + " ORDER BY invocation_id, operation_id", params).fetchall()
    return [_operation_from_row(row) for row in rows]


def read_all_projection_rows(
    conn: sqlite3.Connection,
) -> tuple[list[ToolOperationRecord], list[ToolJournalRecord]]:
    """Every stored projection row, in a stable order (for equality checks): the operations by
    id; the journal by operation id, each operation's rows in their order."""
    rows = conn.execute(
        f"SELECT {OPERATION_COLUMNS}, {ROW_JOURNAL_COLUMNS} FROM tool_operations"
        " ORDER BY operation_id"
    ).fetchall()
    stored: dict[str, list[ToolJournalRecord]] = {}
    for journal_row in conn.execute(
        f"SELECT {JOURNAL_COLUMNS} FROM tool_journal_events ORDER BY operation_id, journal_seq"
    ).fetchall():
        record = _journal_from_row(journal_row)
        stored.setdefault(record.operation_id, []).append(record)
    operations: list[ToolOperationRecord] = []
    journal: list[ToolJournalRecord] = []
    for row in rows:
        operations.append(_operation_from_row(row[:_OPERATION_WIDTH]))
        journal.extend(_whole_journal(row, stored.pop(str(row[0]), [])))
    for orphans in stored.values():  # rows whose operation is gone: shown, never hidden
        journal.extend(orphans)
    journal.sort(key=lambda record: record.operation_id)  # stable: each journal keeps its order
    return operations, journal


# ---- online transitions -----------------------------------------------------------------------


def _fact(dispatch: RuntimeEvent) -> dict[str, Any]:
    actions: dict[str, Any] = dict(dispatch.get("actions") or {})
    fact: dict[str, Any] = actions["toolDispatch"]
    return fact


def prepared_records(
    call_event_id: str, dispatch: RuntimeEvent, committed_at: int
) -> tuple[ToolOperationRecord, ToolJournalRecord]:
    fact = _fact(dispatch)
    operation_id: str = fact["operationId"]
    operation = ToolOperationRecord(
        operation_id=operation_id,
        session_id=dispatch["sessionId"],
        invocation_id=dispatch["invocationId"],
        run_id=dispatch["runId"],
        turn_id=dispatch["turnId"],
        provider_tool_call_id=fact["providerToolCallId"],
        tool_name=fact["toolName"],
        canonical_args_hash=fact["canonicalArgsHash"],
        recovery_mode=fact["recoveryMode"],
        current_state=PREPARED,
        call_event_id=call_event_id,
        dispatch_event_id=dispatch["id"],
        result_event_id=None,
        version=1,
    )
    return operation, _journal(
        operation, f"{operation_id}_prepared", PREPARED, dispatch, committed_at
    )


def _journal(
    operation: ToolOperationRecord,
    journal_id: str,
    state: str,
    event: RuntimeEvent,
    committed_at: int,
) -> ToolJournalRecord:
    return ToolJournalRecord(
        journal_event_id=journal_id,
        operation_id=operation.operation_id,
        invocation_id=operation.invocation_id,
        run_id=operation.run_id,
        turn_id=operation.turn_id,
        state=state,
        runtime_event_id=event["id"],
        canonical_args_hash=operation.canonical_args_hash,
        recovery_mode=operation.recovery_mode,
        metadata=_recovery_metadata(event),
        committed_at=committed_at,
    )


def _recovery_metadata(event: RuntimeEvent) -> dict[str, Any] | None:
    actions = event.get("actions") or {}
    recovery = actions.get("toolRecovery")
    return dict(recovery) if recovery is not None else None


def project_prepared(
    conn: sqlite3.Connection | sqlite3.Cursor,
    call_event_id: str,
    dispatch: RuntimeEvent,
    committed_at: int,
) -> None:
    """T1's operation row with its ``prepared`` journal row on it: the values of
    ``prepared_records``, bound straight from the dispatch (a T1 is on the hot path; the rebuild
    test proves the rows equal the rebuilt ones)."""
    fact = _fact(dispatch)
    operation_id: str = fact["operationId"]
    invocation_id, run_id, turn_id = dispatch["invocationId"], dispatch["runId"], dispatch["turnId"]
    args_hash, mode = fact["canonicalArgsHash"], fact["recoveryMode"]
    dispatch_id = dispatch["id"]
    conn.execute(
        _INSERT_OPERATION,
        (
            operation_id,
            dispatch["sessionId"],
            invocation_id,
            run_id,
            turn_id,
            fact["providerToolCallId"],
            fact["toolName"],
            args_hash,
            mode,
            PREPARED,
            call_event_id,
            dispatch_id,
            None,
            1,
            is_derived_operation_id(operation_id, invocation_id, fact["providerToolCallId"]),
            committed_at,
            _metadata_bytes(dispatch),
            None,
            None,
            None,
        ),
    )


def _metadata_bytes(event: RuntimeEvent) -> bytes | None:
    """``metadata_json`` of the journal row recording ``event`` (``_journal_values``)."""
    metadata = _recovery_metadata(event)
    return canonical_json_bytes(metadata) if metadata is not None else None


def _advance(
    conn: sqlite3.Connection,
    operation: ToolOperationRecord,
    from_state: str,
    to_state: str,
    result_event_id: str | None,
) -> ToolOperationRecord:
    """Compare-and-set on the operation row; anything but exactly one row means the operation
    is not in the state the writer validated against. Returns the row as it now is."""
    cursor = conn.execute(
        "UPDATE tool_operations SET current_state = ?,"
        " result_event_id = COALESCE(?, result_event_id), version = version + 1"
        " WHERE invocation_id = ? AND operation_id = ? AND current_state = ? AND version = ?",
        (
            to_state,
            result_event_id,
            operation.invocation_id,
            operation.operation_id,
            from_state,
            operation.version,
        ),
    )
    return _advanced(cursor.rowcount, operation, to_state, result_event_id)


def _advanced(
    rowcount: int, operation: ToolOperationRecord, to_state: str, result_event_id: str | None
) -> ToolOperationRecord:
    """The operation as a compare-and-set that changed ``rowcount`` rows left it: exactly one,
    or the operation was not in the state the writer validated against."""
    if rowcount != 1:
        raise StoreRefusal(
            WriterRejectionCode.OPERATION_SETTLED,
            f"operation {operation.operation_id} changed under the writer",
        )
    return ToolOperationRecord(
        **{
            **_record_fields(operation),
            "current_state": to_state,
            "result_event_id": result_event_id or operation.result_event_id,
            "version": operation.version + 1,
        }
    )


# The outcome's journal row goes on the operation row, after the operation's journal rows
# stored so far (a reconcile may precede an outcome). ``?`` order: result event id, committed
# at, metadata, invocation id, operation id (twice), then the compare-and-set's terms.
_SET_OUTCOME = (
    "UPDATE tool_operations SET current_state = 'outcome_committed', result_event_id = ?,"
    " version = version + 1, outcome_committed_at = ?, outcome_metadata = ?,"
    " outcome_after = (SELECT count(*) FROM tool_journal_events"
    " WHERE invocation_id = ? AND operation_id = ?)"
    " WHERE invocation_id = ? AND operation_id = ?"
)


def project_outcome(
    conn: sqlite3.Connection,
    operation: ToolOperationRecord,
    response: RuntimeEvent,
    committed_at: int,
) -> ToolOperationRecord:
    """Journal the response (on the operation row) and move the operation to
    ``outcome_committed`` (compare-and-set on its state and version)."""
    invocation_id, operation_id = operation.invocation_id, operation.operation_id
    cursor = conn.execute(
        _SET_OUTCOME + " AND current_state = ? AND version = ? AND outcome_committed_at IS NULL",
        (
            response["id"],
            committed_at,
            _metadata_bytes(response),
            invocation_id,
            operation_id,
            invocation_id,
            operation_id,
            operation.current_state,
            operation.version,
        ),
    )
    return _advanced(cursor.rowcount, operation, OUTCOME_COMMITTED, response["id"])


def project_t2_outcome(
    conn: sqlite3.Connection | sqlite3.Cursor,
    dispatch: RuntimeEvent,
    response: RuntimeEvent,
    committed_at: int,
) -> None:
    """T2: journal the outcome (on the operation row) and move the operation ``prepared`` ->
    ``outcome_committed`` (compare-and-set: an operation settled in any other way refuses).
    The values are the ones ``project_outcome`` writes, bound straight from the dispatch (a T2
    is on the hot path)."""
    fact = _fact(dispatch)
    operation_id: str = fact["operationId"]
    invocation_id = dispatch["invocationId"]
    response_id = response["id"]
    cursor = conn.execute(
        _SET_OUTCOME + " AND current_state = 'prepared' AND result_event_id IS NULL",
        (
            response_id,
            committed_at,
            _metadata_bytes(response),
            invocation_id,
            operation_id,
            invocation_id,
            operation_id,
        ),
    )
    if cursor.rowcount != 1:
        raise StoreRefusal(
            WriterRejectionCode.OPERATION_SETTLED,
            f"operation {operation_id} is not waiting for an outcome",
            response_id,
        )


def project_recovery_fact(
    conn: sqlite3.Connection,
    operation: ToolOperationRecord,
    event: RuntimeEvent,
    state: str,
    committed_at: int,
) -> ToolOperationRecord:
    """Journal a reconcile (state unchanged) or a decision (state = the decision's)."""
    _insert_journal(conn, _journal(operation, f"{event['id']}_journal", state, event, committed_at))
    to_state = operation.current_state if state == RECONCILE_OBSERVED else state
    return _advance(conn, operation, operation.current_state, to_state, None)


def require_operation(
    conn: sqlite3.Connection, operation_id: str, invocation_id: str | None = None
) -> ToolOperationRecord:
    record = read_operation(conn, operation_id, invocation_id)
    if record is None:
        raise StoreRefusal(StoreCode.STORE_CORRUPT, f"operation {operation_id} vanished")
    return record


# ---- rebuild ----------------------------------------------------------------------------------


def derive_run_projection(
    events: Sequence[StoredEvent], *, scan: ToolLedgerScan | None = None
) -> tuple[list[ToolOperationRecord], list[ToolJournalRecord]]:
    """The projection rows of one run's committed events (in ``event_seq`` order); ``scan`` is
    the scanner's result over exactly these events when the caller already has it."""
    if scan is None:
        scan = scan_tool_ledger(stored.event for stored in events)
    if scan.issues:
        issue = scan.issues[0]
        raise StoreRefusal(
            issue.code, f"corrupt tool ledger: {issue.code} at {issue.event_id}", issue.event_id
        )
    committed = {stored.event["id"]: stored.committed_at for stored in events}
    order = {stored.event["id"]: index for index, stored in enumerate(events)}
    operations: list[ToolOperationRecord] = []
    journal: list[ToolJournalRecord] = []
    for op in scan.operations:
        if op.dispatch_event is None or op.call_event is None:
            continue
        meaning = interpret_scanned_recovery(op, order)
        if isinstance(meaning, RecoveryCorruption):
            raise StoreRefusal(
                meaning.code,
                f"corrupt recovery bundle for {op.operation_id}: {meaning.message}",
                op.dispatch_event["id"],
            )
        dispatch = op.dispatch_event
        prepared, first = prepared_records(op.call_event["id"], dispatch, committed[dispatch["id"]])
        tail: list[tuple[str, str, RuntimeEvent]] = []
        state = PREPARED
        if isinstance(meaning, RecoveryValid):
            if meaning.confirmed is not None:  # recovery's finding, then the user's word on it
                found, parked = meaning.confirmed
                tail.append((f"{found['id']}_journal", RECONCILE_OBSERVED, found))
                tail.append((f"{parked['id']}_journal", RECOVERY_PARKED, parked))
            tail.append(
                (
                    f"{meaning.reconcile_event['id']}_journal",
                    RECONCILE_OBSERVED,
                    meaning.reconcile_event,
                )
            )
            completed = meaning.decision.disposition == "completed"
            state = RECOVERY_COMPLETED if completed else RECOVERY_PARKED
            tail.append((f"{meaning.decision_event['id']}_journal", state, meaning.decision_event))
        if op.response_event is not None:
            if not isinstance(meaning, RecoveryValid):
                state = OUTCOME_COMMITTED
            tail.append((f"{prepared.operation_id}_outcome", OUTCOME_COMMITTED, op.response_event))
        tail.sort(key=lambda item: order[item[2]["id"]])
        response = op.response_event
        operations.append(
            ToolOperationRecord(  # positional: the prepared record with its final state
                prepared.operation_id,
                prepared.session_id,
                prepared.invocation_id,
                prepared.run_id,
                prepared.turn_id,
                prepared.provider_tool_call_id,
                prepared.tool_name,
                prepared.canonical_args_hash,
                prepared.recovery_mode,
                state,
                prepared.call_event_id,
                prepared.dispatch_event_id,
                response["id"] if response is not None else None,
                1 + len(tail),
            )
        )
        journal.append(first)
        journal.extend(
            _journal(prepared, journal_id, row_state, event, committed[event["id"]])
            for journal_id, row_state, event in tail
        )
    return operations, journal


def _record_fields(record: ToolOperationRecord) -> dict[str, Any]:
    return record._asdict()


def derive_projections(
    runs: Iterable[Sequence[StoredEvent]],
) -> tuple[list[ToolOperationRecord], list[ToolJournalRecord]]:
    """Projection rows of every run, sorted like ``read_all_projection_rows``."""
    operations: list[ToolOperationRecord] = []
    journal: list[ToolJournalRecord] = []
    for events in runs:
        run_operations, run_journal = derive_run_projection(events)
        operations.extend(run_operations)
        journal.extend(run_journal)
    seen: set[str] = set()
    for record in operations:
        if record.operation_id in seen:
            raise StoreRefusal(
                ScanIssueCode.DUPLICATE_OPERATION,
                f"operation id {record.operation_id} is dispatched in two runs",
                record.dispatch_event_id,
            )
        seen.add(record.operation_id)
    operations.sort(key=lambda record: record.operation_id)
    position = {id(record): index for index, record in enumerate(journal)}
    journal.sort(key=lambda record: (record.operation_id, position[id(record)]))
    return operations, journal


def insert_projection_rows(
    conn: sqlite3.Connection,
    operations: Sequence[ToolOperationRecord],
    journal: Sequence[ToolJournalRecord],
) -> None:
    """Insert ``operations`` and their ``journal`` (each operation's rows in order): the
    ``prepared`` and outcome rows go on their operation's row, the others into
    ``tool_journal_events``. A row the operation row cannot hold exactly as given (another id,
    event or value than the operation implies) is refused: what is read back must be what was
    written."""
    by_operation = {record.operation_id: record for record in operations}
    on_row: dict[str, list[object]] = {}
    stored: list[ToolJournalRecord] = []
    stored_before: dict[str, int] = {}  # per operation: its stored rows so far
    for row in journal:
        operation = by_operation.get(row.operation_id)
        slot = on_row.setdefault(row.operation_id, [None] * 5)
        metadata = canonical_json_bytes(dict(row.metadata)) if row.metadata is not None else None
        if operation is not None and row.journal_event_id == f"{row.operation_id}_prepared":
            _require_row_journal(operation, row, PREPARED, operation.dispatch_event_id)
            slot[0], slot[1] = row.committed_at, metadata
        elif operation is not None and row.journal_event_id == f"{row.operation_id}_outcome":
            _require_row_journal(operation, row, OUTCOME_COMMITTED, operation.result_event_id)
            slot[2], slot[3] = row.committed_at, metadata
            slot[4] = stored_before.get(row.operation_id, 0)
        else:
            stored.append(row)
            stored_before[row.operation_id] = stored_before.get(row.operation_id, 0) + 1
    conn.executemany(
        _INSERT_OPERATION,
        (
            _operation_values(record, tuple(on_row.get(record.operation_id, [None] * 5)))
            for record in operations
        ),
    )
    conn.executemany(_INSERT_JOURNAL, (_journal_values(row) for row in stored))


def _require_row_journal(
    operation: ToolOperationRecord, row: ToolJournalRecord, state: str, event_id: str | None
) -> None:
    expected = (
        operation.invocation_id,
        operation.run_id,
        operation.turn_id,
        state,
        event_id,
        operation.canonical_args_hash,
        operation.recovery_mode,
    )
    given = (
        row.invocation_id,
        row.run_id,
        row.turn_id,
        row.state,
        row.runtime_event_id,
        row.canonical_args_hash,
        row.recovery_mode,
    )
    if given != expected:
        raise StoreRefusal(
            StoreCode.STORE_CORRUPT,
            f"journal row {row.journal_event_id} does not match its operation",
            row.runtime_event_id,
        )


def replace_projections(
    conn: sqlite3.Connection,
    operations: Sequence[ToolOperationRecord],
    journal: Sequence[ToolJournalRecord],
) -> ProjectionCounts:
    """Inside a write transaction: delete both tables and insert ``operations``/``journal``."""
    conn.execute("DELETE FROM tool_journal_events")
    conn.execute("DELETE FROM tool_operations")
    insert_projection_rows(conn, operations, journal)
    return ProjectionCounts(operations=len(operations), journal_events=len(journal))
