"""Who removed a session, as the main process tells its windows (fake services, real host, real
socket): a terminal's ``maka sessions remove S --yes`` beside the desktop is another Maka
process, so the window is told ``elsewhere`` (and says "“<title>” was removed by another Maka
process"), while the window's own Remove session… is answered as its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import (
    PROTOCOL_VERSION,
    ClientRole,
    HelloRequest,
    MessageKind,
    SessionRemovedPush,
    SessionsRemoveRequest,
    SessionSummary,
)
from app.host.ipc_endpoint import terminal_token_path
from main_process.host_app import HostApp
from tests.helpers.fake_host_services import FakeHostServices
from tests.helpers.served_host import serve
from tests.helpers.wire_client import WireClient

pytestmark = pytest.mark.gui


@pytest.fixture
def host(
    qtbot: QtBot, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> Iterator[tuple[HostApp, str, str, str]]:
    services = FakeHostServices(
        sessions={
            sid: SessionSummary(session_id=sid, cwd=str(data_dir), title=sid)
            for sid in ("s1", "s2")
        }
    )

    app, socket, token = serve(qtbot, data_dir, services, capsys)
    terminal = Path(terminal_token_path(data_dir)).read_text().strip()
    yield app, socket, token, terminal
    app.close()


def _removed(client: WireClient, session_id: str) -> SessionRemovedPush | None:
    for message in client.all(MessageKind.SESSION_REMOVED):
        assert isinstance(message, SessionRemovedPush)
        if message.session_id == session_id:
            return message
    return None


def test_a_terminals_removal_reaches_the_window_as_done_elsewhere(
    qtbot: QtBot, host: tuple[HostApp, str, str, str]
) -> None:
    _app, socket, token, terminal_token = host
    window = WireClient(socket)
    window.hello(token)
    qtbot.waitUntil(lambda: window.has(MessageKind.HELLO_OK), timeout=5000)
    terminal = WireClient(socket)
    terminal.send(
        HelloRequest(
            token=terminal_token,
            protocol_version=PROTOCOL_VERSION,
            role=ClientRole.TERMINAL,
            correlation_id="hello",
        )
    )
    qtbot.waitUntil(lambda: terminal.has(MessageKind.HELLO_OK), timeout=5000)

    terminal.send(SessionsRemoveRequest(session_id="s1", correlation_id="t-remove"))
    qtbot.waitUntil(lambda: _removed(window, "s1") is not None, timeout=5000)
    told = _removed(window, "s1")
    assert told is not None and told.elsewhere, "the window did not remove it"
    qtbot.waitUntil(lambda: _removed(terminal, "s1") is not None, timeout=5000)  # it waits

    window.send(SessionsRemoveRequest(session_id="s2", correlation_id="w-remove"))
    qtbot.waitUntil(lambda: _removed(window, "s2") is not None, timeout=5000)
    own = _removed(window, "s2")
    assert own is not None and not own.elsewhere and own.correlation_id == "w-remove"
