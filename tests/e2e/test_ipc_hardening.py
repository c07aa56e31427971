"""The real main process against hostile local peers: a squatted socket name, half-open
connections, a stolen token, log floods and bad session folders."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QDir
from PySide6.QtNetwork import QLocalSocket
from pytestqt.qtbot import QtBot

from app.bridge_contract import (
    PROTOCOL_VERSION,
    ErrorPush,
    HelloRejectedPush,
    MessageKind,
    SessionsCreateRequest,
    SessionsListRequest,
    SessionsOpenRequest,
    TurnsCancelRequest,
)
from tests.helpers.maka_process import MainProcess, main_log, run_maka, start_main
from tests.helpers.wire_client import WireClient

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform == "win32", reason="Unix socket files and modes"),
]


def _renderer(qtbot: QtBot, main: MainProcess) -> WireClient:
    client = WireClient(main.socket_name)
    client.hello(main.token)
    qtbot.waitUntil(lambda: client.has(MessageKind.HELLO_OK) or client.disconnected, timeout=10_000)
    assert client.has(MessageKind.HELLO_OK), client.kinds()
    return client


@pytest.fixture
def main(tmp_path: Path) -> Iterator[MainProcess]:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    process = start_main(data_dir, {"HOME": str(home)}).wait_ready()
    yield process
    process.stop()


# ------------------------------------------------------------------------- item: the endpoint


def _old_predictable_name(data_dir: Path) -> str:
    """The name earlier versions listened on, directly in the temp folder."""
    digest = hashlib.sha256(f"{os.getuid()}\0{os.path.realpath(data_dir)}".encode()).hexdigest()
    return str(Path(QDir.tempPath()) / f"maka-{digest[:12]}")


def test_a_squatted_name_in_the_temp_folder_does_not_stop_startup(
    qtbot: QtBot, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    squatted = Path(_old_predictable_name(data_dir))
    squatted.mkdir()  # what another user could create first; it cannot be removed as a socket
    try:
        main = start_main(data_dir).wait_ready()
        try:
            assert not main.socket_name.startswith(str(squatted))
            endpoint_dir = Path(main.socket_name).parent
            assert stat.S_IMODE(endpoint_dir.stat().st_mode) == 0o700
            assert endpoint_dir.stat().st_uid == os.getuid()
            _renderer(qtbot, main)
        finally:
            main.stop()
    finally:
        squatted.rmdir()


def test_a_failed_listen_names_the_reason(tmp_path: Path) -> None:
    data_dir = Path("/tmp") / f"maka-listen-{os.getpid()}"
    data_dir.mkdir(exist_ok=True)
    (tmp_path / "elsewhere").mkdir()
    (data_dir / "ipc").symlink_to(tmp_path / "elsewhere")
    try:
        result = run_maka(data_dir, extra_env={"XDG_RUNTIME_DIR": ""}, timeout_s=60)
        assert result.returncode == 1
        assert "[ipc_unavailable]" in result.stderr
        assert "is not a folder (a link or a file is in its place)" in result.stderr
        assert "Traceback" not in result.stderr
    finally:
        (data_dir / "ipc").unlink()
        for leftover in sorted(data_dir.rglob("*"), reverse=True):
            leftover.rmdir() if leftover.is_dir() else leftover.unlink()
        data_dir.rmdir()


# ------------------------------------------------------------------ item: half-open connections


def test_idle_half_open_connections_do_not_lock_the_renderer_out(
    qtbot: QtBot, main: MainProcess
) -> None:
    idle = []
    for _ in range(40):
        sock = QLocalSocket()
        sock.connectToServer(main.socket_name)
        idle.append(sock)
    qtbot.waitUntil(
        lambda: all(s.state() != QLocalSocket.LocalSocketState.ConnectingState for s in idle),
        timeout=10_000,
    )
    qtbot.wait(200)
    # Well within the 5 s handshake timeout of the idle ones: the renderer gets in at once.
    client = WireClient(main.socket_name)
    client.hello(main.token)
    qtbot.waitUntil(lambda: client.has(MessageKind.HELLO_OK) or client.disconnected, timeout=2000)
    assert client.has(MessageKind.HELLO_OK) and client.connected
    client.send(SessionsListRequest(correlation_id="served"))
    qtbot.waitUntil(lambda: client.has(MessageKind.SESSIONS_LISTED), timeout=10_000)
    for sock in idle:
        sock.abort()


# ------------------------------------------------------------------------- item: the token


_OTHER_PROCESS_HELLO = """
import json, socket, sys
path, token, version = sys.argv[1], sys.argv[2], int(sys.argv[3])
body = json.dumps({"kind": "hello", "token": token, "protocolVersion": version}).encode()
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
    s.settimeout(10)
    s.connect(path)
    s.sendall(len(body).to_bytes(4, "big") + body)
    data = b""
    while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
print(json.loads(data[4:4 + int.from_bytes(data[:4], "big")])["kind"])
"""


def _hello_from_another_process(main: MainProcess) -> str:
    path = main.socket_name
    if not os.path.isabs(path):  # a bare name lives in Qt's temp folder
        path = str(Path(QDir.tempPath()) / path)
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _OTHER_PROCESS_HELLO,
            path,
            main.token,
            str(PROTOCOL_VERSION),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_token_is_bound_to_the_first_process_that_uses_it(
    qtbot: QtBot, main: MainProcess
) -> None:
    first = _renderer(qtbot, main)
    # Another process holding a copy of the token (read from the renderer's environment) is
    # refused, while the process that used it first may reconnect with it.
    assert _hello_from_another_process(main) == "hello.rejected"
    first.close()
    again = _renderer(qtbot, main)
    again.send(SessionsListRequest(correlation_id="x"))
    qtbot.waitUntil(lambda: again.has(MessageKind.SESSIONS_LISTED), timeout=10_000)


def test_a_token_used_first_by_another_process_is_refused_here(
    qtbot: QtBot, main: MainProcess
) -> None:
    assert _hello_from_another_process(main) == "hello.ok"
    client = WireClient(main.socket_name)
    client.hello(main.token)
    qtbot.waitUntil(lambda: client.disconnected, timeout=10_000)
    rejected = client.first(MessageKind.HELLO_REJECTED)
    assert isinstance(rejected, HelloRejectedPush) and rejected.code == "token_invalid"


# ------------------------------------------------------------------------- item: log floods


def test_a_flood_of_refusals_keeps_the_log_history(qtbot: QtBot, main: MainProcess) -> None:
    log_path = main.data_dir / "logs" / "main.log"
    qtbot.waitUntil(lambda: "main process ready" in main_log(main.data_dir), timeout=30_000)
    client = _renderer(qtbot, main)
    forged = "s1\n2026-01-01 00:00:00,000 1 maka.main CRITICAL FORGED " + "x" * 120
    rounds = 1500
    for index in range(rounds):
        client.send(SessionsOpenRequest(session_id=f"{forged}{index}", correlation_id=f"o{index}"))
        client.send(TurnsCancelRequest(session_id=f"{forged}{index}"))
        if index % 100 == 99:
            answered = index + 1
            qtbot.waitUntil(
                lambda: len(client.all(MessageKind.ERROR)) >= answered,  # noqa: B023
                timeout=30_000,
            )
    qtbot.waitUntil(lambda: len(client.all(MessageKind.ERROR)) >= rounds, timeout=60_000)
    for index in range(300):  # bad hellos: each closes its own connection
        bad = WireClient(main.socket_name)
        bad.hello("x" * 43)
        if index % 50 == 49:
            qtbot.waitUntil(lambda: bad.disconnected, timeout=10_000)  # noqa: B023
    qtbot.wait(500)
    text = log_path.read_text(encoding="utf-8")
    assert not (main.data_dir / "logs" / "main.log.1").exists(), "the log rotated"
    assert "listening on" in text, "the start of the history is still there"
    assert len(text) < 200_000, len(text)
    assert "Traceback" not in text
    assert "\n2026-01-01" not in text, "a peer's id forged a log line"
    assert all(line[:4].isdigit() for line in text.splitlines() if line), "one line per record"
    assert text.count("[token_invalid]") <= 20, "repeats are rate-limited"
    assert main.process.poll() is None


# ------------------------------------------------------------------ item: session folders


@pytest.mark.parametrize(
    ("cwd", "reason"),
    [
        ("relative/folder", "absolute"),
        (".", "absolute"),
        ("/", "root"),
        ("HOME", "home folder"),
        ("/tmp/a\0b", "NUL"),
        ("/proc/self/cwd", "/proc"),
        ("/proc/self/root/tmp", "/proc"),
        ("/dev/fd/0", "/proc"),
    ],
)
def test_sessions_create_refuses_unsafe_folders_with_invalid_cwd(
    qtbot: QtBot, main: MainProcess, tmp_path: Path, cwd: str, reason: str
) -> None:
    if cwd == "HOME":
        cwd = str(tmp_path / "home")
    client = _renderer(qtbot, main)
    client.send(SessionsCreateRequest(cwd=cwd, correlation_id="c"))
    qtbot.waitUntil(
        lambda: client.has(MessageKind.ERROR) or client.has(MessageKind.SESSION_UPDATED),
        timeout=10_000,
    )
    error = client.first(MessageKind.ERROR)
    assert isinstance(error, ErrorPush), client.kinds()
    assert error.code == "invalid_cwd" and reason in error.message, error.message
    # A proper project folder is still accepted.
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    client.send(SessionsCreateRequest(cwd=str(project), correlation_id="ok"))
    qtbot.waitUntil(lambda: client.has(MessageKind.SESSION_UPDATED), timeout=10_000)
