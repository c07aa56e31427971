"""A new turn after a park tells the model which interrupted calls have unknown outcomes."""

from __future__ import annotations

from runtime.agent.outcome_notices import outcome_notices
from runtime.providers.provider_port import HostNotice
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    dispatch_event,
    terminal,
    tool_turn,
    user_text,
)

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
