"""The desktop's permission prompt shows what is approved, whole and as it is (real widgets)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QFrame
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from app.visible_text import AUTO_MODE_WARNING
from renderer.interrupted_banner import InterruptedBanner
from renderer.permission_prompt import COMMAND_VIEW_LINES, PermissionPrompt
from renderer.transcript_items import ToolCardWidget
from tests.helpers.fake_bridge import FakeBridge
from tests.helpers.maka_process import start_main
from tests.helpers.maka_run import scripted_env, write_script
from tests.helpers.wire_client import WireClient

TAIL = "; echo the-very-end"
LONG = "run: echo " + "word " * 1200 + "\r\x1b[2K" + TAIL  # ~6,000 characters


def _prompt(qtbot: QtBot) -> tuple[PermissionPrompt, FakeBridge]:
    bridge = FakeBridge()
    prompt = PermissionPrompt(bridge)
    qtbot.addWidget(prompt)
    prompt.resize(720, 400)
    prompt.set_session("s1")
    prompt.show()
    qtbot.waitExposed(prompt)
    return prompt, bridge


def _ask(bridge: FakeBridge, summary: str, tool: str = "bash", request_id: str = "p1") -> None:
    bridge.permission_requested.emit(
        bc.PermissionRequestedPush(
            session_id="s1", request_id=request_id, tool_name=tool, summary=summary
        )
    )


def test_a_long_command_is_shown_whole_in_a_scrolling_view(qtbot: QtBot) -> None:
    prompt, bridge = _prompt(qtbot)
    _ask(bridge, LONG)
    view = prompt.summary_view
    shown = view.toPlainText()
    assert shown == LONG.replace("\r", "<CR>").replace("\x1b", "<ESC>")
    assert shown.endswith(TAIL) and "\x1b" not in shown and "\r" not in shown
    QApplication.processEvents()
    line = view.line_height()
    assert view.visual_lines() > COMMAND_VIEW_LINES
    assert view.height() <= (COMMAND_VIEW_LINES + 1) * line + 2 * view.frameWidth()
    bar = view.verticalScrollBar()
    assert bar.maximum() > 0, "the rest is reachable by scrolling"
    assert view.frameShape() == QFrame.Shape.StyledPanel, "a scrolling view shows its bounds"
    bar.setValue(bar.maximum())
    end = view.cursorForPosition(view.viewport().rect().bottomLeft()).block().text()
    assert end.endswith(TAIL)
    assert prompt.warning_label.isVisibleTo(prompt)
    assert prompt.warning_label.text() == AUTO_MODE_WARNING


def test_a_short_request_takes_one_line_and_only_a_command_carries_the_warning(
    qtbot: QtBot,
) -> None:
    prompt, bridge = _prompt(qtbot)
    _ask(bridge, "write notes.txt", tool="write_file")
    QApplication.processEvents()
    view = prompt.summary_view
    assert view.toPlainText() == "write notes.txt"
    assert view.visual_lines() == 1
    assert view.verticalScrollBar().maximum() == 0
    assert view.frameShape() == QFrame.Shape.NoFrame, "one line reads as text, not as a field"
    assert not prompt.warning_label.isVisibleTo(prompt)


def test_the_command_view_can_be_reached_and_scrolled_from_the_keyboard(qtbot: QtBot) -> None:
    prompt, bridge = _prompt(qtbot)
    _ask(bridge, LONG)
    view = prompt.summary_view
    assert view.focusPolicy() & Qt.FocusPolicy.TabFocus
    view.setFocus()
    QTest.keyClick(view, Qt.Key.Key_End, Qt.KeyboardModifier.ControlModifier)
    assert view.verticalScrollBar().value() == view.verticalScrollBar().maximum()
    assert view.isReadOnly()


def test_cards_show_control_characters_and_bidi_overrides() -> None:
    card = ToolCardWidget(
        bc.ToolCardItem(
            item_id="i",
            tool_call_id="c",
            tool_name="bash",
            args_summary="ls\r\x1b[2Krm x \u202eevil",
            status=bc.ToolCardStatus.SUCCEEDED,
            result_summary="exit code 0\nok\x1b[31mred",
        )
    )
    assert card.args_label.text() == "ls<CR><ESC>[2Krm x <U+202E>evil"
    assert card.result_label.text() == "ok<ESC>[31mred"
    card.deleteLater()


def test_the_banner_shows_control_characters_in_diagnostics(qtbot: QtBot) -> None:
    bridge = FakeBridge()
    banner = InterruptedBanner(bridge)
    qtbot.addWidget(banner)
    banner.show()
    banner.set_session("s1", interrupted=True)
    banner.request_resume()
    diagnostic = bc.ResumeDiagnostic(
        code="pending_tool_result", message="bash ran ls\r\x1b[2Krm -rf x", tool_name="bash"
    )
    bridge.push_parked("s1", ("dangling_tool_state",), (diagnostic,))
    details = banner.details_label.text()
    assert "ls<CR><ESC>[2Krm -rf x" in details and "\x1b" not in details


def test_the_main_process_delivers_a_long_command_whole(qtbot: QtBot, tmp_path: Path) -> None:
    command = LONG.removeprefix("run: ")
    call = {"id": "c1", "name": "bash", "args": {"command": command}}
    script = write_script(tmp_path / "script.json", [[{"toolCalls": [call]}, {"hang": True}]])
    work = tmp_path / "work"
    work.mkdir()
    main = start_main(tmp_path / "data", scripted_env(script)).wait_ready()
    try:
        client = WireClient(main.socket_name)
        client.hello(main.token)
        qtbot.waitUntil(lambda: client.has(bc.MessageKind.HELLO_OK), timeout=10_000)
        client.send(bc.SessionsCreateRequest(cwd=str(work)))
        qtbot.waitUntil(lambda: client.has(bc.MessageKind.SESSION_UPDATED), timeout=10_000)
        created = client.first(bc.MessageKind.SESSION_UPDATED)
        assert isinstance(created, bc.SessionUpdatedPush)
        client.send(bc.TurnsSendRequest(session_id=created.session.session_id, text="go"))
        qtbot.waitUntil(lambda: client.has(bc.MessageKind.PERMISSION_REQUESTED), timeout=20_000)
        ask = client.first(bc.MessageKind.PERMISSION_REQUESTED)
        assert isinstance(ask, bc.PermissionRequestedPush)
        assert ask.summary == "run: " + command  # every character, the end included
    finally:
        main.stop()


def test_a_question_answered_elsewhere_closes_saying_where_then_goes(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``permission.closed`` (a terminal answered first): the buttons go, the question stays a
    moment under "Allowed: answered in ...", and a copy of the request sent again later (on a
    reconnect) does not bring the buttons back; the next question replaces the note at once."""
    prompt, bridge = _prompt(qtbot)
    _ask(bridge, "run: echo 1 >> n.txt")
    assert prompt.allow_button.isVisible() and not prompt.answered_label.isVisible()
    waiting: list[tuple[str, bool]] = []
    prompt.waiting_changed.connect(lambda s, w: waiting.append((s, w)))
    closed = bc.PermissionClosedPush(
        session_id="s1",
        request_id="p1",
        decision=bc.PermissionDecision.DENY,
        answered_in="the terminal (maka tui, pid 4242)",
    )
    monkeypatch.setattr("renderer.permission_prompt.CLOSED_NOTE_MS", 300)
    bridge.permission_closed.emit(closed)
    assert prompt.isVisible() and prompt.current is None
    assert prompt.answered_label.text() == "Denied: answered in the terminal (maka tui, pid 4242)."
    assert not prompt.allow_button.isVisible() and not prompt.deny_button.isVisible()
    assert "echo 1 >> n.txt" in prompt.summary_view.toPlainText()
    assert waiting == [("s1", False)]
    assert bridge.calls_to("answer_permission") == []
    _ask(bridge, "run: echo 1 >> n.txt")  # the same request again: already answered
    assert prompt.current is None
    qtbot.waitUntil(lambda: not prompt.isVisible(), timeout=5000)
    _ask(bridge, "run: echo 2 >> n.txt", request_id="p2")
    assert prompt.allow_button.isVisible() and not prompt.answered_label.isVisible()
    bridge.permission_closed.emit(closed.model_copy(update={"request_id": "p-other"}))
    assert prompt.current is not None and prompt.current.request_id == "p2"
