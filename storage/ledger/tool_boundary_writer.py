"""T1 and T2: the two short transactions that bracket every tool side effect
(docs/design/recovery.md 1).

- **T1** ``commit_prepared``: ``[function_call, tool_dispatch]`` or ``[tool_dispatch]`` (the call
  was committed earlier through the generic append, e.g. during a permission wait). The
  ``canonicalArgsHash`` of the dispatch is checked against the hash recomputed from the committed
  call by the shared scanner (``canonical_args_hash_conflict``); the caller's value is never
  trusted. File evidence for reconciliation travels inside the dispatch, so it is durable exactly
  when the dispatch is. T1 also writes the ``prepared`` projection rows.
- **T2** ``commit_outcome``: exactly one function_response bound by ``refs.operationId``; it
  moves the operation from ``prepared`` to ``outcome_committed`` and clears the call's
  ``tool_processes`` records (its process has ended; docs/design/recovery.md section 9).

Both answer an exact retry with ``created=False`` and write nothing. Failpoints:
``t1_after_call_insert``, ``t1_after_dispatch_insert`` and ``t2_after_response_insert`` inside the
transaction; the ``*_after_commit`` points are in ``ledger_store``.
"""

from __future__ import annotations

import sqlite3
from typing import Any, cast

from runtime.ledger.codes import Lane, ScanIssueCode, StoreCode, TransitionKind, WriterRejectionCode
from runtime.ledger.crash_points import CrashPoint, failpoint_armed
from runtime.ledger.lane_rules import check_transition_shape, is_bound_response
from runtime.ledger.store_ports import CommitResult, StoreRefusal
from storage.ledger.event_writer import Candidate, LedgerTransaction
from storage.ledger.tool_process_store import clear_operation
from storage.ledger.tool_projection import project_prepared, project_t2_outcome, read_operation

_T1_SHAPES = ((Lane.FUNCTION_CALL, Lane.TOOL_DISPATCH), (Lane.TOOL_DISPATCH,))


def check_shape(candidates: list[Candidate], kind: TransitionKind) -> None:
    """The writer's lane shape over *all* candidates, before anything is read: an exact retry
    can never smuggle another kind of fact through a tool writer. The two shapes every tool
    call writes (docs/design/ledger.md section 3: T1 ``[function_call, tool_dispatch]`` or
    ``[tool_dispatch]``, T2 one bound ``function_response``) are recognised here directly;
    anything else is decided, and named, by the shared ``check_transition_shape``."""
    if kind is TransitionKind.T1_PREPARE:
        if tuple(candidate.lane for candidate in candidates) in _T1_SHAPES:
            return
    elif (
        kind is TransitionKind.T2_OUTCOME
        and len(candidates) == 1
        and candidates[0].lane is Lane.FUNCTION_RESPONSE
        and is_bound_response(candidates[0].event)
    ):
        return
    rejection = check_transition_shape(
        [candidate.event for candidate in candidates],
        kind,
        [candidate.lane for candidate in candidates],
    )
    if rejection is not None:
        raise StoreRefusal(rejection.code, rejection.reason, rejection.event_id)


def commit_prepared(
    tx: LedgerTransaction, call: Candidate | None, dispatch: Candidate, failpoint: CrashPoint | None
) -> CommitResult:
    """T1. The caller has run ``check_shape`` on exactly these candidates; ``failpoint`` is
    ``armed_crash_point()`` read at the start of the store call."""
    candidates = [call, dispatch] if call is not None else [dispatch]
    state = tx.run(dispatch.event["runId"])
    tx.check_spine(state, candidates)
    tx.check_health(state)
    new, retried = tx.split_retries(candidates, state)
    fact = cast(dict[str, Any], dispatch.event["actions"]["toolDispatch"])
    if not new:
        stored = read_operation(tx.conn, fact["operationId"], state.invocation_id)
        if stored is None or stored.dispatch_event_id != dispatch.event_id:
            raise StoreRefusal(
                StoreCode.STORE_CORRUPT,
                f"dispatch {dispatch.event_id} is stored but its operation row is missing",
                dispatch.event_id,
            )
        return CommitResult(created=False, event_seq=retried[dispatch.event_id])
    tx.check_seal(state, new)
    fed = len(new) == len(candidates)
    if fed:
        scanned = tx.feed_tool_boundary(state, new, TransitionKind.T1_PREPARE)
    else:
        # The call is an exact retry: the dispatch alone goes through the shared validation,
        # which checks its shape again.
        tx.validate_tool_transition(state, new, TransitionKind.T1_PREPARE)
        scanned = None
    if call is not None:
        call_event_id = call.event_id
    else:
        if scanned is None:
            scanned = tx.cache.scanner(tx.conn, state).operation(
                state.invocation_id, fact["providerToolCallId"]
            )
        if scanned is None or scanned.call_event is None:
            raise StoreRefusal(
                WriterRejectionCode.TRANSITION_SHAPE_CONFLICT,
                "T1 without a call needs the call committed first",
                dispatch.event_id,
            )
        call_event_id = scanned.call_event["id"]
    dispatch_seq = 0
    for candidate in new:
        seq = tx.insert(state, candidate, fed=fed)
        if candidate is dispatch:
            dispatch_seq = seq
            failpoint_armed(failpoint, CrashPoint.T1_AFTER_DISPATCH_INSERT)
        else:
            failpoint_armed(failpoint, CrashPoint.T1_AFTER_CALL_INSERT)
    try:
        project_prepared(tx.cursor, call_event_id, dispatch.event, tx.committed_at)
    except sqlite3.IntegrityError:
        # The scanner refuses a reused operation id inside the run; only the projection's
        # uniqueness knows the other runs. The whole transaction rolls back.
        raise StoreRefusal(
            ScanIssueCode.DUPLICATE_OPERATION,
            f"operation id {fact['operationId']} already belongs to another tool call",
            dispatch.event_id,
        ) from None
    return CommitResult(created=True, event_seq=dispatch_seq)


def commit_outcome(
    tx: LedgerTransaction, response: Candidate, failpoint: CrashPoint | None
) -> CommitResult:
    """T2. The caller has run ``check_shape`` on ``[response]``; ``failpoint`` is
    ``armed_crash_point()`` read at the start of the store call.

    The operation is the one the scanner files the response under (its invocation and call
    id), and it must have been prepared by T1 under the response's ``refs.operationId``:
    ``operation_not_found`` otherwise (the projection row then moved is the one a rebuild
    would move)."""
    state = tx.run(response.event["runId"])
    tx.check_spine(state, [response])
    tx.check_health(state)
    new, retried = tx.split_retries([response], state)
    if not new:
        return CommitResult(created=False, event_seq=retried[response.event_id])
    tx.check_seal(state, new)
    scanned = tx.feed_tool_boundary(state, new, TransitionKind.T2_OUTCOME)
    operation_id = response.event["refs"]["operationId"]
    if (
        scanned is None
        or scanned.dispatch_event is None
        or scanned.call_event is None
        or scanned.operation_id != operation_id
    ):
        raise StoreRefusal(
            StoreCode.OPERATION_NOT_FOUND,
            f"no T1 prepared operation {operation_id}",
            response.event_id,
        )
    seq = tx.insert(state, response, fed=True)
    failpoint_armed(failpoint, CrashPoint.T2_AFTER_RESPONSE_INSERT)
    project_t2_outcome(tx.cursor, scanned.dispatch_event, response.event, tx.committed_at)
    clear_operation(tx.cursor, operation_id)
    return CommitResult(created=True, event_seq=seq)
