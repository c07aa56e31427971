"""A refused branch is worded as a branch: its folder is the new session's, not "a restored copy".

A branch and Safe resume's restored copy share the codes for the folder chosen
(``workspace_restore_target_not_empty``, ``workspace_restore_target_inside``): making a branch
into a folder that holds files said "A restored copy needs a new or empty folder…" although the
user was making a branch. The restored copy's own words (the banner) stay as they are.
"""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.main_window import MainWindow
from tests.helpers.fake_bridge import FakeBridge

pytestmark = pytest.mark.gui

SESSIONS = (
    bc.SessionSummary(
        session_id="s1",
        cwd="/w/one",
        title="Tidy the parser",
        last_run_status=bc.RunStatusValue.FAILED,
        interrupted=True,
        failure_class="app_restarted",
    ),
)
CARD = bc.ToolCardItem(
    item_id="e-call",
    run_id="r1",
    tool_call_id="w1",
    tool_name="write_file",
    args_summary="notes.txt",
    status=bc.ToolCardStatus.SUCCEEDED,
)
LISTED = bc.BranchOptionsListedPush(
    session_id="s1",
    title="Tidy the parser",
    cwd="/w/one",
    default_folder="/w/one-branch-1",
    options=(
        bc.BranchOptionItem(
            event_id="e-result",
            run_id="r1",
            seq=1,
            kind="tool_result",
            ts=0,
            label="result of write_file",
            snapshot_bound=True,
            snapshot_kept=True,
            tool_call_id="w1",
        ),
    ),
)


def _window(qtbot: QtBot) -> tuple[MainWindow, FakeBridge]:
    bridge = FakeBridge()
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.show()
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=SESSIONS))
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s1", items=(CARD,)))
    return window, bridge


def _refused(window: MainWindow, bridge: FakeBridge, code: str, message: str) -> QMessageBox:
    """Continue from here… on the tool card (its context menu), confirmed, then refused."""
    menu = window.transcript.context_menu_for("e-call")
    (action,) = [a for a in menu.actions() if a.text() == "Continue from here…"]
    action.trigger()
    bridge.branch_options_listed.emit(LISTED)
    dialog = window.branch_flow.dialog
    assert dialog is not None
    dialog.accept()
    bridge.branch_refused.emit(
        bc.BranchRefusedPush(session_id="s1", event_id="e-result", code=code, message=message)
    )
    box = window.branch_flow.refusal
    assert box is not None and box.isVisible()
    return box


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (
            "workspace_restore_target_not_empty",
            "/w/full is not an empty folder; a copy needs a new or empty folder",
        ),
        (
            "workspace_restore_target_inside",
            "/w/one/sub is inside /w/one; the branch's folder goes outside the source folder, "
            "which is left as it is",
        ),
    ],
)
def test_a_branch_refused_for_its_folder_speaks_of_the_new_sessions_folder(
    qtbot: QtBot, code: str, message: str
) -> None:
    window, bridge = _window(qtbot)
    box = _refused(window, bridge, code, message)
    text = box.text()
    assert "restored copy" not in text, text
    assert "new session" in text or "branch's folder" in text, text
    assert text.endswith(f"[{code}]")
    assert box.informativeText() == message
    assert "restored copy" not in window.statusBar().currentMessage()
    box.close()


def test_the_banner_still_speaks_of_a_restored_copy(qtbot: QtBot) -> None:
    """Safe resume's restored copy keeps its own words for the same code."""
    window, bridge = _window(qtbot)
    bridge.push_parked("s1", ("workspace_restore_target_not_empty",))
    shown = " ".join(label.text() for label in window.banner.reason_labels)
    assert "A restored copy needs a new or empty folder" in shown, shown
