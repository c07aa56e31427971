""" "Continue from here…" (issue #36) in the window, against the fake bridge: on a boundary row
of the Timeline (context menu and the detail pane's button) and on a message you sent or a tool
card of the transcript; the confirmation shows the point, the folder (editable) and whether a
snapshot is kept, and without one offers the current files instead; a branch made opens the new
session, whose header names its source and point; the source's transcript marks where it was
branched; a refusal is shown with its code and sentence."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QModelIndex
from PySide6.QtWidgets import QApplication, QDialog
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.branch_dialog import BranchDialog
from renderer.main_window import MainWindow
from renderer.timeline_model import RowNode
from renderer.timeline_panel import TimelinePanel
from renderer.transcript_items import BranchMarkerWidget
from tests.helpers.fake_bridge import FakeBridge
from tests.helpers.ledger_builders import DEFAULT_IDS
from tests.helpers.timeline_demo import ServingBridge, long_session

pytestmark = pytest.mark.gui

ROOT = QModelIndex()
SESSIONS = (
    bc.SessionSummary(session_id="s1", cwd="/w/one", title="Tidy the parser"),
    bc.SessionSummary(session_id="s2", cwd="/w/two", title="Two"),
)
ASK = bc.UserMessageItem(item_id="e-ask", run_id="r1", text="write notes.txt")
CARD = bc.ToolCardItem(
    item_id="e-call",
    run_id="r1",
    tool_call_id="w1",
    tool_name="write_file",
    args_summary="notes.txt",
    status=bc.ToolCardStatus.SUCCEEDED,
)
SAID = bc.AssistantMessageItem(item_id="e-said", run_id="r1", text="Done.")


def _option(
    event_id: str, kind: str, label: str, *, kept: bool = True, tool_call_id: str | None = None
) -> bc.BranchOptionItem:
    return bc.BranchOptionItem(
        event_id=event_id,
        run_id="r1",
        seq=1,
        kind=kind,
        ts=0,
        label=label,
        snapshot_bound=kept,
        snapshot_kept=kept,
        tool_call_id=tool_call_id,
    )


def _listed(session_id: str = "s1", *, kept: bool = True) -> bc.BranchOptionsListedPush:
    return bc.BranchOptionsListedPush(
        session_id=session_id,
        title="Tidy the parser",
        cwd="/w/one",
        default_folder="/w/one-branch-1",
        options=(
            _option("e-ask", "user_message", "you: write notes.txt"),
            _option(
                "e-result", "tool_result", "result of write_file", kept=kept, tool_call_id="w1"
            ),
        ),
    )


def _window(qtbot: QtBot) -> tuple[MainWindow, FakeBridge]:
    bridge = FakeBridge()
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.show()
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=SESSIONS))
    window.sessions.select("s1")
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s1", items=(ASK, CARD, SAID)))
    return window, bridge


def test_the_transcript_offers_continue_from_here_on_messages_you_sent_and_tool_cards(
    qtbot: QtBot,
) -> None:
    window, bridge = _window(qtbot)
    view = window.transcript
    assert view.branchable_item("e-ask") == ASK
    assert view.branchable_item("e-call") == CARD
    assert view.branchable_item("e-said") is None  # the model's answer is not a boundary
    menu = view.context_menu_for("e-call")
    (action,) = [a for a in menu.actions() if a.text() == "Continue from here…"]
    action.trigger()
    assert bridge.calls_to("branch_options") == [("s1",)]
    # The card's boundary is its result: found by the call it answers.
    bridge.branch_options_listed.emit(_listed())
    dialog = window.branch_flow.dialog
    assert isinstance(dialog, BranchDialog)
    assert dialog.option.event_id == "e-result"
    assert "after the result of write_file" in dialog.point_label.text()
    assert dialog.folder_edit.text() == "/w/one-branch-1"
    assert "A snapshot of the folder is kept" in dialog.snapshot_label.text()
    assert dialog.make_button.text() == "Make the branch"
    dialog.make_button.click()
    assert bridge.calls_to("create_branch") == [("s1", "e-result", None, False)]
    assert window.branch_flow.making


def test_a_branch_made_opens_the_new_session_with_its_origin_in_the_header(
    qtbot: QtBot,
) -> None:
    window, bridge = _window(qtbot)
    assert window.branch_label.isHidden()
    assert window.transcript.continue_from("e-ask")
    bridge.branch_options_listed.emit(_listed())
    dialog = window.branch_flow.dialog
    assert dialog is not None and dialog.option.event_id == "e-ask"
    dialog.folder_edit.setText("/w/elsewhere")
    dialog.accept()
    assert bridge.calls_to("create_branch") == [("s1", "e-ask", "/w/elsewhere", False)]
    new = bc.SessionSummary(session_id="s3", cwd="/w/elsewhere", title="Tidy the parser")
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=new))
    bridge.branch_made.emit(
        bc.BranchMadePush(session_id="s1", event_id="e-ask", new_session_id="s3", cwd=new.cwd)
    )
    assert window.session_id == "s3"
    assert bridge.calls_to("open_session")[-1] == ("s3",)
    assert "/w/elsewhere" in window.statusBar().currentMessage()
    origin = bc.BranchOrigin(
        source_session_id="s1",
        source_title="Tidy the parser",
        boundary_event_id="e-ask",
        boundary_label="you: write notes.txt",
        boundary_kind="user_message",
    )
    bridge.session_opened.emit(
        bc.SessionOpenedPush(session_id="s3", items=(ASK,), branched_from=origin)
    )
    assert not window.branch_label.isHidden()
    assert window.branch_label.text() == (
        "Branched from “Tidy the parser”, after your message “write notes.txt”"
    )
    window.sessions.select("s2")  # another session: no origin shown
    assert window.branch_label.isHidden()


def test_without_a_snapshot_the_dialog_offers_the_current_files(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    window.transcript.continue_from("e-call")
    bridge.branch_options_listed.emit(_listed(kept=False))
    dialog = window.branch_flow.dialog
    assert dialog is not None
    assert "No snapshot of the folder is kept for this point" in dialog.snapshot_label.text()
    assert "as it is now" in dialog.snapshot_label.text()
    assert dialog.make_button.text() == "Continue with the current files"
    dialog.make_button.click()
    assert dialog.result() == QDialog.DialogCode.Accepted
    assert bridge.calls_to("create_branch") == [("s1", "e-result", None, True)]


def test_a_branch_of_a_deleted_folder_does_not_promise_a_clone(qtbot: QtBot) -> None:
    """The session's folder deleted (a Git repository): the dialog said the copy would be a
    clone of it, and the copy came without ``.git``. It says the copy is the point's files
    alone; with the folder there it still says what a clone is."""
    window, bridge = _window(qtbot)
    window.transcript.continue_from("e-call")
    bridge.branch_options_listed.emit(_listed().model_copy(update={"folder_gone": True}))
    dialog = window.branch_flow.dialog
    assert dialog is not None
    said = dialog.folder_note.text()
    assert "Your folder is not there any more" in said, said
    assert "not a Git repository" in said and "is a clone of it" not in said, said
    dialog.reject()
    window.transcript.continue_from("e-call")
    bridge.branch_options_listed.emit(_listed())
    there = window.branch_flow.dialog
    assert there is not None and "is a clone of it" in there.folder_note.text()


def test_a_refusal_is_shown_with_its_code_and_sentence(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    window.transcript.continue_from("e-ask")
    bridge.branch_options_listed.emit(_listed())
    dialog = window.branch_flow.dialog
    assert dialog is not None
    dialog.accept()
    bridge.branch_refused.emit(
        bc.BranchRefusedPush(
            session_id="s1",
            event_id="e-ask",
            code="workspace_restore_target_inside",
            message="/w/one/sub is inside /w/one",
        )
    )
    box = window.branch_flow.refusal
    assert box is not None and box.isVisible()
    assert "[workspace_restore_target_inside]" in box.text()
    assert box.informativeText() == "/w/one/sub is inside /w/one"
    assert window.session_id == "s1" and not window.branch_flow.making
    box.close()


def test_a_point_that_is_not_a_boundary_says_so(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    window.transcript.continue_from("e-ask")
    bridge.branch_options_listed.emit(_listed().model_copy(update={"options": ()}))
    assert window.branch_flow.dialog is None
    assert "cannot continue from this point" in window.statusBar().currentMessage()


def test_the_source_transcript_marks_where_it_was_branched(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    marker = bc.BranchMarkerItem(
        item_id="branch:s3",
        run_id="r1",
        branch_session_id="s2",
        branch_title="Two",
        boundary_event_id="e-result",
    )
    bridge.session_opened.emit(
        bc.SessionOpenedPush(session_id="s1", items=(ASK, CARD, marker, SAID))
    )
    widget = window.transcript.item_widget("branch:s3")
    assert isinstance(widget, BranchMarkerWidget)
    assert widget.text == "Branched here → Two"
    assert window.transcript.item_ids() == ["e-ask", "e-call", "branch:s3", "e-said"]
    widget.label.linkActivated.emit("open")
    assert window.session_id == "s2"


def _timeline(qtbot: QtBot) -> tuple[TimelinePanel, ServingBridge]:
    session = DEFAULT_IDS.session_id
    bridge = ServingBridge({session: long_session(8)})
    panel = TimelinePanel(bridge)
    qtbot.addWidget(panel)
    panel.resize(1000, 700)
    panel.open(session)
    bridge.serve()
    assert bridge.calls_to("branch_options") == [(session,)]
    options = (
        _option("evt-u2", "user_message", "you: question 2"),
        _option("evt-u4", "user_message", "you: question 4", kept=False),
    )
    bridge.branch_options_listed.emit(
        bc.BranchOptionsListedPush(
            session_id=session,
            cwd="/w/one",
            default_folder="/w/one-branch-1",
            options=options,
        )
    )
    return panel, bridge


def _row(panel: TimelinePanel, event_id: str) -> QModelIndex:
    model = panel.model
    for number in range(model.rowCount(ROOT)):
        index = model.index(number, 0)
        node = model.node(index)
        if isinstance(node, RowNode) and node.item.entries[0].event_id == event_id:
            return index
    raise AssertionError(f"no row {event_id}")


def test_the_timeline_offers_continue_from_here_on_boundary_rows(qtbot: QtBot) -> None:
    panel, _bridge = _timeline(qtbot)
    asked: list[tuple[str, str]] = []
    panel.branch_requested.connect(lambda session, event: asked.append((session, event)))
    plain = _row(panel, "evt-m1")
    assert panel.boundary_at(plain) is None
    (action,) = panel.context_menu_for(plain).actions()
    assert not action.isEnabled()
    panel.tree.setCurrentIndex(plain)
    assert not panel.branch_button.isEnabled()
    # The disabled button says which rows it works on (a model's message is not one).
    assert "from a message you sent, a tool's result or the end of a run" in (
        panel.branch_button.toolTip()
    )
    boundary = _row(panel, "evt-u2")
    panel.tree.setCurrentIndex(boundary)
    assert panel.branch_button.isEnabled()
    assert panel.detail.toPlainText().startswith("Branch point: a new session can continue")
    panel.branch_button.click()
    assert asked == [(DEFAULT_IDS.session_id, "evt-u2")]
    no_snapshot = _row(panel, "evt-u4")
    (action,) = panel.context_menu_for(no_snapshot).actions()
    assert action.isEnabled() and "no snapshot kept" in action.text()
    action.trigger()
    assert asked[-1] == (DEFAULT_IDS.session_id, "evt-u4")


def test_the_timeline_button_opens_the_dialog_in_the_window(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot)
    window.timeline.branch_requested.emit("s1", "e-ask")
    assert bridge.calls_to("branch_options")[-1] == ("s1",)
    bridge.branch_options_listed.emit(_listed())
    assert window.branch_flow.dialog is not None
    assert "after your message “write notes.txt”" in window.branch_flow.dialog.point_label.text()
    window.branch_flow.dialog.reject()
    QApplication.processEvents()
    assert bridge.calls_to("create_branch") == []


def _detail_of(qtbot: QtBot, option: bc.BranchOptionItem) -> tuple[TimelinePanel, str]:
    """The Timeline's detail of ``option``'s row when it is the session's only branch point."""
    panel, bridge = _timeline(qtbot)
    bridge.branch_options_listed.emit(
        bc.BranchOptionsListedPush(
            session_id=DEFAULT_IDS.session_id,
            cwd="/w/one",
            default_folder="/w/one-branch-1",
            options=(option,),
        )
    )
    panel.tree.setCurrentIndex(_row(panel, option.event_id))
    return panel, panel.detail.toPlainText()


def test_a_point_retention_removed_says_it_is_kept_until_the_prune(qtbot: QtBot) -> None:
    """As ``maka checkpoints`` calls it "removed by retention", the Timeline says the snapshot
    of such a point is kept only until the next prune, unless a branch is made from it."""
    trimmed = _option("evt-u2", "user_message", "you: question 2").model_copy(
        update={"trimmed": True}
    )
    panel, text = _detail_of(qtbot, trimmed)
    assert "kept here until the next prune (removed by retention" in text, text
    assert panel.branch_button.isEnabled()


def test_a_point_whose_snapshot_was_set_aside_as_damaged_says_so(qtbot: QtBot) -> None:
    damaged = _option("evt-u2", "user_message", "you: question 2", kept=False).model_copy(
        update={"snapshot_bound": True, "damaged_aside": True}
    )
    _, text = _detail_of(qtbot, damaged)
    assert "found damaged and set aside" in text, text
    assert "no snapshot of the folder is kept here" not in text, text
