"""A park stands across restarts until one of its inputs changes (the real main process).

A turn killed at P3 (a bash call dispatched, its outcome unknown) parks auto-resume with
``dangling_tool_state``. After a restart nothing was repaired, so nothing auto-resumes: before,
the banner then offered Safe resume again, a button that could only park the same way. Now the
last verdict is kept per boundary with a digest of what the safety inspector observes, so the
banner opens parked; once what the plan depends on changes (here the user settles the call in the
CLI), the planner would continue and Safe resume is offered again. The banner asks the same
planner at start, so a park decided in the CLI is what it shows too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import MessageKind, SessionsListRequest
from renderer.bridge_client import RendererBridge
from renderer.bridge_port import ConnectionState
from renderer.interrupted_banner import BannerState, InterruptedBanner
from tests.helpers.crashed_session import FLAG, crashed_run, main_started
from tests.helpers.desktop_window import connected_banner
from tests.helpers.maka_process import MainProcess, start_main
from tests.helpers.maka_run import maka
from tests.helpers.wire_client import WireClient

pytestmark = pytest.mark.e2e

WAIT_MS = 30_000


def _standing_parks(qtbot: QtBot, main: MainProcess) -> list[str]:
    """Connect as a renderer; the reasons of every park told before the list answer."""
    client = WireClient(main.socket_name)
    client.hello(main.token)
    client.send(SessionsListRequest(correlation_id="list"))
    qtbot.waitUntil(lambda: client.has(MessageKind.SESSIONS_LISTED), timeout=WAIT_MS)
    return [
        reason
        for push in client.all(MessageKind.RESUME_PARKED)
        for reason in push.model_dump()["rejection_reasons"]
    ]


def test_a_park_stands_after_a_restart_until_an_input_changes(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    crashed = crashed_run(tmp_path, "P3", checkpoints=False)
    data, env, session_id = crashed.data, {**crashed.env, **FLAG}, crashed.session_id

    first = main_started(crashed, qtbot, processes)
    assert first.terminate() == 0

    # Restarted: nothing new was repaired, nothing auto-resumes, and the park still stands.
    second = start_main(data, env).wait_ready()
    processes.append(second)
    bridge = RendererBridge(second.socket_name, second.token)
    banner = InterruptedBanner(bridge)
    qtbot.addWidget(banner)
    banner.show()
    banner.set_session(session_id, interrupted=True)
    bridge.start()
    qtbot.waitUntil(lambda: bridge.connection_state is ConnectionState.CONNECTED, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: banner.state is BannerState.PARKED, timeout=WAIT_MS)
    assert [label.property("code") for label in banner.reason_labels] == ["dangling_tool_state"]
    assert banner.action_button.text() != "Safe resume"
    bridge.stop()
    assert "auto-resume outcome" not in second.stderr()
    assert second.terminate() == 0

    # What the plan depends on changes (the user says in the CLI that the command ran): the
    # planner would continue now, so Safe resume is offered again.
    settled = maka(["settle", session_id, "c1", "--ran"], data, env=env)
    assert settled.returncode == 0, settled.stderr
    third = start_main(data, env).wait_ready()
    processes.append(third)
    assert _standing_parks(qtbot, third) == []
    assert third.terminate() == 0


def test_a_park_decided_by_maka_plan_is_what_the_banner_shows(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    """The run is repaired by ``maka plan`` in the CLI (which parks), so the desktop's start
    repairs nothing, auto-resume plans nothing and no verdict is remembered: the banner still
    shows the park the planner decides, never a Safe resume button that can only park."""
    crashed = crashed_run(tmp_path, "P3", checkpoints=False)
    session_id = crashed.session_id
    planned = maka(["plan", session_id], crashed.data, env={**crashed.env, **FLAG})
    assert planned.returncode == 3 and "dangling_tool_state" in planned.stdout, planned.stdout

    main = main_started(crashed, qtbot, processes, parked=False)
    banner, bridge = connected_banner(qtbot, main, session_id, WAIT_MS)
    qtbot.waitUntil(lambda: banner.state is BannerState.PARKED, timeout=WAIT_MS)
    assert [label.property("code") for label in banner.reason_labels] == ["dangling_tool_state"]
    assert banner.action_button.text() != "Safe resume"
    bridge.stop()
    assert "auto-resume outcome" not in main.stderr()
    assert main.terminate() == 0
