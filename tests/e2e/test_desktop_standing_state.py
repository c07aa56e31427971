"""Whatever a window must show about a session reaches every window, however late it connects
(docs/design/desktop.md "Around a crash"; issue: a permission prompt nobody can see).

The real ``maka`` main process (``MAKA_NO_RENDERER=1``) plays against the real renderer code
(``RendererBridge`` and ``MainWindow``) in this process, over the real socket:

- auto-resume at startup continues a session whose next step asks for permission before any
  window connected: the window that connects afterwards shows the request with Allow, the row
  says "Needs you", and Allow lets the continuation finish;
- a window dies while a prompt is open: the next window shows the same request and can answer it;
- 2,000 ``sessions.resumeLatest`` for sessions that do not exist leave nothing standing: a new
  window hears none of them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import (
    MessageKind,
    PermissionRequestedPush,
    ResumeLatestRequest,
    SessionsCreateRequest,
    SessionsListRequest,
    SessionUpdatedPush,
    TurnsSendRequest,
)
from renderer.bridge_client import RendererBridge
from renderer.main_window import MainWindow
from renderer.session_list import WAITING_ROLE
from tests.helpers.desktop_window import connected_window
from tests.helpers.maka_process import MainProcess, main_log, start_main
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script
from tests.helpers.wire_client import WireClient

pytestmark = pytest.mark.e2e

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
WAIT_MS = 30_000
TWO_CALLS: list[list[dict[str, Any]]] = [
    [
        {
            "text": "First.",
            "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "echo 1 >> n.txt"}}],
        },
        {
            "text": "Second.",
            "toolCalls": [{"id": "c2", "name": "bash", "args": {"command": "echo 2 >> n.txt"}}],
        },
        {"text": "Both done."},
    ]
]


def _window(qtbot: QtBot, main: MainProcess) -> tuple[MainWindow, RendererBridge]:
    return connected_window(qtbot, main, WAIT_MS)


def _needs_you(window: MainWindow, session_id: str) -> bool:
    model = window.sessions.model
    row = model.row_of(session_id)
    return row is not None and bool(model.index(row).data(WAITING_ROLE))


def _allow_and_finish(qtbot: QtBot, window: MainWindow, folder: Path, lines: str) -> None:
    qtbot.waitUntil(window.permission.isVisible, timeout=WAIT_MS)
    window.permission.allow_button.click()
    qtbot.waitUntil(
        lambda: (folder / "n.txt").exists() and (folder / "n.txt").read_text() == lines,
        timeout=WAIT_MS,
    )


def test_auto_resume_asking_before_any_window_connected_is_answered_later(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    env = scripted_env(write_script(tmp_path / "script.json", TWO_CALLS))
    crashed = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "count twice"],
        data,
        env={**env, "MAKA_FAILPOINT": "P6"},  # the first call's result is committed
    )
    assert crashed.returncode == -9, crashed.stderr
    session_id = committed_runs(data)[0][0].session_id
    assert (work / "n.txt").read_text() == "1\n"

    main = start_main(data, {**env, **FLAG}).wait_ready()
    processes.append(main)
    # auto-resume continues and its second call asks; no window is connected
    deadline = time.monotonic() + 30
    while "permission" not in _requests_seen(data):
        assert time.monotonic() < deadline, main_log(data)
        qtbot.wait(50)

    window, bridge = _window(qtbot, main)
    qtbot.waitUntil(window.permission.isVisible, timeout=WAIT_MS)
    # The window connected while the continuation runs: it is told automatic resume started it
    # (it was told only once the continuation had ended).
    qtbot.waitUntil(
        lambda: "1 session continued by itself" in window.auto_resume_notice.text,
        timeout=WAIT_MS,
    )
    current = window.permission.current
    assert isinstance(current, PermissionRequestedPush) and current.session_id == session_id
    assert "echo 2 >> n.txt" in window.permission.summary_view.toPlainText()
    qtbot.waitUntil(lambda: _needs_you(window, session_id), timeout=WAIT_MS)
    _allow_and_finish(qtbot, window, work, "1\n2\n")
    qtbot.waitUntil(lambda: not _needs_you(window, session_id), timeout=WAIT_MS)
    bridge.stop()
    assert main.terminate() == 0


def _requests_seen(data: Path) -> str:
    """The run's committed events name the open permission request once it was asked."""
    kinds = []
    for _, events in committed_runs(data):
        for event in events:
            if "permissionRequest" in (event.get("actions") or {}):
                kinds.append("permission")
    return " ".join(kinds)


def test_a_window_that_died_with_a_prompt_open_is_asked_again(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    env = scripted_env(write_script(tmp_path / "script.json", TWO_CALLS))
    main = start_main(data, env).wait_ready()
    processes.append(main)
    first = WireClient(main.socket_name)
    first.hello(main.token)
    first.send(SessionsCreateRequest(cwd=str(work), correlation_id="create"))
    qtbot.waitUntil(lambda: first.has(MessageKind.SESSION_UPDATED), timeout=WAIT_MS)
    created = first.first(MessageKind.SESSION_UPDATED)
    assert isinstance(created, SessionUpdatedPush)
    session_id = created.session.session_id
    first.send(TurnsSendRequest(session_id=session_id, text="count twice"))
    qtbot.waitUntil(lambda: first.has(MessageKind.PERMISSION_REQUESTED), timeout=WAIT_MS)
    first.close()  # the window's process dies with the prompt open

    window, bridge = _window(qtbot, main)
    qtbot.waitUntil(lambda: _needs_you(window, session_id), timeout=WAIT_MS)
    window.sessions.select(session_id)
    _allow_and_finish(qtbot, window, work, "1\n")
    # the second call asks the window that is connected now, which answers it too
    qtbot.waitUntil(window.permission.isVisible, timeout=WAIT_MS)
    window.permission.allow_button.click()
    qtbot.waitUntil(lambda: (work / "n.txt").read_text() == "1\n2\n", timeout=WAIT_MS)
    # a window connecting after the turn ended is asked nothing
    later = WireClient(main.socket_name)
    later.hello(main.token)
    later.send(SessionsListRequest(correlation_id="list"))
    qtbot.waitUntil(lambda: later.has(MessageKind.SESSIONS_LISTED), timeout=WAIT_MS)
    assert not later.has(MessageKind.PERMISSION_REQUESTED), later.kinds()
    bridge.stop()
    assert main.terminate() == 0


def test_resume_requests_for_sessions_that_do_not_exist_leave_nothing_standing(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    main = start_main(data, FLAG).wait_ready()
    processes.append(main)
    asker = WireClient(main.socket_name)
    asker.hello(main.token)
    qtbot.waitUntil(lambda: "main process ready" in main_log(data), timeout=WAIT_MS)
    for number in range(2000):
        asker.send(ResumeLatestRequest(session_id=f"session_made_up_{number}"))
    qtbot.waitUntil(lambda: len(asker.all(MessageKind.RESUME_FAILED)) >= 2000, timeout=120_000)
    assert {m.model_dump()["code"] for m in asker.all(MessageKind.RESUME_FAILED)} == {
        "session_not_found"
    }
    window = WireClient(main.socket_name)
    window.hello(main.token)
    window.send(SessionsListRequest(correlation_id="list"))
    # The list's answer comes after everything that stood was sent at the handshake.
    qtbot.waitUntil(lambda: window.has(MessageKind.SESSIONS_LISTED), timeout=WAIT_MS)
    resume_kinds = {MessageKind.RESUME_FAILED, MessageKind.RESUME_PARKED}
    assert [m for m in window.received if m.kind in resume_kinds] == []
    assert main.terminate() == 0
