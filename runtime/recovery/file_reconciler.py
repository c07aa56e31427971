"""The file-write reconciler: startup recovery's step 3 (docs/design/recovery.md sections 3 and 5).

When the process dies while ``write_file`` or ``edit_file`` runs (T1 committed, no T2), the
outcome is unknown, but for a file it can be observed: the T1 dispatch carries ``file_state_v1``
evidence (the file's state before and the state the write produces). For every such operation of
an orphaned run, before the run's ending is repaired, the reconciler observes the file
(``file_observation``) and commits one recovery bundle (docs/design/ledger.md section 4):

- ``matches_expected_state``: a recovered outcome whose ``result`` is built by the tool's own
  ``file_write_result`` (so it is the normal result, byte for byte), then the decision
  ``completed``. The file is never written again.
- ``matches_prior_state`` / ``diverged`` / ``unreadable``: the decision ``parked`` with the mapped
  reason. Nothing is redone and nobody's change is overwritten: the user decides. For
  ``matches_prior_state`` the write's own temporary file is removed when its bytes are exactly
  the write's (``write_leftovers``); any other is left and named in the park's diagnostics.

Everything else that was interrupted (``bash``, any tool without evidence or with another recovery
mode) is left alone: it stays ``indeterminate``, never retried, never assumed.

Why event ids are derived from the operation id (``<op>_reconcile``, ``<op>_response``,
``<op>_decision``): a recovery killed at any point is simply run again. Before the bundle commits
nothing was written, so the next start observes afresh; after it commits (``P10``), the resolver
sees the operation settled and skips it. The outcome takes the normal T2 id, so a late T2 and a
recovered outcome can never both land.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, cast

from runtime.ledger.codes import (
    ReconcileObservation,
    RecoveryDisposition,
    RecoveryReasonCode,
    ResolverReason,
    ResolverStatus,
)
from runtime.ledger.event_model import FileStateEvidence, RuntimeEvent
from runtime.ledger.fact_events import EventIdentity, recovered_outcome_event, tool_recovery_event
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.recovery_bundle import PARKED_REASONS, DecisionFact, ReconcileFact
from runtime.ledger.store_ports import CommitResult, RunHeader, StoredEvent
from runtime.recovery.file_observation import (
    FileObservation,
    IdentityReader,
    classify,
    observe_write_target,
)
from runtime.recovery.recovery_resolver import resolve_operations
from runtime.recovery.write_leftovers import remove_our_leftovers
from runtime.tools.file_state_evidence import file_write_result

RECONCILABLE_TOOLS = frozenset({"write_file", "edit_file"})


class BundleWriter(Protocol):
    def commit_recovery_bundle(
        self,
        reconcile_event: RuntimeEvent,
        outcome_event: RuntimeEvent | None,
        decision_event: RuntimeEvent,
    ) -> CommitResult: ...


@dataclass(frozen=True, slots=True)
class ReconcileTarget:
    """One interrupted, reconcilable operation: its T1 facts and the evidence they carry."""

    operation_id: str
    tool_call_id: str
    tool_name: str
    call_event: RuntimeEvent
    dispatch_event: RuntimeEvent
    evidence: FileStateEvidence


@dataclass(frozen=True, slots=True)
class RecoveryBundle:
    reconcile: RuntimeEvent
    outcome: RuntimeEvent | None
    decision: RuntimeEvent
    observation: ReconcileObservation
    reason: RecoveryReasonCode


@dataclass(frozen=True, slots=True)
class ReconcileOutcome:
    """What happened to one operation in this pass. ``error`` set = the store refused the bundle
    (the operation stays indeterminate); ``created`` False = the same bundle was already stored."""

    run_id: str
    operation_id: str
    tool_call_id: str
    tool_name: str
    observation: ReconcileObservation
    reason: RecoveryReasonCode
    created: bool = False
    error: str | None = None
    removed_temp_files: tuple[str, ...] = ()
    kept_temp_files: tuple[str, ...] = ()


def _file_evidence(dispatch: RuntimeEvent) -> FileStateEvidence | None:
    fact = cast(Mapping[str, Any], (dispatch.get("actions") or {}).get("toolDispatch") or {})
    evidence = fact.get("evidence")
    if fact.get("recoveryMode") != "reconcile" or not isinstance(evidence, Mapping):
        return None
    if evidence.get("kind") != "file_state_v1":
        return None
    return cast(FileStateEvidence, evidence)


def reconcile_targets(events: Sequence[RuntimeEvent]) -> list[ReconcileTarget]:
    """The run's operations a reconciler may settle: dispatched with ``recoveryMode: reconcile``
    and file evidence, no response, no recovery facts, in a ledger without corruption (a store
    would refuse a bundle there, and a corrupt ledger is no evidence of anything)."""
    resolution, resolved = resolve_operations(events)
    if resolution.has_corruption:
        return []
    targets: list[ReconcileTarget] = []
    for item in resolved:
        decision, op = item.decision, item.operation
        if (
            decision.status is not ResolverStatus.INDETERMINATE
            or decision.reason is not ResolverReason.DISPATCH_WITHOUT_RESPONSE
            or op.call_event is None
            or op.dispatch_event is None
            or op.operation_id is None
            or op.tool_name not in RECONCILABLE_TOOLS
            or op.reconcile_events
            or op.decision_events
        ):
            continue
        evidence = _file_evidence(op.dispatch_event)
        if evidence is None:
            continue
        targets.append(
            ReconcileTarget(
                op.operation_id,
                op.tool_call_id,
                op.tool_name,
                op.call_event,
                op.dispatch_event,
                evidence,
            )
        )
    return targets


def recovered_outcome(target: ReconcileTarget, ts: int) -> RuntimeEvent:
    """The bound, successful function_response a completed decision points at: the normal T2 id
    and the tool's own result shape. It has no ``durationMs`` (nobody timed the write); the
    decision that follows it is what marks it as recovered."""
    return recovered_outcome_event(
        EventIdentity.of_event(target.dispatch_event),
        f"{target.operation_id}_response",
        ts,
        operation_id=target.operation_id,
        tool_call_id=target.tool_call_id,
        tool_name=target.tool_name,
        result=file_write_result(target.tool_name, target.evidence),
    )


def _fact_event(
    target: ReconcileTarget, event_id: str, ts: int, fact: ReconcileFact | DecisionFact
) -> RuntimeEvent:
    return tool_recovery_event(
        EventIdentity.of_event(target.dispatch_event),
        event_id,
        ts,
        fact,
        operation_id=target.operation_id,
        tool_call_id=target.tool_call_id,
    )


def build_bundle(target: ReconcileTarget, observed: FileObservation, ts: int) -> RecoveryBundle:
    """The bundle for one observation (pure: same inputs, same bytes)."""
    observation = classify(observed, target.evidence)
    op = target.operation_id
    reconcile = _fact_event(
        target,
        f"{op}_reconcile",
        ts,
        ReconcileFact(op, observation, observed.digest),
    )
    evidence_ids: tuple[str, ...] = (
        target.call_event["id"],
        target.dispatch_event["id"],
        reconcile["id"],
    )
    outcome: RuntimeEvent | None = None
    if observation is ReconcileObservation.MATCHES_EXPECTED_STATE:
        outcome = recovered_outcome(target, ts)
        reason = RecoveryReasonCode.RECONCILE_MATCHES_EXPECTED_STATE
        fact = DecisionFact(
            op, RecoveryDisposition.COMPLETED, reason, (*evidence_ids, outcome["id"]), outcome["id"]
        )
    else:
        reason = PARKED_REASONS[observation]
        fact = DecisionFact(op, RecoveryDisposition.PARKED, reason, evidence_ids)
    decision = _fact_event(target, f"{op}_decision", ts, fact)
    return RecoveryBundle(reconcile, outcome, decision, observation, reason)


class FileReconciler:
    """The ``Reconciler`` hook of ``run_startup_recovery``: observes and settles the interrupted
    file writes of one orphaned run; returns the operation ids that now have a bundle.

    ``outcomes`` keeps what happened to each operation in this process (for logs and tests)."""

    def __init__(
        self,
        writer: BundleWriter,
        read_identity: IdentityReader,
        clock: Callable[[], int],
    ) -> None:
        self._writer = writer
        self._read_identity = read_identity
        self._clock = clock
        self.outcomes: list[ReconcileOutcome] = []

    def __call__(self, header: RunHeader, rows: Sequence[StoredEvent]) -> Sequence[str]:
        settled: list[str] = []
        for target in reconcile_targets([row.event for row in rows]):
            observed = observe_write_target(header.cwd, target.evidence, self._read_identity)
            bundle = build_bundle(target, observed, self._clock())
            outcome = ReconcileOutcome(
                header.run_id,
                target.operation_id,
                target.tool_call_id,
                target.tool_name,
                bundle.observation,
                bundle.reason,
            )
            if bundle.observation is ReconcileObservation.MATCHES_PRIOR_STATE:
                # The write never reached its target; its temporary file, when it holds exactly
                # the bytes the write was putting in place, is Maka's own and goes.
                removed, kept = remove_our_leftovers(header.cwd, target.evidence)
                outcome = replace(
                    outcome, removed_temp_files=tuple(removed), kept_temp_files=tuple(kept)
                )
            try:
                result = self._writer.commit_recovery_bundle(
                    bundle.reconcile, bundle.outcome, bundle.decision
                )
            except LedgerError as error:
                # Refused: nothing was written; the operation stays indeterminate (never assumed).
                self.outcomes.append(replace(outcome, error=f"{error.code}: {error.message}"))
                continue
            self.outcomes.append(replace(outcome, created=result.created))
            settled.append(target.operation_id)
        return settled
