"""What a tester found driving the real app: the "Automatic resume" announcement on a row and in
the status bar would not go, and hid more important states. The main process tells a window
the stored park again on every open of the session, which announced it again right after the
user's look had cleared it; the session the window shows at start (selected by the window, not
clicked) never counted as seen; and the announcement came before "Folder missing" and before
"Interrupted" (a continuation that was waiting on the user when Maka was killed read "Resumed by
itself"). Real widgets on a fake bridge that sends what the main process sends."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.bridge_port import ConnectionState
from renderer.main_window import MainWindow
from renderer.park_text import Severity
from renderer.session_list import Announcement, badge_for
from tests.helpers.fake_bridge import FakeBridge

pytestmark = pytest.mark.gui

GONE = bc.SessionSummary(
    session_id="s1",
    cwd="/w/gone",
    title="run sleep 20",
    last_run_status=bc.RunStatusValue.FAILED,
    interrupted=True,
    failure_class="app_restarted",
    folder_missing=True,
)
HELD = bc.SessionSummary(
    session_id="s2",
    cwd="/w/held",
    title="Late writer",
    last_run_status=bc.RunStatusValue.FAILED,
    interrupted=True,
    failure_class="app_restarted",
)
OTHER = bc.SessionSummary(
    session_id="s3", cwd="/w/other", title="Other", last_run_status=bc.RunStatusValue.COMPLETED
)
FOLDER_PARK = bc.ResumeParkedPush(
    session_id="s1", rejection_reasons=("workspace_folder_missing",), automatic=True
)
DRIFT_PARK = bc.ResumeParkedPush(
    session_id="s2", rejection_reasons=("workspace_drift",), automatic=True
)


def _window(
    qtbot: QtBot, sessions: tuple[bc.SessionSummary, ...], *, active: bool = True
) -> tuple[MainWindow, FakeBridge]:
    bridge = FakeBridge(safe_resume_enabled=True)
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.resize(800, 600)
    if active:
        with qtbot.waitActive(window):
            window.show()
            window.activateWindow()
    else:
        window.show()
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=sessions))
    return window, bridge


def _badge(window: MainWindow, session_id: str) -> str:
    model = window.sessions.model
    row = model.row_of(session_id)
    assert row is not None
    return str(model.index(row).data(Qt.ItemDataRole.AccessibleTextRole))


def _open_answered(bridge: FakeBridge, session_id: str, *stood: bc.Message) -> None:
    """What the main process answers to ``sessions.open``: the transcript, then what stands
    for the session (``standing_state``), its stored park among it."""
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id=session_id, items=()))
    for push in stood:
        if isinstance(push, bc.ResumeParkedPush):
            bridge.resume_parked.emit(push)
        elif isinstance(push, bc.ResumeStartedPush):
            bridge.resume_started.emit(push)


def test_a_park_told_again_on_opening_the_session_does_not_bring_its_announcement_back(
    qtbot: QtBot,
) -> None:
    """Automatic resume parked two sessions at start; the user opens each (a click away and
    back). The main process answers each open with the stored park again: neither the row nor
    the status bar says "on hold" again, and the folder-missing row says "Folder missing"."""
    window, bridge = _window(qtbot, (OTHER, GONE, HELD), active=False)
    assert window.session_id == "s3"
    bridge.resume_parked.emit(FOLDER_PARK)
    bridge.resume_parked.emit(DRIFT_PARK)
    notice = window.auto_resume_notice
    assert notice.text == "Automatic resume: 2 are on hold; open them to see."
    assert _badge(window, "s2") == "Late writer, Auto-resume on hold"

    view = window.sessions.view
    view.setFocus()
    QTest.keyClick(view, Qt.Key.Key_Down)  # the user opens "run sleep 20"
    assert window.session_id == "s1"
    _open_answered(bridge, "s1", FOLDER_PARK)
    QTest.keyClick(view, Qt.Key.Key_Down)  # then "Late writer"
    assert window.session_id == "s2"
    _open_answered(bridge, "s2", DRIFT_PARK)
    assert notice.text == "" and not notice.label.isVisible()
    QTest.keyClick(view, Qt.Key.Key_Up)  # and back to "run sleep 20"
    _open_answered(bridge, "s1", FOLDER_PARK)
    QTest.keyClick(view, Qt.Key.Key_Down)
    _open_answered(bridge, "s2", DRIFT_PARK)
    assert notice.text == "" and not notice.label.isVisible()
    assert _badge(window, "s1") == "run sleep 20, Folder missing"
    assert _badge(window, "s2") == "Late writer, Interrupted"
    # The banner still has the park it needs (the copy told again is not dropped for it).
    assert window.banner.title_label.text() == "Automatic resume is on hold."

    # A reconnect tells everything that stands again: still no news.
    bridge.disconnect_now()
    bridge.connect_now()
    bridge.resume_parked.emit(FOLDER_PARK)
    bridge.resume_parked.emit(DRIFT_PARK)
    _open_answered(bridge, "s2", DRIFT_PARK)
    assert notice.text == ""
    assert _badge(window, "s2") == "Late writer, Interrupted"


def test_the_session_shown_at_start_counts_as_seen_once_it_has_been_in_view(
    qtbot: QtBot,
) -> None:
    """The window selects the first session at start; the user is looking at it, so what
    automatic resume did to it goes after a moment in view (and is not told again by the
    next open), while a session not looked at keeps its announcement."""
    window, bridge = _window(qtbot, (HELD, OTHER))
    assert window.session_id == "s2"
    notice = window.auto_resume_notice
    bridge.resume_parked.emit(DRIFT_PARK)
    bridge.resume_started.emit(
        bc.ResumeStartedPush(session_id="s3", run_id="r9", turn_id="t9", automatic=True)
    )
    assert notice.text == (
        "Automatic resume: 1 session continued by itself and 1 is on hold; open them to see."
    )
    qtbot.waitUntil(
        lambda: notice.text == "Automatic resume: 1 session continued by itself; open it to see.",
        timeout=8000,  # (a moment in view: LOOK_MS)
    )
    assert _badge(window, "s2") == "Late writer, Interrupted"
    assert _badge(window, "s3") == "Other, Resumed by itself"
    _open_answered(bridge, "s2", DRIFT_PARK)  # the window opens it again (a reconnect, say)
    assert "on hold" not in notice.text
    assert _badge(window, "s2") == "Late writer, Interrupted"

    # The other one, once opened and in view, goes too; its start told again is no news.
    window.sessions.view.setFocus()
    QTest.keyClick(window.sessions.view, Qt.Key.Key_Down)
    assert window.session_id == "s3"
    assert notice.text == "" and not notice.label.isVisible()
    bridge.resume_started.emit(
        bc.ResumeStartedPush(session_id="s3", run_id="r9", turn_id="t9", automatic=True)
    )
    assert notice.text == ""
    assert _badge(window, "s3") == "Other"


def test_a_more_important_state_is_never_hidden_behind_an_announcement(qtbot: QtBot) -> None:
    """A missing folder and an interruption come before what automatic resume did; "on hold"
    names how a parked session is interrupted."""
    missing = GONE
    assert badge_for(missing, announced=Announcement.ON_HOLD) == ("Folder missing", Severity.WARN)
    assert badge_for(missing, announced=Announcement.CONTINUED) == (
        "Folder missing",
        Severity.WARN,
    )
    assert badge_for(HELD, announced=Announcement.ON_HOLD) == (
        "Auto-resume on hold",
        Severity.WARN,
    )
    # A continuation waiting on the user when Maka was killed: "Interrupted", not "Resumed".
    waiting = HELD.model_copy(
        update={
            "interrupted": False,
            "failure_class": None,
            "last_run_status": bc.RunStatusValue.WAITING_FOR_USER,
        }
    )
    window, bridge = _window(qtbot, (OTHER, waiting), active=False)
    bridge.resume_started.emit(
        bc.ResumeStartedPush(session_id="s2", run_id="r2", turn_id="t2", automatic=True)
    )
    bridge.permission_requested.emit(
        bc.PermissionRequestedPush(
            session_id="s2", request_id="p1", tool_name="bash", summary="run: sleep 20"
        )
    )
    assert _badge(window, "s2") == "Late writer, Needs you"
    bridge._set_connection_state(ConnectionState.HOST_LOST)
    assert _badge(window, "s2") == "Late writer, Interrupted"
