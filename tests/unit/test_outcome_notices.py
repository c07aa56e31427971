"""A new turn after a park tells the model which interrupted calls have unknown outcomes."""

from __future__ import annotations

from pathlib import Path

from runtime.agent.continuation_turn import history_before_lineage
from runtime.agent.outcome_notices import outcome_notices
from runtime.providers.provider_port import HostNotice, UserText
from storage.ledger.ledger_store import open_store
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    dispatch_event,
    terminal,
    tool_turn,
    user_text,
)
from tests.helpers.resume_fixtures import recover, seed_interrupted_run

IDS = RunIds()


def test_a_dispatched_call_without_result_gets_an_outcome_unknown_notice() -> None:
    call = call_event("call-1", "bash", {"command": "make deploy"}, ts=2)
    events = [user_text(marker=True), call, dispatch_event(call), terminal(status="failed")]
    notices = outcome_notices(events)
    assert len(notices) == 1
    assert isinstance(notices[0], HostNotice)
    assert "bash" in notices[0].text and "make deploy" in notices[0].text
    assert "unknown" in notices[0].text


def test_a_parked_write_gets_a_notice_naming_the_tool() -> None:
    events = [user_text(marker=True), *tool_turn("call-9", ending="parked"), terminal()]
    notices = outcome_notices(events)
    assert len(notices) == 1
    assert "Write" in notices[0].text


def test_settled_and_undispatched_calls_get_no_notice() -> None:
    settled = call_event("call-1", "bash", {"command": "ls"}, ts=2)
    never = call_event("call-2", "bash", {"command": "rm x"}, ts=5)
    events = [
        user_text(marker=True),
        settled,
        dispatch_event(settled),
        bound_response(settled),
        never,
        terminal(status="failed"),
    ]
    assert outcome_notices(events) == ()


def test_without_the_marker_an_undispatched_call_is_unknown_too() -> None:
    call = call_event("call-1", "bash", {"command": "rm -rf build"}, ts=2)
    events = [user_text(), call, terminal(status="failed")]
    assert len(outcome_notices(events)) == 1


def test_a_continuation_sees_earlier_turns_with_their_notices(tmp_path: Path) -> None:
    earlier = RunIds("sess-n", "inv-n1", "run-n1", "turn-n1")
    source = RunIds("sess-n", "inv-n2", "run-n2", "turn-n2")
    call = call_event("c1", "bash", {"command": "make deploy"}, ids=earlier, ts=2)
    with open_store(tmp_path / "data") as store:
        seed_interrupted_run(
            store,
            earlier,
            [user_text("deploy", ids=earlier, marker=True), call, dispatch_event(call)],
            cwd=str(tmp_path),
        )
        seed_interrupted_run(
            store,
            source,
            [user_text("next", ids=source, event_id="evt-user-2", marker=True)],
            cwd=str(tmp_path),
        )
    store, _ = recover(tmp_path / "data")
    try:
        history = history_before_lineage(store, "sess-n", ["run-n2"])
    finally:
        store.close()
    assert isinstance(history[0], UserText) and history[0].text == "deploy"
    notices = [item for item in history if isinstance(item, HostNotice)]
    assert len(notices) == 1 and "make deploy" in notices[0].text
    assert not any(isinstance(item, UserText) and item.text == "next" for item in history)
