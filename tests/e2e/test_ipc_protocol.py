"""The bridge protocol against a real ``maka`` main process (a child process, no renderer).

Every bad frame closes only the connection that sent it, is logged by code, and has no effect:
the main process keeps running and a well-formed client is served right after. The Safe resume
request in particular can never carry a claimed fact (``workspaceIdentity``, a run id): such a
frame is refused before anything is planned, and the ledger is unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import (
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    HelloRejectedPush,
    MessageKind,
    ResumeLatestRequest,
    SessionsListRequest,
)
from tests.helpers.maka_process import MainProcess, main_log, start_main
from tests.helpers.wire_client import WireClient

pytestmark = pytest.mark.e2e


def _frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def _json_frame(value: object) -> bytes:
    return _frame(json.dumps(value).encode())


@pytest.fixture(scope="module")
def main(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MainProcess]:
    data_dir = tmp_path_factory.mktemp("protocol") / "data"
    data_dir.mkdir()
    process = start_main(data_dir, {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}).wait_ready()
    yield process
    process.stop()


def _served(qtbot: QtBot, main: MainProcess) -> WireClient:
    """A well-formed renderer still gets a handshake and an answer."""
    client = WireClient(main.socket_name)
    client.hello(main.token)
    qtbot.waitUntil(lambda: client.has(MessageKind.HELLO_OK), timeout=10_000)
    client.send(SessionsListRequest(correlation_id="still-served"))
    qtbot.waitUntil(lambda: client.has(MessageKind.SESSIONS_LISTED), timeout=10_000)
    assert client.connected
    return client


def _refused(qtbot: QtBot, client: WireClient, main: MainProcess) -> None:
    qtbot.waitUntil(lambda: client.disconnected, timeout=10_000)
    assert main.process.poll() is None, "the main process must keep running"
    assert not any(
        m.kind in (MessageKind.SESSIONS_LISTED, MessageKind.RESUME_STARTED) for m in client.received
    )


def test_wrong_token_is_rejected_and_closed(qtbot: QtBot, main: MainProcess) -> None:
    client = WireClient(main.socket_name)
    client.hello("x" * 43)
    _refused(qtbot, client, main)
    rejected = client.first(MessageKind.HELLO_REJECTED)
    assert isinstance(rejected, HelloRejectedPush) and rejected.code == "token_invalid"
    assert rejected.windowless_owner is False, "the desktop's start has a window of its own"
    _served(qtbot, main)


def test_a_host_without_a_window_says_so_to_a_window_it_refuses(
    qtbot: QtBot, tmp_path: Path
) -> None:
    """A window of an earlier start reconnecting to a ``maka host`` started in a terminal is
    told that this start has no window, so it offers to open one (it said "use the new
    window", and there was none); the host's log says what was refused."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    host = start_main(data_dir, None, "host").wait_ready()
    try:
        client = WireClient(host.socket_name)
        client.hello("x" * 43)
        _refused(qtbot, client, host)
        rejected = client.first(MessageKind.HELLO_REJECTED)
        assert isinstance(rejected, HelloRejectedPush) and rejected.code == "token_invalid"
        assert rejected.windowless_owner is True
        assert "a window of an earlier start of Maka" in rejected.message
    finally:
        host.stop()


def test_wrong_protocol_version_is_rejected_and_closed(qtbot: QtBot, main: MainProcess) -> None:
    client = WireClient(main.socket_name)
    client.hello(main.token, version=PROTOCOL_VERSION + 1)
    _refused(qtbot, client, main)
    rejected = client.first(MessageKind.HELLO_REJECTED)
    assert isinstance(rejected, HelloRejectedPush)
    assert rejected.code == "protocol_version_unsupported"
    _served(qtbot, main)


BAD_FIRST_FRAMES = {
    "oversized_frame": (MAX_FRAME_BYTES + 1).to_bytes(4, "big") + b"{",
    "garbage_bytes": _frame(b"\xff\xfe\x00garbage\x80\x81"),
    "http_request": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    "json_array": _json_frame([1, 2, 3]),
    "unknown_kind": _json_frame({"kind": "sessions.delete", "sessionId": "s1"}),
    "request_before_hello": _json_frame({"kind": "sessions.list"}),
    "push_kind_from_client": _json_frame(
        {"kind": "hello.ok", "hostState": "ready", "safeResumeEnabled": True}
    ),
    "hello_with_extra_field": _json_frame(
        {"kind": "hello", "token": "y" * 43, "protocolVersion": PROTOCOL_VERSION, "admin": True}
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_FIRST_FRAMES))
def test_bad_first_frame_closes_that_connection_only(
    qtbot: QtBot, main: MainProcess, name: str
) -> None:
    bystander = _served(qtbot, main)
    client = WireClient(main.socket_name)
    qtbot.waitUntil(lambda: client.connected, timeout=10_000)
    client.send_raw(BAD_FIRST_FRAMES[name])
    _refused(qtbot, client, main)
    assert bystander.connected
    _served(qtbot, main)


def _after_hello(qtbot: QtBot, main: MainProcess) -> WireClient:
    client = WireClient(main.socket_name)
    client.hello(main.token)
    qtbot.waitUntil(lambda: client.has(MessageKind.HELLO_OK), timeout=10_000)
    return client


BAD_AUTHENTICATED_FRAMES = {
    "oversized_frame": (MAX_FRAME_BYTES + 1).to_bytes(4, "big"),
    "garbage_bytes": _frame(b"\x00\x01not json at all"),
    "unknown_kind": _json_frame({"kind": "runs.delete", "runId": "r1"}),
    "resume_with_workspace_identity": _json_frame(
        {
            "kind": "sessions.resumeLatest",
            "sessionId": "s1",
            "workspaceIdentity": "workspace:v1:00000000-0000-4000-8000-000000000000",
        }
    ),
    "resume_with_run_id": _json_frame(
        {"kind": "sessions.resumeLatest", "sessionId": "s1", "sourceRunId": "run-1"}
    ),
    "resume_with_snake_case": _json_frame({"kind": "sessions.resumeLatest", "session_id": "s1"}),
    "resume_with_number_session": _json_frame({"kind": "sessions.resumeLatest", "sessionId": 1}),
    "second_hello": _json_frame(
        {"kind": "hello", "token": "z" * 43, "protocolVersion": PROTOCOL_VERSION}
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_AUTHENTICATED_FRAMES))
def test_bad_frame_after_handshake_closes_that_connection_without_effect(
    qtbot: QtBot, main: MainProcess, name: str
) -> None:
    client = _after_hello(qtbot, main)
    client.send_raw(BAD_AUTHENTICATED_FRAMES[name])
    _refused(qtbot, client, main)
    assert not any(m.kind.startswith("resume.") for m in client.received)
    _served(qtbot, main)


def test_a_well_formed_resume_is_served(qtbot: QtBot, main: MainProcess) -> None:
    """The control for the refusals above: the same request without the extra field gets an
    answer (no interrupted run here, so a calm park)."""
    client = _after_hello(qtbot, main)
    client.send(ResumeLatestRequest(session_id="s1", correlation_id="ok"))
    qtbot.waitUntil(
        lambda: client.has(MessageKind.RESUME_PARKED) or client.has(MessageKind.RESUME_FAILED),
        timeout=10_000,
    )
    assert client.connected


def test_every_refusal_is_logged_by_code_and_the_main_process_survives(
    qtbot: QtBot, main: MainProcess
) -> None:
    _served(qtbot, main)
    log = main_log(main.data_dir)
    for code in (
        "token_invalid",
        "protocol_version_unsupported",
        "frame_too_large",
        "frame_malformed",
        "unknown_kind",
        "handshake_required",
        "kind_not_accepted",
        "message_invalid",
    ):
        assert f"[{code}]" in log, code
    assert main.token not in log, "the token must never reach the log"
    assert main.process.poll() is None


def test_socket_is_user_only(main: MainProcess) -> None:
    import os
    import stat
    import sys

    if sys.platform == "win32":
        pytest.skip("named pipes carry an ACL instead of a mode")
    path = Path(main.socket_name)
    mode = stat.S_IMODE(os.stat(path).st_mode)
    assert mode & 0o077 == 0, oct(mode)
    # ... and it lives in a folder only this user can enter (not the shared temp folder).
    assert stat.S_IMODE(os.lstat(path.parent).st_mode) == 0o700
