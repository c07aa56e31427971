"""A session whose folder was deleted, in the real desktop processes: the real ``maka`` main
process (no renderer) and a real ``RendererBridge`` with the real ``MainWindow``.

Nothing typed is lost: a message the main process refuses comes back into the composer with the
reason beside it, instead of vanishing while the status bar flashes a code.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from renderer.bridge_client import RendererBridge
from renderer.bridge_port import ConnectionState
from renderer.main_window import MainWindow
from tests.helpers.maka_process import MainProcess, start_main
from tests.helpers.maka_run import committed_runs, maka

pytestmark = pytest.mark.e2e

WAIT_MS = 30_000


@pytest.fixture
def processes() -> Iterator[list[MainProcess]]:
    started: list[MainProcess] = []
    yield started
    for process in started:
        process.stop()


def _window(qtbot: QtBot, main: MainProcess) -> tuple[MainWindow, RendererBridge]:
    bridge = RendererBridge(main.socket_name, main.token)
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.show()
    bridge.start()
    qtbot.waitUntil(lambda: bridge.connection_state is ConnectionState.CONNECTED, timeout=WAIT_MS)
    return window, bridge


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
    QTest.keyClicks(window.composer.editor, "please carry on with the list")
    QTest.mouseClick(window.composer.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(window.composer.note), timeout=WAIT_MS)
    assert window.composer.editor.toPlainText() == "please carry on with the list"
    note = window.composer.note
    assert note.startswith("Not sent: ")
    assert "folder" in note and "Error" not in note and "[" not in note
    bridge.stop()
    assert main.terminate() == 0
