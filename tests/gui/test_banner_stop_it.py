"""The banner's **Stop it** for a command still running from before a restart."""

from __future__ import annotations

import pytest
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.bridge_port import ConnectionState
from renderer.interrupted_banner import BannerState, InterruptedBanner
from tests.helpers.fake_bridge import FakeBridge

pytestmark = pytest.mark.gui


def _parked_banner(qtbot: QtBot) -> tuple[InterruptedBanner, FakeBridge]:
    bridge = FakeBridge()
    banner = InterruptedBanner(bridge)
    qtbot.addWidget(banner)
    banner.show()
    banner.set_session("s1", interrupted=True)
    bridge.push_parked("s1", ("background_operation_pending", "dangling_tool_state"))
    return banner, bridge


def test_stop_it_asks_once_and_follows_the_answer(qtbot: QtBot) -> None:
    banner, bridge = _parked_banner(qtbot)
    assert banner.stop_button.isVisible() and banner.stop_button.isEnabled()
    banner.stop_button.click()
    assert bridge.calls_to("stop_processes") == [("s1",)]
    assert banner.stop_button.text() == "Stopping…" and not banner.stop_button.isEnabled()
    banner.stop_button.click()
    assert bridge.calls_to("stop_processes") == [("s1",)]
    bridge.processes_stopped.emit(bc.ProcessesStoppedPush(session_id="s1", stopped=1))
    bridge.push_parked("s1", ("dangling_tool_state",))
    assert banner.state is BannerState.PARKED
    assert not banner.stop_button.isVisible()


def test_when_nothing_else_parks_the_banner_offers_safe_resume_again(qtbot: QtBot) -> None:
    banner, bridge = _parked_banner(qtbot)
    banner.stop_button.click()
    bridge.processes_stopped.emit(
        bc.ProcessesStoppedPush(session_id="s1", stopped=1, resume_available=True)
    )
    assert banner.state is BannerState.IDLE
    assert banner.action_button.isEnabled()


def test_no_stop_it_without_a_survivor_or_without_the_main_process(qtbot: QtBot) -> None:
    banner, bridge = _parked_banner(qtbot)
    bridge._set_connection_state(ConnectionState.HOST_LOST)
    assert not banner.stop_button.isEnabled()
    bridge.connect_now()
    bridge.push_parked("s1", ("dangling_tool_state",))
    assert not banner.stop_button.isVisible()


def test_while_it_runs_the_next_step_is_about_it(qtbot: QtBot) -> None:
    banner, _bridge = _parked_banner(qtbot)
    assert banner.body_label.text().startswith("A command from before the restart is still")
