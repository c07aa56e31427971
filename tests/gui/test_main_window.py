"""The main window wired to a fake bridge: sessions, transcript, keyboard, permissions."""

from __future__ import annotations

import functools

import pytest
from PySide6.QtCore import QDir, Qt
from PySide6.QtGui import QTextCursor
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QFileDialog, QWidget
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.bridge_port import ConnectionState
from renderer.interrupted_banner import BannerState
from renderer.main_window import MainWindow
from renderer.theme import monospace_font
from renderer.transcript_items import MessageWidget
from tests.helpers.fake_bridge import FakeBridge

pytestmark = pytest.mark.gui

SESSIONS = (
    bc.SessionSummary(
        session_id="s1",
        cwd="/w/one",
        title="One",
        last_run_status=bc.RunStatusValue.FAILED,
        interrupted=True,
        failure_class="app_restarted",
    ),
    bc.SessionSummary(
        session_id="s2", cwd="/w/two", title="Two", last_run_status=bc.RunStatusValue.COMPLETED
    ),
)


def _window(
    qtbot: QtBot, *, enabled: bool = True, sessions: tuple[bc.SessionSummary, ...] = SESSIONS
) -> tuple[MainWindow, FakeBridge]:
    bridge = FakeBridge(safe_resume_enabled=enabled)
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    with qtbot.waitActive(window):
        window.show()
        window.activateWindow()
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=sessions))
    return window, bridge


def _banner_state(window: MainWindow) -> BannerState:
    return window.banner.state


def test_reconnect_asks_for_the_list_settings_and_the_open_session(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    assert window.session_id == "s1"
    bridge.calls.clear()
    bridge.disconnect_now()
    assert not window.composer.editor.isEnabled()
    assert "Disconnected" in window.connection_status.text
    bridge.connect_now()
    assert bridge.calls_to("list_sessions") == [()]
    assert bridge.calls_to("get_settings") == [()]
    assert bridge.calls_to("open_session") == [("s1",)]
    assert window.connection_status.text == "Connected"


def test_listing_opens_the_first_session_and_shows_its_banner(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    assert bridge.calls_to("open_session") == [("s1",)]
    assert window.title_label.text() == "One" and window.path_label.text() == "/w/one"
    assert _banner_state(window) is BannerState.IDLE
    bridge.session_opened.emit(
        bc.SessionOpenedPush(
            session_id="s1", items=(bc.UserMessageItem(item_id="u", text="hello"),)
        )
    )
    assert window.transcript.item_ids() == ["u"]
    # pushes for another session never reach the shown transcript
    bridge.transcript_item.emit(
        bc.TranscriptItemPush(session_id="s2", item=bc.UserMessageItem(item_id="x", text="no"))
    )
    assert window.transcript.item_ids() == ["u"]
    window.sessions.select("s2")
    assert window.session_id == "s2"
    assert bridge.calls_to("open_session")[-1] == ("s2",)
    assert window.transcript.item_ids() == []
    assert _banner_state(window) is BannerState.HIDDEN


def test_ctrl_r_asks_for_safe_resume_of_the_shown_session(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    QTest.keyClick(window, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    assert bridge.calls_to("resume_latest") == [("s1",)]
    assert _banner_state(window) is BannerState.RESUMING
    QTest.keyClick(window, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    assert len(bridge.calls_to("resume_latest")) == 1


def test_flag_off_ctrl_r_does_nothing(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot, enabled=False)
    assert _banner_state(window) is BannerState.DISABLED
    window.resume_action.trigger()
    assert bridge.calls_to("resume_latest") == []


def test_resume_started_closes_banner_and_streams_the_continuation(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    window.banner.request_resume()
    bridge.push_started("s1", run_id="run-2")
    assert not window.banner.isVisible()
    assert window.composer.stop_button.isVisibleTo(window)
    bridge.transcript_item.emit(
        bc.TranscriptItemPush(
            session_id="s1",
            item=bc.ContinuationMarkerItem(item_id="m", run_id="run-2", source_run_id="run-1"),
        )
    )
    bridge.transcript_item.emit(
        bc.TranscriptItemPush(
            session_id="s1", item=bc.AssistantMessageItem(item_id="a", text="continuing")
        )
    )
    assert window.transcript.in_continuation("a")
    updated = SESSIONS[0].model_copy(
        update={
            "interrupted": False,
            "last_run_status": bc.RunStatusValue.RUNNING,
        }
    )
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=updated))
    assert _banner_state(window) is BannerState.HIDDEN


def test_ctrl_enter_sends_and_escape_cancels(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    window.sessions.select("s2")
    editor = window.composer.editor
    editor.setFocus()
    QTest.keyClicks(editor, "list files")
    QTest.keyClick(editor, Qt.Key.Key_Return)  # plain Enter: a newline, not a send
    assert bridge.calls_to("send_turn") == []
    QTest.keyClick(editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert bridge.calls_to("send_turn") == [("s2", "list files")]
    assert editor.toPlainText() == ""
    window.cancel_action.trigger()
    assert bridge.calls_to("cancel_turn") == [], "nothing runs yet"
    bridge.run_status.emit(
        bc.RunStatusPush(session_id="s2", run_id="r", status=bc.RunStatusValue.RUNNING)
    )
    assert not window.composer.send_button.isEnabled()
    QTest.keyClick(editor, Qt.Key.Key_Escape)
    assert bridge.calls_to("cancel_turn") == [("s2",)]
    bridge.run_status.emit(
        bc.RunStatusPush(session_id="s2", run_id="r", status=bc.RunStatusValue.CANCELLED)
    )
    assert not window.composer.stop_button.isVisibleTo(window)


def test_permission_prompt_allow_and_deny(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    for request_id in ("p1", "p2"):
        bridge.permission_requested.emit(
            bc.PermissionRequestedPush(
                session_id="s1", request_id=request_id, tool_name="shell", summary="rm -rf build"
            )
        )
    prompt = window.permission
    assert prompt.isVisibleTo(window)
    assert "shell" in prompt.title_label.text()
    assert prompt.summary_view.toPlainText() == "rm -rf build"
    QTest.mouseClick(prompt.deny_button, Qt.MouseButton.LeftButton)
    QTest.mouseClick(prompt.allow_button, Qt.MouseButton.LeftButton)
    assert bridge.calls_to("answer_permission") == [("s1", "p1", False), ("s1", "p2", True)]
    assert not prompt.isVisibleTo(window)


def test_keyboard_reaches_every_control_in_order(qtbot: QtBot) -> None:
    window, _ = _window(qtbot)
    chain: list[QWidget] = []
    widget: QWidget = window.sessions.view
    for _ in range(400):
        if (
            widget.focusPolicy() & Qt.FocusPolicy.TabFocus
            and widget.isVisibleTo(window)
            and widget.isEnabled()
        ):
            chain.append(widget)
        following = widget.nextInFocusChain()
        if following is None or following is window.sessions.view:
            break
        widget = following
    wanted = [
        window.sessions.view,
        window.banner.action_button,
        window.transcript,
        window.composer.editor,
    ]
    positions = [chain.index(w) for w in wanted]
    assert positions == sorted(positions), "Tab walks sessions, banner, transcript, composer"


def test_error_push_and_window_show(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    bridge.error_received.emit(bc.ErrorPush(code="session_not_found", message="gone"))
    assert "session_not_found" in window.statusBar().currentMessage()
    window.showMinimized()
    bridge.window_show_requested.emit()
    assert not window.isMinimized()


def test_rejected_connection_is_explained(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    bridge._set_connection_state(ConnectionState.REJECTED)
    assert "earlier start" in window.connection_status.text
    assert not window.composer.editor.isEnabled()


def test_automatic_resume_is_announced_in_the_status_bar_and_rows_until_seen(
    qtbot: QtBot,
) -> None:
    window, bridge = _window(qtbot)
    model = window.sessions.model
    bridge.resume_parked.emit(
        bc.ResumeParkedPush(
            session_id="s1", rejection_reasons=("dangling_tool_state",), automatic=True
        )
    )
    assert window.banner.title_label.text() == "Automatic resume is on hold."
    bridge.resume_started.emit(
        bc.ResumeStartedPush(session_id="s2", run_id="r", turn_id="t", automatic=True)
    )
    bridge.push_started("s3")  # a click's outcome is no announcement
    notice = window.auto_resume_notice
    assert notice.text == (
        "Automatic resume: 1 session continued by itself and 1 is on hold; open them to see."
    )

    def row_text(session_id: str) -> str:
        row = model.row_of(session_id)
        assert row is not None
        return str(model.index(row).data(Qt.ItemDataRole.AccessibleTextRole))

    assert row_text("s2") == "Two, Resumed by itself"
    assert row_text("s1") == "One, Auto-resume on hold"
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=SESSIONS))  # a refresh is no look
    assert "1 is on hold" in notice.text
    window.sessions.view.setFocus()
    QTest.keyClick(window.sessions.view, Qt.Key.Key_Down)  # the user opens "Two"
    assert window.session_id == "s2"
    assert notice.text == "Automatic resume: 1 is on hold; open it to see."
    assert row_text("s2") == "Two"
    QTest.keyClick(window.sessions.view, Qt.Key.Key_Up)  # and then "One"
    assert not notice.label.isVisible() and notice.text == ""
    assert row_text("s1") == "One, Interrupted"


def test_a_permission_request_takes_the_keyboard_and_answers_by_mnemonic(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    window.composer.editor.setFocus()
    for request_id in ("p1", "p2"):
        bridge.permission_requested.emit(
            bc.PermissionRequestedPush(
                session_id="s1", request_id=request_id, tool_name="bash", summary="run: ls"
            )
        )
    prompt = window.permission
    qtbot.waitUntil(lambda: QApplication.focusWidget() is prompt.summary_view)
    QTest.keyClick(prompt.summary_view, Qt.Key.Key_Return)  # a stray Enter decides nothing
    assert bridge.calls_to("answer_permission") == []
    QTest.keyClick(prompt.summary_view, Qt.Key.Key_D, Qt.KeyboardModifier.AltModifier)
    qtbot.waitUntil(lambda: bridge.calls_to("answer_permission") == [("s1", "p1", False)])
    qtbot.waitUntil(lambda: QApplication.focusWidget() is prompt.summary_view)
    QTest.keyClick(prompt.summary_view, Qt.Key.Key_A, Qt.KeyboardModifier.AltModifier)
    qtbot.waitUntil(lambda: bridge.calls_to("answer_permission")[-1] == ("s1", "p2", True))


def test_the_folder_dialog_starts_at_home_and_new_follows_the_connection(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    window, bridge = _window(qtbot)
    asked: list[tuple[object, ...]] = []

    def choose(*args: object) -> str:
        asked.append(args)
        return ""

    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(choose))
    window.new_session()
    assert asked and asked[0][2] == QDir.homePath()
    assert window.sessions.new_button.isEnabled()
    bridge.disconnect_now()
    assert not window.sessions.new_button.isEnabled() and not window.new_action.isEnabled()
    bridge.connect_now()
    assert window.sessions.new_button.isEnabled()


def test_quoted_command_output_is_shown_in_the_monospace_font(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    text = "The command exited with code 0:\n```\nhi   there\n  col\n```\nAll done."
    bridge.session_opened.emit(
        bc.SessionOpenedPush(
            session_id="s1", items=(bc.AssistantMessageItem(item_id="a", text=text),)
        )
    )
    message = window.transcript.item_widget("a")
    assert isinstance(message, MessageWidget)
    shown = message.text_label.text()
    assert shown == "The command exited with code 0:\nhi   there\n  col\nAll done."
    document = message.text_label.document()

    def fixed_at(position: int) -> bool:
        cursor = QTextCursor(document)
        cursor.setPosition(position + 1)
        found = cursor.charFormat()
        return found.fontFixedPitch() and found.fontFamilies() == monospace_font().families()

    assert fixed_at(shown.index("hi   there")) and fixed_at(shown.index("col"))
    assert not fixed_at(shown.index("exited")) and not fixed_at(shown.index("done"))


def test_a_session_whose_folder_is_gone_says_so_on_its_row_and_by_the_composer(
    qtbot: QtBot,
) -> None:
    window, bridge = _window(qtbot)
    gone = bc.SessionSummary(session_id="s3", cwd="/w/gone", title="Gone", folder_missing=True)
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=gone))
    model = window.sessions.model
    row = model.row_of("s3")
    assert row is not None
    assert model.index(row).data(Qt.ItemDataRole.AccessibleTextRole) == "Gone, Folder missing"
    window.sessions.select("s3")
    assert "if it moved, locate it" in window.composer.note
    located = gone.model_copy(update={"cwd": "/w/found", "folder_missing": False})
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=located))
    assert window.composer.note == ""
    assert model.index(row).data(Qt.ItemDataRole.AccessibleTextRole) == "Gone"


def test_a_refusal_for_a_missing_folder_goes_once_the_folder_is_located(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    gone = bc.SessionSummary(session_id="s3", cwd="/w/gone", title="Gone", folder_missing=True)
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=gone))
    window.sessions.select("s3")
    window.composer.clear_note()
    bridge.turn_refused.emit(
        "s3", "hello", bc.ErrorPush(code="invalid_cwd", message="the folder does not exist")
    )
    assert window.composer.note.startswith("Not sent: ")
    assert window.composer.editor.toPlainText() == "hello"
    located = gone.model_copy(update={"cwd": "/w/found", "folder_missing": False})
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=located))
    assert window.composer.note == "", "the folder is there now: the refusal is no longer true"
    assert window.composer.editor.toPlainText() == "hello", "the message stays to be sent"


def test_another_refusal_stays_when_a_session_changes(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    window.sessions.select("s2")
    bridge.turn_refused.emit("s2", "hi", bc.ErrorPush(code="provider_config_invalid", message=""))
    note = window.composer.note
    assert note.startswith("Not sent: ")
    summary = window.sessions.model.summary("s2")
    assert summary is not None
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=summary))
    assert window.composer.note == note


def test_a_session_the_user_continued_is_no_longer_announced_as_on_hold(qtbot: QtBot) -> None:
    """Automatic resume parked it; the user then continued it (a workspace decision or Safe
    resume): its row and the status bar must not go on saying it is on hold."""
    window, bridge = _window(qtbot)
    model = window.sessions.model
    bridge.resume_parked.emit(
        bc.ResumeParkedPush(
            session_id="s1", rejection_reasons=("workspace_checkpoint_stale",), automatic=True
        )
    )
    notice = window.auto_resume_notice
    assert notice.text == "Automatic resume: 1 is on hold; open it to see."
    bridge.push_started("s1")  # the user's click continued it
    row = model.row_of("s1")
    assert row is not None
    assert "on hold" not in str(model.index(row).data(Qt.ItemDataRole.AccessibleTextRole))
    assert not notice.label.isVisible() and notice.text == ""


def test_on_hold_goes_once_the_session_is_no_longer_interrupted(qtbot: QtBot) -> None:
    """The park was told again after the user continued the session (a window opening it while
    the continuation started): once the session's row says it is no longer interrupted, it is
    not on hold, whatever was told before; the same after a reconnect lists it."""
    window, bridge = _window(qtbot)
    model = window.sessions.model
    notice = window.auto_resume_notice
    held = bc.ResumeParkedPush(
        session_id="s1", rejection_reasons=("workspace_drift",), automatic=True
    )
    carried_on = SESSIONS[0].model_copy(
        update={
            "interrupted": False,
            "last_run_status": bc.RunStatusValue.RUNNING,
            "failure_class": None,
        }
    )

    def badge() -> str:
        row = model.row_of("s1")
        assert row is not None
        return str(model.index(row).data(Qt.ItemDataRole.AccessibleTextRole))

    def updated() -> None:
        bridge.session_updated.emit(bc.SessionUpdatedPush(session=carried_on))

    def listed() -> None:
        bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=(carried_on, SESSIONS[1])))

    for moved_on in (updated, listed):
        bridge.resume_parked.emit(held)
        bridge.push_started("s1")
        bridge.resume_parked.emit(held)  # told again, late
        moved_on()
        assert "on hold" not in badge()
        assert not notice.label.isVisible() and notice.text == ""
        bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=SESSIONS))

    # A session still interrupted stays announced.
    bridge.resume_parked.emit(held)
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=SESSIONS[0]))
    assert notice.text == "Automatic resume: 1 is on hold; open it to see."
    assert "Auto-resume on hold" in badge()


def test_a_removed_session_is_no_longer_announced(qtbot: QtBot) -> None:
    """Automatic resume left it on hold and the user removed it (Remove session): the status
    bar must not go on saying one is on hold with nothing left to open."""
    window, bridge = _window(qtbot)
    bridge.resume_parked.emit(
        bc.ResumeParkedPush(
            session_id="s2", rejection_reasons=("workspace_folder_missing",), automatic=True
        )
    )
    notice = window.auto_resume_notice
    assert notice.text == "Automatic resume: 1 is on hold; open it to see."
    bridge.session_removed.emit(bc.SessionRemovedPush(session_id="s2"))
    assert not notice.label.isVisible() and notice.text == ""


def test_locate_folder_waits_for_its_own_answer_and_a_refusal_leaves_the_park_as_it_was(
    qtbot: QtBot,
) -> None:
    """A refresh of the session for another reason while Locate folder… is under way (the
    automatic resume at start ending, say) is no answer to it: the banner never flips to
    "Safe resume" and the status bar never claims the new folder before the main process
    accepted it; a refusal leaves Locate folder… on offer."""
    window, bridge = _window(qtbot)
    banner = window.banner
    bridge.push_parked("s1", ("workspace_folder_missing",))
    assert banner.folder_missing
    problems: list[tuple[str, str]] = []
    actions = window.session_actions
    actions.show_problem = lambda headline, sentence: problems.append((headline, sentence))
    actions.choose_folder = lambda _missing: "/w/other"
    QTest.mouseClick(banner.action_button, Qt.MouseButton.LeftButton)
    assert bridge.calls_to("relocate_session") == [("s1", "/w/other")]
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=SESSIONS[0]))
    assert banner.folder_missing, "a refresh is not the answer"
    assert "now uses" not in window.statusBar().currentMessage()
    refusal = bc.ErrorPush(code="workspace_identity_differs", message="another workspace")
    bridge.session_change_refused.emit("s1", "relocate", refusal)
    assert problems == [("The folder was not accepted", problems[0][1])]
    assert "cannot be shown to be the session's workspace" in problems[0][1]
    assert banner.folder_missing, "still parked: nothing changed"

    actions.choose_folder = lambda _missing: "/w/found"
    QTest.mouseClick(banner.action_button, Qt.MouseButton.LeftButton)
    located = SESSIONS[0].model_copy(update={"cwd": "/w/found"})
    bridge.answer_change("s1", "relocate", bc.SessionUpdatedPush(session=located))
    assert banner.state is BannerState.IDLE
    assert banner.action_button.text() == "Safe resume"
    assert window.statusBar().currentMessage() == "The session now uses /w/found."


def test_a_session_another_process_removed_is_said_so(qtbot: QtBot) -> None:
    """A session removed elsewhere (a shared ledger's sweep, or ``maka sessions remove`` in a
    terminal, which the window's own host serves): the status bar says it was removed outside
    this window (naming it), not by "another Maka process", which a terminal's request served by
    this window's own host is not."""
    window, bridge = _window(qtbot)
    bridge.session_removed.emit(bc.SessionRemovedPush(session_id="s2", elsewhere=True))
    assert window.statusBar().currentMessage() == (
        "“Two” was removed outside this window; its folder was not touched."
    )
    bridge.session_removed.emit(bc.SessionRemovedPush(session_id="s1"))
    assert window.statusBar().currentMessage() == (
        "The session was removed; its folder was not touched."
    )


def test_rename_says_why_a_title_is_refused_and_sends_only_a_valid_one(qtbot: QtBot) -> None:
    """A title over 200 characters or with a tab is refused in the window with the reason
    (before, nothing happened; a tab reached the main process, whose refusal read as a tool
    call's identity conflict); a refusal from the main process is said with the right
    sentence too."""
    window, bridge = _window(qtbot)
    problems: list[tuple[str, str]] = []
    actions = window.session_actions
    actions.show_problem = lambda headline, sentence: problems.append((headline, sentence))
    for title in ("x" * 201, "a\tb", "   "):
        actions.ask_title = functools.partial(lambda said, _current: said, title)
        actions.rename("s1")
    assert bridge.calls_to("rename_session") == []
    refused = ("The session was not renamed", "A session's title is one line of 1 to 200 ")
    assert [(h, s[: len(refused[1])]) for h, s in problems] == [refused, refused]
    actions.ask_title = lambda _current: "  Release checklist  "
    actions.rename("s1")
    assert bridge.calls_to("rename_session") == [("s1", "Release checklist")]
    refusal = bc.ErrorPush(code="session_title_invalid", message="a title is one line")
    bridge.session_change_refused.emit("s1", "rename", refusal)
    assert problems[-1][1].startswith(refused[1])


@pytest.mark.parametrize(
    ("status", "failure_class", "offered"),
    [
        ("failed", "app_restarted", True),
        ("failed", "provider_error", False),
        ("cancelled", "cancelled_by_user", False),
        ("failed", "tool_boundary_failed", False),
        ("completed", None, False),
    ],
)
def test_the_banner_offers_safe_resume_only_after_a_restart(
    qtbot: QtBot, status: str, failure_class: str | None, offered: bool
) -> None:
    """docs/design/desktop.md: the banner shows when the latest run failed with ``app_restarted``. A
    turn whose model server failed, or that the user stopped, ends as shown in the transcript with
    no banner (``maka resume`` can still carry it on)."""
    window, bridge = _window(qtbot)
    ended = bc.SessionSummary(
        session_id="s1",
        cwd="/w/one",
        title="One",
        last_run_status=bc.RunStatusValue(status),
        failure_class=failure_class,
        interrupted=failure_class == "app_restarted",
    )
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=ended))
    if not offered:
        assert _banner_state(window) is BannerState.HIDDEN and not window.banner.isVisible()
        return
    assert _banner_state(window) is BannerState.IDLE and window.banner.isVisible()
    assert window.banner.title_label.text() == "Maka stopped before the last turn finished."
    assert window.banner.action_button.text() == "Safe resume"
    QTest.mouseClick(window.banner.action_button, Qt.MouseButton.LeftButton)
    assert bridge.calls_to("resume_latest") == [("s1",)]


def test_a_message_refused_for_the_provider_settings_says_so(qtbot: QtBot) -> None:
    """The main process could not build the model provider from its settings (no model set,
    say): the message comes back with that reason, not the unknown-code fallback."""
    window, bridge = _window(qtbot)
    window.sessions.select("s2")
    refused = bc.ErrorPush(code="provider_config_invalid", message="no model configured")
    bridge.turn_refused.emit("s2", "hello", refused)
    assert window.composer.editor.toPlainText() == "hello"
    assert window.composer.note == (
        "Not sent: The model provider is not set up correctly: check its name, address, model "
        "and key. Details: no model configured"
    )


def test_the_first_listing_puts_the_cursor_in_the_composer(qtbot: QtBot) -> None:
    """Opening the window, what the user types is the message: the focus is not left on New,
    where a space would open the new-session dialog."""
    window, _bridge = _window(qtbot)
    qtbot.waitUntil(window.composer.editor.hasFocus)
    QTest.keyClicks(window.composer.editor, "carry on")
    assert window.composer.editor.toPlainText() == "carry on"


def test_a_later_listing_leaves_the_focus_where_the_user_put_it(
    qtbot: QtBot,
) -> None:
    window, bridge = _window(qtbot)
    window.sessions.view.setFocus()
    qtbot.waitUntil(window.sessions.view.hasFocus)
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=SESSIONS))  # a reconnect
    assert window.sessions.view.hasFocus()


def test_clicking_send_leaves_the_cursor_in_the_composer(qtbot: QtBot) -> None:
    """Send is disabled as soon as the message leaves the editor: the focus it had must go back
    to the composer, not on to New, where the next space would open the new-session dialog."""
    window, bridge = _window(qtbot)
    qtbot.waitUntil(window.composer.editor.hasFocus)
    QTest.keyClicks(window.composer.editor, "first")
    QTest.mouseClick(window.composer.send_button, Qt.MouseButton.LeftButton)
    assert bridge.calls_to("send_turn") == [("s1", "first")]
    assert window.composer.editor.hasFocus()
    assert not window.sessions.new_button.hasFocus()
    focused = QApplication.focusWidget()
    assert focused is not None
    QTest.keyClicks(focused, "and then")
    assert window.composer.editor.toPlainText() == "and then"


def test_pressing_safe_resume_leaves_the_cursor_in_the_composer(qtbot: QtBot) -> None:
    """The pressed button is disabled while the resume runs and hidden once it started: the
    focus goes back to the composer, not to the transcript, where what is typed is lost."""
    window, bridge = _window(qtbot)
    qtbot.waitUntil(window.composer.editor.hasFocus)
    QTest.mouseClick(window.banner.action_button, Qt.MouseButton.LeftButton)
    assert bridge.calls_to("resume_latest") == [("s1",)]
    assert window.composer.editor.hasFocus()
    bridge.push_started("s1", run_id="run-2")
    focused = QApplication.focusWidget()
    assert focused is not None
    QTest.keyClicks(focused, "next")
    assert window.composer.editor.toPlainText() == "next"


def test_a_first_message_with_no_session_asks_for_the_folder_and_is_sent_there(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first start (no session yet): the cursor is in the composer, which says that a message
    starts a session; sending asks for the folder, makes the session there and sends the text
    once it is made. Cancelling the folder gives the text back, with why; before, the composer
    was disabled and what was typed went to the New button (a space opened the folder dialog
    and the rest of the text was lost)."""
    window, bridge = _window(qtbot, sessions=())
    editor = window.composer.editor
    assert editor.isEnabled() and QApplication.focusWidget() is editor
    assert editor.placeholderText().startswith("Type a message to start a new session")
    folders = iter(["", "/w/new"])
    monkeypatch.setattr(
        QFileDialog, "getExistingDirectory", staticmethod(lambda *args: next(folders))
    )

    QTest.keyClicks(editor, "list files")
    QTest.keyClick(editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert editor.toPlainText() == "list files"  # no folder chosen: nothing is lost
    assert window.composer.note.startswith("Not sent: choose the folder")
    assert bridge.calls_to("create_session") == []

    QTest.keyClick(editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert bridge.calls_to("create_session") == [("/w/new",)]
    assert bridge.calls_to("send_turn") == []  # not before the session is made
    QTest.keyClicks(editor, "read a.txt")  # a second message meanwhile: kept, not sent
    QTest.keyClick(editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert editor.toPlainText() == "read a.txt"
    assert window.composer.note.startswith("Not sent: the new session is still being made")
    assert bridge.calls_to("create_session") == [("/w/new",)]
    made = bc.SessionSummary(session_id="s9", cwd="/w/new", title="", last_run_status=None)
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=made))
    assert window.session_id == "s9"
    assert bridge.calls_to("send_turn") == [("s9", "list files")]
    assert editor.placeholderText().startswith("Message Maka")


def test_a_first_message_comes_back_when_its_session_is_not_made(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    window, bridge = _window(qtbot, sessions=())
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a: "/w/bad"))
    editor = window.composer.editor
    QTest.keyClicks(editor, "list files")
    QTest.keyClick(editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert editor.toPlainText() == "" and bridge.calls_to("create_session") == [("/w/bad",)]
    bridge.error_received.emit(bc.ErrorPush(code="invalid_cwd", message="not a folder"))
    assert editor.toPlainText() == "list files"  # nothing typed is lost
    assert window.composer.note.startswith("Not sent: ")
    assert bridge.calls_to("send_turn") == []


def test_a_turn_another_process_ran_is_read_again_when_recovery_ends_it(qtbot: QtBot) -> None:
    """On a shared ledger the window may show a turn another process runs: its call "Running…".
    When that process is gone and recovery here ends the run (the list says Interrupted), no
    live push will ever end the card: the window reads the transcript again instead of leaving
    the card saying "Running…" under a banner that asks about that call."""
    running = bc.SessionSummary(
        session_id="s1", cwd="/w/one", title="One", last_run_status=bc.RunStatusValue.RUNNING
    )
    window, bridge = _window(qtbot, sessions=(running,))
    card = bc.ToolCardItem(
        item_id="t1", tool_call_id="c1", tool_name="bash", status=bc.ToolCardStatus.RUNNING
    )
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s1", items=(card,)))
    assert window.transcript.shows_running_calls()
    bridge.calls.clear()
    repaired = running.model_copy(
        update={
            "last_run_status": bc.RunStatusValue.FAILED,
            "interrupted": True,
            "failure_class": "app_restarted",
        }
    )
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=repaired))
    assert bridge.calls_to("open_session") == [("s1",)]
    # A turn this window saw end (its cards ended by live pushes) is not read again.
    ended = card.model_copy(update={"status": bc.ToolCardStatus.SUCCEEDED})
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s1", items=(ended,)))
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=running))
    bridge.calls.clear()
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=repaired))
    assert bridge.calls_to("open_session") == []


def test_a_turn_another_process_runs_cannot_be_stopped_here_and_says_so(qtbot: QtBot) -> None:
    """A shared ledger: the open session's turn runs in another process. The list says
    "Running elsewhere"; Stop is greyed out and a note says where it can be stopped and what
    happens if that process is gone; Esc sends nothing, and quitting asks nothing (it stops
    only this host's turns). Once this host runs the session, Stop is its own again."""
    elsewhere = bc.SessionSummary(
        session_id="s1",
        cwd="/w/one",
        title="One",
        last_run_status=bc.RunStatusValue.RUNNING,
        running_elsewhere=True,
    )
    window, bridge = _window(qtbot, sessions=(elsewhere,))
    index = window.sessions.model.index(0)
    assert index.data(Qt.ItemDataRole.AccessibleTextRole) == "One, Running elsewhere"
    composer = window.composer
    assert composer.stop_button.isVisible() and not composer.stop_button.isEnabled()
    assert composer.elsewhere_label.isVisible()
    assert "stop it there" in composer.elsewhere_label.text()
    assert not window.cancel_action.isEnabled()
    window.cancel_turn()
    assert bridge.calls_to("cancel_turn") == []
    assert not composer.send_button.isEnabled()
    window.confirm_quit = True
    window.close()  # no question: nothing of this host's would stop
    assert not window.isVisible()
    window.show()
    here = elsewhere.model_copy(update={"running_elsewhere": False})
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=here))
    assert composer.stop_button.isEnabled() and not composer.elsewhere_label.isVisible()
    assert window.cancel_action.isEnabled()
    window.confirm_quit = False  # (a turn of this host's now: closing would ask)


def test_a_session_another_process_holds_says_so_before_anything_is_typed(qtbot: QtBot) -> None:
    """A shared ledger: a finished session whose lease another Maka process still holds is
    listed "Held elsewhere"; the composer names the holder and Send waits (the main process
    would refuse the turn with session_lease_lost). When the holder lets go, Send works."""
    held = bc.SessionSummary(
        session_id="s1",
        cwd="/w/one",
        title="One",
        last_run_status=bc.RunStatusValue.COMPLETED,
        held_elsewhere="build-server, pid 4242",
    )
    window, bridge = _window(qtbot, sessions=(held,))
    index = window.sessions.model.index(0)
    assert index.data(Qt.ItemDataRole.AccessibleTextRole) == "One, Held elsewhere"
    composer = window.composer
    assert composer.held_label.isVisible()
    assert composer.held_label.text().startswith(
        "Another Maka process (build-server, pid 4242) holds this session: carry on there"
    )
    composer.editor.setPlainText("hello")
    assert not composer.send_button.isEnabled()
    composer.submit()
    assert bridge.calls_to("send_turn") == []
    free = held.model_copy(update={"held_elsewhere": None})
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=free))
    assert not composer.held_label.isVisible() and composer.send_button.isEnabled()
    assert index.data(Qt.ItemDataRole.AccessibleTextRole) == "One"
