"""A session's folder moved or deleted while the desktop runs, in the real processes (the real
``maka`` main process and a real ``RendererBridge`` with the real ``MainWindow``).

A tester's drill: the banner went on offering Safe resume ("Check the current state of your
files first…") under the old path while ``maka plan`` said ``workspace_folder_missing``; only a
click on Safe resume showed "The session's folder is missing.", and a row whose folder went while
the app ran said nothing of it until a send failed. Opening a session now looks at its folder
again in the main process: the banner shows the missing folder's ways on (Locate folder…, Remove
session…) and the row says Folder missing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from renderer.bridge_client import RendererBridge
from renderer.interrupted_banner import BannerState
from renderer.main_window import MainWindow
from tests.helpers.desktop_window import connected_window
from tests.helpers.maka_process import MainProcess, start_main
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = pytest.mark.e2e

WAIT_MS = 30_000
SHOWN_MS = 10_000
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


def _session_ids(data: Path) -> set[str]:
    if not (data / "runtime.sqlite").exists():
        return set()
    return {header.session_id for header, _events in committed_runs(data)}


def _plain_session(data: Path, work: Path) -> str:
    """A session of the offline demo whose turn ended: not interrupted."""
    before = _session_ids(data)
    work.mkdir()
    done = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "list files"], data)
    assert done.returncode == 0, done.stderr
    (made,) = _session_ids(data) - before
    return made


def _row_text(window: MainWindow, session_id: str) -> str:
    model = window.sessions.model
    row = model.row_of(session_id)
    assert row is not None
    return str(model.index(row).data(Qt.ItemDataRole.AccessibleTextRole))


def _open(window: MainWindow, qtbot: QtBot, session_id: str) -> None:
    window.open_session(session_id)
    qtbot.waitUntil(lambda: window.session_id == session_id, timeout=WAIT_MS)


def _window(qtbot: QtBot, main: MainProcess) -> tuple[MainWindow, RendererBridge]:
    window, bridge = connected_window(qtbot, main, WAIT_MS)
    qtbot.waitUntil(lambda: window.sessions.model.rowCount() >= 2, timeout=WAIT_MS)
    return window, bridge


def test_an_interrupted_session_whose_folder_went_while_maka_ran_opens_parked_on_it(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
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
    (interrupted,) = _session_ids(data)
    other = _plain_session(data, tmp_path / "other")
    main = start_main(data, {**env, **FLAG}).wait_ready()
    processes.append(main)
    window, bridge = _window(qtbot, main)
    banner = window.banner

    _open(window, qtbot, interrupted)
    qtbot.waitUntil(lambda: banner.state is BannerState.IDLE, timeout=WAIT_MS)
    assert banner.action_button.text() == "Safe resume", "the folder is there: offered"
    assert "Folder missing" not in _row_text(window, interrupted)

    moved = tmp_path / "moved" / "work"
    moved.parent.mkdir()
    shutil.move(str(work), moved)  # while Maka runs
    _open(window, qtbot, other)
    _open(window, qtbot, interrupted)  # the user clicks its row again

    qtbot.waitUntil(lambda: banner.folder_missing, timeout=SHOWN_MS)
    assert banner.title_label.text() == "The session's folder is missing."
    assert [label.property("code") for label in banner.reason_labels] == [
        "workspace_folder_missing"
    ]
    assert str(work) in banner.reason_labels[0].text(), "the folder is named"
    assert banner.action_button.text().replace("&", "") == "Locate folder…"
    assert banner.remove_button.isVisible()
    qtbot.waitUntil(lambda: "Folder missing" in _row_text(window, interrupted), timeout=SHOWN_MS)
    summary = window.sessions.model.summary(interrupted)
    assert summary is not None and summary.folder_missing
    shown = [label.property("code") for label in banner.reason_labels]
    plan = maka(["plan", interrupted, "--json"], data, env=FLAG)
    assert plan.returncode == 3, plan.stderr
    assert shown == json.loads(plan.stdout)["rejectionReasons"], (shown, plan.stdout)

    # Located again, it offers Safe resume, and the row no longer says the folder is missing.
    window.session_actions.choose_folder = lambda _missing: str(moved)
    banner.action_button.click()
    qtbot.waitUntil(lambda: banner.state is BannerState.IDLE, timeout=WAIT_MS)
    assert window.path_label.text() == str(moved)
    assert "Folder missing" not in _row_text(window, interrupted)
    assert len(committed_runs(data)) == 2, "nothing was resumed by opening it"
    bridge.stop()
    assert main.terminate() == 0


def test_a_row_whose_folder_went_while_maka_ran_says_so_when_it_is_opened(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    first = _plain_session(data, tmp_path / "one")
    second = _plain_session(data, tmp_path / "two")
    main = start_main(data).wait_ready()
    processes.append(main)
    window, bridge = _window(qtbot, main)
    _open(window, qtbot, second)
    assert "Folder missing" not in _row_text(window, second)
    assert window.composer.note == ""

    shutil.rmtree(tmp_path / "two")  # while Maka runs
    _open(window, qtbot, first)
    _open(window, qtbot, second)

    qtbot.waitUntil(lambda: "Folder missing" in _row_text(window, second), timeout=SHOWN_MS)
    qtbot.waitUntil(lambda: "if it moved, locate it" in window.composer.note, timeout=SHOWN_MS)
    assert "Folder missing" not in _row_text(window, first)
    assert window.composer.editor.toPlainText() == "", "said before anything is typed or sent"
    bridge.stop()
    assert main.terminate() == 0
