"""Phase 0 resume plans (docs/design/recovery.md sections 2 and 4): projection, diagnostics in
emission order, rejection reasons, verification, disposition, high-water and the replay list."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from runtime.ledger.codes import DiagnosticCode, Disposition, OperationStatus, ParkReason
from runtime.ledger.event_model import RuntimeEvent
from runtime.recovery.failpoints import RUNTIME_RESUME_FAILPOINTS, CommittedPrefix, Failpoint
from runtime.recovery.replay_walk import replay_runtime_events
from runtime.recovery.resume_plan import (
    INDETERMINATE_TOOL_RESULT_DIRECTIVE,
    ResumeDiagnostic,
    ResumePlan,
    ToolOperation,
    plan_resume,
)
from tests.helpers.ledger_builders import (
    DROP,
    RunIds,
    bound_response,
    call_event,
    decision_event,
    dispatch_event,
    model_text,
    operation_of,
    orphan_dispatch_copy,
    reconcile_event,
    response_event,
    terminal,
    user_text,
    with_changes,
)
from tests.helpers.ledger_builders import (
    MARKER_ACTIONS as MARKER,
)
from tests.helpers.phase0_crash_ledger import REQUIRED_DECISIONS, committed_prefix_events

Ledger = list[RuntimeEvent]
HIDDEN = {"modelVisibility": "hidden"}


def _ids(plan: ResumePlan) -> list[str]:
    return [event["id"] for event in plan.replay_runtime_events]


def _codes(plan: ResumePlan) -> list[DiagnosticCode]:
    return [diagnostic.code for diagnostic in plan.diagnostics]


def _turn(call_id: str, ending: str, *, tool: str = "Write", hidden: bool = False) -> Ledger:
    call = call_event(call_id, tool, extra=HIDDEN if hidden else None)
    dispatch = dispatch_event(call)
    if ending == "call":
        return [call]
    if ending == "dangling":
        return [call, dispatch]
    if ending == "ok":
        return [call, dispatch, bound_response(call)]
    if ending == "error":
        return [call, dispatch, bound_response(call, {"message": "boom"}, is_error=True)]
    if ending == "parked":
        reconcile = reconcile_event(call, "matches_prior_state")
        return [call, dispatch, reconcile, decision_event(call, dispatch, reconcile)]
    if ending == "recovered":
        reconcile = reconcile_event(call, "matches_expected_state")
        outcome = bound_response(call, ts=60, duration_ms=None)
        return [
            call,
            dispatch,
            reconcile,
            outcome,
            decision_event(call, dispatch, reconcile, outcome),
        ]
    if ending == "bad-bundle":  # recovered outcome before the observation: causal order broken
        reconcile = reconcile_event(call, "matches_expected_state")
        outcome = bound_response(call, ts=60, duration_ms=None)
        return [
            call,
            dispatch,
            outcome,
            reconcile,
            decision_event(call, dispatch, reconcile, outcome),
        ]
    raise ValueError(ending)


def _ledger(*turns: Ledger, marker: bool = True) -> Ledger:
    events: Ledger = [user_text(marker=marker)]
    for turn in turns:
        events.extend(turn)
    return events


# ---- projection -------------------------------------------------------------------------------

STATUS_TABLE: dict[str, tuple[Callable[[], Ledger], OperationStatus]] = {
    "a committed successful response is succeeded": (
        lambda: _ledger(_turn("c1", "ok")),
        OperationStatus.SUCCEEDED,
    ),
    "a committed error response is failed": (
        lambda: _ledger(_turn("c1", "error")),
        OperationStatus.FAILED,
    ),
    "a dispatch without response is indeterminate": (
        lambda: _ledger(_turn("c1", "dangling")),
        OperationStatus.INDETERMINATE,
    ),
    "a legacy call without response is indeterminate": (
        lambda: _ledger(_turn("c1", "call"), marker=False),
        OperationStatus.INDETERMINATE,
    ),
    "a marked call that never crossed T1 is not dispatched": (
        lambda: _ledger(_turn("c1", "call")),
        OperationStatus.NOT_DISPATCHED,
    ),
    "a parked recovery bundle is parked": (
        lambda: _ledger(_turn("c1", "parked")),
        OperationStatus.PARKED,
    ),
    "a recovered outcome is succeeded": (
        lambda: _ledger(_turn("c1", "recovered")),
        OperationStatus.SUCCEEDED,
    ),
    "an invalid recovery bundle is corruption": (
        lambda: _ledger(_turn("c1", "bad-bundle")),
        OperationStatus.CORRUPTION,
    ),
}


@pytest.mark.parametrize("name", list(STATUS_TABLE))
def test_operation_status(name: str) -> None:
    build, status = STATUS_TABLE[name]
    (operation,) = plan_resume(build()).operations
    assert operation.status is status


def test_every_operation_status_is_produced() -> None:
    assert {status for _, status in STATUS_TABLE.values()} == set(OperationStatus)


def test_an_operation_carries_the_call_arguments_and_the_response_facts() -> None:
    events = _ledger(_turn("c1", "error"))
    call = events[1]
    assert plan_resume(events).operations == (
        ToolOperation(
            tool_call_id="c1",
            tool_name="Write",
            args={"path": "notes.txt", "content": "after"},
            status=OperationStatus.FAILED,
            call_runtime_event_id=call["id"],
            response_runtime_event_id=f"{operation_of(call)}_response",
            response_is_error=True,
        ),
    )


def test_orphans_and_hidden_calls_are_not_projected() -> None:
    orphan_call = call_event("orphan")
    events = _ledger(
        [response_event(orphan_call, event_id="orphan-response")],
        [dispatch_event(call_event("lonely"))],
        _turn("nested", "ok", hidden=True),
        _turn("c1", "ok"),
    )
    assert [operation.tool_call_id for operation in plan_resume(events).operations] == ["c1"]


# ---- diagnostics ------------------------------------------------------------------------------


def test_an_offset_mismatch_names_both_high_waters() -> None:
    plan = plan_resume(_ledger(_turn("c1", "ok")), expected_high_water=2)
    assert plan.diagnostics == (
        ResumeDiagnostic(
            DiagnosticCode.RUNTIME_OFFSET_MISMATCH,
            "RuntimeEvent high-water does not match the expected checkpoint offset",
            detail={"expectedRuntimeEventHighWater": 2, "actualRuntimeEventHighWater": 4},
        ),
    )
    assert plan.rejection_reasons == (ParkReason.RUNTIME_OFFSET_MISMATCH,)
    assert plan.disposition is Disposition.BLOCKED


def test_a_matching_expected_high_water_changes_nothing() -> None:
    events = _ledger(_turn("c1", "ok"))
    assert plan_resume(events, expected_high_water=4) == plan_resume(events)


OPERATION_DIAGNOSTICS: dict[str, tuple[str, DiagnosticCode, str, str]] = {
    "an unknown outcome is a pending tool result": (
        "dangling",
        DiagnosticCode.PENDING_TOOL_RESULT,
        "function_call has no matching committed function_response",
        "dispatch_without_response",
    ),
    "a call that never crossed T1 is reported as not dispatched": (
        "call",
        DiagnosticCode.TOOL_NOT_DISPATCHED,
        "function_call did not cross the durable tool dispatch boundary",
        "new_protocol_before_dispatch",
    ),
    "a parked operation is reported as parked": (
        "parked",
        DiagnosticCode.TOOL_RECOVERY_PARKED,
        "tool recovery reached a terminal parked decision",
        "reconcile_matches_prior_state",
    ),
    "a corrupt operation is reported as conflicting recovery facts": (
        "bad-bundle",
        DiagnosticCode.TOOL_RECOVERY_CORRUPTION,
        "tool recovery facts conflict",
        "recovery_fact_corruption",
    ),
}


@pytest.mark.parametrize("name", list(OPERATION_DIAGNOSTICS))
def test_operation_diagnostic(name: str) -> None:
    ending, code, message, reason = OPERATION_DIAGNOSTICS[name]
    events = _ledger(_turn("c1", ending))
    plan = plan_resume(events)
    # The resolver's reason travels as a field (``resolverReason``), never inside the message.
    detail = {"resolverReason": reason}
    expected = ResumeDiagnostic(code, message, events[1]["id"], "c1", "Write", detail=detail)
    assert plan.diagnostics == (expected,)
    assert plan.rejection_reasons == (ParkReason.DANGLING_TOOL_STATE,)
    assert plan.disposition is Disposition.BLOCKED


ISSUE_DIAGNOSTICS: dict[str, tuple[Callable[[], Ledger], ResumeDiagnostic]] = {
    "a late protocol marker is reported at its event": (
        lambda: [user_text(marker=True), model_text(extra={"actions": MARKER})],
        ResumeDiagnostic(
            DiagnosticCode.PROTOCOL_MARKER_INVALID,
            "runtime protocol marker is only valid on the first canonical event",
            "evt-model",
        ),
    ),
    "a duplicated event id is reported": (
        lambda: [user_text(marker=True), model_text(), model_text()],
        ResumeDiagnostic(
            DiagnosticCode.DUPLICATE_EVENT_ID,
            "immutable RuntimeEvent identity is duplicated",
            "evt-model",
        ),
    ),
    "an event on two tool lanes is reported": (
        lambda: [
            user_text(marker=True),
            with_changes(call_event("c1", event_id="two-lanes"), actions={"toolDispatch": {}}),
        ],
        ResumeDiagnostic(
            DiagnosticCode.SEMANTIC_LANE_CONFLICT,
            "RuntimeEvent claims more than one authoritative tool semantic lane",
            "two-lanes",
        ),
    ),
    "any other resolver issue is tool ledger corruption naming the issue": (
        lambda: [user_text(marker=True), model_text(ids=RunIds(turn_id="turn-x"))],
        ResumeDiagnostic(
            DiagnosticCode.TOOL_LEDGER_CORRUPTION,
            "immutable tool ledger is corrupt: invocation_identity_conflict",
            "evt-model",
            detail={"issueCode": "invocation_identity_conflict"},
        ),
    ),
}


@pytest.mark.parametrize("name", list(ISSUE_DIAGNOSTICS))
def test_issue_diagnostic(name: str) -> None:
    build, expected = ISSUE_DIAGNOSTICS[name]
    plan = plan_resume(build())
    assert plan.diagnostics == (expected,)
    assert plan.rejection_reasons == (ParkReason.DANGLING_TOOL_STATE,)
    assert plan.disposition is Disposition.BLOCKED


def test_an_orphan_dispatch_is_reported_at_the_dispatch() -> None:
    dispatch = dispatch_event(call_event("c1"))
    plan = plan_resume([user_text(marker=True), dispatch])
    assert plan.operations == ()
    assert plan.diagnostics == (
        ResumeDiagnostic(
            DiagnosticCode.TOOL_LEDGER_CORRUPTION,
            "immutable tool ledger is corrupt: event_order_conflict",
            dispatch["id"],
            detail={"issueCode": "event_order_conflict"},
        ),
        ResumeDiagnostic(
            DiagnosticCode.TOOL_RECOVERY_CORRUPTION,
            "tool recovery fact is corrupt: orphan_dispatch",
            dispatch["id"],
            "c1",
            "Write",
            detail={"resolverReason": "orphan_dispatch"},
        ),
    )


def test_an_orphan_dispatch_reusing_a_bound_operation_id_is_reported_at_the_dispatch() -> None:
    call = call_event("c0")
    owner = dispatch_event(call)
    orphan = orphan_dispatch_copy(owner, "c1", operation_of(call))
    plan = plan_resume([user_text(marker=True), call, owner, orphan])
    assert plan.diagnostics[-1] == ResumeDiagnostic(
        DiagnosticCode.TOOL_RECOVERY_CORRUPTION,
        "tool recovery fact is corrupt: orphan_dispatch",
        orphan["id"],
        "c1",
        "Write",
        detail={"resolverReason": "orphan_dispatch"},
    )
    assert plan.disposition is Disposition.BLOCKED


def test_a_hidden_nested_call_with_unknown_outcome_blocks_and_requires_verification() -> None:
    events = _ledger(_turn("nested", "dangling", tool="Read", hidden=True))
    plan = plan_resume(events)
    assert plan.operations == ()
    assert plan.diagnostics == (
        ResumeDiagnostic(
            DiagnosticCode.PENDING_TOOL_RESULT,
            "hidden nested tool call has no matching committed function_response",
            events[1]["id"],
            "nested",
            "Read",
        ),
    )
    assert plan.requires_verification
    assert plan.directive == INDETERMINATE_TOOL_RESULT_DIRECTIVE
    assert plan.disposition is Disposition.BLOCKED


def test_a_response_without_a_call_is_an_unmatched_tool_result() -> None:
    response = response_event(call_event("ghost", "Read"), event_id="ghost-response")
    plan = plan_resume([user_text(marker=True), response])
    assert plan.diagnostics[-1] == ResumeDiagnostic(
        DiagnosticCode.UNMATCHED_TOOL_RESULT,
        "function_response has no prior matching function_call",
        "ghost-response",
        "ghost",
        "Read",
    )
    assert _codes(plan) == [
        DiagnosticCode.TOOL_LEDGER_CORRUPTION,
        DiagnosticCode.UNMATCHED_TOOL_RESULT,
    ]


def test_a_response_naming_another_tool_is_a_tool_name_mismatch() -> None:
    call = call_event("c1", "Write")
    response = with_changes(response_event(call, event_id="renamed"), content={"name": "Read"})
    plan = plan_resume([user_text(marker=True), call, response])
    assert plan.diagnostics[-1] == ResumeDiagnostic(
        DiagnosticCode.TOOL_NAME_MISMATCH,
        "function_response tool name differs from matching function_call",
        "renamed",
        "c1",
        "Read",
        {"callToolName": "Write", "responseToolName": "Read"},
    )
    assert _ids(plan) == ["evt-user"]


def test_partial_and_hidden_responses_are_not_checked() -> None:
    ghost = call_event("ghost")
    events = [
        user_text(marker=True),
        with_changes(response_event(ghost, event_id="hidden-ghost"), modelVisibility="hidden"),
    ]
    assert DiagnosticCode.UNMATCHED_TOOL_RESULT not in _codes(plan_resume(events))


def test_diagnostics_follow_the_emission_order() -> None:
    """Offset, then operations, then resolver issues, orphan facts, hidden calls, responses."""
    orphan = dispatch_event(call_event("orphan"))
    ghost = response_event(call_event("ghost"), event_id="ghost-response")
    events = [
        user_text(marker=True),
        *_turn("c1", "parked"),
        *_turn("c2", "call"),
        model_text(event_id="late", extra={"actions": MARKER}),
        orphan,
        *_turn("nested", "dangling", hidden=True),
        *_turn("c3", "dangling"),
        ghost,
        model_text(event_id="late"),
    ]
    plan = plan_resume(events, expected_high_water=1)
    assert _codes(plan) == [
        DiagnosticCode.RUNTIME_OFFSET_MISMATCH,
        DiagnosticCode.TOOL_RECOVERY_PARKED,
        DiagnosticCode.TOOL_NOT_DISPATCHED,
        DiagnosticCode.PENDING_TOOL_RESULT,
        DiagnosticCode.PROTOCOL_MARKER_INVALID,
        DiagnosticCode.TOOL_LEDGER_CORRUPTION,  # the orphan dispatch's event_order_conflict
        DiagnosticCode.TOOL_LEDGER_CORRUPTION,  # the ghost response's orphan_response
        DiagnosticCode.DUPLICATE_EVENT_ID,
        DiagnosticCode.TOOL_RECOVERY_CORRUPTION,
        DiagnosticCode.PENDING_TOOL_RESULT,
        DiagnosticCode.UNMATCHED_TOOL_RESULT,
    ]
    assert plan.rejection_reasons == (
        ParkReason.RUNTIME_OFFSET_MISMATCH,
        ParkReason.DANGLING_TOOL_STATE,
    )


def test_every_phase_0_diagnostic_code_is_produced_here() -> None:
    produced = {code for _, code, _, _ in OPERATION_DIAGNOSTICS.values()}
    produced |= {expected.code for _, expected in ISSUE_DIAGNOSTICS.values()}
    produced |= {
        DiagnosticCode.RUNTIME_OFFSET_MISMATCH,
        DiagnosticCode.UNMATCHED_TOOL_RESULT,
        DiagnosticCode.TOOL_NAME_MISMATCH,
    }
    # The continuation planner's and the resume seam's own diagnostics (workspace location,
    # checkpoints, restore and rebaseline) aside.
    planner_only = {
        DiagnosticCode.WORKSPACE_LOCATION_CHANGED,
        DiagnosticCode.WORKSPACE_VERIFIED,
        DiagnosticCode.WORKSPACE_CHECKPOINT_UNAVAILABLE,
        DiagnosticCode.WORKSPACE_RESTORE_ABANDONED,
        DiagnosticCode.WORKSPACE_RESTORE_POINT,
        DiagnosticCode.WORKSPACE_RESTORE_PLACE,
        DiagnosticCode.WORKSPACE_REBASELINE_UNCOMPARED,
        DiagnosticCode.WORKSPACE_REBASELINE_UNCAPTURED,
        DiagnosticCode.WORKSPACE_SETTLE_TAKES_FOLDER,
        # maka doctor's note on a session imported without its snapshots
        DiagnosticCode.WORKSPACE_CHECKPOINTS_NOT_CARRIED,
        # and on a kept snapshot whose ref was deleted by hand
        DiagnosticCode.WORKSPACE_CHECKPOINT_UNNAMED,
        # and on a snapshot store still borrowing from its folder's Git repository
        DiagnosticCode.WORKSPACE_STORE_BORROWING,
    }
    assert produced == set(DiagnosticCode) - planner_only


# ---- verification, disposition, high-water ----------------------------------------------------


def test_a_clean_history_is_safe_to_replay() -> None:
    events = _ledger(_turn("c1", "ok"), _turn("c2", "error"), _turn("c3", "recovered"))
    events.append(terminal())
    plan = plan_resume(events)
    assert plan.disposition is Disposition.SAFE_REPLAY
    assert plan.rejection_reasons == ()
    assert plan.diagnostics == ()
    assert not plan.requires_verification
    assert plan.directive is None
    assert plan.runtime_events == tuple(events)


def test_only_indeterminate_operations_require_verification() -> None:
    for ending, verify in [("dangling", True), ("call", False), ("parked", False), ("ok", False)]:
        plan = plan_resume(_ledger(_turn("c1", ending)))
        assert plan.requires_verification is verify, ending
        assert (plan.directive is not None) is verify


def test_the_directive_tells_the_model_to_verify_before_retrying() -> None:
    directive = plan_resume(_ledger(_turn("c1", "dangling"))).directive
    assert directive is not None
    assert "Do not retry" in directive
    assert "read-only" in directive


def test_a_corrupt_hidden_call_blocks_without_a_rejection_reason() -> None:
    """Its only problem is an invalid bundle: no issue, no visible operation, yet corruption."""
    turn = _turn("nested", "bad-bundle", hidden=True)
    turn[2] = with_changes(turn[2], modelVisibility="hidden")  # the recovered outcome
    plan = plan_resume(_ledger(turn))
    assert plan.operations == ()
    assert plan.diagnostics == ()
    assert plan.rejection_reasons == ()
    assert plan.disposition is Disposition.BLOCKED


def test_the_high_water_counts_every_input_event_including_partial_ones() -> None:
    events = [user_text(marker=True), model_text(event_id="chunk", partial=True), model_text()]
    assert plan_resume(events).source_runtime_event_high_water == 3
    assert plan_resume([]).source_runtime_event_high_water == 0


def test_an_empty_ledger_is_trivially_safe() -> None:
    plan = plan_resume([])
    assert plan.disposition is Disposition.SAFE_REPLAY
    assert plan.replay_runtime_events == ()


# ---- replay list ------------------------------------------------------------------------------


def test_replay_keeps_paired_calls_and_drops_unresolved_ones() -> None:
    events = _ledger(_turn("c1", "ok"), _turn("c2", "dangling"), _turn("c3", "call"))
    replay = _ids(plan_resume(events))
    assert replay == [
        "evt-user",
        events[1]["id"],
        events[2]["id"],
        events[3]["id"],
        events[5]["id"],  # c2's dispatch: no content, kept
    ]


def test_replay_drops_partial_and_hidden_events_but_keeps_text_and_contentless_facts() -> None:
    system_text = with_changes(model_text(event_id="sys-text"), role="system", author="system")
    error = with_changes(model_text(event_id="error"), content={"kind": "error", "text": DROP})
    error = with_changes(error, content={"message": "the provider failed"})
    thinking = with_changes(
        model_text(event_id="thinking"), content={"kind": "thinking", "text": "hm"}
    )
    events = [
        user_text(marker=True),
        model_text(event_id="chunk", partial=True),
        with_changes(model_text(event_id="secret"), modelVisibility="hidden"),
        system_text,
        error,
        thinking,
        terminal(),
    ]
    assert _ids(plan_resume(events)) == [
        "evt-user",
        "sys-text",
        "error",
        "thinking",
        "evt-terminal",
    ]


def test_a_response_pairs_only_an_earlier_call_of_the_same_tool() -> None:
    call = call_event("c1")
    early = response_event(call, event_id="early", ts=1)
    events = [user_text(marker=False), early, call]
    assert _ids(plan_resume(events)) == ["evt-user"]


def test_a_hidden_call_pairs_a_visible_response_but_only_the_response_is_replayed() -> None:
    call = call_event("c1", extra=HIDDEN)
    response = response_event(call, event_id="visible-response")
    events: list[Any] = [user_text(marker=True), call, response]
    assert replay_runtime_events(events) == (events[0], response)


# ---- the crash contract prefixes --------------------------------------------------------------


@pytest.mark.parametrize("point", RUNTIME_RESUME_FAILPOINTS, ids=lambda point: point.id)
def test_each_committed_prefix_gets_its_required_decision(point: Failpoint) -> None:
    events = committed_prefix_events(point.id, point.committed_prefix)
    plan = plan_resume(events)
    disposition, statuses, replay = REQUIRED_DECISIONS[point.committed_prefix]
    assert plan.disposition.value == disposition
    assert tuple(operation.status.value for operation in plan.operations) == statuses
    assert tuple(_ids(plan)) == replay
    blocked = point.committed_prefix is CommittedPrefix.AFTER_FUNCTION_CALL
    assert plan.rejection_reasons == ((ParkReason.DANGLING_TOOL_STATE,) if blocked else ())
