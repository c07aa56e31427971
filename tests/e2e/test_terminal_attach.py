"""A terminal beside the open desktop: ``maka sessions`` is served by the running host.

Real processes: the desktop's main process (offscreen, no renderer) owns a data folder holding a
session killed with SIGKILL and recovered; the real ``maka sessions`` attaches to it as a
terminal client. Its output and exit code are the ones the command prints without a host, and
``--json`` names the host that served it. ``maka settle`` beside the desktop (refused with
``store_locked`` before) is recorded by the host, printing what the command prints alone. SIGKILL
of the host while the command waits for its answer ends the command with ``host_stopped`` (exit
1); the next command, finding no host, reads the folder itself as always. A terminal is never
trusted more than the window: a wrong token, or a request a terminal may not send, closes that
connection and nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import (
    PROTOCOL_VERSION,
    ClientRole,
    HelloRejectedPush,
    HelloRequest,
    MessageKind,
    ProviderChoice,
    SessionsOverviewedPush,
    SessionsOverviewRequest,
    SettingsUpdateRequest,
)
from app.host.ipc_endpoint import terminal_token_path
from tests.e2e.test_sessions_resume_hint_cli import interrupted_session
from tests.e2e.test_settle_cli import FLAG, NOTE, Drill
from tests.helpers.maka_process import MainProcess, maka_executable, start_main
from tests.helpers.maka_run import RunResult, maka
from tests.helpers.wire_client import WireClient

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="reads /proc to see the client connect"),
]


@pytest.fixture
def folder(tmp_path: Path) -> tuple[Path, str]:
    return interrupted_session(tmp_path)


@pytest.fixture
def host(folder: tuple[Path, str]) -> Iterator[MainProcess]:
    process = start_main(folder[0]).wait_ready()
    yield process
    process.stop()


def test_sessions_beside_the_desktop_is_served_by_it_with_the_same_output(
    folder: tuple[Path, str],
) -> None:
    data, session = folder
    alone_json = maka(["sessions", "--json"], data)
    alone_text = maka(["sessions"], data)
    assert alone_json.returncode == 0 and alone_text.returncode == 0, alone_json.stderr
    assert "servedBy" not in json.loads(alone_json.stdout)

    host = start_main(data).wait_ready()
    try:
        served_json = maka(["sessions", "--json"], data)
        served_text = maka(["sessions"], data)
        assert host.process.poll() is None
    finally:
        host.stop()
    assert served_json.returncode == 0, served_json.stderr
    document = json.loads(served_json.stdout)
    assert document["servedBy"] == {"host": "desktop", "pid": host.pid}
    assert document["sessions"] == json.loads(alone_json.stdout)["sessions"]
    assert document["sessions"][0]["sessionId"] == session
    assert served_text.returncode == 0, served_text.stderr
    assert served_text.stdout == alone_text.stdout
    assert served_text.stderr == alone_text.stderr == ""


def test_plan_beside_the_desktop_is_planned_by_it_with_the_same_output(
    folder: tuple[Path, str],
) -> None:
    data, session = folder
    alone_json = maka(["plan", session, "--json"], data)
    alone_text = maka(["plan", session], data)
    host = start_main(data).wait_ready()
    try:
        served_json = maka(["plan", session, "--json"], data)
        served_text = maka(["plan", session], data)
        unknown = maka(["plan", "no-such-session"], data)
        too_long = maka(["plan", "s" * 300, "--json"], data)
        assert host.process.poll() is None
    finally:
        host.stop()
    # Safe resume is off here: both park on it, with the same words and the same document.
    assert alone_json.returncode == served_json.returncode == 3, served_json.stderr
    assert json.loads(served_json.stdout) == json.loads(alone_json.stdout)
    assert json.loads(served_json.stdout)["readOnly"] is False
    assert alone_text.returncode == served_text.returncode == 3
    assert served_text.stdout == alone_text.stdout
    assert served_text.stderr == alone_text.stderr == ""
    assert unknown.returncode == 2 and "[session_not_found]" in unknown.stderr
    assert too_long.returncode == 2
    assert json.loads(too_long.stdout)["error"]["code"] == "session_not_found"


def _connected_unix_sockets(pid: int) -> int:
    """How many of ``pid``'s sockets are connected Unix sockets (state 03 in /proc/net/unix)."""
    inodes: set[str] = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        for entry in fd_dir.iterdir():
            try:
                target = os.readlink(entry)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    except OSError:
        return 0
    connected = 0
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 7 and fields[6] in inodes and fields[5] == "03":
            connected += 1
    return connected


def test_sigkill_of_the_host_while_the_command_waits_says_the_host_stopped(
    folder: tuple[Path, str], host: MainProcess
) -> None:
    data, _ = folder
    # The host stops answering (SIGSTOP) so the command is surely waiting when it dies.
    os.kill(host.pid, signal.SIGSTOP)
    environment = {
        **os.environ,
        "MAKA_DATA_DIR": str(data),
        "QT_QPA_PLATFORM": "offscreen",
    }
    command = subprocess.Popen(
        [*maka_executable(), "sessions", "--json"],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while _connected_unix_sockets(command.pid) == 0:
            assert command.poll() is None, command.communicate()
            assert time.monotonic() < deadline, "the command never connected to the host"
            time.sleep(0.05)
        host.process.send_signal(signal.SIGKILL)
        out, err = command.communicate(timeout=120)
    finally:
        if command.poll() is None:
            command.kill()
            command.wait(10)
    host.process.wait(30)
    assert command.returncode == 1, (out, err)
    refusal = json.loads(out)
    assert refusal["error"]["code"] == "host_stopped", refusal
    assert "Traceback" not in err

    # Nobody serves the folder now (its socket and token are left behind): the next command
    # reads it itself, as it always did.
    assert Path(terminal_token_path(data)).exists()
    after = maka(["sessions", "--json"], data)
    assert after.returncode == 0, after.stderr
    assert "servedBy" not in json.loads(after.stdout)


def test_a_host_that_does_not_answer_is_said_to_be_unreachable(
    folder: tuple[Path, str], host: MainProcess
) -> None:
    """A stopped host (SIGSTOP, a frozen machine) once held every command for ten minutes
    without a word: the hello now has its own short deadline."""
    data, _ = folder
    os.kill(host.pid, signal.SIGSTOP)
    try:
        result = maka(["sessions", "--json"], data, timeout=90)
    finally:
        os.kill(host.pid, signal.SIGCONT)
    assert result.returncode == 1, result
    refusal = json.loads(result.stdout)["error"]
    assert refusal["code"] == "host_unreachable", refusal
    assert "did not answer within 15 s" in refusal["message"]
    assert "Traceback" not in result.stderr


def test_a_copy_of_the_data_folder_is_not_served_by_the_originals_host(
    folder: tuple[Path, str], host: MainProcess, tmp_path: Path
) -> None:
    """A copy made while the host ran carries its endpoint pointer and terminal token: a
    command given the copy reached the original's host and changed the original folder."""
    data, session = folder
    copy = tmp_path / "copy-of-data"
    shutil.copytree(data, copy, ignore=lambda _where, names: [n for n in names if "maka-" in n])
    assert (copy / "ipc" / "endpoint").exists() or Path(terminal_token_path(copy)).exists()
    served = json.loads(maka(["sessions", "--json"], data).stdout)
    assert served["servedBy"]["pid"] == host.pid
    result = maka(["sessions", "rename", session, "renamed in the copy"], copy)
    assert result.returncode == 0, result.stderr
    listed = json.loads(maka(["sessions", "--json"], copy).stdout)
    assert "servedBy" not in listed
    assert [row["title"] for row in listed["sessions"]] == ["renamed in the copy"]
    original = json.loads(maka(["sessions", "--json"], data).stdout)
    assert [row["title"] for row in original["sessions"]] != ["renamed in the copy"]


def _terminal(qtbot: QtBot, host: MainProcess, token: str) -> WireClient:
    client = WireClient(host.socket_name)
    client.send(
        HelloRequest(
            token=token,
            protocol_version=PROTOCOL_VERSION,
            role=ClientRole.TERMINAL,
            correlation_id="hello",
        )
    )
    qtbot.waitUntil(lambda: bool(client.received) or client.disconnected, timeout=30_000)
    return client


def test_a_terminal_needs_the_terminal_token_and_asks_only_what_it_may(
    qtbot: QtBot, folder: tuple[Path, str], host: MainProcess
) -> None:
    data, session = folder
    terminal_token = Path(terminal_token_path(data)).read_text().strip()
    assert Path(terminal_token_path(data)).stat().st_mode & 0o077 == 0

    # The window's token does not make a terminal, and a terminal's does not make a window.
    wrong = _terminal(qtbot, host, host.token)
    qtbot.waitUntil(lambda: wrong.disconnected, timeout=30_000)
    rejected = wrong.first(MessageKind.HELLO_REJECTED)
    assert isinstance(rejected, HelloRejectedPush) and rejected.code == "token_invalid"
    posing = WireClient(host.socket_name)
    posing.hello(terminal_token)
    qtbot.waitUntil(lambda: posing.disconnected, timeout=30_000)
    assert not posing.has(MessageKind.HELLO_OK)

    # Two terminals at once, each answered.
    first = _terminal(qtbot, host, terminal_token)
    second = _terminal(qtbot, host, terminal_token)
    for client in (first, second):
        assert client.has(MessageKind.HELLO_OK)
        client.send(SessionsOverviewRequest(correlation_id="rows"))
    for client in (first, second):
        qtbot.waitUntil(partial(client.answered, "rows"), timeout=30_000)
        rows = client.first(MessageKind.SESSIONS_OVERVIEWED)
        assert isinstance(rows, SessionsOverviewedPush)
        assert [row.session_id for row in rows.rows] == [session]

    # A request a terminal may not send closes that connection only; nothing changes.
    settings = data / "settings.json"
    settings_before = settings.read_bytes() if settings.exists() else None
    first.send(SettingsUpdateRequest(provider=ProviderChoice.OPENAI_COMPATIBLE, max_steps=3))
    qtbot.waitUntil(lambda: first.disconnected, timeout=30_000)
    assert (settings.read_bytes() if settings.exists() else None) == settings_before
    assert host.process.poll() is None
    second.send(SessionsOverviewRequest(correlation_id="still"))
    qtbot.waitUntil(lambda: second.answered("still"), timeout=30_000)
    assert not second.disconnected


def _settled(result: RunResult) -> dict[str, Any]:
    assert result.returncode == 0, result.stdout + result.stderr
    body: dict[str, Any] = json.loads(result.stdout)
    return body


def test_settle_beside_the_desktop_is_recorded_by_it_as_the_command_would(
    tmp_path: Path,
) -> None:
    (tmp_path / "alone").mkdir()
    (tmp_path / "beside").mkdir()
    alone = Drill(tmp_path / "alone")
    alone.crash_inside_bash()
    answer = ["c1", "--ran", "--note", NOTE, "--json"]
    expected = _settled(alone.maka("settle", alone.session, *answer))

    beside = Drill(tmp_path / "beside")
    beside.crash_inside_bash()
    session = beside.session
    host = start_main(beside.data, FLAG).wait_ready()
    try:
        planned = beside.maka("plan", session)
        body = _settled(beside.maka("settle", session, *answer))
        again = beside.maka("settle", session, *answer[:-1])
        unknown_call = beside.maka("settle", session, "c9", "--not-run")
        unknown_session = beside.maka("settle", "no-such-session", "c1", "--ran")
        long_note = beside.maka("settle", session, "c1", "--ran", "--note", "n" * 501)
        assert host.process.poll() is None
    finally:
        host.stop()

    # maka plan beside the desktop is planned by it: the park and its advice, nothing read-only.
    assert planned.returncode == 3, planned.stderr
    assert f"maka settle {session} c1 --ran" in planned.stdout
    assert planned.stderr == ""
    varying = ("operationId", "runId", "attestedAt")
    assert {k: v for k, v in body.items() if k not in varying} == {
        k: v for k, v in expected.items() if k not in varying
    }
    assert body["created"] is True and body["note"] == NOTE and body["resume"]["continues"]
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("Already recorded: you confirmed that bash c1 ran (")
    assert f"Safe resume can now continue: maka resume {session}" in again.stdout
    assert unknown_call.returncode == 2, unknown_call.stderr
    assert "[operation_not_found]" in unknown_call.stderr
    assert unknown_session.returncode == 2, unknown_session.stderr
    assert "[session_not_found]" in unknown_session.stderr
    assert long_note.returncode == 2 and "[attestation_note_too_long]" in long_note.stderr
    assert "Traceback" not in unknown_call.stderr + unknown_session.stderr + long_note.stderr
    ran, attestation = beside.attestation()
    assert ran and attestation.note == NOTE
    assert beside.count() == 1


NOBODY = 65534


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as a second local account")
def test_another_accounts_process_cannot_reach_the_host(
    folder: tuple[Path, str], host: MainProcess
) -> None:
    """Even holding the terminal token (read here as root), a process of another account cannot
    connect: the socket lives in a folder only the owner may enter."""
    data, _ = folder
    token = Path(terminal_token_path(data)).read_text().strip()
    assert len(token) >= 16
    pid = os.fork()
    if pid == 0:  # the child: become the other account, then try
        code = 3
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(host.socket_name)
                code = 1
            except PermissionError:
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "another account reached the socket"
    assert host.process.poll() is None
    served = maka(["sessions", "--json"], data)
    assert json.loads(served.stdout)["servedBy"]["pid"] == host.pid
