"""``maka run`` beside a running host: the host runs the turn, the terminal drives it.

Real processes: a host (the desktop's main process offscreen, or the headless ``maka host``)
owns a data folder; the real ``maka run`` attaches to it as a terminal client. Its output, notes
and exit code are the ones it prints alone; a permission question is answered from its standard
input; a second turn on a busy session is refused with ``session_busy`` naming the terminal that
drives it; Ctrl+C cancels the turn this terminal started; a terminal killed mid-turn leaves the
turn running in the host; a host killed mid-turn ends the command with ``host_stopped``; a host
stopped with SIGTERM cancels the running turn, ends its tool process and releases the folder.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import (
    PROTOCOL_VERSION,
    ClientRole,
    HelloRequest,
    MessageKind,
    TurnsCancelRequest,
    TurnsRunRequest,
)
from app.host.ipc_endpoint import terminal_token_path
from runtime.ledger.store_ports import RunStatus
from tests.helpers.maka_process import MainProcess, maka_executable, start_main
from tests.helpers.maka_run import RunResult, committed_runs, maka, scripted_env, write_script
from tests.helpers.wire_client import WireClient

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform == "win32", reason="terminal clients attach over Unix sockets"),
]

WRITE = {"id": "w1", "name": "write_file", "args": {"path": "a.txt", "content": "hi\n"}}


def _sleeping(seconds: int, marker: str = "") -> dict[str, Any]:
    after = f"; echo done > {marker}" if marker else ""
    return {"id": "b1", "name": "bash", "args": {"command": f"sleep {seconds}{after}"}}


def _ids(text: str) -> str:
    return re.sub(r"session_[0-9a-f]+", "SESSION", text)


class Streaming:
    """A real ``maka run`` in the background, its output read line by line as it comes."""

    def __init__(self, args: Sequence[str], data: Path, env: Mapping[str, str]) -> None:
        environment = dict(os.environ)
        environment.pop("MAKA_FAILPOINT", None)
        environment.update({"MAKA_DATA_DIR": str(data), "QT_QPA_PLATFORM": "offscreen", **env})
        self.process = subprocess.Popen(
            [*maka_executable(), *args],
            env=environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._pumps = [
            threading.Thread(target=self._pump, args=(stream, lines), daemon=True)
            for stream, lines in ((self.process.stdout, self.out), (self.process.stderr, self.err))
        ]
        for pump in self._pumps:
            pump.start()

    @staticmethod
    def _pump(stream: Any, lines: list[str]) -> None:
        for line in iter(stream.readline, ""):
            lines.append(line)

    def wait_for(self, predicate: Callable[[], bool], timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            assert self.process.poll() is None or predicate(), self.text()
            assert time.monotonic() < deadline, self.text()
            time.sleep(0.05)

    def session(self) -> str:
        self.wait_for(lambda: any(line.startswith("session ") for line in self.err))
        first = next(line for line in self.err if line.startswith("session "))
        return first.split()[1]

    def finish(self, timeout_s: float = 60) -> int:
        code = self.process.wait(timeout_s)
        for pump in self._pumps:  # they read the last lines, then the end
            pump.join(10)
        return code

    def text(self) -> str:
        return "".join(self.out) + "\n---\n" + "".join(self.err)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.finish(10)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def clients() -> Iterator[list[Streaming]]:
    started: list[Streaming] = []
    yield started
    for client in started:
        client.kill()


def _host(data: Path, env: Mapping[str, str], *, headless: bool = True) -> MainProcess:
    data.mkdir(parents=True, exist_ok=True)
    return start_main(data, env, *(["host"] if headless else [])).wait_ready()


def _wait_ready(host: MainProcess, timeout_s: float = 60) -> None:
    """``wait_ready`` returns once the host listens; a command then waits for it to be ready,
    but a test that reads the folder must know recovery ran."""
    deadline = time.monotonic() + timeout_s
    while not any(line.startswith("MAKA_MAIN_READY") for line in host.stdout_lines):
        assert host.process.stdout is not None and time.monotonic() < deadline
        line = host.process.stdout.readline()
        if not line:
            break
        host.stdout_lines.append(line)


def _last_status(data: Path, session: str) -> str | None:
    listed = maka(["sessions", "--json"], data)
    assert listed.returncode == 0, listed.stderr
    for row in json.loads(listed.stdout)["sessions"]:
        if row["sessionId"] == session:
            status = row.get("lastRunStatus")
            return str(status) if status is not None else None
    return None


def _one_write(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A session folder, a data folder, and the environment of a model that writes once."""
    work = tmp_path / "work"
    work.mkdir()
    script = write_script(
        tmp_path / "script.json", [[{"text": "Writing.", "toolCalls": [WRITE]}, {"text": "ok"}]]
    )
    return work, tmp_path / "data", dict(scripted_env(script))


def _asked(work: Path, data: Path, env: Mapping[str, str], clients: list[Streaming]) -> Streaming:
    """``maka run`` asking whether it may write (``--permission-mode ask``)."""
    driver = Streaming(["run", "--cwd", str(work), "--permission-mode", "ask", "go"], data, env)
    clients.append(driver)
    driver.wait_for(lambda: any("Allow? [y/N]" in line for line in driver.out))
    return driver


def _killed_at_the_question(
    work: Path, data: Path, env: Mapping[str, str], clients: list[Streaming]
) -> str:
    """The session of a terminal SIGKILLed while it asked."""
    driver = _asked(work, data, env, clients)
    session = driver.session()
    driver.process.send_signal(signal.SIGKILL)
    driver.finish()
    return session


class _SleepingTurn(NamedTuple):
    data: Path
    env: dict[str, str]
    host: MainProcess
    driver: Streaming
    session: str


@contextmanager
def _a_sleeping_turn(
    tmp_path: Path,
    clients: list[Streaming],
    *later_turns: list[dict[str, Any]],
    seconds: int = 60,
) -> Iterator[_SleepingTurn]:
    """A headless host and a ``maka run`` (``sleep``, every call allowed) whose turn sleeps in
    its ``bash`` call for ``seconds``, the call started; ``later_turns`` follow in the script.
    The host is stopped when the block ends."""
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    script = write_script(
        tmp_path / "script.json",
        [[{"toolCalls": [_sleeping(seconds)]}, {"text": "slept"}], *later_turns],
    )
    env = scripted_env(script)
    host = _host(data, env)
    try:
        driver = Streaming(
            ["run", "--cwd", str(work), "--permission-mode", "auto", "sleep"], data, env
        )
        clients.append(driver)
        session = driver.session()
        driver.wait_for(lambda: any("[tool] bash" in line for line in driver.out))
        yield _SleepingTurn(data, env, host, driver, session)
    finally:
        host.stop()


def _decided(
    events: Sequence[Mapping[str, Any]],
) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """Each event recording a permission decision, with the decision."""
    return [
        (e, e["actions"]["permissionDecision"])
        for e in events
        if "permissionDecision" in (e.get("actions") or {})
    ]


def _decisions(events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [decision for _, decision in _decided(events)]


def test_run_beside_the_desktop_prints_what_run_prints_alone(tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "script.json",
        [
            [{"text": "Writing.", "toolCalls": [WRITE]}, {"text": "done"}],
            [
                {
                    "text": "Again.",
                    "toolCalls": [
                        {
                            "id": "w2",
                            "name": "write_file",
                            "args": {"path": "b.txt", "content": "b"},
                        },
                        {"id": "b2", "name": "bash", "args": {"command": "echo x"}},
                    ],
                },
                {"text": "All done.", "chunks": 3},
            ],
        ],
    )
    env = scripted_env(script)
    results: dict[str, tuple[RunResult, RunResult]] = {}
    folders: dict[str, tuple[Path, Path]] = {}
    for path, folder in (("alone", "direct"), ("beside", "served")):
        work = tmp_path / folder / "work"
        work.mkdir(parents=True)
        data = tmp_path / folder / "data"
        host = _host(data, env, headless=False) if path == "beside" else None
        try:
            first = maka(
                ["run", "--cwd", str(work), "--permission-mode", "auto", "one"], data, env=env
            )
            session = first.stderr.split()[1]
            second = maka(
                ["run", "--session", session, "--permission-mode", "ask", "two"],
                data,
                env=env,
                stdin="y\nn\n",
            )
            if host is not None:
                assert host.process.poll() is None, host.stderr()
        finally:
            if host is not None:
                host.stop()
        results[path] = (first, second)
        folders[path] = (work, data)
    for index in (0, 1):
        alone, beside = results["alone"][index], results["beside"][index]
        assert beside.returncode == alone.returncode == 0, beside.stderr
        assert beside.stdout == alone.stdout
        assert _ids(beside.stderr).replace("/served/", "/direct/") == _ids(alone.stderr)
    second = results["beside"][1]
    assert "[permission] write_file wants to:" in second.stdout
    assert "  [permission] allow" in second.stdout and "  [permission] deny" in second.stdout
    work, data = folders["beside"]
    assert (work / "a.txt").read_text() == "hi\n" and (work / "b.txt").read_text() == "b"
    runs = committed_runs(data)
    assert [header.status for header, _ in runs] == [RunStatus.COMPLETED, RunStatus.COMPLETED]


def test_a_busy_session_refuses_a_second_turn_and_ctrl_c_cancels_only_its_own(
    qtbot: QtBot, tmp_path: Path, clients: list[Streaming]
) -> None:
    with _a_sleeping_turn(tmp_path, clients, [{"text": "second"}]) as turn:
        data, env, host, driver, session = turn
        second = maka(
            ["run", "--session", session, "--permission-mode", "auto", "x"], data, env=env
        )
        assert second.returncode == 1, second.stderr
        assert "[session_busy]" in second.stderr
        assert f"a terminal (maka run, pid {driver.process.pid})" in second.stderr
        assert "Traceback" not in second.stderr
        # An answer about a call is refused the same way, naming who drives the session.
        settle = maka(["settle", session, "call-x", "--not-run"], data, env=env)
        assert settle.returncode == 1 and "[session_busy]" in settle.stderr, settle.stderr
        assert f"a terminal (maka run, pid {driver.process.pid})" in settle.stderr

        # Another terminal's cancel does not stop a turn it did not start.
        other = WireClient(host.socket_name)
        other.send(
            HelloRequest(
                token=Path(terminal_token_path(data)).read_text().strip(),
                protocol_version=PROTOCOL_VERSION,
                role=ClientRole.TERMINAL,
                correlation_id="hello",
            )
        )
        qtbot.waitUntil(lambda: other.has(MessageKind.HELLO_OK), timeout=30_000)
        other.send(TurnsCancelRequest(session_id=session))
        other.ask_marker("after-cancel")
        qtbot.waitUntil(lambda: other.answered("after-cancel"), timeout=30_000)
        time.sleep(1.0)
        assert driver.process.poll() is None, driver.text()
        assert _last_status(data, session) == "running"
        other.close()

        driver.process.send_signal(signal.SIGINT)
        assert driver.finish() == 1, driver.text()
        assert "maka: cancelling the turn..." in "".join(driver.err)
        assert "maka: the turn ended cancelled" in "".join(driver.err)
        assert host.process.poll() is None, host.stderr()
        assert _last_status(data, session) == "cancelled"
    [(header, _)] = committed_runs(data)
    assert header.status is RunStatus.CANCELLED


def test_a_terminal_killed_mid_turn_leaves_the_turn_running_in_the_host(
    tmp_path: Path, clients: list[Streaming]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    marker = work / "marker.txt"
    script = write_script(
        tmp_path / "script.json",
        [[{"toolCalls": [_sleeping(4, str(marker))]}, {"text": "slept well"}]],
    )
    env = scripted_env(script)
    host = _host(data, env)
    try:
        driver = Streaming(
            ["run", "--cwd", str(work), "--permission-mode", "auto", "go"], data, env
        )
        clients.append(driver)
        session = driver.session()
        driver.wait_for(lambda: any("[tool] bash" in line for line in driver.out))
        driver.process.send_signal(signal.SIGKILL)
        driver.finish()
        # Another message meanwhile: refused, and the refusal says that terminal is gone.
        busy = maka(["run", "--session", session, "again"], data, env=env)
        assert busy.returncode == 1 and "[session_busy]" in busy.stderr, busy.stderr
        assert "which has gone away (the turn goes on here)" in busy.stderr, busy.stderr
        # maka plan meanwhile leads with the running turn, not with Safe resume being off.
        plan = maka(["plan", session], data, env=env)
        assert plan.returncode == 3, plan.stderr
        first = plan.stdout.splitlines()[0]
        assert first == f"A turn of session {session} is still running:", plan.stdout
        deadline = time.monotonic() + 60
        while _last_status(data, session) != "completed":
            assert time.monotonic() < deadline, "the turn did not finish in the host"
            time.sleep(0.2)
        assert marker.read_text() == "done\n"
        assert host.process.poll() is None
    finally:
        host.stop()


def test_sigkill_of_the_host_mid_turn_says_the_host_stopped(
    tmp_path: Path, clients: list[Streaming]
) -> None:
    with _a_sleeping_turn(tmp_path, clients, seconds=5) as turn:
        driver, session, data = turn.driver, turn.session, turn.data
        turn.host.process.send_signal(signal.SIGKILL)
        assert driver.finish() == 1, driver.text()
    assert "[host_stopped]" in "".join(driver.err), driver.text()
    said = " ".join("".join(driver.err).split())
    # The turn may have done part of its work: never "run the command again".
    assert "run the command again" not in said, said
    assert "1 tool call (bash) had started with no outcome recorded and may have done" in said
    assert f"look before you run it again (maka plan {session} says" in said, said
    assert "Traceback" not in "".join(driver.err)
    # Nobody serves the folder: the next command recovers the run as after any crash.
    time.sleep(6)  # the orphaned tool process ends by itself
    listed = json.loads(maka(["sessions", "--json"], data).stdout)
    [row] = [row for row in listed["sessions"] if row["sessionId"] == session]
    assert "servedBy" not in listed and row["interrupted"] is True, row


def test_sigkill_of_the_host_at_a_question_says_the_call_never_ran(
    tmp_path: Path, clients: list[Streaming]
) -> None:
    """The host killed while its terminal asked ``Allow? [y/N]``: the terminal said the turn "may
    have done part of its work", though the record shows the write was never dispatched. It
    now says what the record shows: no tool call ran, the one asked for never ran."""
    work, data, env = _one_write(tmp_path)
    host = _host(data, env)
    try:
        driver = _asked(work, data, env, clients)
        session = driver.session()
        host.process.send_signal(signal.SIGKILL)
        assert driver.finish() == 1, driver.text()
    finally:
        host.stop()
    said = " ".join("".join(driver.err).split())
    assert "[host_stopped]" in said, said
    assert "part of its work" not in said, said
    assert (
        "it had run no tool call, so it changed nothing; the model's call to write_file never "
        f"ran: you can run it again (maka plan {session} says what was recorded; the next start "
        "repairs what it left)"
    ) in said, said
    assert not (work / "a.txt").exists()


def test_maka_host_stops_on_sigterm_cancelling_the_turn_and_releasing_the_folder(
    tmp_path: Path, clients: list[Streaming]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    script = write_script(
        tmp_path / "script.json", [[{"toolCalls": [_sleeping(67)]}, {"text": "never"}]]
    )
    env = scripted_env(script)
    host = _host(data, env)
    try:
        _wait_ready(host)
        second = start_main(data, env, "host")
        assert second.process.wait(60) == 1
        second.stop()
        assert "[store_locked]" in second.stderr() and str(host.pid) in second.stderr()
        # The owner is named for what it is, asked as a terminal would: a serving host.
        assert f"'maka host' (pid {host.pid}) serves" in second.stderr(), second.stderr()
        driver = Streaming(
            ["run", "--cwd", str(work), "--permission-mode", "auto", "go"], data, env
        )
        clients.append(driver)
        driver.wait_for(lambda: any("[tool] bash" in line for line in driver.out))
        assert host.terminate(signal.SIGTERM, timeout_s=60) == 0, host.stderr()
        assert driver.finish() == 1, driver.text()
        # Its ending is recorded: nothing is left for a next start to repair.
        assert "was shut down while this turn ran, and stopped it" in driver.text()
        assert "the next start repairs" not in driver.text()
    finally:
        host.stop()
    # The turn ended as a user's stop ends it, its command was ended, the folder is free.
    [(header, _)] = committed_runs(data)
    assert header.status is RunStatus.CANCELLED
    still = subprocess.run(["pgrep", "-f", "sleep 67"], check=False, capture_output=True)
    assert still.returncode != 0, "the turn's command outlived the host"
    listed = maka(["sessions", "--json"], data)
    assert listed.returncode == 0 and "servedBy" not in json.loads(listed.stdout)


def test_maka_host_recovers_and_resumes_automatically_at_start(tmp_path: Path) -> None:
    """Startup recovery, then automatic resume with the flag on, as the desktop does: a turn
    killed mid-way (SIGKILL at a failpoint) is repaired by the host's start and continued."""
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "write hello.txt saying hi"]
    killed = maka(args, data, env={"MAKA_FAILPOINT": "P6", "MAKA_WORKSPACE_CHECKPOINTS": "off"})
    assert killed.returncode == -9, killed.stderr
    [(header, _)] = committed_runs(data)
    session = header.session_id
    host = start_main(data, {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}, "host").wait_ready()
    try:
        deadline = time.monotonic() + 120
        while _last_status(data, session) != "completed":
            assert host.process.poll() is None, host.stderr()
            assert time.monotonic() < deadline, "automatic resume did not continue the session"
            time.sleep(0.2)
        listed = json.loads(maka(["sessions", "--json"], data).stdout)
        assert listed["servedBy"] == {"host": "headless", "pid": host.pid}
    finally:
        assert host.terminate(signal.SIGINT, timeout_s=60) == 0, host.stderr()
        host.stop()
    runs = committed_runs(data)
    assert [header.status for header, _ in runs] == [RunStatus.FAILED, RunStatus.COMPLETED]


def test_a_question_left_by_a_killed_terminal_stops_the_turn_when_no_window_can_answer(
    tmp_path: Path, clients: list[Streaming]
) -> None:
    """It was denied in the user's name: the record said the user refused, the model was told
    so, and the run ended "completed". Nobody answered: the turn stops there, as one no
    terminal drives does; the call never runs."""
    work, data, env = _one_write(tmp_path)
    host = _host(data, env)
    try:
        session = _killed_at_the_question(work, data, env, clients)
        deadline = time.monotonic() + 60
        while _last_status(data, session) not in ("cancelled", "completed"):
            assert time.monotonic() < deadline, "the turn still waits for an answer"
            time.sleep(0.2)
        assert host.process.poll() is None
    finally:
        host.stop()
    assert not (work / "a.txt").exists()
    [(header, events)] = committed_runs(data)
    assert header.status == RunStatus.CANCELLED
    assert all(d["decision"] != "deny" or e["author"] != "user" for e, d in _decided(events))
    said = json.dumps([e.get("content") for e in events])
    assert "the user denied" not in said, said
    # Maka stopped it, not the user: the call's row and the plan say so (they said "the turn
    # was cancelled", "stopped": "cancelled", under an ending that said Maka stopped it).
    planned = json.loads(maka(["plan", session, "--json"], data, env=env).stdout)
    [call] = [op for op in planned["operations"] if op.get("toolName") == "write_file"]
    assert call.get("stopped") == "host", call
    timeline = maka(["timeline", session], data, env=env).stdout
    assert "not run (Maka stopped the turn)" in timeline, timeline
    assert "the turn was cancelled" not in timeline, timeline


def test_a_question_left_by_a_killed_terminal_stops_the_turn_when_the_last_window_leaves(
    qtbot: QtBot, tmp_path: Path, clients: list[Streaming]
) -> None:
    """The question waited for the window open when its terminal was killed; the window then
    went away (closed, crashed) and the turn waited for ever, the session busy. It stops there,
    as when the last viewing terminal leaves: not denied, the call never runs."""
    work, data, env = _one_write(tmp_path)
    host = _host(data, env)
    try:
        window = WireClient(host.socket_name)
        window.hello(host.token)
        qtbot.waitUntil(lambda: window.has(MessageKind.HELLO_OK), timeout=60_000)
        session = _killed_at_the_question(work, data, env, clients)
        qtbot.wait(1500)
        assert _last_status(data, session) == "running"  # the window may answer it
        window.close()
        deadline = time.monotonic() + 60
        while _last_status(data, session) not in ("cancelled", "completed"):
            assert time.monotonic() < deadline, "the turn still waits for an answer"
            qtbot.wait(200)
        assert host.process.poll() is None
    finally:
        host.stop()
    assert not (work / "a.txt").exists()
    [(header, events)] = committed_runs(data)
    assert header.status == RunStatus.CANCELLED
    decisions = _decisions(events)
    assert all(d["decision"] != "allow" for d in decisions), decisions


def test_a_window_may_not_send_a_terminals_turn(qtbot: QtBot, tmp_path: Path) -> None:
    """``turns.run`` carries a permission mode: only a terminal may send it; a window that does
    is closed (it sends ``turns.send``), and the host goes on."""
    work = tmp_path / "work"
    work.mkdir()
    host = _host(tmp_path / "data", {}, headless=False)
    try:
        window = WireClient(host.socket_name)
        window.hello(host.token)
        qtbot.waitUntil(lambda: window.has(MessageKind.HELLO_OK), timeout=60_000)
        window.send(TurnsRunRequest(cwd=str(work), text="go", permission_mode="auto"))
        qtbot.waitUntil(lambda: window.disconnected, timeout=30_000)
        assert host.process.poll() is None
        listed = json.loads(maka(["sessions", "--json"], tmp_path / "data").stdout)
        assert listed["sessions"] == [] and listed["servedBy"]["host"] == "desktop"
    finally:
        host.stop()


def test_a_terminals_own_checkpoint_setting_that_the_host_does_not_follow_is_said(
    tmp_path: Path,
) -> None:
    """``MAKA_WORKSPACE_CHECKPOINTS=off maka run`` beside a host that takes snapshots: the host
    runs the turn with its own setting and took them anyway, in silence. The command now says
    so; and the other way round (a host started with them off, a terminal that did not ask for
    that: the variable empty). The same setting on both sides says nothing."""
    turn = [{"text": "Writing.", "toolCalls": [WRITE]}, {"text": "done"}]
    script = write_script(tmp_path / "script.json", [turn])
    said: dict[str, str] = {}
    for host_setting, own_setting in (("on", "off"), ("off", ""), ("on", "on")):
        case = f"{host_setting}-{own_setting or 'unset'}"
        work, data = tmp_path / case / "work", tmp_path / case / "data"
        work.mkdir(parents=True)
        host_env = scripted_env(script, checkpoints=host_setting == "on")
        host = _host(data, host_env)
        try:
            own_env = {**host_env, "MAKA_WORKSPACE_CHECKPOINTS": own_setting}
            args = ["run", "--cwd", str(work), "--permission-mode", "auto", "one"]
            result = maka(args, data, env=own_env)
            assert result.returncode == 0, result.stderr
            said[case] = result.stderr
        finally:
            host.stop()
        snapshots = [
            event
            for _, events in committed_runs(data)
            for event in events
            if "workspaceCheckpoint" in (event.get("actions") or {})
        ]
        assert bool(snapshots) == (host_setting == "on"), case
    assert (
        "note: MAKA_WORKSPACE_CHECKPOINTS=off here does not apply to this turn: the running "
        "Maka serving this data folder runs it and takes snapshots of the folder, as it was "
        "started to" in said["on-off"]
    ), said["on-off"]
    assert (
        "note: this turn takes no snapshots of the folder: the running Maka serving this data "
        "folder runs it and takes none (it was started with MAKA_WORKSPACE_CHECKPOINTS=off)"
        in said["off-unset"]
    ), said["off-unset"]
    assert "snapshots" not in said["on-on"], said["on-on"]


def test_ctrl_c_at_a_question_prints_what_the_record_says(
    tmp_path: Path, clients: list[Streaming]
) -> None:
    """Ctrl+C at ``Allow? [y/N]``: the terminal printed "[permission] deny", while the record
    (closed by Maka, author host) and the timeline say the question closed unanswered."""
    work, data, env = _one_write(tmp_path)
    driver = _asked(work, data, env, clients)
    driver.process.send_signal(signal.SIGINT)
    driver.finish()
    said = "".join(driver.out)
    assert "[permission] closed unanswered (the turn was stopped)" in said, driver.text()
    assert "[permission] deny" not in said
    [(_, events)] = committed_runs(data)
    assert [e["author"] for e in events if "permissionDecision" in (e.get("actions") or {})] == [
        "host"
    ]
    assert not (work / "a.txt").exists()


def test_a_turn_stopped_from_the_window_tells_its_terminal_where(
    qtbot: QtBot, tmp_path: Path, clients: list[Streaming]
) -> None:
    """Stop in the window on a terminal's turn: the terminal printed only "cancelled_by_user",
    as if its own user had stopped it. It is told where, as for an answered question."""
    with _a_sleeping_turn(tmp_path, clients) as turn:
        data, _env, host, driver, session = turn
        window = WireClient(host.socket_name)
        window.hello(host.token)
        qtbot.waitUntil(lambda: window.has(MessageKind.HELLO_OK), timeout=60_000)
        window.send(TurnsCancelRequest(session_id=session))
        driver.finish()
        window.close()
    said = "".join(driver.err)
    assert "[stop] the turn was stopped in the desktop window" in said, driver.text()
    [(header, _)] = committed_runs(data)
    assert header.status is RunStatus.CANCELLED


def test_a_host_shut_down_mid_command_says_the_command_was_stopped(
    tmp_path: Path, clients: list[Streaming]
) -> None:
    """SIGTERM of the host (Ctrl+C in ``maka host``) while its terminal's command sleeps: the
    host stops the command and records that; the terminal said "no tool call of it was
    running: it had finished 1 tool call (bash)", while maka plan said it was stopped."""
    with _a_sleeping_turn(tmp_path, clients, seconds=20) as turn:
        driver, session = turn.driver, turn.session
        time.sleep(1)  # the command is running
        assert turn.host.terminate() == 0, turn.host.stderr()[-2000:]
        assert driver.finish() == 1, driver.text()
    said = " ".join("".join(driver.err).split())
    assert "[host_stopped]" in said, said
    assert "no tool call of it was running" not in said and "it had finished" not in said, said
    assert "1 tool call (bash) was stopped part way (its result says so)" in said, said
    assert f"(maka plan {session} says what was recorded" in said, said


def test_changing_a_session_whose_turn_runs_names_who_drives_it(
    tmp_path: Path, clients: list[Streaming]
) -> None:
    """``maka sessions remove|rename|relocate`` while another terminal's turn runs said "the
    session is running; stop it first", which a terminal cannot do to another client's turn;
    it now names the driver and says to wait, as a second ``maka run`` is told."""
    with _a_sleeping_turn(tmp_path, clients, seconds=20) as turn:
        for args in (
            ["sessions", "rename", turn.session, "a new title"],
            ["sessions", "remove", turn.session, "--yes"],
        ):
            refused = maka(args, turn.data, env=turn.env)
            assert refused.returncode != 0, refused.stdout
            said = " ".join(refused.stderr.split())
            assert "[session_busy]" in said and "stop it first" not in said, said
            assert f"driven by a terminal (maka run, pid {turn.driver.process.pid})" in said
            assert "wait for it to end" in said, said
        turn.driver.process.send_signal(signal.SIGINT)
        turn.driver.finish()
