"""The main window against what a user runs into: long titles and paths, menu actions that
have nothing to act on, quitting while a turn runs, a session that waits for permission."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMessageBox, QPushButton
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.main_window import MainWindow
from renderer.session_list import WAITING_ROLE, badge_for
from tests.helpers.fake_bridge import FakeBridge

pytestmark = pytest.mark.gui

LONG_TITLE = "a-very-long-title-" * 12
LONG_PATH = "/tmp/" + "/deeply-nested-folder-name" * 8 + "/project"
SESSIONS = (
    bc.SessionSummary(
        session_id="s1", cwd="/w/one", title="One", last_run_status=bc.RunStatusValue.COMPLETED
    ),
    bc.SessionSummary(
        session_id="s2",
        cwd=LONG_PATH,
        title=LONG_TITLE,
        last_run_status=bc.RunStatusValue.COMPLETED,
    ),
)

INTERRUPTED = bc.SessionSummary(
    session_id="s1",
    cwd="/w/one",
    title="One",
    last_run_status=bc.RunStatusValue.FAILED,
    interrupted=True,
    failure_class="app_restarted",
)


def _window(qtbot: QtBot, *, confirm_quit: bool = False) -> tuple[MainWindow, FakeBridge]:
    bridge = FakeBridge()
    window = MainWindow(bridge, confirm_quit=confirm_quit)
    qtbot.addWidget(window)
    window.resize(900, 600)
    with qtbot.waitExposed(window):
        window.show()
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=SESSIONS))
    return window, bridge


def _running(bridge: FakeBridge, session_id: str) -> None:
    bridge.run_status.emit(
        bc.RunStatusPush(session_id=session_id, run_id="r", status=bc.RunStatusValue.RUNNING)
    )


def test_a_long_title_and_path_are_shortened_not_widening_the_header(qtbot: QtBot) -> None:
    window, _ = _window(qtbot)
    assert window.session_id == "s1"
    QApplication.processEvents()
    list_width = window.sessions.width()
    window.sessions.select("s2")
    QApplication.processEvents()
    assert window.sessions.width() == list_width
    for label in (window.title_label, window.path_label):
        parent = label.parentWidget()
        assert parent is not None and label.geometry().right() <= parent.width()
        assert label.shown_text() != label.text() and "…" in label.shown_text()
        assert label.toolTip() == label.text()
    assert window.title_label.text() == LONG_TITLE and window.path_label.text() == LONG_PATH
    assert window.path_label.shown_text().endswith("/project")  # shortened in the middle
    window.sessions.select("s1")
    QApplication.processEvents()
    assert window.title_label.shown_text() == "One" and window.title_label.toolTip() == ""


def test_stop_is_only_offered_while_a_turn_runs(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    assert not window.cancel_action.isEnabled()
    _running(bridge, "s1")
    assert window.cancel_action.isEnabled()
    bridge.run_status.emit(
        bc.RunStatusPush(session_id="s1", run_id="r", status=bc.RunStatusValue.COMPLETED)
    )
    assert not window.cancel_action.isEnabled()


def test_safe_resume_without_an_interrupted_turn_says_why(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    assert window.request_resume() is False
    assert bridge.calls_to("resume_latest") == []
    assert "Nothing to resume" in window.statusBar().currentMessage()
    bridge.set_safe_resume_enabled(False)
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=(INTERRUPTED,)))
    assert window.request_resume() is False
    assert "turned off" in window.statusBar().currentMessage()


def _answer_quit_box(qtbot: QtBot, button_text: str, seen: list[str]) -> None:
    def answer() -> None:
        box = next(w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox))
        default = box.defaultButton()
        seen.append(f"{box.text()} [default: {default.text() if default else None}]")
        (button,) = [b for b in box.findChildren(QPushButton) if b.text() == button_text]
        button.click()

    QTimer.singleShot(50, answer)


def test_quitting_while_a_turn_runs_asks_first(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot, confirm_quit=True)
    _running(bridge, "s1")
    seen: list[str] = []
    _answer_quit_box(qtbot, "Keep working", seen)
    assert window.close() is False
    # Enter keeps the turn: the default button is the one that does not quit.
    # Named: the running turn is often in another session than the one shown.
    assert window.isVisible() and seen == [
        "A turn is still running in “One”. [default: Keep working]"
    ]
    _answer_quit_box(qtbot, "Quit", seen)
    assert window.close() is True
    assert not window.isVisible() and len(seen) == 2


def test_quitting_asks_nothing_when_no_turn_runs_or_the_host_closes(qtbot: QtBot) -> None:
    window, _ = _window(qtbot, confirm_quit=True)
    assert window.close() is True
    other, bridge = _window(qtbot, confirm_quit=False)
    _running(bridge, "s1")
    assert other.close() is True


def test_a_session_waiting_for_permission_says_it_needs_you(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    _running(bridge, "s2")
    model = window.sessions.model
    row = model.index(model.row_of("s2") or 0)
    assert model.data(row, WAITING_ROLE) is False
    bridge.permission_requested.emit(
        bc.PermissionRequestedPush(
            session_id="s2", request_id="q1", tool_name="bash", summary="run ls"
        )
    )
    assert model.data(row, WAITING_ROLE) is True
    summary = model.summary("s2")
    assert summary is not None
    badge = badge_for(summary, model.data(row, WAITING_ROLE))
    assert badge is not None and badge[0] == "Needs you"
    window.sessions.select("s2")
    window.permission.allow_button.click()
    assert bridge.calls_to("answer_permission") == [("s2", "q1", True)]
    assert model.data(row, WAITING_ROLE) is False


def test_sending_a_message_shows_the_newest_items(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    items = tuple(bc.UserMessageItem(item_id=f"u{n}", text=f"message {n}\n" * 4) for n in range(40))
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s1", items=items))
    bar = window.transcript.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0)
    bar.setValue(0)  # the reader scrolled up to read
    assert not window.transcript.following
    window.composer.editor.setPlainText("run echo hi")
    window.composer.send_button.click()
    assert bridge.calls_to("send_turn") == [("s1", "run echo hi")]
    assert window.transcript.following and bar.value() == bar.maximum()


def test_the_demo_hint_shows_only_in_an_open_empty_session(qtbot: QtBot) -> None:
    bridge = FakeBridge()
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    with qtbot.waitExposed(window):
        window.show()
    assert window.session_id is None
    assert not window.transcript.placeholder.isVisible()
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=SESSIONS))
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s1", items=()))
    assert window.session_id == "s1" and window.transcript.placeholder.isVisible()


def test_parked_details_wrap_instead_of_hiding_text_to_the_right(qtbot: QtBot) -> None:
    bridge = FakeBridge()
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.resize(760, 600)
    with qtbot.waitExposed(window):
        window.show()
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=(INTERRUPTED,)))
    assert window.banner.request_resume()
    message = "generation 1: tool call bash (c1) is indeterminate (dispatch_without_response)"
    bridge.push_parked(
        "s1",
        ("dangling_tool_state",),
        (bc.ResumeDiagnostic(code="pending_tool_result", message=message),),
    )
    window.banner.details_toggle.click()
    scroll = window.banner.details_scroll
    qtbot.waitUntil(lambda: scroll.viewport().width() > 0)
    QApplication.processEvents()
    assert window.banner.details_label.width() <= scroll.viewport().width()
    assert not scroll.horizontalScrollBar().isVisible()
    assert "(dispatch_without_response)" in window.banner.details_label.text()
