"""What a QA drill under Xvfb found in the desktop, with real widgets on a fake bridge: an answer
about a call of a park automatic resume left updates the row, the status bar and the
conversation at once; Try again gives the park one name everywhere; a session others were
branched from says up front that it cannot be removed, naming them; a stale snapshot that no
file differs from says so in the banner; a permission question stays whole at 720x480."""

from __future__ import annotations

from unittest import mock

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.interrupted_banner import BannerState
from renderer.main_window import MainWindow
from renderer.permission_prompt import COMMAND_VIEW_LINES
from renderer.session_actions import RemoveChoice
from runtime.continuation.workspace_gate import _since_last_snapshot
from tests.gui.test_main_window import _window as shown_window
from tests.helpers.fake_bridge import FakeBridge

pytestmark = pytest.mark.gui

INTERRUPTED = bc.SessionSummary(
    session_id="s1",
    cwd="/w/one",
    title="Late writer",
    last_run_status=bc.RunStatusValue.FAILED,
    interrupted=True,
    failure_class="app_restarted",
)
OTHER = bc.SessionSummary(
    session_id="s2", cwd="/w/two", title="Two", last_run_status=bc.RunStatusValue.COMPLETED
)
STALE = bc.ResumeDiagnostic(
    code="workspace_checkpoint_stale",
    message='the command "sleep 40; echo late >> late.txt" may have changed files after the '
    "last snapshot; " + _since_last_snapshot(()),
    subject='the command "sleep 40; echo late >> late.txt"',
)
PENDING = bc.ResumeDiagnostic(
    code="pending_tool_result",
    message="generation 1: tool call bash (c1) is indeterminate (dispatch_without_response)",
    tool_call_id="c1",
    tool_name="bash",
)
REASONS = ("dangling_tool_state", "workspace_checkpoint_stale")


def _window(
    qtbot: QtBot, sessions: tuple[bc.SessionSummary, ...] = (INTERRUPTED, OTHER)
) -> tuple[MainWindow, FakeBridge]:
    return shown_window(qtbot, sessions=sessions)


def _badge(window: MainWindow, session_id: str) -> str:
    model = window.sessions.model
    row = model.row_of(session_id)
    assert row is not None
    return str(model.index(row).data(Qt.ItemDataRole.AccessibleTextRole))


def _held_at_start(window: MainWindow, bridge: FakeBridge) -> None:
    """Automatic resume at start parked s1 (a command killed mid-call), which the window shows
    (selected by the listing, not opened by the user)."""
    bridge.resume_parked.emit(
        bc.ResumeParkedPush(
            session_id="s1", rejection_reasons=REASONS, diagnostics=(PENDING, STALE), automatic=True
        )
    )
    assert window.session_id == "s1"
    assert window.banner.title_label.text() == "Automatic resume is on hold."
    assert _badge(window, "s1") == "Late writer, Auto-resume on hold"
    assert window.auto_resume_notice.text == "Automatic resume: 1 is on hold; open it to see."


def test_an_answer_about_the_held_call_updates_row_status_and_conversation_at_once(
    qtbot: QtBot,
) -> None:
    """It did not run, on the card of the command automatic resume left on hold: the answer is
    recorded and took the folder as the new starting point (a notice of the transcript). The
    row, the status bar and the conversation say so at once, not after opening another
    session and coming back."""
    window, bridge = _window(qtbot)
    _held_at_start(window, bridge)
    opened = len(bridge.calls_to("open_session"))
    settlement = bc.Settlement(
        operation_id="op1",
        tool_call_id="c1",
        tool_name="bash",
        run_id="run-1",
        attestation=bc.AttestationChoice.NOT_RUN,
        attested_at=1,
        created=True,
        workspace=bc.SettledFolder(
            baseline_recorded=True, changed_paths=("late.txt",), changed_count=1
        ),
    )
    # What the main process sends: the park as it stands now (Safe resume's own), then the answer.
    bridge.push_parked("s1", REASONS, (PENDING, STALE))
    bridge.tool_settled.emit(
        bc.ToolSettledPush(session_id="s1", tool_call_id="c1", recorded=True, settlement=settlement)
    )
    assert _badge(window, "s1") == "Late writer, Interrupted"
    assert window.auto_resume_notice.text == ""
    assert not window.auto_resume_notice.label.isVisible()
    assert window.banner.title_label.text() == "Safe resume is on hold."
    # The conversation is read again: the notice of the answer is in the record, not the card.
    assert len(bridge.calls_to("open_session")) == opened + 1
    assert bridge.calls_to("open_session")[-1] == ("s1",)
    notice = bc.NoticeItem(
        item_id="evt-settle_workspace",
        text="Your answer took the folder as it was as the new starting point; 1 file changed "
        "since the last snapshot.",
        level="info",
    )
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s1", items=(notice,)))
    assert window.transcript.item_ids() == ["evt-settle_workspace"]


def test_a_refused_answer_leaves_the_announcement(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    _held_at_start(window, bridge)
    opened = len(bridge.calls_to("open_session"))
    bridge.push_settled("s1", "c1", recorded=False, code="session_busy")
    assert _badge(window, "s1") == "Late writer, Auto-resume on hold"
    assert len(bridge.calls_to("open_session")) == opened


def test_try_again_gives_the_park_one_name_in_banner_row_and_status_bar(qtbot: QtBot) -> None:
    """Try again on a session automatic resume left on hold: the banner then speaks of Safe
    resume's own check ("Safe resume is on hold.", checked again at ...), and the row and the
    status bar no longer say "Auto-resume on hold" for the same state."""
    window, bridge = _window(qtbot)
    _held_at_start(window, bridge)
    banner = window.banner
    assert banner.action_button.text() == "Try again"
    QTest.mouseClick(banner.action_button, Qt.MouseButton.LeftButton)
    assert bridge.calls_to("resume_latest")[-1][0] == "s1"
    assert banner.state is BannerState.RESUMING
    bridge.push_parked("s1", REASONS, (PENDING, STALE))
    assert banner.title_label.text() == "Safe resume is on hold."
    assert "Checked again at" in banner.body_label.text()
    assert "on hold" not in _badge(window, "s1").lower()
    assert _badge(window, "s1") == "Late writer, Interrupted"
    assert window.auto_resume_notice.text == ""


def test_the_banner_says_no_file_differs_from_a_stale_snapshot(qtbot: QtBot) -> None:
    """``maka plan`` and the details say no file in the folder differs from the stale snapshot;
    the reason in the banner says so too instead of leaving the user to wonder."""
    window, bridge = _window(qtbot)
    _held_at_start(window, bridge)
    labels = {label.property("code"): label.text() for label in window.banner.reason_labels}
    lines = [line.strip() for line in labels["workspace_checkpoint_stale"].splitlines()]
    assert lines == [
        '•  The snapshot of the folder is out of date: the command "sleep 40; echo late >> '
        'late.txt" may have changed files after it.',
        "No file in the folder differs from the last snapshot.",
    ]
    # Not compared (no snapshot objects here, say): nothing is claimed either way.
    bridge.push_parked(
        "s1",
        ("workspace_checkpoint_stale",),
        (STALE.model_copy(update={"message": "a bash call may have changed files after it"}),),
    )
    labels = {label.property("code"): label.text() for label in window.banner.reason_labels}
    assert "differs" not in labels["workspace_checkpoint_stale"]


def _row(session_id: str, title: str, branches: tuple[str, ...] = ()) -> bc.SessionRow:
    return bc.SessionRow(
        session_id=session_id,
        cwd=f"/w/{session_id}",
        title=title,
        created_at=1,
        interrupted=False,
        run_count=1,
        folder_missing=False,
        resumable=False,
        branches=tuple(bc.BranchMade(session_id=b, boundary_event_id="e1") for b in branches)
        or None,
    )


def test_a_session_with_branches_says_up_front_it_cannot_be_removed_and_names_them(
    qtbot: QtBot,
) -> None:
    """Remove session… on a session others were branched from: no "deleted and cannot be
    brought back" confirmation that then fails; the window says it cannot be removed yet and
    names the branches (titles), and sends no removal."""
    branch = bc.SessionSummary(session_id="b1", cwd="/w/one-branch-1", title="Try the fix")
    window, bridge = _window(qtbot, (INTERRUPTED, OTHER, branch))
    actions = window.session_actions
    asked: list[str] = []

    def confirm(summary: bc.SessionSummary) -> RemoveChoice:
        asked.append(summary.session_id)
        return RemoveChoice.REMOVE

    actions.confirm_remove = confirm
    said: list[tuple[str, str]] = []

    def shown(box: QMessageBox) -> int:
        said.append((box.text(), box.informativeText()))
        return 0

    with mock.patch.object(QMessageBox, "exec", shown):
        actions.remove_action.trigger()
        assert bridge.calls_to("overview_sessions") == [()]
        bridge.answer_overview(
            (
                _row("s1", "Late writer", ("b1", "gone")),
                _row("s2", "Two"),
                _row("b1", "Try the fix"),
                _row("gone", "Listed elsewhere"),
            )
        )
    assert asked == [], "no irreversible-sounding confirmation"
    assert bridge.calls_to("remove_session") == []
    assert said == [
        (
            "“Late writer” cannot be removed yet.",
            "The sessions “Try the fix”, “Listed elsewhere” were branched from it and refer to "
            "its history. Remove those sessions first; then this one can be removed. Nothing "
            "was removed.",
        )
    ]

    # Without branches (or when the check is refused), the usual confirmation follows.
    actions.remove_action.trigger()
    bridge.answer_overview((_row("s1", "Late writer"), _row("s2", "Two")))
    assert asked == ["s1"]
    assert bridge.calls_to("remove_session") == [("s1",)]
    actions.remove_action.trigger()
    bridge.answer_overview(None)
    assert asked == ["s1", "s1"]
    # An answer nobody waits for asks nothing.
    bridge.answer_overview((_row("s1", "Late writer"),))
    assert asked == ["s1", "s1"]


def test_the_whole_permission_question_is_readable_at_the_minimum_window_size(
    qtbot: QtBot,
) -> None:
    """At 720x480 a long command's question was covered by the composer (its warning line cut
    off): the command now scrolls sooner, so the title, the command, the warning and the
    buttons all sit above the composer, and the conversation keeps its minimum height."""
    branched = OTHER.model_copy(update={"session_id": "s3", "title": "A branch", "cwd": "/w/b"})
    window, bridge = _window(qtbot, (branched, OTHER))
    window.resize(720, 480)
    origin = bc.BranchOrigin(
        source_session_id="s2",
        source_title="Two",
        boundary_event_id="e1",
        boundary_kind="run_ending",
        boundary_label="run ended completed",
    )
    bridge.session_opened.emit(
        bc.SessionOpenedPush(session_id="s3", items=(), branched_from=origin)
    )
    words = " ".join(f"word{n}" for n in range(60))
    bridge.permission_requested.emit(
        bc.PermissionRequestedPush(
            session_id="s3", request_id="p1", tool_name="bash", summary=f"run: echo {words}"
        )
    )
    prompt = window.permission
    qtbot.waitUntil(prompt.warning_label.isVisible)
    view = prompt.summary_view
    assert view.visual_lines() > view.max_lines, "the command scrolls"

    def bottom_in_window(widget: QWidget) -> int:
        return widget.mapTo(window, widget.rect().bottomLeft()).y()

    def top_in_window(widget: QWidget) -> int:
        return widget.mapTo(window, widget.rect().topLeft()).y()

    def readable() -> bool:
        QApplication.processEvents()
        return (
            bottom_in_window(prompt.warning_label) < top_in_window(window.composer)
            and bottom_in_window(prompt) <= top_in_window(window.composer)
            and window.transcript.height() >= window.transcript.minimumHeight()
        )

    qtbot.waitUntil(readable, timeout=3000)
    warning = prompt.warning_label
    assert warning.height() >= warning.heightForWidth(warning.width()), "not cut off"
    # A taller window gives the command its lines back.
    window.resize(720, 900)
    qtbot.waitUntil(lambda: view.max_lines == COMMAND_VIEW_LINES, timeout=3000)
