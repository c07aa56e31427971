"""The recovery resolver's decision table (docs/design/recovery.md section 4; docs/design/codes.md,
Resolver)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.ledger.canonical_codec import operation_id
from runtime.ledger.codes import ResolverReason, ResolverStatus, ScanIssueCode, SettlementOrigin
from runtime.ledger.event_model import RuntimeEvent
from runtime.recovery.recovery_resolver import (
    RecoveryResolution,
    ToolRecoveryDecision,
    resolve_recovery,
)
from tests.helpers.ledger_builders import (
    ALL_ENDINGS,
    DIGEST_A,
    MIXED_EDITS,
    RunIds,
    attestation_bundle,
    bound_response,
    call_event,
    decision_event,
    dispatch_event,
    mixed_ledger,
    model_text,
    operation_of,
    orphan_dispatch_copy,
    reconcile_event,
    response_event,
    stray_recovery_copy,
    terminal,
    user_text,
    with_changes,
)
from tests.helpers.ledger_builders import (
    MARKER_ACTIONS as MARKER,
)

Ledger = list[RuntimeEvent]


def _user(marker: bool = True) -> RuntimeEvent:
    return user_text(marker=marker)


def _parked(observation: str, *, marker: bool = True, mode: str = "reconcile") -> Ledger:
    call = call_event("c1")
    dispatch = dispatch_event(call, recovery_mode=mode)
    reconcile = reconcile_event(call, observation)
    return [_user(marker), call, dispatch, reconcile, decision_event(call, dispatch, reconcile)]


def _completed_bundle() -> Ledger:
    call = call_event("c1")
    dispatch = dispatch_event(call)
    reconcile = reconcile_event(call, "matches_expected_state")
    outcome = bound_response(call, ts=60, duration_ms=None)
    decision = decision_event(call, dispatch, reconcile, outcome)
    return [_user(), call, dispatch, reconcile, outcome, decision]


def _call_only(marker: bool) -> Ledger:
    return [_user(marker), call_event("c1")]


def _dispatched(marker: bool) -> Ledger:
    call = call_event("c1")
    return [_user(marker), call, dispatch_event(call)]


def _t2(is_error: bool | None = None) -> Ledger:
    call = call_event("c1")
    return [_user(), call, dispatch_event(call), bound_response(call, is_error=is_error)]


def _synthetic(marker: bool) -> Ledger:
    call = call_event("c1")
    return [_user(marker), call, response_event(call, "denied", is_error=True)]


def _orphan_dispatch() -> Ledger:
    call = call_event("c1")
    return [_user(), dispatch_event(call)]


def _orphan_response() -> Ledger:
    call = call_event("c1")
    return [_user(), response_event(call)]


def _duplicate_call() -> Ledger:
    call = call_event("c1")
    return [_user(), call, call_event("c1", event_id="second-call"), dispatch_event(call)]


def _duplicate_operation() -> Ledger:
    first = call_event("c0")
    second = call_event("c1")
    stolen = operation_of(first)
    reused = with_changes(
        dispatch_event(second),
        actions={"toolDispatch": {"operationId": stolen}},
        refs={"operationId": stolen},
    )
    return [_user(), first, dispatch_event(first), second, reused]


def _duplicate_dispatch() -> Ledger:
    call = call_event("c1")
    return [_user(), call, dispatch_event(call), dispatch_event(call, event_id="again")]


def _duplicate_response() -> Ledger:
    call = call_event("c1")
    return [
        _user(),
        call,
        dispatch_event(call),
        bound_response(call),
        bound_response(call, event_id="again"),
    ]


def _hash_conflict() -> Ledger:
    call = call_event("c1")
    forged = with_changes(
        dispatch_event(call), actions={"toolDispatch": {"canonicalArgsHash": DIGEST_A}}
    )
    return [_user(), call, forged, bound_response(call)]


def _renamed_response() -> Ledger:
    call = call_event("c1", "Write")
    renamed = with_changes(response_event(call), content={"name": "Read"})
    return [_user(), call, renamed]


def _response_before_dispatch() -> Ledger:
    call = call_event("c1")
    return [_user(), call, bound_response(call), dispatch_event(call)]


def _bundle_on_never_retry() -> Ledger:
    return _parked("diverged", mode="never_auto_retry")


def _attested(ran: bool, *, mode: str = "never_auto_retry", after_terminal: bool = False) -> Ledger:
    """A bash call left dispatched without response, settled by the user's attestation (after
    the run's recovered terminal event, as the user settles it)."""
    call = call_event("c1", "bash", {"command": "make migrate"})
    dispatch = dispatch_event(call, recovery_mode=mode)
    bundle = attestation_bundle(call, dispatch, ran, note="checked the database")
    ending = [terminal(state_delta={"failureClass": "app_restarted"}, status="failed", ts=59)]
    return [_user(), call, dispatch, *(ending if after_terminal else []), *bundle]


def _bundle_before_dispatch_order() -> Ledger:
    """A valid completed bundle whose outcome sits before the reconcile observation."""
    events = _completed_bundle()
    return [events[0], events[1], events[2], events[4], events[3], events[5]]


@dataclass(frozen=True)
class Row:
    ledger: Callable[[], Ledger]
    status: ResolverStatus
    reason: ResolverReason
    origin: SettlementOrigin | None = None


TABLE: dict[str, Row] = {
    "a T1 call with its T2 response completed normally": Row(
        _t2, ResolverStatus.COMPLETED, ResolverReason.MATCHING_RESPONSE, SettlementOrigin.NORMAL_T2
    ),
    "a refused call answered before T1 completed as a pre-T1 synthetic result": Row(
        lambda: _synthetic(True),
        ResolverStatus.COMPLETED,
        ResolverReason.MATCHING_RESPONSE,
        SettlementOrigin.PRE_T1_SYNTHETIC,
    ),
    "under the legacy protocol a response is still proof of completion": Row(
        lambda: _synthetic(False),
        ResolverStatus.COMPLETED,
        ResolverReason.MATCHING_RESPONSE,
        SettlementOrigin.PRE_T1_SYNTHETIC,
    ),
    "a dispatched call without response is indeterminate": Row(
        lambda: _dispatched(True),
        ResolverStatus.INDETERMINATE,
        ResolverReason.DISPATCH_WITHOUT_RESPONSE,
    ),
    "a dispatch is honoured without the marker too": Row(
        lambda: _dispatched(False),
        ResolverStatus.INDETERMINATE,
        ResolverReason.DISPATCH_WITHOUT_RESPONSE,
    ),
    "under the T1 marker a call without dispatch was definitely not dispatched": Row(
        lambda: _call_only(True),
        ResolverStatus.DEFINITELY_NOT_DISPATCHED,
        ResolverReason.NEW_PROTOCOL_BEFORE_DISPATCH,
    ),
    "without the marker a call without dispatch is indeterminate": Row(
        lambda: _call_only(False),
        ResolverStatus.INDETERMINATE,
        ResolverReason.LEGACY_DISPATCH_UNKNOWN,
    ),
    "a dispatch without its call is an orphan dispatch": Row(
        _orphan_dispatch, ResolverStatus.CORRUPTION, ResolverReason.ORPHAN_DISPATCH
    ),
    "a response without its call is an orphan response": Row(
        _orphan_response, ResolverStatus.CORRUPTION, ResolverReason.ORPHAN_RESPONSE
    ),
    "a second call with the same provider id is corruption": Row(
        _duplicate_call, ResolverStatus.CORRUPTION, ResolverReason.DUPLICATE_CALL
    ),
    "a dispatch reusing another call's operation id is corruption": Row(
        _duplicate_operation, ResolverStatus.CORRUPTION, ResolverReason.DUPLICATE_OPERATION
    ),
    "a second dispatch of one call is corruption": Row(
        _duplicate_dispatch, ResolverStatus.CORRUPTION, ResolverReason.DUPLICATE_DISPATCH
    ),
    "a second response to one call is corruption even though a response exists": Row(
        _duplicate_response, ResolverStatus.CORRUPTION, ResolverReason.DUPLICATE_RESPONSE
    ),
    "a dispatch hash that does not match the call's arguments is corruption": Row(
        _hash_conflict, ResolverStatus.CORRUPTION, ResolverReason.CANONICAL_ARGS_HASH_CONFLICT
    ),
    "a response naming another tool is an identity conflict": Row(
        _renamed_response, ResolverStatus.CORRUPTION, ResolverReason.IDENTITY_CONFLICT
    ),
    "a response committed before the dispatch is an event order conflict": Row(
        _response_before_dispatch, ResolverStatus.CORRUPTION, ResolverReason.EVENT_ORDER_CONFLICT
    ),
    "a valid completed recovery bundle completes the operation": Row(
        _completed_bundle,
        ResolverStatus.COMPLETED,
        ResolverReason.RECOVERY_BUNDLE_COMPLETED,
        SettlementOrigin.RECOVERY_BUNDLE,
    ),
    "a write observed in its prior state is parked": Row(
        lambda: _parked("matches_prior_state"),
        ResolverStatus.PARKED,
        ResolverReason.RECONCILE_MATCHES_PRIOR_STATE,
        SettlementOrigin.RECOVERY_BUNDLE,
    ),
    "a write whose file diverged is parked": Row(
        lambda: _parked("diverged"),
        ResolverStatus.PARKED,
        ResolverReason.RECONCILE_DIVERGED,
        SettlementOrigin.RECOVERY_BUNDLE,
    ),
    "a write whose file cannot be read is parked": Row(
        lambda: _parked("unreadable"),
        ResolverStatus.PARKED,
        ResolverReason.RECONCILE_UNREADABLE,
        SettlementOrigin.RECOVERY_BUNDLE,
    ),
    "the user's attestation that it ran completes the call on their word": Row(
        lambda: _attested(True),
        ResolverStatus.COMPLETED,
        ResolverReason.USER_ATTESTED_RAN,
        SettlementOrigin.USER_ATTESTATION,
    ),
    "the user's attestation that it did not run completes the call as failed": Row(
        lambda: _attested(False, after_terminal=True),
        ResolverStatus.COMPLETED,
        ResolverReason.USER_ATTESTED_NOT_RUN,
        SettlementOrigin.USER_ATTESTATION,
    ),
    "an attestation is valid for a reconcile-mode operation too": Row(
        lambda: _attested(True, mode="reconcile", after_terminal=True),
        ResolverStatus.COMPLETED,
        ResolverReason.USER_ATTESTED_RAN,
        SettlementOrigin.USER_ATTESTATION,
    ),
    "a bundle for an operation that does not accept reconciliation is corrupt": Row(
        _bundle_on_never_retry, ResolverStatus.CORRUPTION, ResolverReason.RECOVERY_FACT_CORRUPTION
    ),
    "a bundle whose facts break the causal order is corrupt and loses its origin": Row(
        _bundle_before_dispatch_order,
        ResolverStatus.CORRUPTION,
        ResolverReason.RECOVERY_FACT_CORRUPTION,
    ),
}


def _decision(resolution: RecoveryResolution, tool_call_id: str = "c1") -> ToolRecoveryDecision:
    matches = [d for d in resolution.decisions if d.tool_call_id == tool_call_id]
    assert len(matches) == 1, resolution.decisions
    return matches[0]


@pytest.mark.parametrize("name", list(TABLE))
def test_decision_table(name: str) -> None:
    """Each row is one behaviour of the decision table (first match wins)."""
    row = TABLE[name]
    decision = _decision(resolve_recovery(row.ledger()))
    assert (decision.status, decision.reason, decision.settlement_origin) == (
        row.status,
        row.reason,
        row.origin,
    )


def test_every_status_reason_and_origin_is_produced_by_the_table() -> None:
    used_reasons = {row.reason for row in TABLE.values()}
    assert set(ResolverReason) == used_reasons
    assert {row.status for row in TABLE.values()} == set(ResolverStatus)
    assert {row.origin for row in TABLE.values()} - {None} == set(SettlementOrigin)


def test_a_normal_decision_carries_every_event_id_and_the_error_flag() -> None:
    events = _t2(is_error=True)
    call = events[1]
    op = operation_of(call)
    assert resolve_recovery(events).decisions == (
        ToolRecoveryDecision(
            tool_call_id="c1",
            status=ResolverStatus.COMPLETED,
            reason=ResolverReason.MATCHING_RESPONSE,
            tool_name="Write",
            operation_id=op,
            settlement_origin=SettlementOrigin.NORMAL_T2,
            call_runtime_event_id=call["id"],
            dispatch_runtime_event_id=f"{op}_dispatch",
            response_runtime_event_id=f"{op}_response",
            response_is_error=True,
        ),
    )


def test_absent_facts_stay_absent_on_the_decision() -> None:
    (decision,) = resolve_recovery(_call_only(True)).decisions
    assert decision.operation_id is None
    assert decision.dispatch_runtime_event_id is None
    assert decision.response_runtime_event_id is None
    assert decision.response_is_error is None
    assert decision.settlement_origin is None


def test_a_response_without_is_error_is_reported_as_not_an_error() -> None:
    assert _decision(resolve_recovery(_t2())).response_is_error is False


def test_a_corrupt_operation_with_a_bound_response_still_names_it() -> None:
    decision = _decision(resolve_recovery(_duplicate_response()))
    assert decision.response_runtime_event_id is not None
    assert decision.response_is_error is False


def test_corruption_of_a_bundle_removes_the_settlement_origin() -> None:
    decision = _decision(resolve_recovery(_bundle_before_dispatch_order()))
    assert decision.settlement_origin is None
    assert decision.response_runtime_event_id is not None


def test_the_marker_only_counts_on_the_first_event() -> None:
    events = [user_text(), model_text(extra={"actions": MARKER}), call_event("c1")]
    resolution = resolve_recovery(events)
    assert resolution.tool_boundary_protocol is None
    assert _decision(resolution).status is ResolverStatus.INDETERMINATE
    assert [(i.code, i.event_id) for i in resolution.issues] == [
        (ScanIssueCode.PROTOCOL_MARKER_INVALID, "evt-model")
    ]
    assert resolution.has_corruption


def test_the_first_event_marker_activates_the_protocol() -> None:
    resolution = resolve_recovery(_call_only(True))
    assert resolution.tool_boundary_protocol == "t1_after_preflight_v1"
    assert resolution.issues == ()


def test_an_unknown_marker_value_on_the_first_event_is_invalid_and_legacy() -> None:
    first = with_changes(
        user_text(marker=True), actions={"runtimeProtocol": {"toolBoundary": "v0"}}
    )
    resolution = resolve_recovery([first, call_event("c1")])
    assert resolution.tool_boundary_protocol is None
    assert _decision(resolution).reason is ResolverReason.LEGACY_DISPATCH_UNKNOWN
    assert [i.code for i in resolution.issues] == [ScanIssueCode.PROTOCOL_MARKER_INVALID]


def test_a_duplicated_first_line_is_both_a_late_marker_and_a_duplicate_id() -> None:
    first = user_text(marker=True)
    resolution = resolve_recovery([first, first, call_event("c1")])
    assert [(i.code, i.event_id) for i in resolution.issues] == [
        (ScanIssueCode.PROTOCOL_MARKER_INVALID, "evt-user"),
        (ScanIssueCode.DUPLICATE_EVENT_ID, "evt-user"),
    ]


def test_a_marker_on_the_first_event_of_another_run_in_the_input_is_invalid() -> None:
    other = RunIds("sess-2", "inv-2", "run-2", "turn-2")
    events = [user_text(marker=True), user_text(event_id="other-user", ids=other, marker=True)]
    issues = resolve_recovery(events).issues
    assert [(i.code, i.event_id) for i in issues] == [
        (ScanIssueCode.PROTOCOL_MARKER_INVALID, "other-user")
    ]


def test_marker_issues_come_before_scanner_issues_in_ledger_order() -> None:
    call = call_event("c1")
    events = [
        user_text(marker=True),
        call,
        call_event("c1", event_id="dup-call"),
        model_text(event_id="late-1", extra={"actions": MARKER}),
        with_changes(call_event("c9", event_id="lane"), status="completed"),
        model_text(event_id="late-2", extra={"actions": MARKER}),
    ]
    codes = [(i.code, i.event_id) for i in resolve_recovery(events).issues]
    assert codes == [
        (ScanIssueCode.PROTOCOL_MARKER_INVALID, "late-1"),
        (ScanIssueCode.PROTOCOL_MARKER_INVALID, "late-2"),
        (ScanIssueCode.DUPLICATE_CALL, "dup-call"),
        (ScanIssueCode.SEMANTIC_LANE_CONFLICT, "lane"),
    ]


def test_an_invocation_used_by_two_runs_is_reported() -> None:
    moved = RunIds(run_id="run-other")
    events = [user_text(marker=True), model_text(ids=moved)]
    resolution = resolve_recovery(events)
    assert [i.code for i in resolution.issues] == [ScanIssueCode.INVOCATION_IDENTITY_CONFLICT]
    assert resolution.has_corruption
    assert resolution.decisions == ()


def test_issues_keep_the_operation_and_tool_call_they_concern() -> None:
    resolution = resolve_recovery(_duplicate_dispatch())
    (issue,) = resolution.issues
    assert issue.code is ScanIssueCode.DUPLICATE_DISPATCH
    assert issue.event_id == "again"
    assert issue.tool_call_id == "c1"
    assert issue.operation_id == operation_id("inv-1", "c1")


def test_reconciliation_is_required_only_for_a_clean_ledger_with_an_unknown_outcome() -> None:
    clean = resolve_recovery(_dispatched(True))
    assert clean.requires_reconciliation
    assert not clean.has_corruption
    corrupt = resolve_recovery([*_dispatched(True), *_orphan_response()[1:]])
    assert corrupt.has_corruption
    assert not corrupt.requires_reconciliation
    settled = resolve_recovery(_t2())
    assert not settled.requires_reconciliation
    assert not settled.has_corruption


def test_a_corrupt_decision_alone_sets_has_corruption() -> None:
    resolution = resolve_recovery(_bundle_on_never_retry())
    assert resolution.issues == ()
    assert resolution.has_corruption


def test_decisions_follow_the_first_appearance_of_each_operation() -> None:
    first, second, third = call_event("a"), call_event("b"), call_event("c")
    events = [
        user_text(marker=True),
        second,
        first,
        dispatch_event(first),
        third,
        bound_response(first),
        terminal(),
    ]
    assert [d.tool_call_id for d in resolve_recovery(events).decisions] == ["b", "a", "c"]


def test_partial_and_ordinary_events_make_no_operation() -> None:
    events = [user_text(marker=True), model_text(partial=True), model_text(event_id="m2")]
    resolution = resolve_recovery(events)
    assert resolution.decisions == ()
    assert not resolution.has_corruption


def test_resolving_never_mutates_the_events() -> None:
    events = _completed_bundle()
    before = copy.deepcopy(events)
    assert resolve_recovery(events) == resolve_recovery(events)
    assert events == before


def test_an_empty_ledger_resolves_to_nothing() -> None:
    resolution = resolve_recovery([])
    assert resolution == RecoveryResolution((), (), False, False, None)


def test_a_stolen_operation_id_corrupts_both_operations() -> None:
    resolution = resolve_recovery(_duplicate_operation())
    assert [(d.tool_call_id, d.reason) for d in resolution.decisions] == [
        ("c0", ResolverReason.DUPLICATE_OPERATION),
        ("c1", ResolverReason.DUPLICATE_OPERATION),
    ]


def test_an_orphan_dispatch_reusing_a_bound_operation_id_is_an_orphan_dispatch() -> None:
    """Reference section 4.2 step 6: the call-less dispatch made its operation with the
    operation id and the dispatch, so it resolves as ``orphan_dispatch`` naming both, not as
    ``duplicate_operation`` naming neither."""
    call = call_event("c0")
    owner = dispatch_event(call)
    orphan = orphan_dispatch_copy(owner, "c1", operation_of(call))
    first, second = resolve_recovery([_user(), call, owner, orphan]).decisions
    assert first.reason is ResolverReason.DUPLICATE_OPERATION
    assert second == ToolRecoveryDecision(
        tool_call_id="c1",
        status=ResolverStatus.CORRUPTION,
        reason=ResolverReason.ORPHAN_DISPATCH,
        tool_name="Write",
        operation_id=operation_of(call),
        dispatch_runtime_event_id=orphan["id"],
        response_is_error=None,
    )


def test_a_recovery_fact_without_its_operation_is_reported_with_the_claimed_id() -> None:
    """Reference section 4.2 step 8: the issue names the payload's operation id."""
    call = call_event("c1")
    dispatch = dispatch_event(call)
    stray = stray_recovery_copy(reconcile_event(call), "toolop_nobody", "stray")
    resolution = resolve_recovery([_user(), call, dispatch, stray])
    assert [(i.code, i.event_id, i.operation_id, i.tool_call_id) for i in resolution.issues] == [
        (ScanIssueCode.EVENT_ORDER_CONFLICT, stray["id"], "toolop_nobody", "c1")
    ]
    assert resolution.has_corruption


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_an_operation_without_a_call_is_always_an_orphan_naming_its_fact(
    data: st.DataObject,
) -> None:
    """Rows 1 and 2 of the decision table: an operation without a call was made by a dispatch
    or a response, and is reported as that orphan with the fact's event (and a dispatch's
    operation id), never by one of its issues."""
    events = mixed_ledger(data.draw, edits=MIXED_EDITS, endings=ALL_ENDINGS)
    for decision in resolve_recovery(events).decisions:
        if decision.call_runtime_event_id is not None:
            continue
        assert decision.status is ResolverStatus.CORRUPTION
        if decision.reason is ResolverReason.ORPHAN_DISPATCH:
            assert decision.dispatch_runtime_event_id is not None
            assert decision.operation_id is not None
        else:
            assert decision.reason is ResolverReason.ORPHAN_RESPONSE, decision
            assert decision.response_runtime_event_id is not None


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_marker_issues_name_every_marker_after_the_first_event(data: st.DataObject) -> None:
    """The resolver takes the markers' places from the scan; they are exactly the events after
    the first whose actions carry a marker, duplicated lines included, in ledger order (and an
    invalid marker on the first event comes before them)."""
    events = mixed_ledger(
        data.draw, edits=("dup", "mark", "swap", "drop", "orphan", "stray"), endings=ALL_ENDINGS
    )
    issues = [
        issue.event_id
        for issue in resolve_recovery(events).issues
        if issue.code is ScanIssueCode.PROTOCOL_MARKER_INVALID
    ]
    first_actions: dict[str, Any] = dict(events[0].get("actions") or {})
    first_invalid = (
        "runtimeProtocol" in first_actions
        and first_actions["runtimeProtocol"] != (MARKER["runtimeProtocol"])
    )
    late = [
        event["id"] for event in events[1:] if "runtimeProtocol" in (event.get("actions") or {})
    ]
    assert issues == [events[0]["id"]] * first_invalid + late
