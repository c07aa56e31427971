"""The main process's standing state per session: what it keeps, when it lets go, its bound."""

from __future__ import annotations

from app.bridge_contract import (
    PermissionRequestedPush,
    ResumeFailedPush,
    ResumeParkedPush,
    ResumeStartedPush,
    RunStatusPush,
    RunStatusValue,
)
from main_process.standing_state import StandingState


def _ask(session: str, request: str) -> PermissionRequestedPush:
    return PermissionRequestedPush(
        session_id=session, request_id=request, tool_name="bash", summary="run: ls"
    )


def _status(session: str, status: RunStatusValue) -> RunStatusPush:
    return RunStatusPush(session_id=session, run_id="run_1", status=status)


def test_a_turn_stands_until_its_run_ends_and_a_request_until_answered() -> None:
    state = StandingState()
    state.note(_status("s1", RunStatusValue.RUNNING))
    state.note(_ask("s1", "r1"))
    state.note(_ask("s1", "r2"))
    kinds = [push.kind for push in state.pushes("s1")]
    assert kinds == ["run.status", "permission.requested", "permission.requested"]
    state.answered("s1", "r1")
    assert [getattr(p, "request_id", None) for p in state.pushes("s1")] == [None, "r2"]
    state.note(_status("s1", RunStatusValue.COMPLETED))
    assert state.pushes() == [] and len(state) == 0


def test_outcomes_for_sessions_that_do_not_exist_never_stand() -> None:
    state = StandingState()
    for number in range(2000):
        state.set_outcome(
            ResumeFailedPush(session_id=f"nope_{number}", code="session_not_found", message="")
        )
    assert state.pushes() == []
    state.set_outcome(ResumeParkedPush(session_id="s1", rejection_reasons=("dangling_tool_state",)))
    assert [getattr(p, "session_id", None) for p in state.pushes()] == ["s1"]
    state.clear_outcome("s1")
    assert len(state) == 0


def test_the_state_is_bounded_and_keeps_sessions_waiting_for_the_user() -> None:
    state = StandingState(max_sessions=10)
    state.note(_ask("waiting", "r1"))
    for number in range(100):
        state.set_outcome(
            ResumeParkedPush(session_id=f"s{number}", rejection_reasons=("dangling_tool_state",))
        )
    assert len(state) == 10
    sessions = {getattr(p, "session_id", None) for p in state.pushes()}
    assert "waiting" in sessions
    assert sessions >= {"s99", "s98"}


def test_a_park_no_longer_stands_once_a_continuation_starts_or_a_turn_runs() -> None:
    """Automatic resume parked the session, then the user continued it: a window opening the
    session while the continuation runs must not be told again that it is on hold."""
    state = StandingState()
    parked = ResumeParkedPush(
        session_id="s1", rejection_reasons=("workspace_drift",), automatic=True
    )
    state.set_outcome(parked)
    state.note(ResumeStartedPush(session_id="s1", run_id="run_2", turn_id="t2"))
    assert state.outcome("s1") is None and state.pushes("s1") == []

    state.set_outcome(parked.model_copy(update={"session_id": "s2"}))
    state.note(_status("s2", RunStatusValue.RUNNING))  # a new message's turn
    assert state.outcome("s2") is None
    assert [push.kind for push in state.pushes("s2")] == ["run.status"]
