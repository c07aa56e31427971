"""The Timeline view: the renderer's item model fed by the main process's own paging.

Rows come in pages as the view asks (``fetchMore``); a tool call's facts are one row with
children; filters hide rows, never run headings; every park family's reason is pinned to its row
or listed outside the record, and activating a pinned reason brings its row into view, loading
the pages before it when needed.
"""

from __future__ import annotations

import json

from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from renderer.timeline_model import PAGE_ROWS, PROBLEM_ROLE, EntryNode, RowNode, RunNode
from renderer.timeline_panel import PIN_ROLE, TimelinePanel
from runtime.ledger.timeline_model import RowFilter, matching_rows
from tests.helpers.timeline_demo import ServingBridge, long_session, parked_session

ROOT = QModelIndex()


def _panel(qtbot: QtBot, bridge: ServingBridge) -> TimelinePanel:
    panel = TimelinePanel(bridge)
    qtbot.addWidget(panel)
    panel.resize(1000, 700)
    return panel


def test_rows_arrive_a_page_at_a_time_as_the_view_asks(qtbot: QtBot) -> None:
    timeline = long_session(1300)
    total = len(timeline.runs[0].rows)
    bridge = ServingBridge({"sess-1": timeline})
    panel = _panel(qtbot, bridge)
    model = panel.model
    panel.open("sess-1")
    assert model.rowCount(ROOT) == 0
    bridge.serve()
    # the heading of the one run and a place for each of its rows; the first page alone here
    assert model.rowCount(ROOT) == 1 + total
    assert bridge.calls_to("timeline_rows") == [("sess-1", "run-1", 0, PAGE_ROWS)]
    assert model.loaded_rows == PAGE_ROWS
    assert model.node(model.index(PAGE_ROWS + 1, 0)) is None  # not here yet
    # a row shown before its page is here asks for that page (once), after the paint
    far = 3 * PAGE_ROWS + 5
    assert model.index(far, 2).data() == "…"
    assert model.index(far + 1, 2).data() == "…"
    qtbot.waitUntil(lambda: len(bridge.calls_to("timeline_rows")) == 2, timeout=60_000)
    assert bridge.calls_to("timeline_rows")[-1] == ("sess-1", "run-1", 3 * PAGE_ROWS, PAGE_ROWS)
    bridge.serve()
    assert model.loaded_rows == 2 * PAGE_ROWS
    node = model.node(model.index(far, 0))
    assert isinstance(node, RowNode) and node.item.seq == timeline.runs[0].rows[far - 1].seq
    model.load_all()
    bridge.serve()
    assert model.fully_loaded() and model.loaded_rows == total
    seqs = [model.node(model.index(n, 0)) for n in range(1, model.rowCount(ROOT))]
    assert [n.item.seq for n in seqs if isinstance(n, RowNode)] == [
        row.seq for row in timeline.runs[0].rows
    ]
    assert panel.tree.uniformRowHeights()


def test_a_page_arriving_inserts_no_top_level_row(qtbot: QtBot) -> None:
    """The view lays its rows out again on any top-level insert or reset: a page arriving
    changes the rows it holds in place, and only inserts a tool row's facts under it."""
    bridge = ServingBridge({"sess-1": long_session(900)})
    panel = _panel(qtbot, bridge)
    panel.show()
    model = panel.model
    panel.open("sess-1")
    bridge.serve()
    inserted: list[tuple[bool, int, int]] = []
    model.rowsInserted.connect(lambda parent, a, b: inserted.append((parent.isValid(), a, b)))
    resets: list[str] = []
    model.modelReset.connect(lambda: resets.append("reset"))
    model.layoutChanged.connect(lambda: resets.append("layout"))
    changed: list[tuple[int, int]] = []
    model.dataChanged.connect(lambda a, b: changed.append((a.row(), b.row())))
    panel.tree.scrollToBottom()
    qtbot.waitUntil(lambda: bridge.serve() > 0, timeout=60_000)
    assert changed and not resets
    assert inserted and all(under_a_row for under_a_row, _a, _b in inserted)
    assert model.loaded_rows < model.rowCount(ROOT) - 1  # the rows between never asked for
    last = model.node(model.index(model.rowCount(ROOT) - 1, 0))
    assert isinstance(last, RowNode) and last.item.kind == "run_end"


def test_a_tool_call_is_one_row_whose_children_are_its_facts(qtbot: QtBot) -> None:
    bridge = ServingBridge({"sess-1": long_session(8)}, immediate=True)
    panel = _panel(qtbot, bridge)
    panel.open("sess-1")
    model = panel.model
    tool = next(
        model.index(n, 0) for n in range(model.rowCount(ROOT)) if model.index(n, 1).data() == "tool"
    )
    assert model.rowCount(tool) == 3
    facts = [model.index(n, 1, tool).data() for n in range(3)]
    assert facts == ["tool call", "tool dispatch", "tool response"]
    child = model.node(model.index(0, 0, tool))
    assert isinstance(child, EntryNode)
    assert model.parent(model.index(0, 0, tool)) == tool
    assert "read_file: done" in str(model.index(tool.row(), 2).data())
    heading = model.node(model.index(0, 0))
    assert isinstance(heading, RunNode)
    assert model.index(0, 1).data() == "run"
    assert str(model.index(0, 2).data()).startswith("run-1 · completed · ")


def test_filters_hide_rows_but_never_a_run_heading(qtbot: QtBot) -> None:
    bridge = ServingBridge({"sess-1": parked_session(rows_before=12)}, immediate=True)
    panel = _panel(qtbot, bridge)
    panel.open("sess-1")
    model = panel.model

    def shown() -> list[str]:
        return [str(model.index(n, 1).data()) for n in range(model.rowCount(ROOT))]

    panel.problems_box.setChecked(True)
    # the pinned snapshot, the unknown call, the damaged record, the failed ending
    assert shown() == ["run", "checkpoint", "tool", "event", "run end"]
    assert all(model.index(n, 0).data(PROBLEM_ROLE) for n in range(1, model.rowCount(ROOT)))
    panel.problems_box.setChecked(False)
    panel.kind_box.setCurrentIndex(panel.kind_box.findData("tool"))
    assert shown() == ["run", *["tool"] * 4]  # three read_file, one bash
    panel.kind_box.setCurrentIndex(0)
    panel.tool_edit.setText("BASH")
    assert shown() == ["run", "tool"]
    panel.tool_edit.clear()
    panel.status_box.setCurrentIndex(panel.status_box.findData("damaged"))
    assert shown() == ["run", "event"]
    panel.status_box.setCurrentIndex(0)
    panel.text_edit.setText("question 4")
    assert shown() == ["run", "message"]
    panel.text_edit.setText("evt-bash")  # an event id finds its row
    assert shown() == ["run", "tool"]
    panel.text_edit.clear()
    assert model.rowCount(ROOT) == 1 + len(parked_session(rows_before=12).runs[0].rows)


def test_the_main_process_filters_so_the_view_holds_only_the_rows_shown(qtbot: QtBot) -> None:
    """Only problems over 1,200 rows: the pages asked carry the filter and hold the four
    problem rows alone, however far into the run they are; no unfiltered page is asked."""
    timeline = parked_session(rows_before=1200)
    bridge = ServingBridge({"sess-1": timeline})
    panel = _panel(qtbot, bridge)
    panel.show()
    panel.open("sess-1")
    bridge.serve()
    model = panel.model
    assert not model.fully_loaded()
    before = len(bridge.calls_to("timeline_rows"))
    panel.problems_box.setChecked(True)
    bridge.serve()
    assert model.fully_loaded()
    asked = bridge.calls_to("timeline_rows")[before:]
    assert asked == [("sess-1", "run-1", 0, PAGE_ROWS, panel.filters())]
    assert panel.filters().only_problems
    assert model.rowCount(ROOT) == 5
    kinds = [model.index(n, 1).data() for n in range(1, 5)]
    assert kinds == ["checkpoint", "tool", "event", "run end"]
    rows = timeline.runs[0].rows
    problems = [str(row.seq) for row in rows[-4:]]
    assert [model.index(n, 0).data() for n in range(1, 5)] == problems
    assert not any(row.problem for row in rows[:-4])


def test_a_filter_showing_many_rows_still_pages_them(qtbot: QtBot) -> None:
    timeline = long_session(2000)
    bridge = ServingBridge({"sess-1": timeline})
    panel = _panel(qtbot, bridge)
    panel.open("sess-1")
    bridge.serve()
    panel.text_edit.setText("question")
    bridge.serve()
    model = panel.model
    questions = [row for row in timeline.runs[0].rows if "question" in row.summary]
    assert len(questions) > PAGE_ROWS
    assert model.rowCount(ROOT) == 1 + len(questions)  # counted by the main process
    assert model.loaded_rows == PAGE_ROWS  # one page of matches here, no more
    model.load_all()
    bridge.serve()
    shown = [model.node(model.index(n, 0)) for n in range(1, model.rowCount(ROOT))]
    assert [node.item.seq for node in shown if isinstance(node, RowNode)] == [
        row.seq for row in questions
    ]
    # a page of the previous filter arriving late is not mixed in
    panel.text_edit.setText("answer")
    stale = bridge.pages.page("sess-1", "run-1", 0, 10, None)
    model.on_page(stale)
    assert model.rowCount(ROOT) == 1
    bridge.serve()
    answers = [row for row in timeline.runs[0].rows if "answer" in row.summary]
    assert model.rowCount(ROOT) == 1 + len(answers)
    here = [model.index(n, 2).data() for n in range(1, 1 + PAGE_ROWS)]
    assert all("answer" in str(text) for text in here)


def test_every_park_family_is_pinned_to_its_row_or_listed_outside(qtbot: QtBot) -> None:
    bridge = ServingBridge({"sess-1": parked_session()}, immediate=True)
    panel = _panel(qtbot, bridge)
    panel.open("sess-1")
    pinned = [panel.pinned.item(n) for n in range(panel.pinned.count())]
    assert [item.data(PIN_ROLE) for item in pinned] == [("run-1", 3), ("run-1", 5), ("run-1", 2)]
    words = [item.text() for item in pinned]
    assert words[0].startswith("⚑ pending_tool_result: ")  # unknown outcome
    assert words[0].endswith("(row #3 of run-1)")
    assert "tool_ledger_corruption" in words[1]  # damaged record
    assert "workspace_checkpoint_stale" in words[2]  # stale snapshot
    outside = [panel.outside.item(n).text() for n in range(panel.outside.count())]
    assert [text.split(":")[0] for text in outside] == [
        "workspace_drift",
        "workspace_folder_missing",
        "background_operation_pending",
    ]
    assert not panel.outside_label.isHidden()
    # Told again (the window says whether the session was branched, after it opened): the
    # reasons are listed once, not once more.
    panel.set_origin("sess-1", None)
    assert (panel.pinned.count(), panel.outside.count()) == (3, 3)
    model = panel.model
    for (run_id, seq), code in (
        (("run-1", 3), "pending_tool_result"),
        (("run-1", 5), "tool_ledger_corruption"),
        (("run-1", 2), "workspace_checkpoint_stale"),
    ):
        node = model.node(model.index_of_row(run_id, seq))
        assert isinstance(node, RowNode)
        assert [pin.code for pin in node.pins] == [code]
        assert node.problem
    assert panel.verdict.text() == "1 run, 6 events. Safe resume parks at event 6 of run-1."


def _activate_first_reason(qtbot: QtBot, panel: TimelinePanel, bridge: ServingBridge) -> str:
    first = panel.pinned.item(0)
    panel.pinned.setCurrentItem(first)
    with qtbot.waitSignal(panel.row_shown, timeout=60_000) as shown:
        panel.pinned.itemActivated.emit(first)
        qtbot.waitUntil(lambda: bridge.serve() == 0 and panel._target is None, timeout=60_000)
    assert shown.args == ["run-1", first.data(PIN_ROLE)[1]]
    node = panel.model.node(panel.tree.currentIndex())
    assert isinstance(node, RowNode) and node.item.tool_name == "bash"
    return str(first.data(PIN_ROLE)[0])


def test_activating_a_reason_asks_the_main_process_where_its_row_is(qtbot: QtBot) -> None:
    timeline = parked_session(rows_before=1400)
    bridge = ServingBridge({"sess-1": timeline})
    panel = _panel(qtbot, bridge)
    panel.show()
    panel.open("sess-1")
    bridge.serve()
    assert not panel.model.fully_loaded()
    _activate_first_reason(qtbot, panel, bridge)
    seq = panel.pinned.item(0).data(PIN_ROLE)[1]
    assert bridge.calls_to("timeline_locate") == [("sess-1", "run-1", seq, None)]
    # the first page and the one holding the row, none between
    place = next(n for n, row in enumerate(timeline.runs[0].rows) if row.seq == seq)
    rows = len(timeline.runs[0].rows)
    assert place >= 2 * PAGE_ROWS  # beyond the first two pages
    last = place // PAGE_ROWS
    model = panel.model
    # the pages between were never asked for (the view may ask for the page just before the
    # row's, when it shows rows of it around the row)
    assert all(
        model.node(model.index(1 + n, 0)) is None for n in range(PAGE_ROWS, (last - 1) * PAGE_ROWS)
    )
    assert model.loaded_rows <= 2 * PAGE_ROWS + min(PAGE_ROWS, rows - last * PAGE_ROWS)
    assert panel.tree.currentIndex().row() == 1 + place


def test_a_reason_under_a_filter_is_found_among_the_filtered_rows(qtbot: QtBot) -> None:
    """700 questions come before the unknown call; under a filter matching both, the call's
    place among the matches is asked, and the matches alone are loaded up to it."""
    timeline = parked_session(rows_before=1400)
    bridge = ServingBridge({"sess-1": timeline})
    panel = _panel(qtbot, bridge)
    panel.show()
    panel.open("sess-1")
    bridge.serve()
    panel.text_edit.setText("u")  # "question 12", "bash: outcome unknown", a tool's "result"
    bridge.serve()
    model = panel.model
    assert model.loaded_rows == PAGE_ROWS
    _activate_first_reason(qtbot, panel, bridge)
    located = bridge.calls_to("timeline_locate")
    assert [call[3] for call in located] == [panel.filters()]
    assert panel.text_edit.text() == "u"  # the filter stays
    run = timeline.runs[0]
    matches = matching_rows(run, RowFilter(text="u"))
    place = [run.rows[n].seq for n in matches].index(located[0][2])
    assert place >= 3 * PAGE_ROWS  # well beyond the first page of matches
    assert model.rowCount(ROOT) == 1 + len(matches)
    # the first page and the one holding the row (and the one before it, when the view shows
    # rows of it around the row), none between
    page = place // PAGE_ROWS
    assert model.loaded_rows <= 2 * PAGE_ROWS + min(PAGE_ROWS, len(matches) - page * PAGE_ROWS)
    for n, match in enumerate(matches):
        node = model.node(model.index(1 + n, 0))
        if n < PAGE_ROWS or n // PAGE_ROWS == page:
            assert isinstance(node, RowNode) and node.item.seq == run.rows[match].seq
        elif n // PAGE_ROWS < page - 1:
            assert node is None


def test_a_reason_a_filter_hides_clears_the_filter_and_shows_its_row(qtbot: QtBot) -> None:
    bridge = ServingBridge({"sess-1": parked_session(rows_before=1400)})
    panel = _panel(qtbot, bridge)
    panel.show()
    panel.open("sess-1")
    bridge.serve()
    panel.kind_box.setCurrentIndex(panel.kind_box.findData("message"))
    bridge.serve()
    hidden = panel.filters()
    _activate_first_reason(qtbot, panel, bridge)
    located = bridge.calls_to("timeline_locate")
    assert [call[3] for call in located] == [hidden, None]
    assert panel.filters() == type(hidden)()  # every filter cleared
    assert panel.kind_box.currentIndex() == 0


def test_the_detail_shows_the_saved_events_canonical_json_and_digest(qtbot: QtBot) -> None:
    bridge = ServingBridge({"sess-1": parked_session()}, immediate=True)
    panel = _panel(qtbot, bridge)
    panel.open("sess-1")
    panel.tree.setCurrentIndex(panel.model.index_of_row("run-1", 3))
    assert bridge.calls_to("timeline_event")[-1] == ("sess-1", "run-1", "evt-bash")
    text = panel.detail.toPlainText()
    assert "tool operation: bash call-bash (unknown, 2 facts)" in text
    assert "[warn] pending_tool_result: " in text  # tagged by severity, as the CLI tags it
    assert "digest: sha256:" in text
    body = text.splitlines()[-1]
    assert json.loads(body)["id"] == "evt-bash"
    panel.copy_json()
    assert QApplication.clipboard().text() == body
    assert panel.detail.isReadOnly()


def test_the_keyboard_moves_through_rows_and_opens_a_tool_row(qtbot: QtBot) -> None:
    bridge = ServingBridge({"sess-1": long_session(8)}, immediate=True)
    panel = _panel(qtbot, bridge)
    panel.show()
    panel.open("sess-1")
    panel.tree.setFocus()
    panel.tree.setCurrentIndex(panel.tree.model().index(0, 0))
    for _ in range(5):  # the heading, three messages, then the read_file call
        QTest.keyClick(panel.tree, Qt.Key.Key_Down)
    current = panel.tree.currentIndex()
    assert current.row() == 5 and current.siblingAtColumn(1).data() == "tool"
    QTest.keyClick(panel.tree, Qt.Key.Key_Right)
    assert panel.tree.isExpanded(current)
    QTest.keyClick(panel.tree, Qt.Key.Key_Down)
    assert panel.tree.currentIndex().parent() == current


def test_a_run_that_has_fewer_rows_than_announced_stops_asking(qtbot: QtBot) -> None:
    """The record is read afresh when a page is asked of a session no longer kept: a page
    that says the run ends earlier drops the rows past its end, instead of asking again."""
    timeline = long_session(700)
    bridge = ServingBridge({"sess-1": timeline})
    panel = _panel(qtbot, bridge)
    panel.open("sess-1")
    bridge.serve()
    model = panel.model
    shorter = long_session(400)
    bridge.pages = type(bridge.pages)(lambda _session: shorter)  # what a fresh read gives
    far = len(timeline.runs[0].rows) - 1
    past_end = far // PAGE_ROWS * PAGE_ROWS
    assert past_end >= len(shorter.runs[0].rows)
    model.want("run-1", far)
    bridge.serve()
    assert model.rowCount(ROOT) == 1 + len(shorter.runs[0].rows)
    assert not model.wanting()
    model.load_all()
    bridge.serve()
    assert model.fully_loaded()
    asked = [call[2] for call in bridge.calls_to("timeline_rows")]
    assert asked.count(past_end) == 1  # past the new end: asked once, never again
    pages = -(-len(shorter.runs[0].rows) // PAGE_ROWS)
    assert sorted(asked) == sorted([past_end, *(n * PAGE_ROWS for n in range(pages))])


def test_opening_while_disconnected_says_so(qtbot: QtBot) -> None:
    from tests.helpers.fake_bridge import FakeBridge

    class Offline(FakeBridge):
        def open_timeline(self, session_id: str) -> bool:
            return False

    panel = TimelinePanel(Offline())
    qtbot.addWidget(panel)
    panel.open("sess-1")
    assert panel.verdict.text().startswith("Not connected to the main process")


def test_view_timeline_replaces_the_transcript_and_follows_the_open_session(
    qtbot: QtBot,
) -> None:
    from app import bridge_contract as bc
    from renderer.main_window import MainWindow

    timelines = {"s1": parked_session(session_id="s1"), "s2": long_session(5, session_id="s2")}
    bridge = ServingBridge(timelines, immediate=True)
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.show()
    summaries = tuple(
        bc.SessionSummary(session_id=session, cwd=f"/w/{session}", title=session)
        for session in ("s1", "s2")
    )
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=summaries))
    window.sessions.select("s1")
    assert window.transcript.isVisible() and not window.timeline.isVisible()
    assert window.timeline_action.shortcut().toString() == "Ctrl+T"
    window.timeline_action.trigger()  # View › Timeline
    assert window.timeline.isVisible() and not window.transcript.isVisible()
    assert bridge.calls_to("open_timeline") == [("s1",)]
    assert window.timeline.pinned.count() == 3
    window.sessions.select("s2")
    assert bridge.calls_to("open_timeline")[-1] == ("s2",)
    assert window.timeline.model.session_id == "s2"
    assert window.timeline.pinned.isHidden()  # nothing interrupted there
    window.timeline_action.trigger()
    assert window.transcript.isVisible() and not window.timeline.isVisible()


def _model_calls_opening(qtbot: QtBot, rows: int) -> tuple[int, TimelinePanel]:
    """Python calls into the Timeline view's model while a session of ``rows`` rows opens and
    its first rows are painted (the view lays every counted row out)."""
    import sys

    timeline = long_session(rows)
    bridge = ServingBridge({"sess-1": timeline})
    panel = _panel(qtbot, bridge)
    panel.show()
    calls = [0]

    def count(frame: object, event: str, arg: object) -> None:
        code = getattr(frame, "f_code", None)
        if event == "call" and code is not None and code.co_filename.endswith("timeline_model.py"):
            calls[0] += 1

    sys.setprofile(count)
    try:
        panel.open("sess-1")
        bridge.serve()
        panel.tree.viewport().repaint()
        QApplication.processEvents()
    finally:
        sys.setprofile(None)
    assert panel.model.rowCount(ROOT) == 1 + len(timeline.runs[0].rows)
    return calls[0], panel


def test_laying_out_every_counted_row_asks_no_python_per_row(qtbot: QtBot) -> None:
    """Qt's own model holds the rows' shape: the view lays out 2,000 or 8,000 counted rows
    with the same few calls into this model (those of the page and the rows painted), where
    a model answering ``index`` and ``hasChildren`` in Python is asked twice per row."""
    small, _ = _model_calls_opening(qtbot, 2_000)
    large, panel = _model_calls_opening(qtbot, 8_000)
    assert small > 0 and large - small < 200, (small, large)
    # read-only all the same (Qt's model would keep an edit of a cell it holds no item for)
    model = panel.model
    far = model.index(5_000, 2)
    before = far.data()
    assert model.setData(far, "edited") is False
    assert far.data() == before
    assert panel.tree.editTriggers() == panel.tree.EditTrigger.NoEditTriggers


def test_a_short_window_keeps_every_reason_row_and_several_events_in_view(qtbot: QtBot) -> None:
    """Under a tall banner the panel gets little height: a lane of reasons never shows a
    horizontal scroll bar over its rows (a long reason ends in "…" and shows whole on hover),
    and the event rows keep room for the header and five rows, the detail four lines, inside
    the panel. With room, every reason row shows; short of it, the lanes give way to one row
    each (they scroll) before the rows or the detail do."""
    bridge = ServingBridge({"sess-1": parked_session()}, immediate=True)
    panel = _panel(qtbot, bridge)
    panel.resize(700, 480)
    panel.show()
    panel.open("sess-1")
    qtbot.waitExposed(panel)
    for lane in (panel.pinned, panel.outside):
        assert lane.horizontalScrollBarPolicy() == Qt.ScrollBarPolicy.ScrollBarAlwaysOff
        for n in range(lane.count()):
            assert lane.item(n).toolTip().startswith(lane.item(n).text())
        rows = sum(lane.sizeHintForRow(n) for n in range(lane.count()))
        assert lane.viewport().height() >= rows  # every reason row shows
    panel.resize(700, 300)
    QApplication.processEvents()
    for lane in (panel.pinned, panel.outside):
        assert lane.isVisible() and lane.viewport().height() >= lane.sizeHintForRow(0)
    row = panel.tree.sizeHintForRow(0)
    header = panel.tree.header().height()
    assert panel.tree.viewport().height() >= 5 * row - 2, (panel.tree.height(), header, row)
    assert panel.detail.height() >= panel.detail.fontMetrics().lineSpacing() * 4
    tree_bottom = panel.tree.mapTo(panel, panel.tree.rect().bottomLeft()).y()
    assert panel.detail.mapTo(panel, panel.detail.rect().topLeft()).y() > tree_bottom  # no overlap
    # laid out inside the splitter (not cut off under it) and inside the panel
    splitter = panel.splitter
    assert panel.detail.mapTo(splitter, panel.detail.rect().bottomLeft()).y() < splitter.height()
    assert panel.detail.mapTo(panel, panel.detail.rect().bottomLeft()).y() < panel.height()


def test_the_timeline_is_usable_at_the_minimum_window_size_under_a_banner(qtbot: QtBot) -> None:
    """At 720x480 with a parked session's banner, View › Timeline showed the header and one
    row, its "What" column a few letters wide and the detail's buttons off screen: now the
    rows keep at least five rows and "What" a readable width, the filters are not squeezed
    to a letter, the banner keeps its reasons, and the detail and its buttons show, above
    the composer, inside the window."""
    from app import bridge_contract as bc
    from app.bridge_contract import ResumeDiagnostic
    from renderer.main_window import MainWindow

    bridge = ServingBridge({"s1": parked_session(rows_before=6, session_id="s1")}, immediate=True)
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.resize(720, 480)
    window.show()
    summary = bc.SessionSummary(
        session_id="s1",
        cwd="/w/s1",
        title="Run the build",
        last_run_status=bc.RunStatusValue.FAILED,
        interrupted=True,
    )
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=(summary,)))
    unknown = ResumeDiagnostic(code="pending_tool_result", tool_call_id="c1", tool_name="bash")
    bridge.push_parked("s1", ("dangling_tool_state", "workspace_drift"), (unknown,))
    window.sessions.select("s1")
    window.timeline_action.trigger()
    qtbot.waitExposed(window)
    panel = window.timeline
    tree = panel.tree

    def inside(widget: QWidget, above: QWidget | None = None) -> bool:
        top = widget.mapTo(window, widget.rect().topLeft())
        bottom = widget.mapTo(window, widget.rect().bottomRight())
        limit = above.mapTo(window, above.rect().topLeft()).y() if above else window.height()
        return widget.isVisible() and top.y() >= 0 and bottom.y() < limit
        # (and within the window's width)

    def usable() -> bool:
        QApplication.processEvents()
        row = tree.sizeHintForRow(0)
        return (
            row > 0
            and tree.viewport().height() >= 5 * row
            and all(inside(w, window.composer) for w in (panel.copy_button, panel.branch_button))
            and inside(panel.detail, window.composer)
        )

    qtbot.waitUntil(usable, timeout=3000)
    average = tree.fontMetrics().averageCharWidth()
    assert tree.columnWidth(2) >= 18 * average, tree.columnWidth(2)
    for column in (0, 1, 3):  # their content (or their heading) shows whole
        assert tree.columnWidth(column) >= tree.header().sectionSizeHint(column) - 12
    assert panel.detail.height() >= 2 * panel.detail.fontMetrics().lineSpacing()
    for edit in (panel.tool_edit, panel.text_edit):
        assert edit.width() >= edit.fontMetrics().horizontalAdvance(edit.placeholderText()) + 20
        assert edit.toolTip()
    banner = window.banner
    assert banner.isVisible() and banner.reason_lines
    assert all(line.isVisible() for line in banner.reason_lines)  # the reasons stay
    for widget in (*banner.reason_lines, banner.action_button, panel.copy_button):
        right = widget.mapTo(window, widget.rect().topRight()).x()
        assert right < window.width()
    # More opens the banner whole; a taller window gives back the full banner and composer.
    banner.body_more.click()
    assert all(label.isVisible() for label in banner.reason_labels)
    window.resize(1180, 760)
    qtbot.waitUntil(lambda: not banner.compact, timeout=3000)
    assert tree.columnWidth(3) > tree.fontMetrics().horizontalAdvance("2025-12-02 04:33:15")


def test_a_row_made_current_before_its_page_arrived_is_shown_when_it_does(
    qtbot: QtBot,
) -> None:
    """Ctrl+End onto rows not loaded yet: the last row was current, but the detail said
    nothing was selected (and "Continue from here…" stayed off) after its page came."""
    timeline = long_session(1300)
    bridge = ServingBridge({"sess-1": timeline})
    panel = _panel(qtbot, bridge)
    panel.show()
    panel.open("sess-1")
    bridge.serve()
    model = panel.model
    last = model.rowCount(ROOT) - 1
    assert model.node(model.index(last, 0)) is None  # not here yet
    panel.tree.setFocus()
    panel.tree.setCurrentIndex(model.index(1, 0))
    QTest.keyClick(panel.tree, Qt.Key.Key_End, Qt.KeyboardModifier.ControlModifier)
    assert panel.tree.currentIndex().row() == last
    seq = timeline.runs[0].rows[-1].seq

    def shown() -> bool:
        bridge.serve()  # the pages and the event, as the main process answers them
        return f"#{seq} of run" in panel.detail.toPlainText()

    qtbot.waitUntil(shown, timeout=10_000)
    assert bridge.calls_to("timeline_event"), "the current row's saved event was asked for"
