"""The renderer as a real child process: argument errors, handshake, exit on host close."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.renderer_app import main
from tests.gui.test_bridge_client import FakeMain

pytestmark = pytest.mark.gui

ROOT = Path(__file__).resolve().parents[2]


def test_missing_server_or_token_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MAKA_RENDERER_SERVER", raising=False)
    monkeypatch.delenv("MAKA_RENDERER_TOKEN", raising=False)
    assert main(["maka-renderer"]) == 2
    assert "[renderer_server_missing]" in capsys.readouterr().err
    assert main(["maka-renderer", "--server", "x"]) == 2
    assert "[renderer_token_missing]" in capsys.readouterr().err


@pytest.fixture
def fake_main() -> Iterator[FakeMain]:
    fake = FakeMain(f"mk-app-{uuid.uuid4().hex[:8]}")
    fake.listen()
    yield fake
    fake.close()


def test_child_renderer_handshakes_and_exits_when_the_host_closes(
    qtbot: QtBot, fake_main: FakeMain
) -> None:
    token = uuid.uuid4().hex
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "MAKA_RENDERER_TOKEN": token}
    child = subprocess.Popen(
        [sys.executable, "-m", "renderer.renderer_app", "--server", fake_main.name],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        qtbot.waitUntil(lambda: len(fake_main.requests) >= 1, timeout=20_000)
        hello = fake_main.requests[0]
        assert isinstance(hello, bc.HelloRequest) and hello.token == token
        fake_main.send(bc.HelloOkPush(host_state=bc.HostState.READY, safe_resume_enabled=True))
        qtbot.waitUntil(
            lambda: any(isinstance(r, bc.SessionsListRequest) for r in fake_main.requests),
            timeout=10_000,
        )
        fake_main.send(bc.HostStatePush(state=bc.HostState.CLOSED))
        qtbot.waitUntil(lambda: child.poll() is not None, timeout=10_000)
        assert child.returncode == 0
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        assert child.stderr is not None
        child.stderr.close()
