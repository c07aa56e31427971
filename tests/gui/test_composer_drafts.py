"""One composer, a draft per session: a message typed for one session (and its folder) is never
sent to another one by the next Ctrl+Enter after the user clicked another row.

A tester's drill: a message sent in a session whose folder was deleted came back ("Not sent: The
session's folder does not exist…"); clicking another session's row took the note away but left
the text, and Ctrl+Enter then sent it there, so a write meant for one folder ran in another.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QFileDialog
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.main_window import MainWindow
from tests.helpers.fake_bridge import FakeBridge

pytestmark = pytest.mark.gui

GONE = bc.SessionSummary(
    session_id="s1",
    cwd="/w/gone",
    title="Gone",
    last_run_status=bc.RunStatusValue.COMPLETED,
    folder_missing=True,
)
OTHER = bc.SessionSummary(
    session_id="s2", cwd="/w/two", title="Two", last_run_status=bc.RunStatusValue.COMPLETED
)


def _window(qtbot: QtBot) -> tuple[MainWindow, FakeBridge]:
    bridge = FakeBridge()
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    with qtbot.waitActive(window):
        window.show()
        window.activateWindow()
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=(GONE, OTHER)))
    assert window.session_id == "s1"
    return window, bridge


def _ctrl_enter(window: MainWindow) -> None:
    QTest.keyClick(window.composer.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)


def test_a_refused_message_stays_with_its_session_and_is_not_sent_to_the_next(
    qtbot: QtBot,
) -> None:
    window, bridge = _window(qtbot)
    editor = window.composer.editor
    QTest.keyClicks(editor, "write notes.txt saying hi")
    _ctrl_enter(window)
    assert bridge.calls_to("send_turn") == [("s1", "write notes.txt saying hi")]
    bridge.turn_refused.emit(
        "s1",
        "write notes.txt saying hi",
        bc.ErrorPush(code="invalid_cwd", message="the folder does not exist"),
    )
    assert editor.toPlainText() == "write notes.txt saying hi"
    assert window.composer.note.startswith("Not sent: ")

    window.sessions.select("s2")  # the user clicks another session's row
    assert window.session_id == "s2"
    assert editor.toPlainText() == "", "the other session's composer holds nothing of s1's"
    assert window.composer.note == ""
    assert not window.composer.send_button.isEnabled()
    _ctrl_enter(window)
    assert bridge.calls_to("send_turn") == [("s1", "write notes.txt saying hi")], (
        "nothing was sent to the other session"
    )

    window.sessions.select("s1")  # back: the message waits where it was written
    assert editor.toPlainText() == "write notes.txt saying hi"
    assert editor.textCursor().position() == len("write notes.txt saying hi")


def test_every_session_keeps_its_own_unsent_draft(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    editor = window.composer.editor
    QTest.keyClicks(editor, "for the first")
    window.sessions.select("s2")
    assert editor.toPlainText() == ""
    QTest.keyClicks(editor, "for the second")
    window.sessions.select("s1")
    assert editor.toPlainText() == "for the first"
    window.sessions.select("s2")
    assert editor.toPlainText() == "for the second"
    _ctrl_enter(window)
    assert bridge.calls_to("send_turn") == [("s2", "for the second")]
    window.sessions.select("s1")
    window.sessions.select("s2")
    assert editor.toPlainText() == "", "a sent draft does not come back"


def test_a_new_session_starts_with_an_empty_composer(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    window, bridge = _window(qtbot)
    editor = window.composer.editor
    window.sessions.select("s2")
    QTest.keyClicks(editor, "run rm -rf build")
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a: "/w/new"))
    window.new_session()
    assert bridge.calls_to("create_session") == [("/w/new",)]
    made = bc.SessionSummary(session_id="s9", cwd="/w/new", title="", last_run_status=None)
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=made))
    assert window.session_id == "s9"
    assert editor.toPlainText() == ""
    _ctrl_enter(window)
    assert bridge.calls_to("send_turn") == []
    window.sessions.select("s2")
    assert editor.toPlainText() == "run rm -rf build"


def test_a_refusal_that_comes_after_the_user_left_goes_back_to_its_own_session(
    qtbot: QtBot,
) -> None:
    window, bridge = _window(qtbot)
    editor = window.composer.editor
    QTest.keyClicks(editor, "list files")
    _ctrl_enter(window)
    window.sessions.select("s2")
    QTest.keyClicks(editor, "hello two")
    bridge.turn_refused.emit(
        "s1", "list files", bc.ErrorPush(code="invalid_cwd", message="the folder does not exist")
    )
    assert editor.toPlainText() == "hello two", "the refusal of s1 leaves s2's draft alone"
    assert "[invalid_cwd]" in window.statusBar().currentMessage()
    window.sessions.select("s1")
    assert editor.toPlainText() == "list files", "nothing typed is lost"
