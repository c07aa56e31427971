"""T1 and T2 validate by feeding the run's own scanner (``feed_boundary_candidates``) instead of
a fork (``validate_candidates``): on random histories and random, often wrong, T1/T2 candidates
both give the same verdict (code and event), and after a valid write the fed scanner equals the
one that absorbed the fork."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from runtime.ledger.codes import TransitionKind
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.lane_rules import check_transition_shape
from runtime.ledger.tool_ledger_scanner import ToolLedgerScanner
from runtime.ledger.transition_validator import (
    TransitionVerdict,
    feed_boundary_candidates,
    validate_candidates,
)
from tests.helpers.ledger_builders import (
    ENDINGS,
    RunIds,
    bound_response,
    call_event,
    dispatch_event,
    response_event,
    tool_turn,
    user_text,
    with_changes,
)

IDS = RunIds()
OTHER = RunIds(run_id="run-2")
CALL_IDS = [f"call-{index}" for index in range(4)]


def _history(endings: list[str], damage: bool) -> list[RuntimeEvent]:
    events: list[RuntimeEvent] = [user_text(ids=IDS, marker=True)]
    for index, ending in enumerate(endings):
        events.extend(tool_turn(CALL_IDS[index], ids=IDS, ts=10 * (index + 1), ending=ending))
    if damage and len(events) > 1:
        events.append(events[1])  # a duplicate id: the ledger already has an issue
    return events


@st.composite
def _candidates(draw: st.DrawFn) -> tuple[TransitionKind, list[RuntimeEvent]]:
    kind = draw(
        st.sampled_from(["t1", "t1_dispatch_only", "t2", "t2", "t2_misbound", "t2_unbound"])
    )
    # A T1 mostly prepares a new call, a T2 mostly answers one of the history's calls.
    new_first = kind.startswith("t1")
    call_id = draw(
        st.one_of(st.just("call-new"), st.sampled_from(CALL_IDS))
        if new_first
        else st.one_of(st.sampled_from(CALL_IDS), st.just("call-new"))
    )
    args = draw(st.sampled_from([None, {"path": "other.txt"}]))
    call = call_event(call_id, args=args, ids=IDS, ts=90)
    dispatch = dispatch_event(call)
    change = draw(
        st.one_of(
            st.just("none"),
            st.sampled_from(["hash", "run", "refs", "name", "mode", "operation"]),
        )
    )
    if change == "hash":
        dispatch = with_changes(
            dispatch, actions={"toolDispatch": {"canonicalArgsHash": "sha256:" + "0" * 64}}
        )
    elif change == "run":
        dispatch = with_changes(dispatch, runId=OTHER.run_id)
    elif change == "refs":
        dispatch = with_changes(dispatch, refs={"toolCallId": "call-x"})
    elif change == "name":
        dispatch = with_changes(dispatch, actions={"toolDispatch": {"toolName": "Edit"}})
    elif change == "mode":
        dispatch = dispatch_event(call, recovery_mode="never_auto_retry")
    elif change == "operation":
        other = call_event(draw(st.sampled_from(CALL_IDS)), ids=IDS)
        fact = dict(dispatch_event(other)["actions"]["toolDispatch"])
        dispatch = with_changes(
            dispatch, actions={"toolDispatch": {"operationId": fact["operationId"]}}
        )
    if kind == "t1":
        return TransitionKind.T1_PREPARE, [call, dispatch]
    if kind == "t1_dispatch_only":
        return TransitionKind.T1_PREPARE, [dispatch]
    response = bound_response(call, draw(st.sampled_from(["ok", "again"])), event_id="resp-new")
    if kind == "t2_misbound":
        target = call_event(draw(st.sampled_from(CALL_IDS)), ids=IDS)
        refs: dict[str, Any] = dict(bound_response(target)["refs"])
        response = with_changes(response, refs=refs)
    elif kind == "t2_unbound":
        response = response_event(call, event_id="resp-new")
    return TransitionKind.T2_OUTCOME, [response]


def _nothing_stored(event_id: str) -> bytes | None:
    del event_id
    return None


def _scanner(events: list[RuntimeEvent]) -> ToolLedgerScanner:
    scanner = ToolLedgerScanner()
    for fact in events:
        scanner.feed(fact)
    return scanner


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    endings=st.lists(
        st.one_of(st.just("dangling"), st.sampled_from(ENDINGS)), max_size=len(CALL_IDS)
    ),
    damage=st.sampled_from([False, False, False, True]),
    write=_candidates(),
)
def test_in_place_validation_gives_the_fork_verdict(
    endings: list[str], damage: bool, write: tuple[TransitionKind, list[RuntimeEvent]]
) -> None:
    kind, candidates = write
    history = _history(endings, damage)
    history_ids = {event["id"] for event in history}
    # The writers answer stored ids (exact retries) before this validation.
    assume(not any(candidate["id"] in history_ids for candidate in candidates))
    # ... and check the lane shape of exactly these candidates first.
    assume(check_transition_shape(candidates, kind) is None)
    forked = _scanner(history)
    expected = validate_candidates(forked, candidates, kind, _nothing_stored, shape_checked=True)
    fed = _scanner(history)
    outcome = feed_boundary_candidates(fed, candidates, kind)
    verdict = f"refused {outcome.code}" if isinstance(outcome, TransitionVerdict) else "ok"
    event(f"{kind}: {verdict}")
    if isinstance(outcome, TransitionVerdict):
        assert not outcome.ok
        assert (outcome.code, outcome.event_id) == (expected.code, expected.event_id)
        return
    assert expected.ok, expected
    assert expected.fork is not None and forked.absorb(expected.fork)
    assert fed.result() == forked.result()
    assert fed.event_count == forked.event_count
    if kind is TransitionKind.T2_OUTCOME or len(candidates) == 1:
        last = candidates[-1]
        call_id = (
            last["content"]["id"]  # type: ignore[typeddict-item]
            if "content" in last
            else last["actions"]["toolDispatch"]["providerToolCallId"]
        )
        assert outcome == fed.operation(last["invocationId"], call_id)
    else:
        assert outcome is None
