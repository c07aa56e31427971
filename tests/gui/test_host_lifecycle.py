"""The main process in-process: lifecycle, startup and shutdown order, routing, auto-resume.

A real ``HostApp`` (real QLockFile, real QLocalServer, real worker threads, real signal bridge)
runs with an in-memory ``HostServices``; a real ``QLocalSocket`` client plays the renderer.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

import main_process.host_app as host_app_module
from app.bridge_contract import (
    HelloOkPush,
    HostStatePush,
    MessageKind,
    ResumeDiagnostic,
    ResumeFailedPush,
    ResumeLatestRequest,
    ResumeParkedPush,
    ResumeStartedPush,
    RunStatusPush,
    RunStatusValue,
    SessionRemovedPush,
    SessionsCreateRequest,
    SessionsListedPush,
    SessionsListRequest,
    SessionsOpenRequest,
    SessionSummary,
    SessionUpdatedPush,
    TranscriptItemPush,
    TurnsCancelRequest,
    TurnsSendRequest,
    WindowActivateRequest,
    encode_frame,
)
from app.host.auto_resume import select_auto_resume
from app.host.host_services import (
    HostServices,
    InterruptedRun,
    RecoveryReport,
    ResumeFailed,
    ResumeParked,
    ResumeStarted,
)
from app.host.ipc_endpoint import find_endpoint, socket_name_for
from main_process.host_app import HostApp, HostConfig
from main_process.host_lifecycle import HostLifecycle, HostState, IllegalTransition
from main_process.renderer_launcher import renderer_command
from main_process.turn_workers import MainThreadRelay
from runtime.ledger.codes import ParkReason, StoreCode
from runtime.ledger.ledger_errors import LedgerError
from storage.instance_lock import InstanceLock, LockOutcome
from tests.helpers.fake_host_services import FakeHostServices
from tests.helpers.wire_client import WireClient

pytestmark = pytest.mark.gui


# ------------------------------------------------------------------------------- pure parts


def test_lifecycle_moves_forward_only_and_close_is_idempotent() -> None:
    lifecycle = HostLifecycle()
    seen: list[tuple[str, str]] = []
    lifecycle.subscribe(lambda old, new: seen.append((old, new)))
    assert not lifecycle.admits_work
    assert lifecycle.mark_ready()
    assert lifecycle.admits_work
    assert lifecycle.begin_closing()
    assert not lifecycle.begin_closing()
    assert not lifecycle.mark_ready()  # a late startup never reopens a closing host
    assert lifecycle.mark_closed()
    assert not lifecycle.mark_closed()
    assert not lifecycle.begin_closing()
    assert seen == [("opening", "ready"), ("ready", "closing"), ("closing", "closed")]


def test_lifecycle_refuses_to_skip_closing() -> None:
    lifecycle = HostLifecycle()
    with pytest.raises(IllegalTransition):
        lifecycle.mark_closed()
    assert lifecycle.begin_closing()  # a startup that fails goes opening -> closing
    assert lifecycle.state is HostState.CLOSING


def _run(session: str, run: str, at: int, automatic: bool = False) -> InterruptedRun:
    return InterruptedRun(session, run, at, automatic_continuation=automatic)


def test_auto_resume_takes_newest_three_and_guards_crash_loops() -> None:
    runs = [
        _run("a", "r1", 10),
        _run("b", "r2", 50),
        _run("c", "r3", 40, automatic=True),
        _run("d", "r4", 30),
        _run("e", "r5", 20),
        _run("f", "r6", 5),
        _run("a", "r7", 60),  # a newer interrupted run of session a replaces r1
    ]
    selection = select_auto_resume(runs, enabled=True)
    assert [r.run_id for r in selection.resume] == ["r7", "r2", "r4"]
    assert [r.run_id for r in selection.skipped_crash_loop] == ["r3"]
    assert [r.run_id for r in selection.skipped_over_limit] == ["r5", "r6"]


def test_auto_resume_guard_holds_a_session_whose_latest_run_is_an_automatic_continuation() -> None:
    runs = [_run("a", "old", 1), _run("a", "auto", 2, automatic=True)]
    selection = select_auto_resume(runs, enabled=True)
    assert selection.resume == ()
    assert [r.run_id for r in selection.skipped_crash_loop] == ["auto"]


def test_auto_resume_does_nothing_with_the_flag_off() -> None:
    assert select_auto_resume([_run("a", "r", 1)], enabled=False).resume == ()


def test_renderer_is_spawned_from_this_program(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A source install runs its own ``app.commands.gui_cmd``, whatever the folder it starts
    in holds: ``python -m`` put the current folder first, and a project's ``app.py`` hid Maka's
    ``app`` package, so the window never opened in a Python project's folder."""
    import subprocess
    import sys

    from PySide6.QtCore import QCoreApplication

    command = renderer_command()
    assert command.program == sys.executable
    assert command.arguments[-3:] == ("app.commands.gui_cmd", "--role", "renderer")
    assert command.arguments[0] == "-P"
    (tmp_path / "app.py").write_text("raise SystemExit('the project app.py was imported')\n")
    (tmp_path / "main_process").mkdir()  # (a folder of the same name as another package)
    ran = subprocess.run(
        [command.program, *command.arguments[:-2], "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0 and "usage: maka gui" in ran.stdout, ran.stderr
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    frozen = renderer_command(("--refusal", "store_corrupt"))
    assert frozen.arguments == ("gui", "--role", "renderer", "--refusal", "store_corrupt")
    assert frozen.program == QCoreApplication.applicationFilePath()


def test_instance_lock_is_exclusive_and_released(tmp_path: Path) -> None:
    first = InstanceLock(tmp_path)
    second = InstanceLock(tmp_path)
    assert first.acquire().outcome is LockOutcome.ACQUIRED
    held = second.acquire()
    assert held.outcome is LockOutcome.HELD_ELSEWHERE
    assert held.holder_pid == os.getpid()
    first.release()
    first.release()  # double release is harmless
    assert second.acquire().outcome is LockOutcome.ACQUIRED
    second.release()


def test_socket_names_are_short_and_per_data_directory(tmp_path: Path) -> None:
    deep = tmp_path / ("x" * 200)
    assert len(socket_name_for(deep)) <= 32
    assert socket_name_for(tmp_path / "a") != socket_name_for(tmp_path / "b")
    assert socket_name_for(tmp_path / "a") == socket_name_for(tmp_path / "a")


# ------------------------------------------------------------------------------- the host


@dataclass
class Running:
    host: HostApp
    services: FakeHostServices
    socket_name: str
    token: str
    closed: list[int] = field(default_factory=list)


def _start(
    qtbot: QtBot,
    data_dir: Path,
    services: FakeHostServices,
    capsys: pytest.CaptureFixture[str],
    *,
    safe_resume: bool = True,
) -> Running:
    closed: list[int] = []

    def factory(path: Path, *, safe_resume_enabled: bool) -> HostServices:
        assert path == data_dir
        assert safe_resume_enabled is safe_resume
        return services

    config = HostConfig(
        data_dir=data_dir,
        safe_resume_enabled=safe_resume,
        launch_renderer=False,
        announce_endpoint=True,
        drain_timeout_s=5,
    )
    host = HostApp(config, factory, closed.append)
    assert host.start() is None
    qtbot.waitUntil(lambda: host.lifecycle.state is HostState.READY, timeout=5000)
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("MAKA_MAIN_READY")]
    fields = dict(part.split("=", 1) for part in line[-1].split()[1:])
    return Running(host, services, fields["socket"], fields["token"], closed)


@pytest.fixture
def running(qtbot: QtBot, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[Running]:
    services = FakeHostServices(
        sessions={"s1": SessionSummary(session_id="s1", cwd=str(data_dir), title="one")}
    )
    started = _start(qtbot, data_dir, services, capsys)
    yield started
    started.host.close()


def _client(qtbot: QtBot, running: Running) -> WireClient:
    client = WireClient(running.socket_name)
    client.hello(running.token)
    qtbot.waitUntil(lambda: client.has(MessageKind.HELLO_OK), timeout=5000)
    return client


def test_startup_runs_recovery_before_serving_and_reports_ready(
    qtbot: QtBot, running: Running
) -> None:
    assert running.host.lifecycle.state is HostState.READY
    assert running.services.calls[0] == "recover_at_startup"
    client = _client(qtbot, running)
    hello = client.first(MessageKind.HELLO_OK)
    assert isinstance(hello, HelloOkPush)
    assert hello.host_state == "ready"
    assert hello.safe_resume_enabled is True
    assert hello.correlation_id == "hello"


def test_queries_run_off_the_event_loop_and_answer_the_asker(
    qtbot: QtBot, running: Running
) -> None:
    client = _client(qtbot, running)
    client.send(SessionsListRequest(correlation_id="q1"))
    qtbot.waitUntil(lambda: client.has(MessageKind.SESSIONS_LISTED), timeout=5000)
    listed = client.first(MessageKind.SESSIONS_LISTED)
    assert isinstance(listed, SessionsListedPush)
    assert listed.correlation_id == "q1"
    assert [s.session_id for s in listed.sessions] == ["s1"]
    assert running.services.threads["list_sessions"] != threading.main_thread().name

    client.send(SessionsOpenRequest(session_id="missing", correlation_id="q2"))
    qtbot.waitUntil(lambda: client.has(MessageKind.ERROR), timeout=5000)
    error = client.first(MessageKind.ERROR)
    assert error is not None and error.model_dump()["code"] == "not_found"


def test_create_session_broadcasts_the_new_session(
    qtbot: QtBot, running: Running, tmp_path: Path
) -> None:
    client = _client(qtbot, running)
    client.send(SessionsCreateRequest(cwd=str(tmp_path), correlation_id="c"))
    qtbot.waitUntil(lambda: client.has(MessageKind.SESSION_UPDATED), timeout=5000)
    client.send(SessionsCreateRequest(cwd=str(tmp_path / "nope"), correlation_id="d"))
    qtbot.waitUntil(lambda: client.has(MessageKind.ERROR), timeout=5000)
    error = client.first(MessageKind.ERROR)
    assert error is not None and error.model_dump()["code"] == "invalid_cwd"


def test_a_turn_streams_on_a_worker_and_a_second_turn_is_refused(
    qtbot: QtBot, running: Running
) -> None:
    running.services.block_turns = True
    client = _client(qtbot, running)
    client.send(TurnsSendRequest(session_id="s1", text="hi", correlation_id="t1"))
    qtbot.waitUntil(lambda: client.has(MessageKind.TRANSCRIPT_ITEM), timeout=5000)
    client.send(TurnsSendRequest(session_id="s1", text="again", correlation_id="t2"))
    qtbot.waitUntil(lambda: client.has(MessageKind.ERROR), timeout=5000)
    error = client.first(MessageKind.ERROR)
    assert error is not None and error.model_dump()["code"] == "session_busy"
    assert running.services.threads["send_turn"].startswith("maka-turn-")

    client.send(TurnsCancelRequest(session_id="s1"))
    qtbot.waitUntil(
        lambda: any(
            isinstance(m, RunStatusPush) and m.status == "cancelled" for m in client.received
        ),
        timeout=5000,
    )
    qtbot.waitUntil(lambda: client.has(MessageKind.SESSION_UPDATED), timeout=5000)
    items = [m for m in client.received if isinstance(m, TranscriptItemPush)]
    assistant = [m.item for m in items if m.item.type == "assistant_message"]
    # Coalesced or not, the newest state of the growing message arrives last.
    assert assistant[-1].model_dump()["text"] == "abcde"
    assert "turn_cancelled:s1" in running.services.calls


def test_resume_sends_only_the_session_and_reports_started_once(
    qtbot: QtBot, running: Running
) -> None:
    running.services.resume_outcomes["s1"] = ResumeStarted("run-c", "turn-c")
    client = _client(qtbot, running)
    client.send(ResumeLatestRequest(session_id="s1", correlation_id="r1"))
    qtbot.waitUntil(
        lambda: any(
            isinstance(m, RunStatusPush) and m.status == "completed" for m in client.received
        ),
        timeout=5000,
    )
    # The session's row is refreshed when its run starts and again once the resume is over,
    # after its outcome was pushed: any second "started" would have arrived before that.
    qtbot.waitUntil(lambda: len(client.all(MessageKind.SESSION_UPDATED)) >= 2, timeout=5000)
    started = client.all(MessageKind.RESUME_STARTED)
    assert len(started) == 1
    assert isinstance(started[0], ResumeStartedPush)
    assert (started[0].run_id, started[0].correlation_id) == ("run-c", "r1")
    assert running.services.resumed_automatic == [("s1", False)]


def test_resume_park_reaches_the_renderer_with_reasons(qtbot: QtBot, running: Running) -> None:
    running.services.resume_outcomes["s1"] = ResumeParked(("dangling_tool_state",))
    client = _client(qtbot, running)
    client.send(ResumeLatestRequest(session_id="s1", correlation_id="r2"))
    qtbot.waitUntil(lambda: client.has(MessageKind.RESUME_PARKED), timeout=5000)
    parked = client.first(MessageKind.RESUME_PARKED)
    assert isinstance(parked, ResumeParkedPush)
    assert parked.rejection_reasons == ("dangling_tool_state",)


def test_second_launch_activation_shows_the_window(qtbot: QtBot, running: Running) -> None:
    renderer = _client(qtbot, running)
    launcher = WireClient(running.socket_name)
    launcher.send(WindowActivateRequest())
    qtbot.waitUntil(lambda: renderer.has(MessageKind.WINDOW_SHOW), timeout=5000)
    qtbot.waitUntil(lambda: launcher.disconnected, timeout=5000)


def test_unauthenticated_request_closes_only_that_connection(
    qtbot: QtBot, running: Running
) -> None:
    good = _client(qtbot, running)
    stranger = WireClient(running.socket_name)
    stranger.send(SessionsListRequest())
    qtbot.waitUntil(lambda: stranger.disconnected, timeout=5000)
    assert "list_sessions" not in running.services.calls
    stranger_raw = WireClient(running.socket_name)
    stranger_raw.send_raw(b"\x00\x00\x00\x05hello")
    qtbot.waitUntil(lambda: stranger_raw.disconnected, timeout=5000)
    good.send(SessionsListRequest(correlation_id="after"))
    qtbot.waitUntil(lambda: good.has(MessageKind.SESSIONS_LISTED), timeout=5000)


def test_shutdown_cancels_and_drains_turns_before_closing_the_store(
    qtbot: QtBot, running: Running, data_dir: Path
) -> None:
    running.services.block_turns = True
    client = _client(qtbot, running)
    client.send(TurnsSendRequest(session_id="s1", text="long", correlation_id="t"))
    qtbot.waitUntil(lambda: "send_turn:s1" in running.services.calls, timeout=5000)
    running.host.close(0)
    calls = running.services.calls
    order = [
        calls.index("cancel_turn:s1"),
        calls.index("turn_cancelled:s1"),
        calls.index("stop_background_work"),
        calls.index("close"),
    ]
    assert order == sorted(order)
    assert running.host.lifecycle.state is HostState.CLOSED
    assert running.closed == [0]
    running.host.close(1)  # double close: nothing runs twice
    assert running.services.calls.count("close") == 1
    assert running.closed == [0]
    qtbot.waitUntil(lambda: client.disconnected, timeout=5000)
    states = [m.state for m in client.received if isinstance(m, HostStatePush)]
    assert "closing" in states
    relock = InstanceLock(data_dir)
    assert relock.acquire().outcome is LockOutcome.ACQUIRED
    relock.release()


def test_sigterm_inside_the_event_loop_runs_the_orderly_shutdown(
    qtbot: QtBot, running: Running
) -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    qtbot.waitUntil(lambda: running.host.lifecycle.state is HostState.CLOSED, timeout=5000)
    assert running.closed == [0]
    assert running.services.calls[-2:] == ["stop_background_work", "close"]


def _wait_for_auto_resume_to_end(qtbot: QtBot, started: Running) -> None:
    """Automatic resume chooses its sessions when the host becomes ready and resumes them one
    after the other; its last outcome has been pushed when the host marks the run over."""
    qtbot.waitUntil(lambda: started.host._auto_total == 0, timeout=5000)


def test_auto_resume_at_startup_resumes_newest_interrupted_sessions(
    qtbot: QtBot, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = RecoveryReport(
        interrupted=(
            _run("old", "r1", 1),
            _run("loop", "r2", 9, automatic=True),
            _run("new", "r3", 5),
        )
    )
    services = FakeHostServices(report=report, resume_outcomes={"new": ResumeStarted("c1", "t1")})
    started = _start(qtbot, data_dir, services, capsys)
    try:
        _wait_for_auto_resume_to_end(qtbot, started)
        assert services.resumed_automatic == [("new", True), ("old", True)]
    finally:
        started.host.close()


def test_a_renderer_connecting_after_auto_resume_learns_each_park_and_failure_once(
    qtbot: QtBot, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The renderer may start after auto-resume finished, or restart later: it still learns
    which sessions parked (with reasons and diagnostics) or failed, and only those."""
    diagnostic = ResumeDiagnostic(code="pending_tool_result", tool_call_id="c1", tool_name="bash")
    summaries = {
        name: SessionSummary(session_id=name, cwd=str(data_dir), title=name, interrupted=True)
        for name in ("parks", "fails", "starts")
    }
    services = FakeHostServices(
        report=RecoveryReport(
            interrupted=(_run("parks", "r1", 3), _run("fails", "r2", 2), _run("starts", "r3", 1))
        ),
        sessions=dict(summaries),
        resume_outcomes={
            "parks": ResumeParked(("dangling_tool_state",), (diagnostic,)),
            "fails": ResumeFailed("internal_failure", "the planner broke"),
            "starts": ResumeStarted("c1", "t1"),
        },
    )
    started = _start(qtbot, data_dir, services, capsys)

    def outcomes(client: WireClient) -> list[tuple[str, str]]:
        return [
            (m.kind.value, m.session_id)
            for m in client.received
            if isinstance(m, ResumeParkedPush | ResumeFailedPush | ResumeStartedPush)
        ]

    def wait_for_outcomes(client: WireClient, count: int) -> None:
        qtbot.waitUntil(lambda: len(outcomes(client)) == count, timeout=5000)

    def caught_up(client: WireClient) -> None:
        """Everything that stands was sent right after the handshake, before this answer."""
        client.ask_marker("after-hello")
        qtbot.waitUntil(lambda: client.answered("after-hello"), timeout=5000)

    try:
        # Connected while auto-resume runs: each outcome arrives once, pushed or on connecting.
        early = _client(qtbot, started)
        _wait_for_auto_resume_to_end(qtbot, started)  # every outcome was pushed by then
        caught_up(early)
        assert sorted(o for o in outcomes(early) if o[1] != "starts") == [
            ("resume.failed", "fails"),
            ("resume.parked", "parks"),
        ]
        for _ in range(2):  # a renderer started later, then the same one restarted
            late = _client(qtbot, started)
            wait_for_outcomes(late, 3)
            caught_up(late)
            # ... and which sessions automatic resume continued, to announce them until seen
            assert sorted(outcomes(late)) == [
                ("resume.failed", "fails"),
                ("resume.parked", "parks"),
                ("resume.started", "starts"),
            ]
            resumed = late.first(MessageKind.RESUME_STARTED)
            assert isinstance(resumed, ResumeStartedPush) and resumed.automatic
            parked = late.first(MessageKind.RESUME_PARKED)
            assert isinstance(parked, ResumeParkedPush)
            assert parked.automatic
            assert parked.rejection_reasons == ("dangling_tool_state",)
            assert parked.diagnostics == (diagnostic,)
            assert parked.correlation_id is None
            failed = late.first(MessageKind.RESUME_FAILED)
            assert isinstance(failed, ResumeFailedPush)
            assert (failed.code, failed.message) == ("internal_failure", "the planner broke")
            late.close()

        # A new message carries the parked session on: its park no longer stands.
        services.sessions["parks"] = summaries["parks"].model_copy(update={"interrupted": False})
        early.send(TurnsSendRequest(session_id="parks", text="carry on", correlation_id="t"))
        qtbot.waitUntil(
            lambda: any(
                isinstance(m, SessionUpdatedPush)
                and m.session.session_id == "parks"
                and not m.session.interrupted
                for m in early.received
            ),
            timeout=5000,
        )
        after = _client(qtbot, started)
        caught_up(after)
        assert sorted(outcomes(after)) == [("resume.failed", "fails"), ("resume.started", "starts")]
    finally:
        started.host.close()


def _click_resume_after_startup(qtbot: QtBot, started: Running) -> None:
    """Resume session "a" by hand and wait for the answer. Automatic resume is decided when
    the host becomes ready and runs on the session's own turn thread, before a later click: had
    it started, it would be recorded first (or the click would be refused as busy)."""
    client = _client(qtbot, started)
    client.send(ResumeLatestRequest(session_id="a", correlation_id="click"))
    qtbot.waitUntil(
        lambda: any(
            m.correlation_id == "click" and m.kind.startswith("resume.") for m in client.received
        ),
        timeout=5000,
    )


def test_no_auto_resume_with_the_flag_off(
    qtbot: QtBot, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    services = FakeHostServices(report=RecoveryReport(interrupted=(_run("a", "r", 1),)))
    started = _start(qtbot, data_dir, services, capsys, safe_resume=False)
    try:
        _click_resume_after_startup(qtbot, started)
        assert services.resumed_automatic == [("a", False)], "only the click resumed it"
    finally:
        started.host.close()


@pytest.mark.parametrize(
    ("flags", "expected"),
    [((True, False), []), ((False, False), []), ((True, True), [("a", True)])],
)
def test_the_settings_decide_automatic_resume_at_start(
    qtbot: QtBot,
    data_dir: Path,
    capsys: pytest.CaptureFixture[str],
    flags: tuple[bool, bool],
    expected: list[tuple[str, bool]],
) -> None:
    """Safe resume on with automatic resume unticked: interrupted sessions wait for a click."""
    services = FakeHostServices(
        report=RecoveryReport(interrupted=(_run("a", "r", 1),)), flags=flags
    )
    services.resume_outcomes["a"] = ResumeParked(("dangling_tool_state",))
    started = _start(qtbot, data_dir, services, capsys, safe_resume=True)
    try:
        if expected:
            qtbot.waitUntil(lambda: services.resumed_automatic == expected, timeout=5000)
        else:
            _click_resume_after_startup(qtbot, started)
            expected = [("a", False)]  # only the click resumed it
        assert services.resumed_automatic == expected
    finally:
        started.host.close()


@pytest.mark.parametrize(
    "code",
    [StoreCode.SCHEMA_NEWER_THAN_PROGRAM, StoreCode.STORE_CORRUPT, StoreCode.STORE_LOCKED],
)
def test_store_refusal_exits_1_with_the_code_and_releases_the_lock(
    qtbot: QtBot, data_dir: Path, capsys: pytest.CaptureFixture[str], code: StoreCode
) -> None:
    def refuse(path: Path, *, safe_resume_enabled: bool) -> HostServices:
        raise LedgerError(code, "the store said no")

    closed: list[int] = []
    config = HostConfig(data_dir, safe_resume_enabled=False, launch_renderer=False)
    host = HostApp(config, refuse, closed.append)
    assert host.start() is None
    qtbot.waitUntil(lambda: closed == [1], timeout=5000)
    assert f"maka: error [{code}]: the store said no" in capsys.readouterr().err
    assert host.lifecycle.state is HostState.CLOSED
    relock = InstanceLock(data_dir)
    assert relock.acquire().outcome is LockOutcome.ACQUIRED
    relock.release()


def test_failed_startup_recovery_is_a_refusal_and_closes_the_store(
    qtbot: QtBot, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    services = FakeHostServices()

    def broken_recovery() -> RecoveryReport:
        raise LedgerError(ParkReason.RUNTIME_LEDGER_UNREADABLE, "run r1 cannot be read")

    services.recover_at_startup = broken_recovery  # type: ignore[method-assign]
    closed: list[int] = []
    config = HostConfig(data_dir, safe_resume_enabled=False, launch_renderer=False)
    host = HostApp(config, lambda p, **_: services, closed.append)
    assert host.start() is None
    qtbot.waitUntil(lambda: closed == [1], timeout=5000)
    assert "[runtime_ledger_unreadable]" in capsys.readouterr().err
    assert services.calls[-1] == "close"
    assert host.lifecycle.state is HostState.CLOSED


def test_frames_are_refused_before_the_services_see_them(qtbot: QtBot, running: Running) -> None:
    client = _client(qtbot, running)
    body = b'{"kind":"sessions.resumeLatest","sessionId":"s1","workspaceIdentity":"w"}'
    client.send_raw(len(body).to_bytes(4, "big") + body)
    qtbot.waitUntil(lambda: client.disconnected, timeout=5000)
    again = _client(qtbot, running)
    again.send_raw(encode_frame(ResumeLatestRequest(session_id="s1")))
    qtbot.waitUntil(lambda: again.has(MessageKind.RESUME_PARKED), timeout=5000)
    # the honest request, sent later, is the only one the services ever saw
    assert [c for c in running.services.calls if c.startswith("resume_latest")] == [
        "resume_latest:s1"
    ]


class SlowRecovery(FakeHostServices):
    """Startup recovery that waits for the test: the window is up while it runs."""

    def __init__(self) -> None:
        super().__init__(sessions={"s1": SessionSummary(session_id="s1", cwd="/tmp", title="one")})
        self.release = threading.Event()

    def recover_at_startup(self) -> RecoveryReport:
        self._record("recover_started")
        self.release.wait(10)
        return super().recover_at_startup()


def _start_slow(data_dir: Path, services: SlowRecovery) -> tuple[HostApp, list[int], str]:
    closed: list[int] = []
    config = HostConfig(
        data_dir, safe_resume_enabled=False, launch_renderer=False, announce_endpoint=True
    )
    host = HostApp(config, lambda p, **_: services, closed.append)
    assert host.start() is None
    endpoint = find_endpoint(data_dir)
    assert endpoint is not None
    return host, closed, endpoint


def test_requests_wait_for_startup_recovery_then_are_served(
    qtbot: QtBot, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    services = SlowRecovery()
    host, _closed, name = _start_slow(data_dir, services)
    token = capsys.readouterr().out.split("token=")[1].split()[0]
    try:
        client = WireClient(name)
        client.hello(token)
        qtbot.waitUntil(lambda: client.has(MessageKind.HELLO_OK), timeout=5000)
        hello = client.first(MessageKind.HELLO_OK)
        assert isinstance(hello, HelloOkPush) and hello.host_state == "recovering"
        assert host._server is not None
        with qtbot.waitSignal(host._server.request_received, timeout=5000):
            client.send(SessionsListRequest(correlation_id="early"))
        # The host has the request (its own slot ran first) and holds it: not answered, and
        # the order of the calls below shows the services saw it only after recovery.
        assert not client.has(MessageKind.SESSIONS_LISTED)
        assert "list_sessions" not in services.calls  # nothing touches sessions yet
        services.release.set()
        qtbot.waitUntil(lambda: client.has(MessageKind.SESSIONS_LISTED), timeout=5000)
        states = [m.state for m in client.received if isinstance(m, HostStatePush)]
        assert "ready" in states
        assert services.calls.index("recover_at_startup") < services.calls.index("list_sessions")
    finally:
        services.release.set()
        host.close()


def _after_callbacks_posted_so_far(qtbot: QtBot, relay: MainThreadRelay) -> None:
    """Wait until every callable other threads have already posted to ``relay`` has run: a
    marker posted now from another thread is queued behind them and runs after them."""
    ran: list[bool] = []
    poster = threading.Thread(target=relay.post, args=(lambda: ran.append(True),))
    poster.start()
    poster.join()
    qtbot.waitUntil(lambda: ran == [True], timeout=5000)


def test_shutdown_during_recovery_waits_for_it_then_closes_the_store(
    qtbot: QtBot, data_dir: Path
) -> None:
    services = SlowRecovery()
    host, closed, _name = _start_slow(data_dir, services)
    qtbot.waitUntil(lambda: "recover_started" in services.calls, timeout=5000)
    threading.Timer(0.3, services.release.set).start()
    host.close(0)
    assert closed == [0]
    calls = services.calls
    assert calls.index("recover_at_startup") < calls.index("close")
    assert host.lifecycle.state is HostState.CLOSED
    _after_callbacks_posted_so_far(qtbot, host._workers.relay)
    # the late "recovery finished" callback has run and changed nothing
    assert host.lifecycle.state is HostState.CLOSED
    assert "list_sessions" not in calls


def test_push_sink_coalesces_a_burst_and_keeps_first_seen_order(qtbot: QtBot) -> None:
    from app.bridge_contract import AssistantMessageItem, Message, ToolCardItem, ToolCardStatus
    from main_process.push_sink import CoalescingPushSink

    relay = MainThreadRelay()
    sent: list[Message] = []
    sink = CoalescingPushSink("s1", relay, sent.append)

    def burst() -> None:  # a worker thread streaming while the event loop is busy
        for n in range(1, 501):
            sink.transcript_item(AssistantMessageItem(item_id="a", text="x" * n))
            if n == 10:
                sink.transcript_item(
                    ToolCardItem(
                        item_id="card",
                        tool_call_id="c",
                        tool_name="bash",
                        status=ToolCardStatus.RUNNING,
                    )
                )

    worker = threading.Thread(target=burst)
    worker.start()
    worker.join()
    _after_callbacks_posted_so_far(qtbot, relay)  # every flush the burst asked for has run
    items = [m for m in sent if isinstance(m, TranscriptItemPush)]
    assert len(items) == 2, "500 updates of one item collapse into its newest state"
    assert [i.item.item_id for i in items] == ["a", "card"]
    first = items[0].item
    assert isinstance(first, AssistantMessageItem) and len(first.text) == 500


def test_closing_the_window_ends_the_main_process_with_0(qtbot: QtBot, running: Running) -> None:
    running.host._launcher.exited.emit(0, False)  # the renderer exited normally
    qtbot.waitUntil(lambda: running.closed == [0], timeout=5000)
    assert running.host.lifecycle.state is HostState.CLOSED
    assert running.services.calls[-1] == "close"


def test_a_crashed_renderer_without_renderers_enabled_changes_nothing(
    qtbot: QtBot, running: Running
) -> None:
    launcher = running.host._launcher
    # a respawn would start a renderer 300 ms after the crash
    with qtbot.assertNotEmitted(launcher.started, wait=500):
        launcher.exited.emit(-1, True)
    assert running.host.lifecycle.state is HostState.READY
    assert running.closed == []


def test_an_endpoint_that_cannot_listen_is_shown_like_any_refusal(
    qtbot: QtBot, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A desktop started from a menu has no terminal: when the window's connection cannot be
    made, the reason goes to the refusal screen as well as to stderr, like a refused store."""
    shown: list[tuple[str, str, bool]] = []
    monkeypatch.setattr(
        host_app_module,
        "show_refusal",
        lambda code, message, *, windows_enabled: shown.append((code, message, windows_enabled)),
    )
    (data_dir / "ipc").write_text("a file where the private folder belongs")
    config = HostConfig(data_dir, safe_resume_enabled=False, launch_renderer=True)
    host = HostApp(config, lambda *a, **k: FakeHostServices(), lambda code: None)
    assert host.start() == 1
    assert [(code, enabled) for code, _, enabled in shown] == [("ipc_unavailable", True)]
    assert "is not a folder" in shown[0][1]
    relock = InstanceLock(data_dir)
    assert relock.acquire().outcome is LockOutcome.ACQUIRED
    relock.release()


def test_a_sweep_tells_the_window_of_other_hosts_sessions_and_resumes_what_it_took_over(
    qtbot: QtBot, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shared ledger: every sweep pushes what became of the sessions other hosts run, and a
    failure reading them never costs the resume of a session the same sweep took over."""
    other = SessionSummary(
        session_id="far",
        cwd=str(data_dir),
        title="far",
        last_run_status=RunStatusValue.RUNNING,
        running_elsewhere=True,
    )
    services = FakeHostServices(
        sweep_every_s=0.1,
        resume_outcomes={"taken": ResumeStarted("c1", "t1")},
        elsewhere=[other],
    )
    started = _start(qtbot, data_dir, services, capsys)
    try:
        client = _client(qtbot, started)
        qtbot.waitUntil(lambda: client.has(MessageKind.SESSION_UPDATED), timeout=5000)
        (pushed,) = client.all(MessageKind.SESSION_UPDATED)
        assert isinstance(pushed, SessionUpdatedPush) and pushed.session == other
        services.elsewhere.append("gone")  # another host removed it
        qtbot.waitUntil(lambda: client.has(MessageKind.SESSION_REMOVED), timeout=5000)
        (removed,) = client.all(MessageKind.SESSION_REMOVED)
        assert isinstance(removed, SessionRemovedPush) and removed.session_id == "gone"
        assert removed.elsewhere  # the window says who removed it
        services.elsewhere.append(LedgerError(StoreCode.STORE_IO_FAILED, "connection lost"))
        services.taken_over.append(_run("taken", "r1", 1))
        qtbot.waitUntil(lambda: services.resumed_automatic == [("taken", True)], timeout=5000)
    finally:
        started.host.close()
