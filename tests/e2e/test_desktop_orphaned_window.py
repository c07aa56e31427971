"""An orphaned window tells the truth, with the real processes (docs/design/desktop.md
"Around a crash").

1. The real two-process app (offscreen): SIGKILL of the main process; within 3 seconds the
   window process notices that its main process is gone (it logs it, and shows the notice the
   widget tests check); a new start of Maka then replaces it, and the old window closes itself.
2. The real main process and the real renderer code in this process: a turn waits for
   permission (a running card, Allow/Deny shown); SIGKILL of the main process; within 3 seconds
   the window says Maka stopped unexpectedly, the card reads Not run (it was only waiting for
   permission), the prompt is gone, the composer is disabled and closing asks nothing.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import MessageKind, SessionsCreateRequest, SessionUpdatedPush
from renderer.bridge_client import RendererBridge
from renderer.bridge_port import ConnectionState
from renderer.main_window import MainWindow
from tests.helpers.maka_process import MainProcess, main_log, maka_env, maka_executable, start_main
from tests.helpers.maka_run import scripted_env, write_script
from tests.helpers.wire_client import WireClient

pytestmark = pytest.mark.e2e

WAIT_MS = 30_000
SCRIPT: list[list[dict[str, Any]]] = [
    [
        {
            "text": "Running the long job.",
            "toolCalls": [
                {
                    "id": "c1",
                    "name": "bash",
                    "args": {"command": "sleep 30; echo done >> late.txt"},
                }
            ],
        },
        {"text": "Done."},
    ]
]


def _wait_for(predicate: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def _renderer_of(main: subprocess.Popen[bytes]) -> psutil.Process:
    """The main process's one renderer child (``--role renderer``); the main may also have a
    short-lived child of its own at that moment (a Git call), which is not the window."""
    (renderer,) = [
        child for child in psutil.Process(main.pid).children(recursive=False) if _is_renderer(child)
    ]
    return renderer


def _is_renderer(process: psutil.Process) -> bool:
    try:
        arguments = process.cmdline()
    except psutil.Error:
        return False
    return any(arguments[at : at + 2] == ["--role", "renderer"] for at in range(len(arguments) - 1))


def _gone(process: psutil.Process) -> bool:
    try:
        return bool(process.status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def test_the_window_process_notices_a_killed_main_and_yields_to_a_new_start(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    env = maka_env(data)
    env.pop("MAKA_NO_RENDERER")
    stderr_path = tmp_path / "first.stderr"
    with stderr_path.open("w") as stderr:
        first = subprocess.Popen(maka_executable(), env=env, stderr=stderr)
    second: subprocess.Popen[bytes] | None = None
    try:
        _wait_for(lambda: "renderer connection 1 authenticated" in main_log(data))
        window = _renderer_of(first)
        first.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        first.wait(10)
        gone_line = f"the main process (pid {first.pid}) is gone"
        _wait_for(lambda: gone_line in stderr_path.read_text(errors="replace"), timeout_s=5)
        assert time.monotonic() - killed_at < 3.0
        assert not _gone(window), "the window stays, saying what happened"
        # a new start owns the data directory; the old window hears its refusal and closes
        with (tmp_path / "second.stderr").open("w") as stderr:
            second = subprocess.Popen(maka_executable(), env=env, stderr=stderr)
        _wait_for(lambda: _gone(window), timeout_s=30)
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)


def test_a_window_over_a_killed_main_says_so_within_three_seconds(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    env = scripted_env(write_script(tmp_path / "script.json", SCRIPT))
    main = start_main(data, env).wait_ready()
    processes.append(main)
    setup = WireClient(main.socket_name)
    setup.hello(main.token)
    setup.send(SessionsCreateRequest(cwd=str(work), correlation_id="create"))
    qtbot.waitUntil(lambda: setup.has(MessageKind.SESSION_UPDATED), timeout=WAIT_MS)
    created = setup.first(MessageKind.SESSION_UPDATED)
    assert isinstance(created, SessionUpdatedPush)
    session_id = created.session.session_id

    bridge = RendererBridge(main.socket_name, main.token, main_pid=main.pid)
    window = MainWindow(bridge, confirm_quit=True)
    qtbot.addWidget(window)
    window.show()
    bridge.start()
    qtbot.waitUntil(lambda: bridge.connection_state is ConnectionState.CONNECTED, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: window.session_id == session_id, timeout=WAIT_MS)
    window.composer.editor.setPlainText("run the long job")
    window.composer.submit()
    qtbot.waitUntil(window.permission.isVisible, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: window.transcript.tool_card("c1") is not None, timeout=WAIT_MS)
    assert window.composer.stop_button.isVisible()

    main.process.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    main.process.wait(10)
    qtbot.waitUntil(window.host_lost.isVisible, timeout=3000)
    assert time.monotonic() - killed_at < 3.0
    assert window.host_lost.title_label.text() == "Maka stopped unexpectedly."
    assert window.connection_status.text == "Maka stopped unexpectedly"
    card = window.transcript.tool_card("c1")
    # It was only waiting for permission: it never started, which the card says.
    assert card is not None and card.chip.text() == "Not run"
    assert not window.permission.isVisible()
    assert not window.composer.editor.isEnabled()
    assert not window.composer.stop_button.isVisible()
    asked: list[int] = []

    def quit_question(running: list[str]) -> bool:
        asked.append(len(running))
        return True

    monkeypatch.setattr(window, "_quit_confirmed", quit_question)
    window.close()
    assert asked == [], "the quit never claims a running turn"
    assert not (work / "late.txt").exists()
    assert "Traceback" not in main_log(data)
