"""Phase 0: the resume plan of one run's committed events (docs/design/recovery.md section 4).

``plan_resume(events, expected_high_water=None)`` answers "may this history be handed back to a
model as it is?" without touching anything: resolver -> tool-operation projection -> diagnostics
-> rejection reasons -> verification -> disposition -> replay list. It never writes, runs no tool
and creates no run; the same events always give an equal plan.

The plan is deliberately conservative. Every unsettled, parked or inconsistent tool fact is a
``dangling_tool_state``; an operation whose outcome is unknown (``indeterminate``) additionally
requires the model to verify the world with read-only tools before retrying (the directive).
The replay list never contains an unpaired call or response, a partial chunk or a hidden event,
so whatever happens next, the model is never shown half a tool exchange.

``plan_resume`` resolves the run, plans the resolved operations (``plan_resolved``) and takes the
verdict of their facts (``plan_verdict``). ``maka ledger plan`` folds a long run in one streaming
pass (``app/commands/ledger_stream_plan``) and gives ``plan_verdict`` the facts it folded (tests
check its output equals the plan of ``plan_resume``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from runtime.ledger.codes import (
    ISSUE_CODE,
    RESOLVER_REASON,
    DiagnosticCode,
    Disposition,
    OperationStatus,
    ParkReason,
    ReconcileObservation,
    ResolverReason,
    ResolverStatus,
    ScanIssueCode,
    SettlementOrigin,
)
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.tool_ledger_scanner import ScanIssue, ScannedOperation, ToolLedgerScan
from runtime.recovery.recovery_resolver import (
    RecoveryResolution,
    ResolvedOperation,
    resolve_operations,
)
from runtime.recovery.replay_walk import ResponseMismatch, walk_replay

if TYPE_CHECKING:
    from runtime.ledger.attestation import Attestation

INDETERMINATE_TOOL_RESULT_DIRECTIVE = (
    "Tool execution was interrupted before a matching committed tool result was found. The side "
    "effects may or may not have occurred. Do not retry the tool call immediately. Use read-only "
    "inspection tools to verify the current state before deciding the next step."
)

DetailValue = str | int
Detail = Mapping[str, DetailValue]


class AttestedCall(NamedTuple):
    """What the user said about a call whose outcome was unknown (docs/design/recovery.md section
    8): ``ran`` or not, and who, when and with which note (``attestation``)."""

    ran: bool
    attestation: Attestation


class ToolOperation(NamedTuple):
    """A model-visible tool call as the plan sees it. ``status`` succeeded/failed is decided only
    by the committed response's ``isError``; ``attested`` is set when that response is the
    user's word (the call was never seen to succeed or fail). A named tuple, as the resolver's
    per-operation records are (one per call of a long run)."""

    tool_call_id: str
    tool_name: str
    args: Any
    status: OperationStatus
    call_runtime_event_id: str
    response_runtime_event_id: str | None = None
    response_is_error: bool | None = None
    attested: AttestedCall | None = None


@dataclass(frozen=True, slots=True)
class ResumeDiagnostic:
    code: DiagnosticCode
    message: str
    event_id: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    detail: Detail | None = None


@dataclass(frozen=True, slots=True)
class ResumePlan:
    """``source_runtime_event_high_water`` counts every input event (partial ones included);
    ``directive`` is set exactly when ``requires_verification``."""

    disposition: Disposition
    operations: tuple[ToolOperation, ...]
    diagnostics: tuple[ResumeDiagnostic, ...]
    rejection_reasons: tuple[ParkReason, ...]
    requires_verification: bool
    source_runtime_event_high_water: int
    directive: str | None
    runtime_events: tuple[RuntimeEvent, ...]
    replay_runtime_events: tuple[RuntimeEvent, ...]


_STATUS: Mapping[ResolverStatus, OperationStatus] = {
    ResolverStatus.DEFINITELY_NOT_DISPATCHED: OperationStatus.NOT_DISPATCHED,
    ResolverStatus.INDETERMINATE: OperationStatus.INDETERMINATE,
    ResolverStatus.PARKED: OperationStatus.PARKED,
    ResolverStatus.CORRUPTION: OperationStatus.CORRUPTION,
}

# Per projected operation status: (diagnostic code, message); succeeded/failed need none.
_OPERATION_DIAGNOSTICS: Mapping[OperationStatus, tuple[DiagnosticCode, str]] = {
    OperationStatus.INDETERMINATE: (
        DiagnosticCode.PENDING_TOOL_RESULT,
        "function_call has no matching committed function_response",
    ),
    OperationStatus.NOT_DISPATCHED: (
        DiagnosticCode.TOOL_NOT_DISPATCHED,
        "function_call did not cross the durable tool dispatch boundary",
    ),
    OperationStatus.CORRUPTION: (
        DiagnosticCode.TOOL_RECOVERY_CORRUPTION,
        "tool recovery facts conflict",
    ),
    OperationStatus.PARKED: (
        DiagnosticCode.TOOL_RECOVERY_PARKED,
        "tool recovery reached a terminal parked decision",
    ),
}

# Resolver issues with a diagnostic of their own; every other issue is tool_ledger_corruption.
_ISSUE_DIAGNOSTICS: Mapping[ScanIssueCode, tuple[DiagnosticCode, str]] = {
    ScanIssueCode.PROTOCOL_MARKER_INVALID: (
        DiagnosticCode.PROTOCOL_MARKER_INVALID,
        "runtime protocol marker is only valid on the first canonical event",
    ),
    ScanIssueCode.DUPLICATE_EVENT_ID: (
        DiagnosticCode.DUPLICATE_EVENT_ID,
        "immutable RuntimeEvent identity is duplicated",
    ),
    ScanIssueCode.SEMANTIC_LANE_CONFLICT: (
        DiagnosticCode.SEMANTIC_LANE_CONFLICT,
        "RuntimeEvent claims more than one authoritative tool semantic lane",
    ),
}

_DANGLING = frozenset(
    {
        DiagnosticCode.PENDING_TOOL_RESULT,
        DiagnosticCode.TOOL_NOT_DISPATCHED,
        DiagnosticCode.TOOL_RECOVERY_PARKED,
        DiagnosticCode.TOOL_RECOVERY_CORRUPTION,
        DiagnosticCode.TOOL_LEDGER_CORRUPTION,
        DiagnosticCode.DUPLICATE_EVENT_ID,
        DiagnosticCode.SEMANTIC_LANE_CONFLICT,
        DiagnosticCode.PROTOCOL_MARKER_INVALID,
        DiagnosticCode.UNMATCHED_TOOL_RESULT,
        DiagnosticCode.TOOL_NAME_MISMATCH,
    }
)


_INDETERMINATE = ResolverStatus.INDETERMINATE
_CORRUPTION = ResolverStatus.CORRUPTION
_COMPLETED = ResolverStatus.COMPLETED
_ORPHAN_RESPONSE = ResolverReason.ORPHAN_RESPONSE
_SUCCEEDED, _FAILED = OperationStatus.SUCCEEDED, OperationStatus.FAILED
_USER_ATTESTATION = SettlementOrigin.USER_ATTESTATION


def _attested(scanned: ScannedOperation) -> AttestedCall | None:
    """The user's attestation among the operation's reconcile facts (the resolver settled it
    with ``user_attestation``, so its bundle is valid)."""
    # Imported here, as the resolver does: most runs hold no recovery fact.
    from runtime.ledger.recovery_bundle import parse_reconcile_fact

    for event in scanned.reconcile_events:
        actions: Any = event.get("actions") or {}
        fact = parse_reconcile_fact(actions.get("toolRecovery"))
        if fact is not None and fact.attestation is not None:
            ran = fact.observation is ReconcileObservation.USER_ATTESTED_RAN
            return AttestedCall(ran, fact.attestation)
    return None


@dataclass(frozen=True, slots=True)
class _Projection:
    """What one pass over the resolved operations yields: the model-visible operations (orphans,
    that is operations without a call, and hidden nested calls are not projected) and, each in
    resolver order, the diagnostics of the operations, of orphan facts and of hidden calls."""

    operations: tuple[ToolOperation, ...]
    operation_diagnostics: list[ResumeDiagnostic]
    orphan_facts: list[ResumeDiagnostic]
    hidden_pending: list[ResumeDiagnostic]


def _project(resolved: Sequence[ResolvedOperation]) -> _Projection:
    """One pass over the resolver's operations (a long run has tens of thousands)."""
    operations: list[ToolOperation] = []
    operation_diagnostics: list[ResumeDiagnostic] = []
    orphan_facts: list[ResumeDiagnostic] = []
    hidden_pending: list[ResumeDiagnostic] = []
    operation_entry = _OPERATION_DIAGNOSTICS.get
    for decision, scanned in resolved:
        call = scanned.call_event
        call_event_id = decision.call_runtime_event_id
        if call_event_id is None or call is None:
            # Corrupt operations without a call that no other diagnostic names: orphan
            # dispatches and bad recovery facts (an orphan response is named by the replay walk).
            if decision.status is _CORRUPTION and decision.reason is not _ORPHAN_RESPONSE:
                orphan_facts.append(
                    ResumeDiagnostic(
                        DiagnosticCode.TOOL_RECOVERY_CORRUPTION,
                        f"tool recovery fact is corrupt: {decision.reason.value}",
                        decision.dispatch_runtime_event_id or decision.response_runtime_event_id,
                        decision.tool_call_id,
                        decision.tool_name,
                        detail=MappingProxyType({RESOLVER_REASON: decision.reason.value}),
                    )
                )
            continue
        if "modelVisibility" in call and call["modelVisibility"] == "hidden":
            # A hidden nested call with an unknown outcome still blocks the enclosing execution.
            if decision.status is _INDETERMINATE:
                hidden_pending.append(
                    ResumeDiagnostic(
                        DiagnosticCode.PENDING_TOOL_RESULT,
                        "hidden nested tool call has no matching committed function_response",
                        call_event_id,
                        decision.tool_call_id,
                        decision.tool_name,
                    )
                )
            continue
        content: Any = call.get("content") or {}
        if content.get("kind") != "function_call":
            continue
        attested = None
        if decision.status is _COMPLETED:
            status = _FAILED if decision.response_is_error is True else _SUCCEEDED
            if decision.settlement_origin is _USER_ATTESTATION:
                attested = _attested(scanned)
        else:
            status = _STATUS[decision.status]
            entry = operation_entry(status)
            if entry is not None:
                operation_diagnostics.append(
                    ResumeDiagnostic(
                        entry[0],
                        entry[1],
                        call_event_id,
                        decision.tool_call_id,
                        content["name"],
                        detail=MappingProxyType({RESOLVER_REASON: decision.reason.value}),
                    )
                )
        operations.append(
            ToolOperation(
                decision.tool_call_id,
                content["name"],
                content["args"],
                status,
                call_event_id,
                decision.response_runtime_event_id,
                decision.response_is_error,
                attested,
            )
        )
    return _Projection(tuple(operations), operation_diagnostics, orphan_facts, hidden_pending)


def _issue_diagnostic(issue: ScanIssue) -> ResumeDiagnostic:
    named = _ISSUE_DIAGNOSTICS.get(issue.code)
    if named is not None:
        return ResumeDiagnostic(named[0], named[1], issue.event_id)
    return ResumeDiagnostic(
        DiagnosticCode.TOOL_LEDGER_CORRUPTION,
        f"immutable tool ledger is corrupt: {issue.code.value}",
        issue.event_id,
        detail=MappingProxyType({ISSUE_CODE: issue.code.value}),
    )


def _diagnostics(
    parts: Sequence[PlanFacts], expected_high_water: int | None, high_water: int
) -> list[ResumeDiagnostic]:
    """All diagnostics, in the fixed emission order of the design (six passes): high-water,
    operations, resolver issues (every marker issue, then the scan's other issues), orphan
    facts, hidden calls, responses; within each pass, the parts in ledger order."""
    found: list[ResumeDiagnostic] = []
    if expected_high_water is not None and expected_high_water != high_water:
        found.append(
            ResumeDiagnostic(
                DiagnosticCode.RUNTIME_OFFSET_MISMATCH,
                "RuntimeEvent high-water does not match the expected checkpoint offset",
                detail=MappingProxyType(
                    {
                        "expectedRuntimeEventHighWater": expected_high_water,
                        "actualRuntimeEventHighWater": high_water,
                    }
                ),
            )
        )
    for part in parts:
        found.extend(part.operation_diagnostics)
    for part in parts:
        found.extend(map(_issue_diagnostic, part.marker_issues))
    for part in parts:
        found.extend(map(_issue_diagnostic, part.scan_issues))
    for part in parts:
        found.extend(part.orphan_facts)
    for part in parts:
        found.extend(part.hidden_pending)
    for part in parts:
        found.extend(part.response_diagnostics)
    return found


def _response_diagnostic(mismatch: ResponseMismatch) -> ResumeDiagnostic:
    """Every visible committed response must answer a projected call of the same tool."""
    if mismatch.call_tool_name is None:
        return ResumeDiagnostic(
            DiagnosticCode.UNMATCHED_TOOL_RESULT,
            "function_response has no prior matching function_call",
            mismatch.event_id,
            mismatch.tool_call_id,
            mismatch.tool_name,
        )
    return ResumeDiagnostic(
        DiagnosticCode.TOOL_NAME_MISMATCH,
        "function_response tool name differs from matching function_call",
        mismatch.event_id,
        mismatch.tool_call_id,
        mismatch.tool_name,
        MappingProxyType(
            {"callToolName": mismatch.call_tool_name, "responseToolName": mismatch.tool_name}
        ),
    )


def _rejection_reasons(diagnostics: Sequence[ResumeDiagnostic]) -> tuple[ParkReason, ...]:
    """Only two reasons come out of Phase 0; unique, in first-appearance order."""
    reasons: list[ParkReason] = []
    for diagnostic in diagnostics:
        if diagnostic.code is DiagnosticCode.RUNTIME_OFFSET_MISMATCH:
            reason = ParkReason.RUNTIME_OFFSET_MISMATCH
        elif diagnostic.code in _DANGLING:
            reason = ParkReason.DANGLING_TOOL_STATE
        else:
            continue
        if reason not in reasons:
            reasons.append(reason)
    return tuple(reasons)


@dataclass(frozen=True, slots=True)
class PlanFacts:
    """What the plan's verdict takes from a run's events (``plan_verdict`` of a run's facts is
    its plan's verdict)."""

    event_count: int
    operation_diagnostics: tuple[ResumeDiagnostic, ...]
    marker_issues: tuple[ScanIssue, ...]
    scan_issues: tuple[ScanIssue, ...]
    corrupt_decision: bool
    indeterminate_operation: bool
    orphan_facts: tuple[ResumeDiagnostic, ...]
    hidden_pending: tuple[ResumeDiagnostic, ...]
    response_diagnostics: tuple[ResumeDiagnostic, ...]


@dataclass(frozen=True, slots=True)
class PlanPart:
    """A run's events planned: the verdict's facts, the projected operations and the replay
    list."""

    facts: PlanFacts
    operations: tuple[ToolOperation, ...]
    replay: tuple[RuntimeEvent, ...]


@dataclass(frozen=True, slots=True)
class PlanVerdict:
    """A run's plan but for its two lists (operations, replay): ``plan_verdict``."""

    disposition: Disposition
    diagnostics: tuple[ResumeDiagnostic, ...]
    rejection_reasons: tuple[ParkReason, ...]
    requires_verification: bool
    source_runtime_event_high_water: int
    directive: str | None


def plan_resolved(
    events: Sequence[RuntimeEvent],
    resolved: tuple[RecoveryResolution, tuple[ResolvedOperation, ...]],
) -> PlanPart:
    """Plan ``events`` (a whole run) from their resolution (``resolve_operations``)."""
    resolution, operations_resolved = resolved
    projection = _project(operations_resolved)
    operations = projection.operations
    walk = walk_replay(
        events,
        {operation.tool_call_id: operation.tool_name for operation in operations},
    )
    marker = ScanIssueCode.PROTOCOL_MARKER_INVALID
    facts = PlanFacts(
        event_count=len(events),
        operation_diagnostics=tuple(projection.operation_diagnostics),
        marker_issues=tuple(issue for issue in resolution.issues if issue.code is marker),
        scan_issues=tuple(issue for issue in resolution.issues if issue.code is not marker),
        corrupt_decision=any(d.status is _CORRUPTION for d in resolution.decisions),
        indeterminate_operation=any(
            operation.status is OperationStatus.INDETERMINATE for operation in operations
        ),
        orphan_facts=tuple(projection.orphan_facts),
        hidden_pending=tuple(projection.hidden_pending),
        response_diagnostics=tuple(map(_response_diagnostic, walk.response_mismatches)),
    )
    return PlanPart(facts, operations, walk.replay)


def plan_verdict(parts: Sequence[PlanFacts], expected_high_water: int | None) -> PlanVerdict:
    """The verdict of a run from the facts of its parts, in ledger order (one part: the whole
    run)."""
    high_water = sum(part.event_count for part in parts)
    diagnostics = _diagnostics(parts, expected_high_water, high_water)
    reasons = _rejection_reasons(diagnostics)
    requires_verification = any(
        part.hidden_pending or part.indeterminate_operation for part in parts
    )
    has_corruption = any(
        part.marker_issues or part.scan_issues or part.corrupt_decision for part in parts
    )
    safe = not reasons and not requires_verification and not has_corruption
    return PlanVerdict(
        disposition=Disposition.SAFE_REPLAY if safe else Disposition.BLOCKED,
        diagnostics=tuple(diagnostics),
        rejection_reasons=reasons,
        requires_verification=requires_verification,
        source_runtime_event_high_water=high_water,
        directive=INDETERMINATE_TOOL_RESULT_DIRECTIVE if requires_verification else None,
    )


def plan_resume(
    events: Sequence[RuntimeEvent],
    expected_high_water: int | None = None,
    *,
    scan: ToolLedgerScan | None = None,
) -> ResumePlan:
    """The Phase 0 resume plan of one run's committed events, in ledger order. ``scan``: the
    caller's ``scan_tool_ledger`` of exactly ``events``, if it already has one."""
    part = plan_resolved(events, resolve_operations(events, scan))
    verdict = plan_verdict([part.facts], expected_high_water)
    return ResumePlan(
        disposition=verdict.disposition,
        operations=part.operations,
        diagnostics=verdict.diagnostics,
        rejection_reasons=verdict.rejection_reasons,
        requires_verification=verdict.requires_verification,
        source_runtime_event_high_water=verdict.source_runtime_event_high_water,
        directive=verdict.directive,
        runtime_events=tuple(events),
        replay_runtime_events=part.replay,
    )
