"""The recovery resolver: what happened to every tool call, from committed facts alone.

``resolve_recovery(events)`` reads one run's RuntimeEvents in ledger order and gives each tool
operation the scanner found a status, a reason and (when it settled) a settlement origin. It is
pure and deterministic: it never writes, never looks at the clock and never mutates its input, so
re-resolving a reopened ledger always gives an equal answer.

Why the rules look the way they do:

- *Missing evidence never upgrades.* A call without a response is never "failed", and a call
  without a dispatch proves nothing unless the run's first event carries the T1 marker
  (``runtimeProtocol: t1_after_preflight_v1``): only a run that really wrote T1 before every
  side effect can claim that a missing dispatch means "never ran" (``definitely_not_dispatched``).
  Without the marker the same gap is ``indeterminate`` (``legacy_dispatch_unknown``).
- *A marker anywhere else is a lie about the protocol*: ``protocol_marker_invalid`` at that event,
  and it never activates the protocol. These marker issues are computed here over the raw input
  (a duplicated first line with the marker is a late marker too) and listed first; the scanner's
  own per-invocation marker issues are therefore not repeated.
- *Corruption is decided before settlement*: an operation with a scanner issue is ``corruption``
  even when a response exists, because a conflicting fact means the response may not be the one
  the call produced.
- Recovery bundles (reconcile + optional outcome + decision) are interpreted by the shared bundle
  rules, causal order included; anything invalid is ``recovery_fact_corruption``. A valid bundle
  holding the user's attestation settles the call ``completed`` with reason
  ``user_attested_ran`` / ``user_attested_not_run`` and settlement origin ``user_attestation``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from runtime.ledger.codes import (
    RecoveryDisposition,
    ResolverReason,
    ResolverStatus,
    ScanIssueCode,
    SettlementOrigin,
)
from runtime.ledger.event_model import TOOL_BOUNDARY_PROTOCOL_V1, RuntimeEvent
from runtime.ledger.tool_ledger_scanner import (
    ScanIssue,
    ScannedOperation,
    ToolLedgerScan,
    scan_tool_ledger,
)

# Row 3 of the decision table: the first of these an operation carries names its corruption.
_ISSUE_PRIORITY: tuple[ScanIssueCode, ...] = (
    ScanIssueCode.DUPLICATE_CALL,
    ScanIssueCode.DUPLICATE_OPERATION,
    ScanIssueCode.DUPLICATE_DISPATCH,
    ScanIssueCode.DUPLICATE_RESPONSE,
    ScanIssueCode.ORPHAN_RESPONSE,
    ScanIssueCode.CANONICAL_ARGS_HASH_CONFLICT,
    ScanIssueCode.IDENTITY_CONFLICT,
    ScanIssueCode.EVENT_ORDER_CONFLICT,
)


class ToolRecoveryDecision(NamedTuple):
    """The resolver's verdict on one operation. Optional fields are None when the fact does not
    exist (the JSON view omits them); ``response_is_error`` is set whenever a response is bound.

    This and ``ResolvedOperation`` are named tuples, not frozen dataclasses: there is one per
    tool operation (tens of thousands in a long run) and a frozen dataclass costs five times as
    much to build."""

    tool_call_id: str
    status: ResolverStatus
    reason: ResolverReason
    tool_name: str | None = None
    operation_id: str | None = None
    settlement_origin: SettlementOrigin | None = None
    call_runtime_event_id: str | None = None
    dispatch_runtime_event_id: str | None = None
    response_runtime_event_id: str | None = None
    response_is_error: bool | None = None


@dataclass(frozen=True, slots=True)
class RecoveryResolution:
    """``decisions`` in first-appearance order of the operations; ``issues`` = marker issues
    (first event, then late markers in ledger order) followed by the scanner's other issues in
    scan order. ``has_corruption`` = any issue or any corrupt decision; ``requires_reconciliation``
    = no corruption and some operation ``indeterminate``."""

    decisions: tuple[ToolRecoveryDecision, ...]
    issues: tuple[ScanIssue, ...]
    has_corruption: bool
    requires_reconciliation: bool
    tool_boundary_protocol: str | None


class ResolvedOperation(NamedTuple):
    """A decision together with the scanned facts it was made from (for the resume plan, which
    needs the call event itself: its visibility and its arguments)."""

    decision: ToolRecoveryDecision
    operation: ScannedOperation


def run_protocol(first_event: RuntimeEvent) -> str | None:
    """The tool-boundary protocol a run's first event declares, if it declares a valid one."""
    actions = cast(Mapping[str, Any] | None, first_event.get("actions"))
    if actions is None or "runtimeProtocol" not in actions:
        return None
    marker = actions["runtimeProtocol"]
    if isinstance(marker, Mapping) and marker.get("toolBoundary") == TOOL_BOUNDARY_PROTOCOL_V1:
        return TOOL_BOUNDARY_PROTOCOL_V1
    return None


def _marker_issues(
    events: Sequence[RuntimeEvent], scan: ToolLedgerScan
) -> tuple[str | None, list[ScanIssue]]:
    """The run's tool-boundary protocol (from the first event only) and every marker issue:
    an invalid marker on the first event, then every marker on a later one (the scan lists
    where the markers are, so the events are not searched again)."""
    issues: list[ScanIssue] = []
    if not events:
        return None, issues
    protocol = run_protocol(events[0])
    first_actions = cast(Mapping[str, Any] | None, events[0].get("actions"))
    if protocol is None and first_actions is not None and "runtimeProtocol" in first_actions:
        issues.append(ScanIssue(ScanIssueCode.PROTOCOL_MARKER_INVALID, events[0]["id"]))
    issues.extend(late_marker_issues(scan))
    return protocol, issues


def late_marker_issues(scan: ToolLedgerScan) -> list[ScanIssue]:
    """A marker issue for every marker the scan found after the run's first event."""
    return [
        ScanIssue(ScanIssueCode.PROTOCOL_MARKER_INVALID, event_id)
        for position, event_id in scan.markers
        if position > 0
    ]


# The verdicts of the decision table's common rows, looked up once (``_decide`` runs once per
# operation of the run).
_MATCHING_RESPONSE = (ResolverStatus.COMPLETED, ResolverReason.MATCHING_RESPONSE)
_DISPATCH_WITHOUT_RESPONSE = (
    ResolverStatus.INDETERMINATE,
    ResolverReason.DISPATCH_WITHOUT_RESPONSE,
)
_NEW_PROTOCOL_BEFORE_DISPATCH = (
    ResolverStatus.DEFINITELY_NOT_DISPATCHED,
    ResolverReason.NEW_PROTOCOL_BEFORE_DISPATCH,
)
_LEGACY_DISPATCH_UNKNOWN = (ResolverStatus.INDETERMINATE, ResolverReason.LEGACY_DISPATCH_UNKNOWN)
_NORMAL_T2 = SettlementOrigin.NORMAL_T2
_PRE_T1_SYNTHETIC = SettlementOrigin.PRE_T1_SYNTHETIC


def _decide(op: ScannedOperation, new_protocol: bool) -> ToolRecoveryDecision:
    """The decision table, first match wins; the recovery tail applies on top of rows 4-6."""
    tool_call_id, _, tool_name, operation_id, call, dispatch, response, reconciles, decided = op[:9]
    origin: SettlementOrigin | None = None
    if call is None and dispatch is not None:
        status, reason = ResolverStatus.CORRUPTION, ResolverReason.ORPHAN_DISPATCH
    elif call is None and response is not None:
        status, reason = ResolverStatus.CORRUPTION, ResolverReason.ORPHAN_RESPONSE
    elif op.issues and (code := _first_priority_issue(op.issues)) is not None:
        status, reason = ResolverStatus.CORRUPTION, ResolverReason(code.value)
    else:
        if response is not None:
            status, reason = _MATCHING_RESPONSE
            origin = _NORMAL_T2 if dispatch is not None else _PRE_T1_SYNTHETIC
        elif dispatch is not None:
            status, reason = _DISPATCH_WITHOUT_RESPONSE
        elif new_protocol:
            status, reason = _NEW_PROTOCOL_BEFORE_DISPATCH
        else:
            status, reason = _LEGACY_DISPATCH_UNKNOWN
        if reconciles or decided:
            status, reason, origin = _recovery_tail(op, status, reason, origin)
    if response is None:
        response_id = is_error = None
    else:
        response_id = response["id"]
        content: Any = response.get("content")
        is_error = content is not None and content.get("isError") is True
    return ToolRecoveryDecision(
        tool_call_id,
        status,
        reason,
        tool_name,
        operation_id,
        origin,
        call["id"] if call is not None else None,
        dispatch["id"] if dispatch is not None else None,
        response_id,
        is_error,
    )


def _first_priority_issue(issues: Sequence[ScanIssue]) -> ScanIssueCode | None:
    present = {issue.code for issue in issues}
    for code in _ISSUE_PRIORITY:
        if code in present:
            return code
    return None


def _recovery_tail(
    op: ScannedOperation,
    status: ResolverStatus,
    reason: ResolverReason,
    origin: SettlementOrigin | None,
) -> tuple[ResolverStatus, ResolverReason, SettlementOrigin | None]:
    """Recovery facts override rows 4-6: a valid bundle settles, an invalid one corrupts."""
    # Imported here: most runs hold no recovery fact, and ``maka ledger plan`` counts its
    # start-up (the bundle rules' module costs a few milliseconds to import).
    from runtime.ledger.recovery_bundle import (
        RecoveryAbsent,
        RecoveryCorruption,
        interpret_scanned_recovery,
    )

    meaning = interpret_scanned_recovery(op)
    if isinstance(meaning, RecoveryAbsent):
        return status, reason, origin
    if isinstance(meaning, RecoveryCorruption):
        return ResolverStatus.CORRUPTION, ResolverReason.RECOVERY_FACT_CORRUPTION, None
    if meaning.reconcile.attestation is not None:
        # The user's attestation (docs/design/recovery.md section 8): settled on their word,
        # and said so.
        return (
            ResolverStatus.COMPLETED,
            ResolverReason(meaning.decision.reason_code.value),
            SettlementOrigin.USER_ATTESTATION,
        )
    if meaning.decision.disposition is RecoveryDisposition.COMPLETED:
        return (
            ResolverStatus.COMPLETED,
            ResolverReason.RECOVERY_BUNDLE_COMPLETED,
            SettlementOrigin.RECOVERY_BUNDLE,
        )
    return (
        ResolverStatus.PARKED,
        ResolverReason(meaning.decision.reason_code.value),
        SettlementOrigin.RECOVERY_BUNDLE,
    )


def resolve_operations(
    events: Sequence[RuntimeEvent], scan: ToolLedgerScan | None = None
) -> tuple[RecoveryResolution, tuple[ResolvedOperation, ...]]:
    """``resolve_recovery`` plus the scanned operation behind each decision (same order).

    ``scan``: the caller's ``scan_tool_ledger`` of exactly ``events`` (a reader that scanned the
    ledger while it was still decoding it), so the scan is not done twice."""
    if scan is None:
        scan = scan_tool_ledger(events)
    protocol, marker_issues = _marker_issues(events, scan)
    return resolve_scanned(scan, protocol, marker_issues)


def resolve_scanned(
    scan: ToolLedgerScan, protocol: str | None, marker_issues: list[ScanIssue]
) -> tuple[RecoveryResolution, tuple[ResolvedOperation, ...]]:
    """The decisions of a scan, given the run's tool-boundary ``protocol`` and its marker
    issues (``resolve_operations`` takes both from the events; a reader that plans a run in
    parts takes them from the run's first event and ``late_marker_issues``)."""
    issues = marker_issues
    issues.extend(
        issue for issue in scan.issues if issue.code is not ScanIssueCode.PROTOCOL_MARKER_INVALID
    )
    new_protocol = protocol == TOOL_BOUNDARY_PROTOCOL_V1
    decisions = tuple([_decide(op, new_protocol) for op in scan.operations])
    resolved = tuple(map(ResolvedOperation, decisions, scan.operations))
    statuses = {decision.status for decision in decisions}
    has_corruption = bool(issues) or ResolverStatus.CORRUPTION in statuses
    requires_reconciliation = not has_corruption and ResolverStatus.INDETERMINATE in statuses
    resolution = RecoveryResolution(
        decisions=decisions,
        issues=tuple(issues),
        has_corruption=has_corruption,
        requires_reconciliation=requires_reconciliation,
        tool_boundary_protocol=protocol,
    )
    return resolution, resolved


def resolve_recovery(
    events: Sequence[RuntimeEvent], scan: ToolLedgerScan | None = None
) -> RecoveryResolution:
    """Resolve every tool operation of one run's committed events (in ledger order); ``scan`` as
    for ``resolve_operations``."""
    return resolve_operations(events, scan)[0]
