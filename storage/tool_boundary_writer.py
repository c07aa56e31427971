"""T1 and T2: the two short transactions that bracket every tool side effect (RECOVERY.md 1).

- **T1** ``commit_prepared``: ``[function_call, tool_dispatch]`` or ``[tool_dispatch]`` (the call
  was committed earlier through the generic append, e.g. during a permission wait). The
  ``canonicalArgsHash`` of the dispatch is checked against the hash recomputed from the committed
  call by the shared scanner (``canonical_args_hash_conflict``); the caller's value is never
  trusted. File evidence for reconciliation travels inside the dispatch, so it is durable exactly
  when the dispatch is. T1 also writes the ``prepared`` projection rows.
- **T2** ``commit_outcome``: exactly one function_response bound by ``refs.operationId``; it
  moves the operation from ``prepared`` to ``outcome_committed``.

Both answer an exact retry with ``created=False`` and write nothing. Failpoints:
``t1_after_call_insert``, ``t1_after_dispatch_insert`` and ``t2_after_response_insert`` inside the
transaction; the ``*_after_commit`` points are in ``ledger_store``.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from runtime.ledger.codes import ScanIssueCode, StoreCode, TransitionKind, WriterRejectionCode
from runtime.ledger.lane_rules import check_transition_shape
from runtime.ledger.store_ports import CommitResult, StoreRefusal
from storage.event_writer import Candidate, LedgerTransaction
from storage.store_failpoints import store_failpoint
from storage.tool_projection import project_prepared, project_t2_outcome, read_operation


def check_shape(candidates: list[Candidate], kind: TransitionKind) -> None:
    """The writer's lane shape over *all* candidates, before anything is read: an exact retry
    can never smuggle another kind of fact through a tool writer."""
    rejection = check_transition_shape(
        [candidate.event for candidate in candidates],
        kind,
        [candidate.lane for candidate in candidates],
    )
    if rejection is not None:
        raise StoreRefusal(rejection.code, rejection.reason, rejection.event_id)


def commit_prepared(
    tx: LedgerTransaction, call: Candidate | None, dispatch: Candidate
) -> CommitResult:
    """T1. The caller has run ``check_shape`` on exactly these candidates."""
    candidates = [call, dispatch] if call is not None else [dispatch]
    state = tx.run(dispatch.event["runId"])
    tx.check_spine(state, candidates)
    tx.check_health(state)
    new, retried = tx.split_retries(candidates, state)
    actions: dict[str, Any] = dict(dispatch.event.get("actions") or {})
    fact: dict[str, Any] = actions["toolDispatch"]
    operation_id: str = fact["operationId"]
    if not new:
        stored = read_operation(tx.conn, operation_id)
        if stored is None or stored.dispatch_event_id != dispatch.event_id:
            raise StoreRefusal(
                StoreCode.STORE_CORRUPT,
                f"dispatch {dispatch.event_id} is stored but its operation row is missing",
                dispatch.event_id,
            )
        return CommitResult(created=False, event_seq=retried[dispatch.event_id])
    tx.check_seal(state, new)
    tx.validate_tool_transition(
        state, new, TransitionKind.T1_PREPARE, shape_checked=len(new) == len(candidates)
    )
    if call is not None:
        call_event_id = call.event_id
    else:
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
        seq = tx.insert(state, candidate)
        if candidate is dispatch:
            dispatch_seq = seq
            store_failpoint("t1_after_dispatch_insert")
        else:
            store_failpoint("t1_after_call_insert")
    try:
        project_prepared(tx.conn, call_event_id, dispatch.event, tx.committed_at)
    except sqlite3.IntegrityError:
        # The scanner refuses a reused operation id inside the run; only the projection's
        # uniqueness knows the other runs. The whole transaction rolls back.
        raise StoreRefusal(
            ScanIssueCode.DUPLICATE_OPERATION,
            f"operation id {operation_id} already belongs to another tool call",
            dispatch.event_id,
        ) from None
    return CommitResult(created=True, event_seq=dispatch_seq)


def commit_outcome(tx: LedgerTransaction, response: Candidate) -> CommitResult:
    """T2. The caller has run ``check_shape`` on ``[response]``."""
    state = tx.run(response.event["runId"])
    tx.check_spine(state, [response])
    tx.check_health(state)
    new, retried = tx.split_retries([response], state)
    if not new:
        return CommitResult(created=False, event_seq=retried[response.event_id])
    tx.check_seal(state, new)
    tx.validate_tool_transition(state, new, TransitionKind.T2_OUTCOME, shape_checked=True)
    refs: dict[str, Any] = dict(response.event.get("refs") or {})
    scanned = tx.cache.scanner(tx.conn, state).operation_by_id(refs["operationId"])
    if scanned is None or scanned.dispatch_event is None or scanned.call_event is None:
        raise StoreRefusal(
            StoreCode.OPERATION_NOT_FOUND,
            f"no T1 prepared operation {refs['operationId']}",
            response.event_id,
        )
    seq = tx.insert(state, response)
    store_failpoint("t2_after_response_insert")
    project_t2_outcome(
        tx.conn, scanned.call_event["id"], scanned.dispatch_event, response.event, tx.committed_at
    )
    return CommitResult(created=True, event_seq=seq)
