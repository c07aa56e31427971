"""A permission request sent again (on connect or session open) after this window answered it
is not shown a second time: the copy crossed the answer on the wire."""

from __future__ import annotations

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import PermissionRequestedPush
from renderer.permission_prompt import PermissionPrompt
from tests.helpers.fake_bridge import FakeBridge

pytestmark = pytest.mark.gui


def test_a_resent_request_already_answered_stays_answered(qtbot: QtBot) -> None:
    bridge = FakeBridge()
    bridge.connect_now()
    prompt = PermissionPrompt(bridge)
    qtbot.addWidget(prompt)
    prompt.set_session("s1")
    push = PermissionRequestedPush(
        session_id="s1", request_id="r1", tool_name="bash", summary="run: ls"
    )
    bridge.permission_requested.emit(push)
    bridge.permission_requested.emit(push)  # sent again on open: shown once
    assert prompt.current == push
    prompt.allow_button.click()
    assert bridge.calls_to("answer_permission") == [("s1", "r1", True)]
    assert prompt.current is None
    bridge.permission_requested.emit(push)  # a copy that crossed the answer
    assert prompt.current is None
