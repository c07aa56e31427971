"""A session whose folder was deleted, in the real desktop processes: the real ``maka`` main
process (no renderer) and a real ``RendererBridge`` with the real ``MainWindow``.

Nothing typed is lost: a message the main process refuses comes back into the composer with the
reason beside it, instead of vanishing while the status bar flashes a code.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from app.bridge_contract import SessionSummary
from renderer.bridge_client import RendererBridge
from renderer.interrupted_banner import BannerState
from renderer.main_window import MainWindow
from renderer.session_actions import RemoveChoice
from tests.helpers.crashed_session import crashed_run
from tests.helpers.desktop_window import connected_window
from tests.helpers.maka_process import MainProcess, start_main
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = pytest.mark.e2e

WAIT_MS = 30_000


def _window(qtbot: QtBot, main: MainProcess) -> tuple[MainWindow, RendererBridge]:
    return connected_window(qtbot, main, WAIT_MS)


def _session_in_a_deleted_folder(tmp_path: Path) -> tuple[Path, Path, str]:
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    done = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "list files"], data)
    assert done.returncode == 0, done.stderr
    session_id = committed_runs(data)[0][0].session_id
    shutil.rmtree(work)
    return data, work, session_id


def test_a_refused_message_stays_in_the_composer_with_the_reason_beside_it(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    data, _work, session_id = _session_in_a_deleted_folder(tmp_path)
    main = start_main(data).wait_ready()
    processes.append(main)
    window, bridge = _window(qtbot, main)
    qtbot.waitUntil(lambda: window.session_id == session_id, timeout=WAIT_MS)
    qtbot.waitUntil(window.composer.editor.isEnabled, timeout=WAIT_MS)
    assert "if it moved, locate it" in window.composer.note, "said before anything is typed"
    QTest.keyClicks(window.composer.editor, "please carry on with the list")
    QTest.mouseClick(window.composer.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.composer.note.startswith("Not sent"), timeout=WAIT_MS)
    assert window.composer.editor.toPlainText() == "please carry on with the list"
    note = window.composer.note
    assert note.startswith("Not sent: ")
    assert "folder" in note and "Error" not in note and "[" not in note
    bridge.stop()
    assert main.terminate() == 0


FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
COUNT_SCRIPT: list[list[dict[str, Any]]] = [
    [
        {
            "text": "Counting.",
            "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "echo x >> n.txt"}}],
        },
        {"text": "Counted."},
    ],
    [{"text": "Carrying on."}],
]


def _interrupted_then_moved(tmp_path: Path) -> tuple[Path, Path, str, dict[str, str]]:
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    env = scripted_env(write_script(tmp_path / "script.json", COUNT_SCRIPT))
    crashed = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "count once"],
        data,
        env={**env, "MAKA_FAILPOINT": "P6"},  # the call completed; its run was interrupted
    )
    assert crashed.returncode == -9, crashed.stderr
    session_id = committed_runs(data)[0][0].session_id
    moved = tmp_path / "moved" / "work"
    moved.parent.mkdir()
    shutil.move(str(work), moved)
    return data, moved, session_id, env


def test_a_moved_folder_is_located_by_its_marker_and_the_session_resumes_there(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    data, moved, session_id, env = _interrupted_then_moved(tmp_path)
    main = start_main(data, {**env, **FLAG}).wait_ready()
    processes.append(main)
    window, bridge = _window(qtbot, main)
    qtbot.waitUntil(lambda: window.session_id == session_id, timeout=WAIT_MS)
    banner = window.banner
    if banner.state is not BannerState.PARKED:
        qtbot.waitUntil(lambda: banner.state is BannerState.PARKED, timeout=WAIT_MS)
    assert banner.folder_missing
    assert [label.property("code") for label in banner.reason_labels] == [
        "workspace_folder_missing"
    ]
    assert banner.title_label.text() == "The session's folder is missing."
    assert str(tmp_path / "work") in banner.reason_labels[0].text(), "the folder is named"
    assert "Error" not in banner.body_label.text() + banner.details_label.text()
    # Deleted by mistake: a branch from a snapshot is offered before removing the session.
    said = banner.body_label.text() + banner.details_label.text()
    assert "Continue from here… makes a new folder from a snapshot" in said, said
    assert banner.action_button.text().replace("&", "") == "Locate folder…"
    assert banner.remove_button.isVisible()

    problems: list[tuple[str, str]] = []
    actions = window.session_actions
    actions.show_problem = lambda headline, sentence: problems.append((headline, sentence))
    other = tmp_path / "other"
    other.mkdir()
    actions.choose_folder = lambda _missing: str(other)
    QTest.mouseClick(banner.action_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(problems), timeout=WAIT_MS)
    assert problems[0][0] == "The folder was not accepted"
    assert "cannot be shown to be the session's workspace" in problems[0][1]
    assert list(other.iterdir()) == [], "the marker is read, never created"
    assert banner.folder_missing, "still parked: nothing changed"

    actions.choose_folder = lambda _missing: str(moved)
    QTest.mouseClick(banner.action_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: banner.state is BannerState.IDLE, timeout=WAIT_MS)
    assert window.path_label.text() == str(moved)
    assert banner.action_button.text() == "Safe resume"
    QTest.mouseClick(banner.action_button, Qt.MouseButton.LeftButton)
    # started, then closed for good once the continuation moved the session on
    qtbot.waitUntil(
        lambda: banner.state in (BannerState.STARTED, BannerState.HIDDEN), timeout=WAIT_MS
    )
    qtbot.waitUntil(lambda: len(committed_runs(data)) == 2, timeout=WAIT_MS)
    assert (moved / "n.txt").read_text() == "x\n", "the completed call never ran again"
    assert '"kind": "session.relocated"' in (data / "logs" / "lifecycle.jsonl").read_text()
    bridge.stop()
    assert main.terminate() == 0


def test_remove_session_offers_export_first_and_deletes_only_the_history(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    data, moved, session_id, env = _interrupted_then_moved(tmp_path)
    main = start_main(data, {**env, **FLAG}).wait_ready()
    processes.append(main)
    window, bridge = _window(qtbot, main)
    qtbot.waitUntil(lambda: window.session_id == session_id, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: window.banner.folder_missing, timeout=WAIT_MS)
    answers = iter([RemoveChoice.EXPORT_FIRST, RemoveChoice.REMOVE])
    asked: list[str] = []

    def confirm(summary: SessionSummary) -> RemoveChoice:
        asked.append(summary.session_id)
        return next(answers)

    export = tmp_path / "kept.jsonl"
    window.session_actions.confirm_remove = confirm
    window.session_actions.choose_export_path = lambda _summary: str(export)
    QTest.mouseClick(window.banner.remove_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.sessions.model.row_of(session_id) is None, timeout=WAIT_MS)
    assert asked == [session_id, session_id], "asked again after the export"
    assert export.read_text().count("\n") >= 3
    assert committed_runs(data) == []
    assert (moved / "n.txt").exists(), "the folder is not touched"
    assert window.session_id is None
    bridge.stop()
    assert main.terminate() == 0


WRITE_SCRIPT: list[list[dict[str, Any]]] = [
    [
        {
            "text": "Writing.",
            "toolCalls": [
                {"id": "w1", "name": "write_file", "args": {"path": "z.md", "content": "zz\n"}}
            ],
        },
        {"text": "Written."},
    ],
]


def test_a_located_folder_whose_write_recovery_parked_for_good_stays_parked(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    """Killed after a write and before its outcome (P4), with the folder moved while Maka was
    down: startup recovery cannot read the written file and parks the call for good. Once the
    folder is located, the banner says the park as Safe resume makes it now (``maka plan``
    agrees), instead of offering a Safe resume that could only park."""
    crashed = crashed_run(tmp_path, "P4", script=WRITE_SCRIPT, checkpoints=None)
    data, work, env, session_id = crashed.data, crashed.work, crashed.env, crashed.session_id
    assert (work / "z.md").read_text() == "zz\n"
    moved = tmp_path / "moved" / "work"
    moved.parent.mkdir()
    shutil.move(str(work), moved)
    main = start_main(data, {**env, **FLAG}).wait_ready()
    processes.append(main)
    window, bridge = _window(qtbot, main)
    qtbot.waitUntil(lambda: window.session_id == session_id, timeout=WAIT_MS)
    banner = window.banner
    qtbot.waitUntil(lambda: banner.folder_missing, timeout=WAIT_MS)
    window.session_actions.choose_folder = lambda _missing: str(moved)
    QTest.mouseClick(banner.action_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.path_label.text() == str(moved), timeout=WAIT_MS)
    qtbot.waitUntil(
        lambda: banner.state is BannerState.PARKED and not banner.folder_missing,
        timeout=WAIT_MS,
    )
    shown = [label.property("code") for label in banner.reason_labels]
    plan = maka(["plan", session_id, "--json"], data, env=FLAG)
    bridge.stop()
    assert main.terminate() == 0
    assert plan.returncode == 3, plan.stderr
    assert shown == json.loads(plan.stdout)["rejectionReasons"], (shown, plan.stdout)
    assert banner.action_button.text() != "Safe resume" or not banner.action_button.isVisible()
    assert len(committed_runs(data)) == 1, "nothing continued"
