"""What a user drill of the desktop under Xvfb found (drill C), each fixed and kept so: the
Timeline says why a tool row with an unknown outcome is no branch point; the first window fits
a small screen; the banner's cut running text ends with "…" and Try again keeps More open; the
branch dialog's footnote is readable; the restore dialog breaks a path only at "/"; automatic
resume that started is announced on the divider too, and the status bar speaks of the open
session as open."""

from __future__ import annotations

from unittest import mock

import pytest
from PySide6.QtCore import QModelIndex, QSize, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPalette
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QLabel, QMessageBox
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.branch_dialog import BranchDialog
from renderer.interrupted_banner import InterruptedBanner
from renderer.main_window import MainWindow, first_size
from renderer.timeline_model import RowNode
from renderer.timeline_panel import TimelinePanel
from renderer.transcript_items import ContinuationMarkerWidget
from tests.helpers.fake_bridge import FakeBridge
from tests.helpers.timeline_demo import ServingBridge, parked_session

pytestmark = pytest.mark.gui

ROOT = QModelIndex()


def _unknown_tool_row(panel: TimelinePanel) -> QModelIndex:
    for number in range(panel.model.rowCount(ROOT)):
        index = panel.model.index(number, 0)
        node = panel.model.node(index)
        if isinstance(node, RowNode) and node.item.kind == "tool" and node.item.status == "unknown":
            return index
    raise AssertionError("no tool row with an unknown outcome")


def test_a_tool_row_with_an_unknown_outcome_says_why_it_is_no_branch_point(
    qtbot: QtBot,
) -> None:
    bridge = ServingBridge({"sess-1": parked_session()}, immediate=True)
    panel = TimelinePanel(bridge)
    qtbot.addWidget(panel)
    panel.resize(1000, 700)
    panel.open("sess-1")
    index = _unknown_tool_row(panel)
    panel.tree.setCurrentIndex(index)
    assert not panel.branch_button.isEnabled()
    tip = panel.branch_button.toolTip()
    assert "select one of those rows" not in tip
    assert "no settled outcome" in tip and "settle the call first" in tip
    text = panel.detail.toPlainText()
    assert text.startswith("Not a branch point: this tool call has no settled outcome")
    assert "earlier point" in text and "whether it ran" in text
    (action,) = panel.context_menu_for(index).actions()
    assert not action.isEnabled() and "unsettled" in action.text()


def test_the_first_window_fits_the_screen_it_opens_on(qtbot: QtBot) -> None:
    window = MainWindow(FakeBridge())
    qtbot.addWidget(window)
    screen = window.screen()
    assert screen is not None
    available = screen.availableGeometry().size()
    assert available.width() < 1180, "the test screen is smaller than the usual window"
    assert window.width() <= available.width() and window.height() <= available.height()
    assert window.width() >= 720 and window.height() >= 480


@pytest.mark.parametrize(
    ("screen", "first"),
    [
        (QSize(1400, 900), QSize(1180, 760)),  # room for the usual size: kept
        (QSize(2560, 1440), QSize(1180, 760)),
        (QSize(800, 600), QSize(760, 540)),  # all of it on screen, with room for the frame
        (QSize(640, 480), QSize(720, 480)),  # never below the minimum size
    ],
)
def test_the_first_size_is_the_usual_one_shrunk_to_the_screen(screen: QSize, first: QSize) -> None:
    assert first_size(screen) == first


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
    message="the command may have changed files after the last snapshot",
    subject='the command "sleep 40; echo late >> late.txt"',
)
PENDING = bc.ResumeDiagnostic(
    code="pending_tool_result",
    message="tool call bash (c1) is indeterminate (dispatch_without_response)",
    tool_call_id="c1",
    tool_name="bash",
)
REASONS = ("dangling_tool_state", "workspace_checkpoint_stale")


def _small_window(qtbot: QtBot) -> tuple[MainWindow, FakeBridge]:
    bridge = FakeBridge(safe_resume_enabled=True)
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.resize(720, 480)
    window.show()
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=(INTERRUPTED, OTHER)))
    QApplication.processEvents()
    return window, bridge


def _held_at_start(bridge: FakeBridge) -> None:
    bridge.resume_parked.emit(
        bc.ResumeParkedPush(
            session_id="s1", rejection_reasons=REASONS, diagnostics=(PENDING, STALE), automatic=True
        )
    )
    QApplication.processEvents()


def test_the_cut_running_text_ends_with_an_ellipsis(qtbot: QtBot) -> None:
    window, bridge = _small_window(qtbot)
    _held_at_start(bridge)
    banner = window.banner
    label = banner.body_label
    qtbot.waitUntil(lambda: banner.body_cut)
    shown = label.shown_text()
    assert shown.endswith("…") and shown != label.text()
    assert label.text().startswith(shown[:-1].rstrip()), "the lines shown are the text's own"
    banner.body_more.click()
    qtbot.waitUntil(lambda: label.height() >= label.heightForWidth(label.width()))
    assert label.shown_text() == label.text()


def test_try_again_keeps_more_open(qtbot: QtBot) -> None:
    window, bridge = _small_window(qtbot)
    _held_at_start(bridge)
    banner = window.banner
    qtbot.waitUntil(lambda: banner.body_cut)
    banner.body_more.click()
    assert not banner.body_cut
    assert banner.action_button.text() == "Try again"
    banner.action_button.click()
    bridge.push_parked("s1", REASONS, (PENDING, STALE))
    QApplication.processEvents()
    assert "Checked again at" in banner.body_label.text()
    assert banner.body_more.text() == "Less" and not banner.body_cut
    # Another session's banner starts with its text cut again.
    window.open_session("s2")
    window.open_session("s1")
    qtbot.waitUntil(lambda: banner.body_cut)


def _luminance(colour: QColor) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return (
        0.2126 * channel(colour.red())
        + 0.7152 * channel(colour.green())
        + 0.0722 * channel(colour.blue())
    )


def _contrast(one: QColor, two: QColor) -> float:
    high, low = sorted((_luminance(one), _luminance(two)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_branch_dialog_footnote_is_readable_secondary_text(qtbot: QtBot) -> None:
    option = bc.BranchOptionItem(
        event_id="e-ask",
        run_id="run-1",
        seq=1,
        kind="user_message",
        ts=0,
        label="you: hi",
        snapshot_bound=True,
        snapshot_kept=True,
    )
    listed = bc.BranchOptionsListedPush(
        session_id="s1",
        title="Drill",
        cwd="/w/one",
        default_folder="/w/one-branch-1",
        options=(option,),
    )
    dialog = BranchDialog(listed, option)
    qtbot.addWidget(dialog)
    note = dialog.folder_note
    assert note.isEnabled(), "not the disabled grey"
    shown = note.palette().color(QPalette.ColorGroup.Active, note.foregroundRole())
    window = dialog.palette().color(QPalette.ColorRole.Window)
    text = dialog.palette().color(QPalette.ColorRole.WindowText)
    assert shown != text, "secondary text, set apart from the sentences above it"
    assert _contrast(shown, window) >= 4.5


def _restore_box(qtbot: QtBot, place: str) -> tuple[str, int, QFontMetrics]:
    """The restore confirmation's informative text for a copy the main process would make at
    ``place``, its informative label's minimum width and its font (the dialog cancelled)."""
    bridge = FakeBridge(safe_resume_enabled=True)
    banner = InterruptedBanner(bridge)
    qtbot.addWidget(banner)
    banner.show()
    banner.set_session("s1", interrupted=True, folder="/tmp/drill-c/repo5")
    drift = bc.ResumeDiagnostic(code="workspace_drift", message="1 file changed")
    named = bc.ResumeDiagnostic(
        code="workspace_restore_place", message=f"a restored copy at {place}", path=place
    )
    bridge.push_parked(
        "s1", ("workspace_drift",), (drift, named), workspace_options=("isolated_restore",)
    )
    shown: list[tuple[str, int, QFontMetrics]] = []

    def cancel(box: QMessageBox) -> int:
        label = box.findChild(QLabel, "qt_msgbox_informativelabel")
        assert isinstance(label, QLabel)
        shown.append((box.informativeText(), label.minimumWidth(), label.fontMetrics()))
        return 0

    with mock.patch.object(QMessageBox, "exec", cancel):
        banner.restore_button.click()
    [one] = shown
    return one


def test_the_restore_dialog_puts_a_path_on_its_own_line(qtbot: QtBot) -> None:
    text, width, metrics = _restore_box(qtbot, "/tmp/drill-c/repo5-restored-1")
    lines = text.split("\n")
    assert "/tmp/drill-c/repo5-restored-1" in lines, "whole, on a line of its own"
    assert width >= metrics.horizontalAdvance("/tmp/drill-c/repo5-restored-1")


def test_a_long_path_breaks_only_after_a_slash(qtbot: QtBot) -> None:
    place = (
        "/home/ann-marie/projects/customer-integration-tests/services/payment-gateway-"
        "adapters/python-client-library-restored-1"
    )
    text, width, metrics = _restore_box(qtbot, place)
    lines = text.split("\n")
    start = next(n for n, line in enumerate(lines) if line.startswith("/home/"))
    end = next(n for n, line in enumerate(lines) if line.endswith("-restored-1"))
    pieces = lines[start : end + 1]
    assert len(pieces) > 1 and "".join(pieces) == place
    assert all(piece.endswith("/") for piece in pieces[:-1]), "broken after a / only"
    assert all(metrics.horizontalAdvance(piece) <= width for piece in pieces)


def _marker_words(window: MainWindow, item_id: str) -> str:
    widget = window.transcript.item_widget(item_id)
    assert isinstance(widget, ContinuationMarkerWidget)
    return widget.label.text()


def _opened(bridge: FakeBridge, session_id: str, run_id: str) -> None:
    marker = bc.ContinuationMarkerItem(item_id=f"m-{run_id}", run_id=run_id, source_run_id="r1")
    user = bc.UserMessageItem(item_id=f"u-{run_id}", text="write notes.md saying hello")
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id=session_id, items=(user, marker)))
    QApplication.processEvents()


@pytest.mark.parametrize("told_first", [True, False])
def test_a_continuation_automatic_resume_started_is_announced_as_such(
    qtbot: QtBot, told_first: bool
) -> None:
    """The divider, the row and the status bar all say automatic resume continued it (told
    before or after the transcript shows the divider); one the user started keeps its words."""
    window, bridge = _small_window(qtbot)
    started = bc.ResumeStartedPush(session_id="s1", run_id="r2", turn_id="t2", automatic=True)
    if told_first:
        bridge.resume_started.emit(started)
    _opened(bridge, "s1", "r2")
    if not told_first:
        bridge.resume_started.emit(started)
    QApplication.processEvents()
    assert _marker_words(window, "m-r2") == "Continued by automatic resume after Maka stopped"
    assert window.auto_resume_notice.text == (
        "Automatic resume: 1 session continued by itself; open it to see."
    )
    row = window.sessions.model.row_of("s1")
    assert row is not None
    badge = window.sessions.model.index(row).data(Qt.ItemDataRole.AccessibleTextRole)
    assert badge == "Late writer, Resumed by itself"
    # A continuation the user started (Safe resume) keeps its own words.
    bridge.push_started("s2", run_id="r3")
    window.open_session("s2")
    _opened(bridge, "s2", "r3")
    assert _marker_words(window, "m-r3") == "Continued with Safe resume after Maka stopped"


def test_clicking_the_open_session_clears_its_announcement(qtbot: QtBot) -> None:
    """The window selected the session at start; the user's click on it (or Enter) is their
    look at it: the status bar no longer says "open it to see", nor the row "on hold"."""
    window, bridge = _small_window(qtbot)
    _held_at_start(bridge)
    assert window.session_id == "s1"
    notice = window.auto_resume_notice
    assert notice.text == "Automatic resume: 1 is on hold; open it to see."
    view = window.sessions.view
    row = window.sessions.model.row_of("s1")
    assert row is not None
    rect = view.visualRect(window.sessions.model.index(row))
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert window.session_id == "s1"
    assert notice.text == "" and not notice.label.isVisible()
    badge = window.sessions.model.index(row).data(Qt.ItemDataRole.AccessibleTextRole)
    assert badge == "Late writer, Interrupted"
    # Enter on the open row does the same for a later announcement.
    _held_at_start(bridge)
    assert notice.text == "Automatic resume: 1 is on hold; open it to see."
    view.setFocus()
    QTest.keyClick(view, Qt.Key.Key_Return)
    assert notice.text == ""


def test_a_path_is_never_shortened_and_windows_separators_break_it_too(qtbot: QtBot) -> None:
    """A name wider than a line was shortened in its middle with "…" (the path shown was no
    longer the real one), and a Windows path, which has no "/", was one piece."""
    from PySide6.QtGui import QFontMetrics
    from PySide6.QtWidgets import QLabel

    from renderer.restore_dialog import path_lines

    metrics = QFontMetrics(QLabel().font())
    long_name = "/tmp/" + "x" * 300 + "-restored-1"
    lines = path_lines(long_name, metrics, 200).split("\n")
    assert "".join(lines) == long_name and "…" not in "".join(lines)
    assert all(metrics.horizontalAdvance(line) <= 200 for line in lines)
    windows = "C:\\Users\\ann-marie\\projects\\customer-integration-tests\\payment-restored-1"
    pieces = path_lines(windows, metrics, 200).split("\n")
    assert len(pieces) > 1 and "".join(pieces) == windows
    assert all(piece.endswith("\\") for piece in pieces[:-1])


def test_in_a_short_window_more_and_details_take_turns(qtbot: QtBot) -> None:
    """At 800x600 both open drew the banner over the transcript and the composer."""
    window, bridge = _small_window(qtbot)
    _held_at_start(bridge)
    banner = window.banner
    qtbot.waitUntil(lambda: banner.body_cut)
    banner.body_more.click()
    assert banner.body_more.text() == "Less"
    banner.details_toggle.click()
    assert banner.details_shown and banner.body_more.text() == "More"  # More gave way
    banner.body_more.click()
    assert banner.body_more.text() == "Less" and not banner.details_shown  # and Details
    # With room for both (a tall window), both stay open.
    window.resize(1180, 1000)
    QApplication.processEvents()
    banner.details_toggle.click()
    assert banner.details_shown and banner.body_more.text() == "Less"
