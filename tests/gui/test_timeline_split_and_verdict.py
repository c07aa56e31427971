"""View › Timeline as a user met it: the selected event's detail squeezed to a sliver at
760x540, and a verdict ("Safe resume parks…") that stayed on screen after the session had
moved on (a settle recorded, a resume started, the turn ended).

The detail and the rows share the height (each keeps its minimum, inside the panel, at every
window size), and the verdict is read again on the pushes that change the session: it never
says what the last reading said once that may no longer hold.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QModelIndex
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.main_window import MainWindow
from renderer.timeline_model import RowNode
from renderer.timeline_panel import TimelinePanel
from runtime.ledger.timeline_pins import ParkHeader, SessionTimeline
from tests.helpers.timeline_demo import ServingBridge, long_session, parked_session

ROOT = QModelIndex()


def _window(
    qtbot: QtBot, timelines: dict[str, SessionTimeline], width: int, height: int
) -> tuple[MainWindow, ServingBridge]:
    """The main window at ``width`` x ``height`` with s1 parked (its banner above), the
    Timeline open on it."""
    bridge = ServingBridge(timelines, immediate=True)
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.resize(width, height)
    window.show()
    summary = bc.SessionSummary(
        session_id="s1",
        cwd="/w/project",
        title="count the lines once and write the total to count.txt",
        last_run_status=bc.RunStatusValue.FAILED,
        interrupted=True,
    )
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=(summary,)))
    unknown = bc.ResumeDiagnostic(code="pending_tool_result", tool_call_id="c1", tool_name="bash")
    bridge.push_parked("s1", ("dangling_tool_state", "workspace_drift"), (unknown,))
    window.sessions.select("s1")
    window.timeline_action.trigger()
    qtbot.waitExposed(window)
    return window, bridge


def _select_first_row(panel: TimelinePanel) -> None:
    run = panel.model.index(0, 0, ROOT)
    first = panel.model.index(1, 0, ROOT) if not panel.model.hasChildren(run) else run
    panel.tree.setCurrentIndex(first)
    QApplication.processEvents()


def _shown_height(widget: QWidget) -> int:
    """How much of ``widget`` is on screen (its parents' clipping counted)."""
    return widget.visibleRegion().boundingRect().height()


def _readable(window: MainWindow, panel: TimelinePanel, detail_lines: int, tree_rows: int) -> None:
    QApplication.processEvents()
    line = panel.detail.fontMetrics().lineSpacing()
    assert _shown_height(panel.detail) >= detail_lines * line, (
        _shown_height(panel.detail),
        panel.splitter.sizes(),
    )
    row = panel.tree.sizeHintForRow(0)
    assert panel.tree.viewport().height() >= tree_rows * row
    assert _shown_height(panel.tree) == panel.tree.height()
    # inside the window, above the composer, its buttons too
    composer_top = window.composer.mapTo(window, window.composer.rect().topLeft()).y()
    for widget in (panel.detail, panel.copy_button, panel.branch_button):
        assert widget.isVisible()
        assert widget.mapTo(window, widget.rect().bottomLeft()).y() < composer_top
        assert _shown_height(widget) == widget.height()


def test_the_detail_is_readable_in_a_760x540_window_under_a_banner(qtbot: QtBot) -> None:
    """At 760x540 (an 800x600 screen, or 1080p at 200 %) under a parked session's banner the
    detail was laid out under the rows' splitter, about 12 px of it on screen: now it keeps
    four lines (with its buttons) and the rows keep the header and five rows."""
    timelines = {"s1": parked_session(rows_before=6, session_id="s1")}
    window, _bridge = _window(qtbot, timelines, 760, 540)
    panel = window.timeline
    _select_first_row(panel)
    _readable(window, panel, detail_lines=4, tree_rows=5)


def test_the_rows_and_the_detail_share_a_1280x800_window(qtbot: QtBot) -> None:
    """In a large window the detail is no longer left three lines under a tall list: the two
    share the height, each with room to read."""
    timelines = {"s1": parked_session(rows_before=6, session_id="s1")}
    window, _bridge = _window(qtbot, timelines, 1280, 800)
    panel = window.timeline
    _select_first_row(panel)
    _readable(window, panel, detail_lines=5, tree_rows=6)
    box = panel.detail.parentWidget()
    assert box is not None
    tree, detail_box = panel.tree.height(), box.height()
    assert abs(tree - detail_box) <= 0.25 * max(tree, detail_box)


def test_the_open_timelines_verdict_follows_the_session(qtbot: QtBot) -> None:
    """The verdict is what the planner says now: after a recorded settle it is read again (and
    says Safe resume can continue); while a resumed turn runs it says a turn runs; once the
    turn ends, that nothing is left to resume. In between it claims neither, and the row the
    user had selected stays selected."""
    parked = parked_session(rows_before=6, session_id="s1")
    timelines = {"s1": parked}
    window, bridge = _window(qtbot, timelines, 1180, 760)
    panel = window.timeline
    assert "Safe resume parks" in panel.verdict.text()
    assert panel.pinned.count() > 0
    _select_first_row(panel)
    node = panel.model.node(panel.tree.currentIndex())
    assert isinstance(node, RowNode)
    selected = (node.run.head.run_id, node.item.seq)
    window.composer.editor.setFocus()

    # The user says the call ran: the planner now continues.
    marks = parked.header.marks if parked.header is not None else None
    timelines["s1"] = replace(parked, header=ParkHeader("continue", (), (), marks))
    bridge.tool_settled.emit(
        bc.ToolSettledPush(
            session_id="s1", tool_call_id="call-bash", recorded=True, resume_available=True
        )
    )
    assert "parks" not in panel.verdict.text()  # at once: no longer the old verdict
    assert not panel.pinned.isVisible()  # nor its reasons
    qtbot.waitUntil(lambda: "Safe resume can continue" in panel.verdict.text(), timeout=3000)
    assert panel.pinned.count() == 0
    node = panel.model.node(panel.tree.currentIndex())
    assert isinstance(node, RowNode) and (node.run.head.run_id, node.item.seq) == selected
    assert window.composer.editor.hasFocus() or QApplication.focusWidget() is None

    # Safe resume starts a continuation: nothing to resume while it runs.
    bridge.resume_started.emit(bc.ResumeStartedPush(session_id="s1", run_id="run-2", turn_id="t2"))
    assert "can continue" not in panel.verdict.text()
    assert "A turn is running now" in panel.verdict.text()
    qtbot.wait(400)  # the record read again meanwhile does not change that
    assert "A turn is running now" in panel.verdict.text()

    # The turn ends: the record now has nothing interrupted.
    timelines["s1"] = long_session(8, session_id="s1")
    bridge.run_status.emit(
        bc.RunStatusPush(session_id="s1", run_id="run-2", status=bc.RunStatusValue.COMPLETED)
    )
    assert "running" not in panel.verdict.text()
    qtbot.waitUntil(lambda: "Nothing interrupted to resume" in panel.verdict.text(), timeout=3000)


def test_a_push_about_another_session_leaves_the_verdict(qtbot: QtBot) -> None:
    parked = parked_session(rows_before=6, session_id="s1")
    window, bridge = _window(qtbot, {"s1": parked}, 1180, 760)
    panel = window.timeline
    before = panel.verdict.text()
    opened = len(bridge.calls_to("open_timeline"))
    bridge.run_status.emit(
        bc.RunStatusPush(session_id="s2", run_id="run-9", status=bc.RunStatusValue.RUNNING)
    )
    qtbot.wait(400)
    assert panel.verdict.text() == before
    assert len(bridge.calls_to("open_timeline")) == opened


def test_a_verdict_the_window_offers_no_way_to_follow_says_where_it_can(qtbot: QtBot) -> None:
    """A turn the user stopped (or one that failed) is no crash: the window's banner does not
    offer Safe resume for it, and Session › Safe resume is greyed. The Timeline said "Safe
    resume can continue at event N" with no word of where; it names the terminal's command
    and what carries the session on here. For a crash's turn (the banner offers it) it does
    not."""
    parked = parked_session(rows_before=6, session_id="s1")
    marks = parked.header.marks if parked.header is not None else None
    continuing = replace(parked, header=ParkHeader("continue", (), (), marks))
    window, bridge = _window(qtbot, {"s1": continuing}, 1180, 760)
    panel = window.timeline
    qtbot.waitUntil(lambda: "Safe resume can continue" in panel.verdict.text(), timeout=3000)
    assert "from a terminal" not in panel.verdict.text()  # interrupted: the banner offers it
    stopped = bc.SessionSummary(
        session_id="s1",
        cwd="/w/project",
        title="count the lines once and write the total to count.txt",
        last_run_status=bc.RunStatusValue.CANCELLED,
    )
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=(stopped,)))
    qtbot.waitUntil(lambda: "from a terminal" in panel.verdict.text(), timeout=3000)
    said = panel.verdict.text()
    assert "(maka resume s1)" in said and "a new message carries the session on" in said, said
