"""``maka tui``'s view of a turn another client drives (``app.commands.tui_viewer``).

The viewer is fed the host's pushes as the connection's reader thread offers them; what it
writes and what it sends back (an answer to a question) are checked here without a host (the
real processes: tests/e2e/test_tui_views_through_host.py)."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from app import bridge_contract as bc
from app.commands.tui_viewer import TuiViewer


class _Host:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send(self, message: Any) -> None:
        self.sent.append(message)


def _viewer() -> tuple[TuiViewer, _Host, io.StringIO]:
    host, out = _Host(), io.StringIO()
    viewer = TuiViewer(host, out)  # type: ignore[arg-type]
    viewer.watch("s1")
    assert viewer.take(bc.SessionDriverPush(session_id="s1", correlation_id="viewer-watch"))
    return viewer, host, out


def _item(item: bc.TranscriptItem, session: str = "s1") -> bc.TranscriptItemPush:
    return bc.TranscriptItemPush(session_id=session, item=item)


def test_streamed_text_is_written_once_and_the_end_says_who_drove_it() -> None:
    viewer, _, out = _viewer()
    viewer.prompt()
    driver = bc.SessionDriverPush(session_id="s1", driver="the desktop window")
    assert viewer.take(driver)
    for text in ("Coun", "Counting the", "Counting the lines."):
        assert viewer.take(_item(bc.AssistantMessageItem(item_id="a1", text=text)))
    # The committed event replaces the stream under the same id: nothing new to write.
    assert viewer.take(_item(bc.AssistantMessageItem(item_id="a1", text="Counting the lines.")))
    card = bc.ToolCardItem(
        item_id="c1",
        tool_call_id="c1",
        tool_name="bash",
        args_summary="wc -l n.txt",
        status=bc.ToolCardStatus.SUCCEEDED,
        result_summary="exit code 0\n1 n.txt",
    )
    assert viewer.take(_item(card)) and viewer.take(_item(card))
    ended = bc.RunStatusPush(session_id="s1", run_id="r1", status=bc.RunStatusValue.COMPLETED)
    assert viewer.take(ended)
    text = out.getvalue()
    assert text.count("Counting the lines.") == 1
    assert "you> \n[viewing] a turn driven by the desktop window is running" in text
    assert text.count("[tool] bash wc -l n.txt  (succeeded)\n  exit code 0\n  1 n.txt\n") == 1
    assert text.endswith("[viewing] the turn driven by the desktop window ended completed\nyou> ")


def test_pushes_of_other_sessions_and_of_its_own_turns_are_not_taken() -> None:
    viewer, _, out = _viewer()
    other = _item(bc.AssistantMessageItem(item_id="a1", text="elsewhere"), session="s2")
    assert not viewer.take(other)
    viewer.driving(True)  # the TUI's own turn: its lines come from the host as turn.output
    assert not viewer.take(_item(bc.AssistantMessageItem(item_id="a1", text="mine")))
    assert "elsewhere" not in out.getvalue() and "mine" not in out.getvalue()


def test_the_next_line_answers_a_viewed_question_and_a_late_answer_is_never_a_message() -> None:
    viewer, host, out = _viewer()
    viewer.prompt()
    asked = bc.PermissionRequestedPush(
        session_id="s1", request_id="p1", tool_name="bash", summary="run: rm -rf build"
    )
    assert viewer.take(asked)
    assert out.getvalue().endswith("the first answer counts)\nAllow? [y/N] ")
    assert viewer.line_read("y\n")
    [answer] = host.sent[1:]
    assert isinstance(answer, bc.PermissionsAnswerRequest)
    assert (answer.request_id, answer.decision) == ("p1", bc.PermissionDecision.ALLOW)

    # A second question answered in the window first: it closes here saying where, and the
    # "n" typed a moment later is no chat message and no answer.
    viewer.prompt()
    assert viewer.take(asked.model_copy(update={"request_id": "p2"}))
    closed = bc.PermissionClosedPush(
        session_id="s1",
        request_id="p2",
        decision=bc.PermissionDecision.ALLOW,
        answered_in="the desktop window",
    )
    assert viewer.take(closed)
    assert "[permission] answered in the desktop window: allowed\nyou> " in out.getvalue()
    assert viewer.line_read("n\n")
    assert "already answered in the desktop window: allowed; nothing sent" in out.getvalue()
    assert len(host.sent) == 2
    assert not viewer.line_read("list the files\n")  # an ordinary line is the user's message


def test_a_late_answer_to_the_tuis_own_question_answered_in_the_window_is_no_message() -> None:
    """The TUI's own turn asked; the window answered first (``maka run``'s reader says so and
    tells the viewer): a ``y`` typed a moment later starts no turn."""
    viewer, host, out = _viewer()
    viewer.closed_elsewhere("answered in the desktop window: denied")
    assert viewer.line_read("y\n")
    assert "(that question was already answered in the desktop window: denied" in out.getvalue()
    assert len(host.sent) == 1  # the watch only


def test_a_call_waiting_for_permission_is_not_said_to_run() -> None:
    """A viewed call whose question waits read "(running)" though it had not started (and
    was then denied, never run); it reads "(not started yet)", then "(running)" once it is
    dispatched. (It read "(waiting for permission)", untrue of a turn that allows every tool:
    the question, when there is one, is shown on its own.)"""
    viewer, _, out = _viewer()
    card = bc.ToolCardItem(
        item_id="c1",
        tool_call_id="c1",
        tool_name="bash",
        args_summary="rm -r build",
        status=bc.ToolCardStatus.RUNNING,
        park_reason="awaiting_permission",
    )
    assert viewer.take(_item(card)) and viewer.take(_item(card))
    assert viewer.take(_item(card.model_copy(update={"park_reason": None})))
    text = out.getvalue()
    assert text.count("[tool] bash rm -r build  (not started yet)\n") == 1, text
    assert "waiting for permission" not in text
    assert text.index("(not started yet)") < text.index("[tool] bash rm -r build  (running)")


def test_a_y_typed_after_the_viewed_turn_ended_at_its_question_is_no_message() -> None:
    """The driver cancelled its turn while the question was open here (no ``permission.closed``
    comes: nobody answered): the ``y`` typed a moment later was sent as the user's message,
    which a model reads as a yes."""
    viewer, host, out = _viewer()
    viewer.prompt()
    asked = bc.PermissionRequestedPush(
        session_id="s1", request_id="p1", tool_name="bash", summary="run: echo six >> log.txt"
    )
    assert viewer.take(asked)
    ended = bc.RunStatusPush(
        session_id="s1",
        run_id="r1",
        status=bc.RunStatusValue.CANCELLED,
        failure_class="cancelled_by_user",
    )
    assert viewer.take(ended)
    assert viewer.line_read("y\n"), "a late answer, not a message"
    assert "closed unanswered: the turn ended cancelled; nothing sent" in out.getvalue()
    assert len(host.sent) == 1  # the watch only: no answer, no message
    assert not viewer.line_read("list the files\n")


def test_the_host_stopping_under_a_viewed_turn_says_that_turn_stopped(
    monkeypatch: Any, capsys: Any
) -> None:
    """The host killed while this TUI showed another client's turn and its open question:
    it said "nothing of it was waiting" and nothing of the viewed turn."""
    import os

    from app.host.host_client import HostConnectionError
    from runtime.ledger.codes import HostCode

    def leave(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(os, "_exit", leave)
    viewer, _, _ = _viewer()
    assert viewer.take(bc.SessionDriverPush(session_id="s1", driver="a terminal (maka run)"))
    asked = bc.PermissionRequestedPush(
        session_id="s1", request_id="p1", tool_name="bash", summary="run: echo six >> log.txt"
    )
    assert viewer.take(asked)
    viewer.prompt()
    try:
        viewer.stopped(HostConnectionError(HostCode.HOST_STOPPED, "gone"))
    except SystemExit as leaving:
        assert leaving.code == 1
    said = capsys.readouterr().err
    assert "nothing of this chat's own was waiting" in said, said
    assert "the turn driven by a terminal (maka run) stopped with it" in said, said
    assert "its question here was never answered" in said and "maka plan s1" in said, said


def test_the_host_stopping_at_the_prompt_is_said_on_a_line_of_its_own(monkeypatch: Any) -> None:
    """The error ran on along the prompt (and what the user was typing after it):
    ``Allow? [y/N] maka: error [host_stopped]: ...``."""
    import os

    from app.host.host_client import HostConnectionError
    from runtime.ledger.codes import HostCode

    def leave(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(os, "_exit", leave)
    viewer, _, out = _viewer()
    viewer.prompt()
    assert out.getvalue().endswith("you> ")
    with contextlib.suppress(SystemExit):
        viewer.stopped(HostConnectionError(HostCode.HOST_STOPPED, "gone"))
    assert out.getvalue().endswith("you> \n"), out.getvalue()


def test_ctrl_d_at_a_viewed_question_says_it_was_left_unanswered() -> None:
    """Ctrl+D at another client's question ends this chat, leaving the question to the
    others; the chat ended with a bare blank line, as if it had answered."""
    viewer, host, out = _viewer()
    asked = bc.PermissionRequestedPush(
        session_id="s1", request_id="p1", tool_name="bash", summary="run: echo six >> log.txt"
    )
    assert viewer.take(asked)
    viewer.prompt()
    assert not viewer.line_read(None)
    assert "left without answering: the question stays open for the others" in out.getvalue()
    assert not [sent for sent in host.sent if isinstance(sent, bc.PermissionsAnswerRequest)]


@pytest.mark.parametrize(
    ("reason", "said"),
    [("cancelled", "cancelled"), ("permission_denied", "denied"), (None, "failed")],
)
def test_a_viewed_call_refused_because_the_turn_was_cancelled_did_not_fail(
    reason: str | None, said: str
) -> None:
    """A call the driver cancelled (or denied) read "(failed)" in a viewing TUI, where
    ``/transcript`` and the desktop's card say cancelled (denied)."""
    viewer, _, out = _viewer()
    card = bc.ToolCardItem(
        item_id="c1",
        tool_call_id="c1",
        tool_name="bash",
        args_summary="sleep 30",
        status=bc.ToolCardStatus.FAILED,
        park_reason=reason,
        result_summary="not run",
    )
    assert viewer.take(_item(card))
    assert f"[tool] bash sleep 30  ({said})\n" in out.getvalue(), out.getvalue()
