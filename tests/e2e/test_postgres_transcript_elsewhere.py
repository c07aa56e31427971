"""The open transcript follows a turn another host runs on a shared PostgreSQL ledger
(docs/postgres.md, docs/design/hosts.md section 2).

Real processes, a real server: a ``maka host`` on data folder B served a first turn in a session
and holds its lease; the desktop's main process on data folder G (a real window, offscreen)
shows that session. Then ``maka run --session`` through host B runs a turn whose command sleeps.
The window's transcript shows the new message and the running call's card while the command
still runs (at the pace of the main process's sweep of the other hosts' state), and the turn's
end once it ends, without the session being opened again; the draft being typed stays.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from app.bridge_contract import ToolCardItem, ToolCardStatus
from renderer.main_window import MainWindow
from renderer.transcript_items import MessageWidget, ToolCardWidget
from tests.helpers.desktop_window import connected_window
from tests.helpers.maka_process import MainProcess, maka_executable, start_main
from tests.helpers.maka_run import maka, scripted_env, write_script

pytestmark = pytest.mark.e2e

SLEEP = {"id": "s1", "name": "bash", "args": {"command": "sleep 8; echo slept > slept.txt"}}
SCRIPT: list[list[dict[str, Any]]] = [
    [{"text": "Hello from host B."}],
    [{"text": "Sleeping a while.", "toolCalls": [SLEEP]}, {"text": "Slept well."}],
]
LEASES = {  # a sweep every second
    "MAKA_SESSION_LEASE_TTL_MS": "3000",
    "MAKA_SESSION_LEASE_RUNWAY_MS": "1000",
    "MAKA_SESSION_TAKEOVER_GRACE_MS": "500",
}


@pytest.fixture
def started() -> Iterator[list[MainProcess | subprocess.Popen[str]]]:
    processes: list[MainProcess | subprocess.Popen[str]] = []
    yield processes
    for process in processes:
        if isinstance(process, MainProcess):
            process.stop()
        elif process.poll() is None:
            process.kill()
            process.wait(10)


def _shown(window: MainWindow) -> list[QWidget]:
    """The transcript's widgets, as the reader sees them."""
    transcript = window.transcript
    widgets = (transcript.item_widget(item_id) for item_id in transcript.live_item_ids())
    return [widget for widget in widgets if widget is not None]


def _said(window: MainWindow, role: str) -> list[str]:
    """The messages shown, of "You" or of "Maka"."""
    return [
        widget.full_text
        for widget in _shown(window)
        if isinstance(widget, MessageWidget) and widget.role_label.text() == role
    ]


def _cards(window: MainWindow) -> list[ToolCardItem]:
    return [widget.item for widget in _shown(window) if isinstance(widget, ToolCardWidget)]


def test_the_open_transcript_shows_a_turn_another_host_runs_as_it_goes(
    qtbot: QtBot,
    postgres_url: str,
    tmp_path: Path,
    started: list[MainProcess | subprocess.Popen[str]],
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    script = write_script(tmp_path / "script.json", SCRIPT)
    env = {**scripted_env(script), **LEASES, "MAKA_DATABASE_URL": postgres_url}
    data_b, data_g = tmp_path / "b", tmp_path / "g"
    for data in (data_b, data_g):
        data.mkdir()
    host_b = start_main(data_b, env, "host")
    started.append(host_b)
    host_b.wait_ready()
    first = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "say hello"], data_b, env=env
    )
    assert first.returncode == 0, first.stderr
    session = next(line for line in first.stderr.splitlines() if line.startswith("session "))
    session_id = session.split()[1]

    desktop = start_main(data_g, env)
    started.append(desktop)
    desktop.wait_ready()
    window, _bridge = connected_window(qtbot, desktop)
    qtbot.waitUntil(lambda: window.sessions.model.row_of(session_id) is not None, timeout=30_000)
    window.open_session(session_id)
    qtbot.waitUntil(lambda: "Hello from host B." in _said(window, "Maka"), timeout=30_000)
    summary = window.sessions.model.summary(session_id)
    assert summary is not None and summary.held_elsewhere is not None  # host B holds it
    window.composer.editor.setPlainText("a draft, not sent")
    window.show_timeline(True)  # the Timeline, open, follows it too
    verdict = window.timeline.verdict
    qtbot.waitUntil(lambda: verdict.text().startswith("1 run,"), timeout=30_000)

    environment = {**os.environ, **env, "MAKA_DATA_DIR": str(data_b)}
    environment.update({"QT_QPA_PLATFORM": "offscreen"})
    environment.pop("MAKA_FAILPOINT", None)
    args = ["run", "--session", session_id, "--permission-mode", "auto", "sleep a while"]
    turn = subprocess.Popen(
        [*maka_executable(), *args],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    started.append(turn)

    # While the command sleeps: the message and the running call, as host B committed them.
    qtbot.waitUntil(
        lambda: any(card.status is ToolCardStatus.RUNNING for card in _cards(window)),
        timeout=30_000,
    )
    assert turn.poll() is None, "the turn's card must show while the turn still runs"
    assert not (work / "slept.txt").exists()
    assert _said(window, "You") == ["say hello", "sleep a while"]
    assert "Sleeping a while." in _said(window, "Maka")
    summary = window.sessions.model.summary(session_id)
    assert summary is not None and summary.running_elsewhere

    # Once it ends: the call done and the turn's last words, the session not opened again.
    assert turn.wait(60) == 0
    qtbot.waitUntil(lambda: "Slept well." in _said(window, "Maka"), timeout=30_000)
    (card,) = _cards(window)
    assert card.status is ToolCardStatus.SUCCEEDED
    assert _said(window, "You") == ["say hello", "sleep a while"]
    assert window.session_id == session_id
    assert window.composer.editor.toPlainText() == "a draft, not sent"
    qtbot.waitUntil(lambda: verdict.text().startswith("2 runs,"), timeout=30_000)
    deadline = time.monotonic() + 3  # told once: the transcript stays as it is
    before = window.transcript.item_ids()
    while time.monotonic() < deadline:
        qtbot.wait(200)
    assert window.transcript.item_ids() == before
