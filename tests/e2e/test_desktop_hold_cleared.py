"""Automatic resume parked a session at start (its files changed since the stop), in the real
desktop processes: the real ``maka`` main process (no renderer) and a real ``RendererBridge``
with the real ``MainWindow``. Once the user continues it (one of the banner's two ways forward),
it is no longer on hold: its row's "Auto-resume on hold" badge and the status bar's "1 is on
hold" line go, and stay gone while the window opens the session again (as it does after a
reconnect or when commands end) and for a window that connects afterwards."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from renderer.bridge_client import RendererBridge
from renderer.interrupted_banner import BannerState
from renderer.main_window import MainWindow
from tests.helpers.crashed_session import WAIT_MS, drifted_run, main_started
from tests.helpers.desktop_window import connected_window
from tests.helpers.maka_process import MainProcess
from tests.helpers.maka_run import committed_runs

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]

HELD = "Automatic resume: 1 is on hold; open it to see."


def _badge(window: MainWindow, session_id: str) -> str:
    model = window.sessions.model
    row = model.row_of(session_id)
    assert row is not None
    return str(model.index(row).data(Qt.ItemDataRole.AccessibleTextRole))


def _reopen(qtbot: QtBot, bridge: RendererBridge, session_id: str) -> None:
    """Open the session twice, waiting for each answer: what stands for it is told right
    after the first answer, so it has arrived by the second."""
    for _ in range(2):
        with qtbot.waitSignal(bridge.session_opened, timeout=WAIT_MS):
            assert bridge.open_session(session_id)


@pytest.mark.parametrize("early", [False, True])
@pytest.mark.parametrize("decision", ["rebaseline", "isolated_restore"])
def test_continuing_a_session_auto_resume_held_clears_its_badge_and_the_status_line(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess], decision: str, early: bool
) -> None:
    crashed = drifted_run(tmp_path)
    data, session_id = crashed.data, crashed.session_id
    main = main_started(crashed, qtbot, processes, parked=not early)

    window, bridge = connected_window(qtbot, main, WAIT_MS)
    qtbot.waitUntil(lambda: window.session_id == session_id, timeout=WAIT_MS)
    banner = window.banner
    qtbot.waitUntil(lambda: banner.state is BannerState.PARKED, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: window.auto_resume_notice.text == HELD, timeout=WAIT_MS)
    assert "Auto-resume on hold" in _badge(window, session_id)

    if decision == "rebaseline":
        banner.rebaseline_button.click()
    else:
        assert banner.request_decision("isolated_restore")
    # The window opens the session again while the continuation starts: the park it answered
    # must not be told again.
    deadline = time.monotonic() + 30
    while len(committed_runs(data)) < 2 or committed_runs(data)[1][0].status.value != "completed":
        assert time.monotonic() < deadline
        bridge.open_session(session_id)
        qtbot.wait(2)
    qtbot.waitUntil(lambda: committed_runs(data)[1][0].status.value == "completed", timeout=WAIT_MS)
    qtbot.waitUntil(lambda: banner.state is not BannerState.PARKED, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: window.auto_resume_notice.text == "", timeout=WAIT_MS)
    assert not window.auto_resume_notice.label.isVisible()
    assert "on hold" not in _badge(window, session_id)
    _reopen(qtbot, bridge, session_id)
    assert window.auto_resume_notice.text == ""
    assert "on hold" not in _badge(window, session_id)
    bridge.stop()
    window.close()
    window, bridge = connected_window(qtbot, main, WAIT_MS)
    qtbot.waitUntil(lambda: window.session_id == session_id, timeout=WAIT_MS)
    _reopen(qtbot, bridge, session_id)
    assert window.auto_resume_notice.text == ""
    assert "on hold" not in _badge(window, session_id)
    bridge.stop()
    window.close()
    assert main.terminate() == 0
