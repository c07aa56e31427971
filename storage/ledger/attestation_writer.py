"""Recording the user's attestation of an unknown outcome (docs/design/recovery.md section 8).

``commit_attestation`` runs inside one ``BEGIN IMMEDIATE`` transaction: it checks that the
attestation may be recorded, builds the bundle (reconcile observation, recovered outcome,
decision: ``runtime.ledger.attestation``) and commits it through the recovery-bundle writer, so
every bundle rule, the transition validation and the projection update apply as for any bundle.

Refusals (nothing written), in this order:

- ``operation_not_found``: no T1 operation with that id;
- ``attestation_note_too_long`` / ``attestation_note_empty``: the note is longer than 500
  characters, or empty;
- the verdict of the run's committed events (``judge``: ``runtime.recovery.settle_verdict``, the
  resolver's reading that ``maka plan`` shows, never the ``tool_operations`` projection, which
  only names the operation): ``tool_ledger_corruption`` (the run's record is damaged),
  ``operation_settled`` (already settled, or parked: final; the same choice and note again is a
  no-op, ``created=False``, the stored bundle stands, its time included),
  ``attestation_not_applicable`` (its outcome was recorded, or it never started, or "it ran"
  for a file write recovery found untouched: only "it did not run" confirms that finding),
  ``attestation_not_offered_for_reconcile`` (a file write: its evidence decides);
- the writer's own rule that a run with a ledger issue accepts no tool fact (the scanner's code);
- ``run_not_orphaned``: the run was started by the current owner of the data directory;
- ``background_operation_pending``: a process of the call is still recorded alive.

The bundle's event ids are fixed per operation (``<operationId>_attest_reconcile`` / ``_outcome``
/ ``_decision``): an operation has at most one attestation.

Settling a writing call also takes the folder as the new baseline (docs/design/workspace.md
section 3): ``baseline`` is the ``workspaceBaseline`` body of the capture the host made just
before, committed as a fourth, hidden event (``<operationId>_attest_baseline``) in the same
transaction, through the workspace-fact envelope check. Like the bundle it may follow the run's
terminal event; the run's seal is otherwise kept.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from runtime.ledger.attestation import (
    ATTESTED_REASONS,
    Attestation,
    SettleJudge,
    attestation_result,
    note_code,
    note_problem,
)
from runtime.ledger.codes import (
    AttestationRefusal,
    ParkReason,
    RecoveryDisposition,
    StoreCode,
    WriterRejectionCode,
)
from runtime.ledger.crash_points import CrashPoint, failpoint
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.fact_events import (
    EventIdentity,
    recovered_outcome_event,
    settled_baseline_event,
    tool_recovery_event,
)
from runtime.ledger.recovery_bundle import DecisionFact, ReconcileFact, parse_reconcile_fact
from runtime.ledger.store_ports import (
    AttestationCommit,
    CommitResult,
    RunHeader,
    StoreRefusal,
    ToolOperationRecord,
)
from storage.ledger import run_header_store as headers
from storage.ledger.event_rows import read_event, read_invocation_rows
from storage.ledger.event_writer import LedgerTransaction, prepare_candidate
from storage.ledger.recovery_bundle_writer import commit_bundle
from storage.ledger.tool_projection import read_operation
from storage.ledger.workspace_fact_writer import commit_settled_baseline

SurvivingProcess = Callable[[str], str | None]
"""Given an operation id, a description of a process of that call still recorded alive (for
the refusal's message), or None."""


def attestation_event_ids(operation_id: str) -> tuple[str, str, str]:
    return (
        f"{operation_id}_attest_reconcile",
        f"{operation_id}_attest_outcome",
        f"{operation_id}_attest_decision",
    )


def attestation_events(
    operation: ToolOperationRecord,
    dispatch: RuntimeEvent,
    ran: bool,
    attestation: Attestation,
    write_not_done: bool = False,
) -> tuple[RuntimeEvent, RuntimeEvent, RuntimeEvent]:
    """The bundle for ``operation``: reconcile observation, recovered outcome, decision
    (``write_not_done``: confirming a file write recovery found not done)."""
    op = operation.operation_id
    call_id = operation.provider_tool_call_id
    ids = EventIdentity.of_event(dispatch)
    reconcile_id, outcome_id, decision_id = attestation_event_ids(op)
    ts = attestation.attested_at
    fact = ReconcileFact.attested(op, ran, attestation)
    reconcile = tool_recovery_event(
        ids, reconcile_id, ts, fact, operation_id=op, tool_call_id=call_id
    )
    outcome = recovered_outcome_event(
        ids,
        outcome_id,
        ts,
        operation_id=op,
        tool_call_id=call_id,
        tool_name=operation.tool_name,
        result=attestation_result(ran, attestation, write_not_done),
        is_error=not ran,
    )
    evidence = (operation.call_event_id, operation.dispatch_event_id, reconcile_id, outcome_id)
    decided = DecisionFact(
        op, RecoveryDisposition.COMPLETED, ATTESTED_REASONS[fact.observation], evidence, outcome_id
    )
    decision = tool_recovery_event(
        ids, decision_id, ts, decided, operation_id=op, tool_call_id=call_id
    )
    return reconcile, outcome, decision


def _same_attestation(
    tx: LedgerTransaction, operation: ToolOperationRecord, ran: bool, note: str | None
) -> AttestationCommit | None:
    """The stored attestation when it says the same (choice and note), else None."""
    reconcile_id, outcome_id, decision_id = attestation_event_ids(operation.operation_id)
    stored = read_event(tx.conn, reconcile_id, operation.run_id)
    decision = read_event(tx.conn, decision_id, operation.run_id)
    if stored is None or decision is None:
        return None
    fact = parse_reconcile_fact((stored.event.get("actions") or {}).get("toolRecovery"))
    if fact is None or fact.attestation is None:
        return None
    same_choice = (fact.observation.value == "user_attested_ran") == ran
    if not same_choice or fact.attestation.note != note:
        return None
    return AttestationCommit(
        False, decision.seq, reconcile_id, outcome_id, decision_id, fact.attestation.attested_at
    )


def baseline_event_id(operation_id: str) -> str:
    return f"{operation_id}_attest_baseline"


def _commit_baseline(
    tx: LedgerTransaction, dispatch: RuntimeEvent, operation_id: str, body: dict[str, object]
) -> None:
    """The settled call's ``workspaceBaseline`` fact, after its bundle in the same transaction."""
    failpoint(CrashPoint.SETTLE_BEFORE_BASELINE_FACT)
    ts = int(str(body["decidedAt"]))
    event = settled_baseline_event(
        EventIdentity.of_event(dispatch), baseline_event_id(operation_id), ts, body
    )
    commit_settled_baseline(tx, prepare_candidate(event))
    failpoint(CrashPoint.SETTLE_AFTER_BASELINE_FACT)


def _older_epoch(conn: sqlite3.Connection, header: RunHeader) -> bool:
    return header.owner_epoch < headers.read_owner_epoch(conn)


def commit_attestation(  # noqa: PLR0917 (what the user said, and the host facts)
    tx: LedgerTransaction,
    operation_id: str,
    ran: bool,
    note: str | None,
    attested_at: int,
    surviving_process: SurvivingProcess,
    judge: SettleJudge,
    baseline: dict[str, object] | None = None,
    orphaned: Callable[[sqlite3.Connection, RunHeader], bool] | None = None,
) -> AttestationCommit:
    """``orphaned``: whether the run belongs to no running process (default: it was started
    under an older owner epoch of the data folder; on PostgreSQL, the store's own rule)."""
    operation = read_operation(tx.conn, operation_id)
    if operation is None:
        raise StoreRefusal(StoreCode.OPERATION_NOT_FOUND, f"no tool operation {operation_id}")
    problem = note_problem(note)
    if problem is not None:
        raise StoreRefusal(note_code(note), problem)
    header = headers.require_header(tx.conn, operation.run_id)
    events = [stored.event for stored in read_invocation_rows(tx.conn, header.invocation_id)]
    verdict = judge(events, operation_id)
    if verdict.code is not None:
        if verdict.code == WriterRejectionCode.OPERATION_SETTLED:
            same = _same_attestation(tx, operation, ran, note)
            if same is not None:
                return same
        raise StoreRefusal(verdict.code, verdict.message)
    if verdict.not_run_only and ran:
        raise StoreRefusal(AttestationRefusal.ATTESTATION_NOT_APPLICABLE, verdict.message)
    state = tx.run(operation.run_id)
    tx.check_health(state)  # the writer's own rule: a run with a ledger issue takes no tool fact
    if not (orphaned or _older_epoch)(tx.conn, header):
        raise StoreRefusal(
            AttestationRefusal.RUN_NOT_ORPHANED,
            f"run {operation.run_id} belongs to the process that owns the data directory now; "
            "its call may still be running",
        )
    alive = surviving_process(operation_id)
    if alive is not None:
        raise StoreRefusal(
            ParkReason.BACKGROUND_OPERATION_PENDING,
            f"a process of this call is still running ({alive}); stop it first",
        )
    dispatch = read_event(tx.conn, operation.dispatch_event_id, operation.run_id)
    if dispatch is None:
        raise StoreRefusal(StoreCode.STORE_CORRUPT, f"operation {operation_id} lost its dispatch")
    attestation = Attestation(attested_at, headers.read_owner_epoch(tx.conn), note)
    reconcile, outcome, decision = attestation_events(
        operation, dispatch.event, ran, attestation, verdict.not_run_only
    )
    result: CommitResult = commit_bundle(
        tx, prepare_candidate(reconcile), prepare_candidate(outcome), prepare_candidate(decision)
    )
    if baseline is not None and result.created:
        _commit_baseline(tx, dispatch.event, operation_id, baseline)
    return AttestationCommit(
        result.created,
        result.event_seq,
        reconcile["id"],
        outcome["id"],
        decision["id"],
        attested_at,
    )
