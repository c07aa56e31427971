"""Whether the user may settle a tool call on their word (docs/design/recovery.md section 8): one
decision, read from the run's committed events through the recovery resolver, the same reading
``maka plan`` shows. Every surface uses it: the store refuses an attestation by it (``maka settle``,
``/settle``, the desktop's "It ran" / "It did not run"), the transcript offers the question by
it (the desktop card's "Did it run?", the TUI's hint) and ``maka plan`` advises ``maka settle``
by it. It never reads the ``tool_operations`` projection: a projection can disagree with the
facts it was built from (an event damaged behind Maka's back), and the facts decide.

In order:

1. The run's record of tool calls is damaged (the resolver found corruption: any ledger issue or
   a corrupt operation): ``tool_ledger_corruption``. Saying whether a call ran cannot make such
   a run resumable, and the call's facts may not be what they seem.
2. Settled by the user already: ``operation_settled`` (the same answer again is the store's
   no-op).
3. Its outcome is recorded (``completed``): ``attestation_not_applicable``.
4. Parked by recovery: a file write recovery found untouched (``reconcile_matches_prior_state``)
   may be confirmed "it did not run" (only that answer: ``not_run_only``), recorded beside the
   reconciler's finding; any other park is final (``operation_settled``, saying recovery parked
   it, never that the user settled it).
5. Dispatched without a recorded result: a file write is decided by its evidence
   (``attestation_not_offered_for_reconcile``); anything else may be settled.
6. Anything else (never dispatched, or no dispatch recorded): ``attestation_not_applicable``.

Host facts come after it: the run must be an earlier start's (``run_not_orphaned``) and no process
of the call may survive (``background_operation_pending``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runtime.ledger.attestation import SettleVerdict
from runtime.ledger.codes import (
    AttestationRefusal,
    DiagnosticCode,
    ResolverReason,
    ResolverStatus,
    SettlementOrigin,
    WriterRejectionCode,
)
from runtime.ledger.command_words import maka_command
from runtime.ledger.event_model import RuntimeEvent
from runtime.recovery.recovery_resolver import (
    RecoveryResolution,
    ResolvedOperation,
    resolve_operations,
)

SETTLEABLE = SettleVerdict(None)

__all__ = [
    "SETTLEABLE",
    "SettleVerdict",
    "damage_of",
    "judge_settlement",
    "settle_verdict",
    "verdicts_by_call",
]


def damage_of(resolution: RecoveryResolution) -> str | None:
    """Where the run's record is damaged, in words (``orphan_response at event E``), or None."""
    if resolution.issues:
        issue = resolution.issues[0]
        return f"{issue.code.value} at event {issue.event_id}"
    for decision in resolution.decisions:
        if decision.status is ResolverStatus.CORRUPTION:
            return f"{decision.reason.value} at tool call {decision.tool_call_id}"
    return None


def _damaged(call: str, damage: str) -> SettleVerdict:
    return SettleVerdict(
        DiagnosticCode.TOOL_LEDGER_CORRUPTION,
        f"the saved history of this run is damaged ({damage}): saying whether {call} ran "
        f"cannot make the run resumable, so nothing is recorded. {maka_command('doctor')} lists "
        "every damaged record (it changes nothing)",
    )


def settle_verdict(resolution: RecoveryResolution, resolved: ResolvedOperation) -> SettleVerdict:
    """The verdict on one operation of a run resolved as ``resolution`` (see the module)."""
    decision = resolved.decision
    call = f"{decision.tool_name or 'tool'} {decision.tool_call_id}"  # as maka plan names it
    damage = damage_of(resolution) if resolution.has_corruption else None
    if damage is not None:
        return _damaged(call, damage)
    status = decision.status
    if decision.settlement_origin is SettlementOrigin.USER_ATTESTATION:
        return SettleVerdict(
            WriterRejectionCode.OPERATION_SETTLED,
            f"{call} is already settled; a settlement is final",
        )
    if status is ResolverStatus.COMPLETED:
        return SettleVerdict(
            AttestationRefusal.ATTESTATION_NOT_APPLICABLE,
            f"the outcome of {call} was recorded; there is nothing to settle",
        )
    if status is ResolverStatus.PARKED:
        if decision.reason is ResolverReason.RECONCILE_MATCHES_PRIOR_STATE:
            return SettleVerdict(
                None,
                f"recovery found the file of {call} as it was before the write: the write did "
                "not happen, so only 'it did not run' can be confirmed",
                not_run_only=True,
            )
        return SettleVerdict(
            WriterRejectionCode.OPERATION_SETTLED,
            f"recovery parked {call} ({decision.reason.value}) after checking the file; that "
            "is final and cannot be changed by an answer",
        )
    if decision.reason is ResolverReason.DISPATCH_WITHOUT_RESPONSE:
        if _recovery_mode(resolved.operation.dispatch_event) == "reconcile":
            return SettleVerdict(
                AttestationRefusal.ATTESTATION_NOT_OFFERED_FOR_RECONCILE,
                f"{decision.tool_name} is a file write: recovery checks the file itself",
            )
        return SETTLEABLE
    return SettleVerdict(
        AttestationRefusal.ATTESTATION_NOT_APPLICABLE,
        f"no start of {call} was recorded ({decision.reason.value}); only a call started "
        "without a recorded result can be settled",
    )


def _recovery_mode(dispatch: RuntimeEvent | None) -> object:
    actions: Any = dispatch.get("actions") if dispatch is not None else None
    fact = actions.get("toolDispatch") if isinstance(actions, Mapping) else None
    return fact.get("recoveryMode") if isinstance(fact, Mapping) else None


def judge_settlement(events: Sequence[RuntimeEvent], operation_id: str) -> SettleVerdict:
    """The verdict on ``operation_id`` from its run's committed ``events`` (the store's
    ``SettleJudge``). An operation no fact of the run names: the record is damaged."""
    resolution, resolved = resolve_operations(events)
    for operation in resolved:
        if operation.decision.operation_id == operation_id:
            return settle_verdict(resolution, operation)
    return _damaged(
        f"operation {operation_id}",
        damage_of(resolution) or f"no committed fact names operation {operation_id}",
    )


def verdicts_by_call(events: Sequence[RuntimeEvent]) -> dict[str, SettleVerdict]:
    """The verdict on every operation of a run, by tool call id (the first operation of a call
    id: a repeated one is damage, which closes every verdict anyway)."""
    resolution, resolved = resolve_operations(events)
    verdicts: dict[str, SettleVerdict] = {}
    for operation in resolved:
        verdicts.setdefault(operation.decision.tool_call_id, settle_verdict(resolution, operation))
    return verdicts
