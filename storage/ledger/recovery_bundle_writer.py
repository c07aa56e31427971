"""The recovery-bundle writer: reconcile, optional recovered outcome, decision, in one transaction.

Startup recovery observes an operation left ``prepared`` (T1 committed, no T2) and commits one
bundle (docs/design/ledger.md section 4): ``[reconcile_result, recovery_decision]`` (parked) or
``[reconcile_result, function_response, recovery_decision]`` (completed). The bundle is checked
against the operation as T1 recorded it (the projection row and the stored call and dispatch) with
the shared ``validate_recovery_bundle``, then through the shared transition validation, and the
operation must still be ``prepared``: parked is final, and only a byte-identical retry of the same
bundle is accepted afterwards (``created=False``). The one exception: the user's attestation that a
file write recovery found untouched (``reconcile_matches_prior_state``) did not run, which
confirms that finding beside it.

A run sealed by its terminal event accepts no bundle (``run_sealed``): startup recovery
reconciles before it writes the recovered ending. The exception is the user's attestation
(docs/design/recovery.md section 8, ``attestation_writer``): it comes after recovery closed the run,
and a whole, valid attestation bundle is the only thing a sealed run accepts.

Failpoints inside the transaction: ``bundle_after_reconcile_insert``,
``bundle_after_outcome_insert``, ``bundle_after_decision_insert`` (after ``COMMIT``:
``bundle_after_commit`` / ``P10``, in ``ledger_store``).
"""

from __future__ import annotations

from typing import Any

from runtime.ledger.attestation import is_attestation_fact
from runtime.ledger.codes import StoreCode, TransitionKind, WriterRejectionCode
from runtime.ledger.crash_points import CrashPoint, failpoint
from runtime.ledger.recovery_bundle import OperationIdentity, validate_recovery_bundle
from runtime.ledger.store_ports import CommitResult, StoreRefusal
from storage.ledger.event_rows import read_event
from storage.ledger.event_writer import Candidate, LedgerTransaction
from storage.ledger.tool_projection import (
    PREPARED,
    RECONCILE_OBSERVED,
    RECOVERY_COMPLETED,
    RECOVERY_PARKED,
    project_outcome,
    project_recovery_fact,
    read_operation,
)


def commit_bundle(
    tx: LedgerTransaction,
    reconcile: Candidate,
    outcome: Candidate | None,
    decision: Candidate,
) -> CommitResult:
    candidates = [reconcile, *([outcome] if outcome is not None else []), decision]
    state = tx.run(reconcile.event["runId"])
    tx.check_spine(state, candidates)
    tx.check_health(state)
    new, retried = tx.split_retries(candidates)
    refs: dict[str, Any] = dict(reconcile.event.get("refs") or {})
    operation = read_operation(tx.conn, refs["operationId"], reconcile.event["invocationId"])
    if operation is None:
        raise StoreRefusal(
            StoreCode.OPERATION_NOT_FOUND,
            f"no T1 prepared operation {refs['operationId']}",
            reconcile.event_id,
        )
    if not new:
        expected = RECOVERY_COMPLETED if outcome is not None else RECOVERY_PARKED
        result = outcome.event_id if outcome is not None else None
        if operation.current_state != expected or operation.result_event_id != result:
            raise StoreRefusal(
                StoreCode.STORE_CORRUPT,
                f"bundle for {operation.operation_id} is stored but the projection disagrees",
                decision.event_id,
            )
        return CommitResult(created=False, event_seq=retried[decision.event_id])
    if not is_attestation_fact(reconcile.event):
        # The user's attestation is the one bundle that may follow the terminal event: the user
        # settles after startup recovery closed the run (``attestation_suffix_ok``).
        tx.check_seal(state, new)
    call = read_event(tx.conn, operation.call_event_id, operation.run_id)
    dispatch = read_event(tx.conn, operation.dispatch_event_id, operation.run_id)
    if call is None or dispatch is None:
        raise StoreRefusal(
            StoreCode.STORE_CORRUPT, f"operation {operation.operation_id} lost its T1 events"
        )
    identity = OperationIdentity(
        operation_id=operation.operation_id,
        invocation_id=operation.invocation_id,
        run_id=operation.run_id,
        turn_id=operation.turn_id,
        provider_tool_call_id=operation.provider_tool_call_id,
        tool_name=operation.tool_name,
        canonical_args_hash=operation.canonical_args_hash,
        recovery_mode=operation.recovery_mode,
        call_event_id=operation.call_event_id,
        dispatch_event_id=operation.dispatch_event_id,
    )
    verdict = validate_recovery_bundle(
        identity,
        call.event,
        dispatch.event,
        reconcile.event,
        outcome.event if outcome is not None else None,
        decision.event,
    )
    if not verdict.ok or verdict.decision is None:
        raise StoreRefusal(
            verdict.code or WriterRejectionCode.TRANSITION_SHAPE_CONFLICT,
            verdict.message,
            decision.event_id,
        )
    tx.validate_tool_transition(state, new, TransitionKind.RECOVERY_BUNDLE)
    # The user confirming a file write recovery found untouched follows its parked bundle (the
    # transition validation accepts only that shape: ``recovery_bundle``).
    confirming = operation.current_state == RECOVERY_PARKED and is_attestation_fact(reconcile.event)
    if (
        operation.current_state != PREPARED and not confirming
    ) or operation.result_event_id is not None:
        raise StoreRefusal(
            WriterRejectionCode.OPERATION_SETTLED,
            f"operation {operation.operation_id} is already {operation.current_state}",
            decision.event_id,
        )
    tx.insert(state, reconcile)
    operation = project_recovery_fact(
        tx.conn, operation, reconcile.event, RECONCILE_OBSERVED, tx.committed_at
    )
    failpoint(CrashPoint.BUNDLE_AFTER_RECONCILE_INSERT)
    if outcome is not None:
        tx.insert(state, outcome)
        operation = project_outcome(tx.conn, operation, outcome.event, tx.committed_at)
        failpoint(CrashPoint.BUNDLE_AFTER_OUTCOME_INSERT)
    seq = tx.insert(state, decision)
    final = RECOVERY_COMPLETED if verdict.decision.disposition == "completed" else RECOVERY_PARKED
    project_recovery_fact(tx.conn, operation, decision.event, final, tx.committed_at)
    failpoint(CrashPoint.BUNDLE_AFTER_DECISION_INSERT)
    return CommitResult(created=True, event_seq=seq)
