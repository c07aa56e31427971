"""Properties of Phase 0 planning over generated ledgers (resume-logic invariants, section 7).

The generator mixes every kind of tool turn (settled, refused before T1, dangling, never
dispatched, parked, recovered, broken bundles, orphans, renamed responses, hidden nested calls)
with noise a real file can hold: partial chunks, late protocol markers, duplicated lines and other
runs' events.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.ledger.codes import OperationStatus, ResolverStatus
from runtime.ledger.event_model import RuntimeEvent
from runtime.recovery.recovery_resolver import resolve_recovery
from runtime.recovery.resume_plan import ResumePlan, plan_resume
from tests.helpers.ledger_builders import (
    MARKER_ACTIONS as MARKER,
)
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    decision_event,
    dispatch_event,
    model_text,
    reconcile_event,
    response_event,
    terminal,
    user_text,
    with_changes,
)

ENDINGS = (
    "call",
    "dangling",
    "ok",
    "error",
    "synthetic",
    "parked",
    "recovered",
    "bad-bundle",
    "orphan-response",
    "orphan-dispatch",
    "renamed",
)
NOISE = ("partial", "late-marker", "text", "duplicate", "other-run")
OTHER_RUN = RunIds("sess-9", "inv-9", "run-9", "turn-9")


def _turn(index: int, ending: str, hidden: bool) -> list[RuntimeEvent]:
    call_id = f"call-{index}"
    call = call_event(call_id, ("Write", "Read", "Bash")[index % 3], {"n": index})
    if hidden:
        call = with_changes(call, modelVisibility="hidden")
    dispatch = dispatch_event(call)
    if ending == "call":
        return [call]
    if ending == "dangling":
        return [call, dispatch]
    if ending == "ok":
        return [call, dispatch, bound_response(call)]
    if ending == "error":
        return [call, dispatch, bound_response(call, "boom", is_error=True)]
    if ending == "synthetic":
        return [call, response_event(call, "denied", is_error=True)]
    if ending == "orphan-response":
        return [response_event(call)]
    if ending == "orphan-dispatch":
        return [dispatch]
    if ending == "renamed":
        return [call, with_changes(response_event(call), content={"name": "Other"})]
    observation = "diverged" if ending == "parked" else "matches_expected_state"
    reconcile = reconcile_event(call, observation)
    if ending == "parked":
        return [call, dispatch, reconcile, decision_event(call, dispatch, reconcile)]
    outcome = bound_response(call, duration_ms=None)
    decision = decision_event(call, dispatch, reconcile, outcome)
    if ending == "recovered":
        return [call, dispatch, reconcile, outcome, decision]
    return [call, dispatch, outcome, reconcile, decision]  # bad-bundle: broken causal order


@st.composite
def ledgers(draw: st.DrawFn, marker: bool | None = None) -> list[RuntimeEvent]:
    with_marker = draw(st.booleans()) if marker is None else marker
    events: list[RuntimeEvent] = [user_text(marker=with_marker)]
    steps = draw(
        st.lists(st.tuples(st.sampled_from(ENDINGS + NOISE), st.booleans()), min_size=0, max_size=8)
    )
    for index, (kind, flag) in enumerate(steps):
        if kind == "partial":
            events.append(model_text(f"chunk {index}", event_id=f"chunk-{index}", partial=True))
        elif kind == "late-marker":
            events.append(model_text(event_id=f"late-{index}", extra={"actions": MARKER}))
        elif kind == "text":
            events.append(model_text(f"text {index}", event_id=f"text-{index}"))
        elif kind == "duplicate":
            events.append(events[draw(st.integers(0, len(events) - 1))])
        elif kind == "other-run":
            events.append(model_text(event_id=f"other-{index}", ids=OTHER_RUN))
        else:
            events.extend(_turn(index, kind, hidden=flag))
    if draw(st.booleans()):
        events.append(terminal(status=draw(st.sampled_from(["completed", "failed"]))))
    return events


def _by_call(plan: ResumePlan) -> dict[str, OperationStatus]:
    return {op.call_runtime_event_id: op.status for op in plan.operations}


@settings(max_examples=150, deadline=None)
@given(ledgers(), st.one_of(st.none(), st.integers(0, 40)))
def test_planning_is_deterministic_and_never_mutates_its_input(
    events: list[RuntimeEvent], expected: int | None
) -> None:
    before = copy.deepcopy(events)
    first = plan_resume(events, expected)
    assert events == before
    assert plan_resume(copy.deepcopy(events), expected) == first
    assert resolve_recovery(events) == resolve_recovery(before)
    assert events == before


@settings(max_examples=100, deadline=None)
@given(ledgers())
def test_deleting_any_function_response_never_turns_an_operation_into_succeeded(
    events: list[RuntimeEvent],
) -> None:
    original = _by_call(plan_resume(events))
    for index, event in enumerate(events):
        content: Any = event.get("content")
        if content is None or content["kind"] != "function_response":
            continue
        if sum(1 for other in events if other is event) > 1:
            continue  # a duplicated line: its twin still answers the call
        remaining = events[:index] + events[index + 1 :]
        for call_id, status in _by_call(plan_resume(remaining)).items():
            if status is OperationStatus.SUCCEEDED:
                assert original.get(call_id) is OperationStatus.SUCCEEDED, (index, call_id)


@settings(max_examples=150, deadline=None)
@given(ledgers(marker=False))
def test_a_ledger_without_the_t1_marker_never_yields_not_dispatched(
    events: list[RuntimeEvent],
) -> None:
    plan = plan_resume(events)
    assert all(op.status is not OperationStatus.NOT_DISPATCHED for op in plan.operations)
    statuses = {decision.status for decision in resolve_recovery(events).decisions}
    assert ResolverStatus.DEFINITELY_NOT_DISPATCHED not in statuses


@settings(max_examples=150, deadline=None)
@given(ledgers())
def test_replay_never_holds_an_unpaired_call_a_partial_or_a_hidden_event(
    events: list[RuntimeEvent],
) -> None:
    plan = plan_resume(events)
    replay = plan.replay_runtime_events
    assert all(not event["partial"] for event in replay)
    assert all(event.get("modelVisibility") != "hidden" for event in replay)
    response_ids = {
        content["id"]
        for event in events
        if (content := event.get("content")) is not None and content["kind"] == "function_response"
    }
    for event in replay:
        content = event.get("content")
        if content is not None and content["kind"] == "function_call":
            assert content["id"] in response_ids
    assert (plan.directive is not None) is plan.requires_verification
    assert plan.source_runtime_event_high_water == len(events)
    if plan.disposition.value == "safe_replay":
        assert plan.rejection_reasons == ()
        assert all(
            op.status in (OperationStatus.SUCCEEDED, OperationStatus.FAILED)
            for op in plan.operations
        )


def _replay_as_specified(events: list[RuntimeEvent]) -> list[str]:
    """The replay rule written the way the design states it: two passes, pairing first."""
    calls: dict[str, str] = {}
    paired: set[str] = set()
    for event in events:
        content: Any = event.get("content")
        if event["partial"] or content is None:
            continue
        if content["kind"] == "function_call":
            calls[content["id"]] = content["name"]
        elif content["kind"] == "function_response" and calls.get(content["id"]) == content["name"]:
            paired.add(content["id"])
    kept: list[str] = []
    for event in events:
        content = event.get("content")
        if event["partial"] or event.get("modelVisibility") == "hidden":
            continue
        tool = content is not None and content["kind"] in ("function_call", "function_response")
        if not tool or content["id"] in paired:
            kept.append(event["id"])
    return kept


@settings(max_examples=150, deadline=None)
@given(ledgers())
def test_the_one_pass_replay_equals_the_specified_two_pass_rule(
    events: list[RuntimeEvent],
) -> None:
    plan = plan_resume(events)
    assert [event["id"] for event in plan.replay_runtime_events] == _replay_as_specified(events)
