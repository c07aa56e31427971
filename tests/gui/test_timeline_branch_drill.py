"""The Timeline and "Continue from here…" as a tester found them driving the real app (drill C):
a point the branch service calls unsettled is not offered, and the way on is an earlier point
or the call settled; a tool's result is named by its call; the pane says which event a tool
row's branch continues after; a text search reads a message's whole text and says when
nothing matches; filters start empty in another session; Copy JSON says it copied; a branched
session's timeline names its source; the current-files dialog's footnote matches its choice;
a card with no result offers no "Continue from here…"."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QModelIndex
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.branch_dialog import BranchDialog
from renderer.main_window import MainWindow
from renderer.timeline_model import RowNode
from renderer.timeline_panel import TimelinePanel
from runtime.ledger.timeline_model import RunSource, build_timeline
from runtime.ledger.timeline_pins import SessionTimeline
from tests.helpers.fake_bridge import FakeBridge
from tests.helpers.ledger_builders import DEFAULT_IDS, terminal, user_text
from tests.helpers.timeline_demo import DAY, ServingBridge, chat_events, long_session

pytestmark = pytest.mark.gui

ROOT = QModelIndex()
SESSION = DEFAULT_IDS.session_id


def _option(event_id: str, kind: str, label: str, **more: object) -> bc.BranchOptionItem:
    fields: dict[str, object] = {
        "event_id": event_id,
        "run_id": "run-1",
        "seq": 1,
        "kind": kind,
        "ts": 0,
        "label": label,
        "snapshot_bound": True,
        "snapshot_kept": True,
    }
    fields.update(more)
    return bc.BranchOptionItem.model_validate(fields)


def _listed(*options: bc.BranchOptionItem, session_id: str = SESSION) -> bc.BranchOptionsListedPush:
    return bc.BranchOptionsListedPush(
        session_id=session_id,
        title="Drill",
        cwd="/w/one",
        default_folder="/w/one-branch-1",
        options=options,
    )


def _panel(
    qtbot: QtBot, timelines: dict[str, SessionTimeline] | None = None
) -> tuple[TimelinePanel, ServingBridge]:
    bridge = ServingBridge(timelines or {SESSION: long_session(8)})
    panel = TimelinePanel(bridge)
    qtbot.addWidget(panel)
    panel.resize(1000, 700)
    panel.open(SESSION)
    bridge.serve()
    return panel, bridge


def _row(panel: TimelinePanel, event_id: str) -> QModelIndex:
    for number in range(panel.model.rowCount(ROOT)):
        index = panel.model.index(number, 0)
        node = panel.model.node(index)
        if isinstance(node, RowNode) and any(e.event_id == event_id for e in node.item.entries):
            return index
    raise AssertionError(f"no row {event_id}")


def _tool_row(panel: TimelinePanel) -> tuple[QModelIndex, RowNode]:
    for number in range(panel.model.rowCount(ROOT)):
        index = panel.model.index(number, 0)
        node = panel.model.node(index)
        if isinstance(node, RowNode) and node.item.kind == "tool":
            return index, node
    raise AssertionError("no tool row")


def test_a_point_the_branch_service_calls_unsettled_is_not_offered(qtbot: QtBot) -> None:
    panel, bridge = _panel(qtbot)
    bridge.branch_options_listed.emit(
        _listed(_option("evt-u2", "run_ending", "run ended failed", branchable=False))
    )
    index = _row(panel, "evt-u2")
    panel.tree.setCurrentIndex(index)
    assert not panel.branch_button.isEnabled()
    assert "earlier point" in panel.branch_button.toolTip()
    text = panel.detail.toPlainText()
    assert text.startswith("Not a branch point: a tool call before it has no settled outcome")
    assert "earlier point" in text and "Branch point: a new session can" not in text
    (action,) = panel.context_menu_for(index).actions()
    assert not action.isEnabled()
    assert not panel.continue_from(index)


def test_a_point_before_the_calls_answer_names_the_later_result(qtbot: QtBot) -> None:
    """The call was settled after this point (its answer is a later result): settling it is
    no advice any more; the way on is that result, or an earlier point."""
    panel, bridge = _panel(qtbot)
    point = _option(
        "evt-u2", "run_ending", "run ended failed", branchable=False, settled_at="evt-answer"
    )
    bridge.branch_options_listed.emit(_listed(point))
    panel.tree.setCurrentIndex(_row(panel, "evt-u2"))
    assert not panel.branch_button.isEnabled()
    tip = panel.branch_button.toolTip()
    assert "continue from its result, recorded later" in tip and "settle the call" not in tip, tip
    text = panel.detail.toPlainText()
    assert text.startswith("Not a branch point: a tool call before it had no settled outcome yet")
    assert "its outcome was recorded later" in text and "settle the call" not in text, text
    dialog = BranchDialog(_listed(point), point)
    qtbot.addWidget(dialog)
    words = dialog.snapshot_label.text()
    assert "Choose that later point (the call's result)" in words and "settle the call" not in words
    assert not dialog.make_button.isEnabled()


def test_the_dialog_of_an_unsettled_point_advises_an_earlier_point_or_settling(
    qtbot: QtBot,
) -> None:
    option = _option("e-end", "run_ending", "run ended failed", branchable=False)
    dialog = BranchDialog(_listed(option), option)
    qtbot.addWidget(dialog)
    words = dialog.snapshot_label.text()
    assert "later point" not in words
    assert "Choose an earlier point" in words and "settle the call" in words
    assert not dialog.make_button.isEnabled()


def test_the_dialog_names_the_call_whose_result_it_continues_after(qtbot: QtBot) -> None:
    option = _option(
        "e-r17",
        "tool_result",
        "result of write_file",
        tool_call_id="call_17",
        tool_args="notes/f17.txt",
    )
    dialog = BranchDialog(_listed(option), option)
    qtbot.addWidget(dialog)
    assert "after the result of write_file (call call_17: notes/f17.txt)" in (
        dialog.point_label.text()
    )


def test_the_current_files_footnote_says_the_current_files_are_copied(qtbot: QtBot) -> None:
    option = _option("e-ask", "user_message", "you: hi", snapshot_bound=False, snapshot_kept=False)
    dialog = BranchDialog(_listed(option), option)
    qtbot.addWidget(dialog)
    assert dialog.make_button.text() == "Continue with the current files"
    assert "current files on top" in dialog.folder_note.text()
    assert "files of that point" not in dialog.folder_note.text()
    kept = _option("e-ask", "user_message", "you: hi")
    other = BranchDialog(_listed(kept), kept)
    qtbot.addWidget(other)
    assert "files of that point on top" in other.folder_note.text()


def test_a_tool_rows_pane_says_which_event_the_branch_continues_after(qtbot: QtBot) -> None:
    panel, bridge = _panel(qtbot)
    index, node = _tool_row(panel)
    call, result = node.item.entries[0], node.item.entries[-1]
    bridge.branch_options_listed.emit(
        _listed(_option(result.event_id, "tool_result", "result of read_file"))
    )
    panel.tree.setCurrentIndex(index)
    first = panel.detail.toPlainText().splitlines()[0]
    assert f"after #{result.seq} (event {result.event_id}" in first
    assert f"not after #{call.seq} shown below" in first


def _long_message_session() -> SessionTimeline:
    writes = "; ".join(f"write f{n}.txt saying n{n}" for n in range(30))
    events = [user_text(f"Please: {writes}", event_id="evt-long", ts=DAY - 5_000)]
    events += chat_events(6)
    events.append(terminal(status="completed", ts=DAY + 60_000))
    runs = build_timeline([RunSource("run-1", list(enumerate(events, 1)), "completed")])
    return SessionTimeline(SESSION, runs, None)


def test_the_text_search_reads_a_messages_whole_text_and_says_when_nothing_matches(
    qtbot: QtBot,
) -> None:
    panel, bridge = _panel(qtbot, {SESSION: _long_message_session()})
    panel.text_edit.setText("saying n17")
    bridge.serve()
    assert panel.model.shown_rows() == 1
    _row(panel, "evt-long")
    assert panel.matches_label.isVisibleTo(panel) and panel.matches_label.text() == "1 row"
    panel.text_edit.setText("nothing like this")
    bridge.serve()
    assert panel.matches_label.text() == "no match"
    panel.text_edit.clear()
    bridge.serve()
    assert not panel.matches_label.isVisibleTo(panel)


def test_filters_start_empty_in_another_session(qtbot: QtBot) -> None:
    other = "session-other"
    panel, bridge = _panel(qtbot, {SESSION: long_session(8), other: long_session(8, other)})
    panel.text_edit.setText("question")
    panel.problems_box.setChecked(True)
    bridge.serve()
    assert panel.model.filters is not None
    panel.open(other)
    bridge.serve()
    assert panel.text_edit.text() == "" and not panel.problems_box.isChecked()
    assert panel.model.filters is None
    assert panel.model.rowCount(ROOT) == 1 + len(long_session(8, other).runs[0].rows)
    panel.open(other)  # the same session again keeps what was typed
    panel.text_edit.setText("question")
    panel.open(other)
    assert panel.text_edit.text() == "question"


def test_copy_json_says_it_copied(qtbot: QtBot) -> None:
    panel, bridge = _panel(qtbot)
    said: list[str] = []
    panel.said.connect(said.append)
    panel.copy_json()
    assert said and "Nothing to copy" in said[-1]
    panel.tree.setCurrentIndex(_row(panel, "evt-u2"))
    bridge.serve()
    panel.copy_json()
    assert said[-1].startswith("Copied the JSON of event evt-u2")
    assert QApplication.clipboard().text().startswith("{")


def test_a_branched_sessions_timeline_names_its_source_and_opens_it(qtbot: QtBot) -> None:
    empty = SessionTimeline(SESSION, (), None)
    panel, bridge = _panel(qtbot, {SESSION: empty})
    assert panel.verdict.text().startswith("0 runs")
    origin = bc.BranchOrigin(
        source_session_id="session-src",
        source_title="Write notes",
        boundary_event_id="evt-r6",
        boundary_label="result of write_file",
        boundary_kind="tool_result",
    )
    panel.set_origin(SESSION, origin)
    assert panel.verdict.text() == "No run of its own yet. Nothing interrupted to resume."
    assert panel.origin_label.isVisibleTo(panel)
    words = panel.origin_label.text()
    assert "Branched from “Write notes” (session session-src) at event evt-r6" in words
    assert "the history before this session's first run is that session's" in words
    opened: list[str] = []
    panel.source_open_requested.connect(opened.append)
    panel.origin_label.linkActivated.emit("open")
    assert opened == ["session-src"]
    panel.set_origin(SESSION, None)
    panel.open(SESSION)
    bridge.serve()
    assert not panel.origin_label.isVisibleTo(panel)


def test_a_card_with_no_result_offers_no_continue_from_here(qtbot: QtBot) -> None:
    bridge = FakeBridge()
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.show()
    sessions = (bc.SessionSummary(session_id="s1", cwd="/w/one", title="One"),)
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=sessions))
    window.sessions.select("s1")
    unknown = bc.ToolCardItem(
        item_id="e-bash",
        run_id="r1",
        tool_call_id="b1",
        tool_name="bash",
        args_summary="sleep 100",
        status=bc.ToolCardStatus.INDETERMINATE,
    )
    done = unknown.model_copy(
        update={"item_id": "e-ok", "tool_call_id": "b2", "status": bc.ToolCardStatus.SUCCEEDED}
    )
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s1", items=(unknown, done)))
    menu = window.transcript.context_menu_for("e-bash")
    (action,) = [a for a in menu.actions() if a.text() == "Continue from here…"]
    assert not action.isEnabled()
    assert "outcome is unknown" in action.toolTip() and "Settle it first" in action.toolTip()
    menu = window.transcript.context_menu_for("e-ok")
    (action,) = [a for a in menu.actions() if a.text() == "Continue from here…"]
    assert action.isEnabled()
    # A point that is still not found says so in a box, the status bar only in short.
    window.transcript.continue_from("e-ok")
    bridge.branch_options_listed.emit(_listed(session_id="s1"))
    assert window.statusBar().currentMessage() == "Maka cannot continue from this point."
    box = window.branch_flow.refusal
    assert box is not None and "settle it first" in box.informativeText()
    box.close()


def test_the_safe_resume_off_banner_does_not_promise_turning_it_on_continues() -> None:
    from renderer.banner_text import BannerState, SessionResume, copy_for

    _, body, _ = copy_for(BannerState.DISABLED, SessionResume())
    assert "turn on Safe resume in Settings" in body
    assert "checks the turn again and may still hold it back" in body
    held = SessionResume(
        reasons=(
            "resume_feature_disabled",
            "dangling_tool_state",
            "workspace_checkpoint_stale",
        )
    )
    _, body, _ = copy_for(BannerState.DISABLED, held)
    assert body.endswith(
        "It already found what would hold it: dangling_tool_state, workspace_checkpoint_stale."
    )


def test_a_relative_folder_name_in_the_dialog_goes_beside_the_sessions_folder(
    qtbot: QtBot,
) -> None:
    """Typed without a full path, the new folder is beside the session's folder (where the
    default goes), not in the folder the desktop happened to be started from."""
    option = _option("e-end", "run_ending", "run ended completed")
    dialog = BranchDialog(_listed(option), option)
    qtbot.addWidget(dialog)
    assert dialog.target() is None  # the default, as listed
    dialog.folder_edit.setText("try two")
    assert dialog.target() == "/w/try two"
    dialog.folder_edit.setText("../elsewhere/copy")
    assert dialog.target() == "/elsewhere/copy"
    dialog.folder_edit.setText("/tmp/exact")
    assert dialog.target() == "/tmp/exact"
    assert "a name without a full path goes beside it" in dialog.folder_edit.toolTip()
