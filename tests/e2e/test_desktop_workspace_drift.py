"""A workspace drift through the real desktop main process to the real banner
(docs/design/workspace.md sections 3 and 4's surfaces): a turn killed at P8 (its checkpoints
committed), a file edited afterwards, then auto-resume at startup parks with ``workspace_drift``,
and a renderer's banner names the changed file under "Files changed since the run stopped."."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from renderer.bridge_client import RendererBridge
from renderer.interrupted_banner import BannerState, InterruptedBanner
from tests.helpers.crashed_session import (
    COUNTING,
    WAIT_MS,
    crashed_run,
    drifted_banner,
    drifted_run,
    main_started,
    parked_banner,
)
from tests.helpers.desktop_window import connected_banner
from tests.helpers.maka_process import MainProcess
from tests.helpers.maka_run import committed_runs

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


def test_the_banner_names_the_file_changed_after_the_crash(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    crashed = drifted_run(tmp_path)
    data, session_id = crashed.data, crashed.session_id
    main = main_started(crashed, qtbot, processes)
    banner, bridge = connected_banner(qtbot, main, session_id, WAIT_MS)
    qtbot.waitUntil(lambda: banner.state is BannerState.PARKED, timeout=WAIT_MS)
    assert [label.property("code") for label in banner.reason_labels] == ["workspace_drift"]
    assert banner.title_label.text() == "Files changed since the run stopped."
    assert "changed: n.txt" in banner.body_label.text()
    assert "workspace_drift" in banner.details_label.text()
    bridge.stop()
    banner.close()
    assert len(committed_runs(data)) == 1  # nothing was continued
    assert main.terminate() == 0


def test_continue_with_my_current_files_from_the_banner(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    data, work, _, bridge, banner = drifted_banner(tmp_path, qtbot, processes)
    assert banner.rebaseline_button.isVisible() and banner.restore_button.isVisible()
    assert banner.rebaseline_note.text() == (
        "The files stay as they are now; the model is told which changed and re-reads them."
    )
    banner.rebaseline_button.click()
    qtbot.waitUntil(lambda: banner.state is not BannerState.PARKED, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: len(committed_runs(data)) == 2, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: committed_runs(data)[1][0].status.value == "completed", timeout=WAIT_MS)
    start = committed_runs(data)[1][1][0]
    baseline = start["actions"]["workspaceBaseline"]
    assert baseline["changedPaths"] == [{"path": "n.txt", "change": "modified"}]
    assert (work / "n.txt").read_text() == "edited by hand\n"
    bridge.stop()
    banner.close()


def test_continue_in_a_restored_copy_from_the_banner(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    data, work, _, bridge, banner = drifted_banner(tmp_path, qtbot, processes)
    assert banner.request_decision("isolated_restore")
    qtbot.waitUntil(lambda: len(committed_runs(data)) == 2, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: committed_runs(data)[1][0].status.value == "completed", timeout=WAIT_MS)
    header = committed_runs(data)[1][0]
    copy = tmp_path / "work-restored-1"
    assert header.cwd == str(copy)
    assert (copy / "n.txt").read_text() == "x\n"  # as at the stop
    assert (work / "n.txt").read_text() == "edited by hand\n"  # the user's folder untouched
    bridge.stop()
    banner.close()


def test_a_refused_folder_for_the_copy_leaves_both_ways_forward(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    """Choose folder… with a folder that holds files: the banner says why it was refused and
    still offers both ways forward, so the user picks another folder; nothing was continued."""
    data, work, _, bridge, banner = drifted_banner(tmp_path, qtbot, processes)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine\n")
    assert banner.request_decision("isolated_restore", str(busy))
    qtbot.waitUntil(
        lambda: (
            banner.state is BannerState.PARKED
            and "workspace_restore_target_not_empty"
            in [label.property("code") for label in banner.reason_labels]
        ),
        timeout=WAIT_MS,
    )
    codes = [label.property("code") for label in banner.reason_labels]
    assert codes == ["workspace_restore_target_not_empty", "workspace_drift"]
    assert banner.restore_button.isVisible() and banner.rebaseline_button.isVisible()
    body = banner.body_label.text()
    assert "Choose how to continue below" in body and "report the problem" not in body
    assert [p.name for p in busy.iterdir()] == ["keep.txt"]
    assert len(committed_runs(data)) == 1
    # Another folder: the copy is made there and the session continues in it.
    assert banner.request_decision("isolated_restore", str(tmp_path / "elsewhere"))
    qtbot.waitUntil(lambda: len(committed_runs(data)) == 2, timeout=WAIT_MS)
    assert committed_runs(data)[1][0].cwd == str(tmp_path / "elsewhere")
    assert (work / "n.txt").read_text() == "edited by hand\n"
    bridge.stop()
    banner.close()


def _killed_then_edited(
    tmp_path: Path,
    qtbot: QtBot,
    processes: list[MainProcess],
    script: list[list[dict[str, Any]]],
) -> tuple[Path, str, InterruptedBanner, RendererBridge]:
    """A ``maka run`` of ``script`` in a folder with ``n.txt`` (checkpoints at the product's
    default: on) killed at P3 while its call ran, ``n.txt`` edited afterwards, then the real
    main process started with Safe resume on: once auto-resume parked, a real banner connected
    to it, parked. Returns the data folder, the session, the banner and its bridge."""
    crashed = crashed_run(
        tmp_path, "P3", script=script, checkpoints=None, message="go", files={"n.txt": "x\n"}
    )
    (crashed.work / "n.txt").write_text("edited by hand\n")
    main = main_started(crashed, qtbot, processes)
    bridge, banner = parked_banner(qtbot, main, crashed.session_id, crashed.work)
    return crashed.data, crashed.session_id, banner, bridge


def test_an_unknown_outcome_and_changed_files_show_together(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    """A read killed mid-call (its outcome unknown) and a file edited afterwards: the banner
    lists both reasons at once, the file under its own; once the user says the call ran, the
    announced park remains, with its two ways forward."""
    # The run's first snapshot goes on while read-only calls run; a call that may write waits
    # for it, even one refused for its arguments: so the folder's snapshot is recorded before
    # the read the run is killed in, and the hand edit afterwards is a drift from it.
    refused = {"id": "c0", "name": "write_file", "args": {}}
    read: list[list[dict[str, Any]]] = [
        [
            {"text": "Preparing.", "toolCalls": [refused]},
            {
                "text": "Reading.",
                "toolCalls": [{"id": "c1", "name": "read_file", "args": {"path": "n.txt"}}],
            },
            {"text": "Read."},
        ]
    ]
    data, session_id, banner, bridge = _killed_then_edited(tmp_path, qtbot, processes, read)
    labels = {label.property("code"): label.text() for label in banner.reason_labels}
    assert list(labels) == ["dangling_tool_state", "workspace_drift"]
    assert "changed: n.txt" in labels["workspace_drift"]
    assert banner.title_label.text() != "Files changed since the run stopped."
    assert "still need your decision" in banner.body_label.text()
    assert not banner.rebaseline_button.isVisible()

    assert bridge.settle_call(session_id, "c1", True, None)
    qtbot.waitUntil(
        lambda: [label.property("code") for label in banner.reason_labels] == ["workspace_drift"],
        timeout=WAIT_MS,
    )
    assert banner.title_label.text() == "Files changed since the run stopped."
    assert banner.rebaseline_button.isVisible() and banner.restore_button.isVisible()
    assert len(committed_runs(data)) == 1  # nothing was continued
    bridge.stop()
    banner.close()


def test_a_command_cut_short_is_answered_and_nothing_about_the_files_follows(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    """A command killed while it ran (its outcome unknown, the snapshot before it stale) and a
    file edited afterwards: the banner says that the answer also takes the folder as it is,
    not that a decision about the files follows; once the user says it did not run, no
    reason about the files is left (the real main process, its store and ``git``)."""
    data, session_id, banner, bridge = _killed_then_edited(tmp_path, qtbot, processes, COUNTING)
    codes = [label.property("code") for label in banner.reason_labels]
    assert codes == ["dangling_tool_state", "workspace_checkpoint_stale"]
    body = banner.body_label.text()
    assert "still need your decision" not in body
    assert body.endswith(
        "Your answer also takes the folder as it is now as the new starting point, so the files "
        "need no other decision."
    )

    assert bridge.settle_call(session_id, "c1", False, None)
    # Safe resume checked again and found nothing in the way: its button is offered.
    qtbot.waitUntil(lambda: banner.state is BannerState.IDLE, timeout=WAIT_MS)
    assert banner.reason_labels == []
    assert banner.action_button.isVisible() and banner.action_button.text() == "Safe resume"
    assert len(committed_runs(data)) == 1  # nothing was continued without the user
    bridge.stop()
    banner.close()
