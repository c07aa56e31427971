"""Auto-resume that parks at startup reaches the banner, however late the renderer connects.

The real ``maka`` main process (flag on, ``MAKA_NO_RENDERER=1``) starts over a turn that was
killed at P3 (a bash call dispatched, its outcome unknown), so auto-resume parks with
``dangling_tool_state``. A real ``RendererBridge`` with a real ``InterruptedBanner`` then connects
*after* that park, as a renderer that starts late or restarts does: the banner must open parked
with the reasons and diagnostics a click would show, not offer Safe resume again. Once a new
message carries the session on, the park no longer stands.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import (
    MessageKind,
    ResumeParkedPush,
    SessionsListRequest,
    TurnsSendRequest,
)
from renderer.bridge_client import RendererBridge
from renderer.interrupted_banner import BannerState, InterruptedBanner
from tests.helpers.crashed_session import crashed_run, main_started
from tests.helpers.desktop_window import connected_banner
from tests.helpers.maka_process import MainProcess, main_log
from tests.helpers.wire_client import WireClient

pytestmark = pytest.mark.e2e

SCRIPT: list[list[dict[str, Any]]] = [
    [
        {
            "text": "Counting.",
            "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "echo x >> n.txt"}}],
        },
        {"text": "Counted."},
    ],
    [{"text": "Carrying on from here."}],
]
WAIT_MS = 30_000


def _renderer(
    qtbot: QtBot, main: MainProcess, session_id: str
) -> tuple[InterruptedBanner, RendererBridge]:
    """A renderer's bridge and banner, connected to the real main process."""
    banner, bridge = connected_banner(qtbot, main, session_id, WAIT_MS)
    return banner, bridge


def test_a_park_at_startup_opens_the_banner_parked_for_a_late_or_restarted_renderer(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    crashed = crashed_run(tmp_path, "P3", script=SCRIPT, checkpoints=False)
    data, session_id = crashed.data, crashed.session_id

    main = main_started(crashed, qtbot, processes, parked=False)
    # A renderer connected from the start hears the park exactly once, whenever it connected.
    early = WireClient(main.socket_name)
    early.hello(main.token)
    deadline = time.monotonic() + 30
    while "auto-resume outcome: ResumeParked" not in main_log(data):
        assert time.monotonic() < deadline, main_log(data)
        qtbot.wait(50)
    qtbot.waitUntil(lambda: early.has(MessageKind.RESUME_PARKED), timeout=WAIT_MS)

    # The window's renderer connects only now (it started late), then restarts.
    for _ in range(2):
        banner, bridge = _renderer(qtbot, main, session_id)
        _wait_parked(qtbot, banner)
        assert banner.title_label.text() == "Automatic resume is on hold."
        assert [label.property("code") for label in banner.reason_labels] == ["dangling_tool_state"]
        assert "send a new message to carry on" in banner.body_label.text()
        assert banner.action_button.text() == "Try again"
        details = banner.details_label.text().splitlines()
        (line,) = [ln for ln in details if ln.startswith("pending_tool_result")]
        assert "bash" in line and "indeterminate" in line
        assert line.count(_first_call_id(early)) == 1, line
        bridge.stop()
        banner.close()
    assert len(early.all(MessageKind.RESUME_PARKED)) == 1, "no repeat to a connected renderer"

    # A new message carries the session on; a renderer connecting afterwards hears no park.
    early.send(TurnsSendRequest(session_id=session_id, text="carry on"))
    qtbot.waitUntil(
        lambda: any(
            m.kind == MessageKind.RUN_STATUS and m.model_dump()["status"] == "completed"
            for m in early.received
        ),
        timeout=WAIT_MS,
    )
    qtbot.waitUntil(
        lambda: any(
            m.kind == MessageKind.SESSION_UPDATED and not m.model_dump()["session"]["interrupted"]
            for m in early.received
        ),
        timeout=WAIT_MS,
    )
    later = WireClient(main.socket_name)
    later.hello(main.token)
    later.send(SessionsListRequest(correlation_id="after"))
    qtbot.waitUntil(lambda: later.has(MessageKind.SESSIONS_LISTED), timeout=WAIT_MS)
    assert not later.has(MessageKind.RESUME_PARKED), later.kinds()
    assert main.terminate() == 0


def _wait_parked(qtbot: QtBot, banner: InterruptedBanner) -> None:
    qtbot.waitUntil(lambda: banner.state is BannerState.PARKED, timeout=WAIT_MS)


def _first_call_id(client: WireClient) -> str:
    parked = client.first(MessageKind.RESUME_PARKED)
    assert isinstance(parked, ResumeParkedPush)
    assert parked.rejection_reasons == ("dangling_tool_state",)
    assert parked.correlation_id is None
    ids = {d.tool_call_id for d in parked.diagnostics if d.code == "pending_tool_result"}
    (call_id,) = ids
    assert call_id is not None
    return call_id
