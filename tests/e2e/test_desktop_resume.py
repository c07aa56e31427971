"""Safe resume through the desktop main process, end to end (acceptance of issue 7).

The real ``maka`` main process runs with the scripted provider and real tools and store; the test
plays the renderer over the real socket. A turn is killed at P6 (its tool's outcome committed,
the result not yet delivered to the model). Then:

- the banner path: the next start shows the session as interrupted; Safe resume (a session id and
  nothing else) starts a continuation that streams in, marked as a continuation, and completes
  without running the tool again;
- the automatic path: with the flag on, the same happens at startup without any click;
- the crash-loop guard: an automatic continuation that itself crashed is not auto-resumed again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import (
    HelloOkPush,
    MessageKind,
    PermissionDecision,
    PermissionRequestedPush,
    PermissionsAnswerRequest,
    ResumeLatestRequest,
    ResumeParkedPush,
    ResumeStartedPush,
    RunStatusPush,
    SessionOpenedPush,
    SessionsCreateRequest,
    SessionsListedPush,
    SessionsListRequest,
    SessionsOpenRequest,
    SessionSummary,
    SessionUpdatedPush,
    TranscriptItemPush,
    TurnsSendRequest,
)
from tests.helpers.maka_process import MainProcess, main_log, start_main
from tests.helpers.maka_run import committed_runs, scripted_env, write_script
from tests.helpers.wire_client import WireClient

pytestmark = pytest.mark.e2e

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
SCRIPT = [
    [
        {
            "text": "Counting.",
            "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "echo x >> count.txt"}}],
        },
        # The continuation's answer waits a second, so the session row's refresh that its
        # start triggers reads the run while it is still running.
        {"text": "Counted once.", "chunks": 4, "delayMs": 1000},
    ]
]
WAIT_MS = 30_000


@dataclass
class Desk:
    tmp: Path
    qtbot: QtBot

    def __post_init__(self) -> None:
        self.data = self.tmp / "data"
        self.data.mkdir()
        self.work = self.tmp / "work"
        self.work.mkdir()
        self.record = self.tmp / "requests.jsonl"
        self.env = scripted_env(write_script(self.tmp / "script.json", SCRIPT), self.record)
        self.processes: list[MainProcess] = []

    def start(self, flag: bool, failpoint: str | None = None) -> tuple[MainProcess, WireClient]:
        env = {**self.env, **(FLAG if flag else {})}
        if failpoint:
            env["MAKA_FAILPOINT"] = failpoint
        main = start_main(self.data, env).wait_ready()
        self.processes.append(main)
        client = WireClient(main.socket_name)
        client.hello(main.token)
        self.qtbot.waitUntil(lambda: client.has(MessageKind.HELLO_OK), timeout=WAIT_MS)
        return main, client

    def wait(self, client: WireClient, kind: MessageKind) -> None:
        self.qtbot.waitUntil(lambda: client.has(kind), timeout=WAIT_MS)

    def sessions(self, client: WireClient, tag: str) -> SessionsListedPush:
        client.send(SessionsListRequest(correlation_id=tag))
        self.qtbot.waitUntil(
            lambda: any(m.correlation_id == tag for m in client.all(MessageKind.SESSIONS_LISTED)),
            timeout=WAIT_MS,
        )
        listed = [m for m in client.all(MessageKind.SESSIONS_LISTED) if m.correlation_id == tag]
        assert isinstance(listed[0], SessionsListedPush)
        return listed[0]

    def crash_a_turn_at_p6(self) -> str:
        """A turn whose bash call ran and committed its outcome; the process dies at P6."""
        main, client = self.start(flag=True, failpoint="P6")
        client.send(SessionsCreateRequest(cwd=str(self.work), correlation_id="create"))
        self.wait(client, MessageKind.SESSION_UPDATED)
        created = client.first(MessageKind.SESSION_UPDATED)
        assert isinstance(created, SessionUpdatedPush)
        session_id = created.session.session_id
        client.send(TurnsSendRequest(session_id=session_id, text="count once"))
        self.wait(client, MessageKind.PERMISSION_REQUESTED)
        ask = client.first(MessageKind.PERMISSION_REQUESTED)
        assert isinstance(ask, PermissionRequestedPush) and ask.tool_name == "bash"
        client.send(
            PermissionsAnswerRequest(
                session_id=session_id, request_id=ask.request_id, decision=PermissionDecision.ALLOW
            )
        )
        assert main.process.wait(60) == -9, main.stderr()
        self.qtbot.waitUntil(lambda: client.disconnected, timeout=WAIT_MS)
        assert self.count() == 1
        return session_id

    def count(self) -> int:
        path = self.work / "count.txt"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.record.read_text().splitlines()]

    def stop_all(self) -> None:
        for process in self.processes:
            process.stop()


def _closed(client: WireClient) -> Callable[[], bool]:
    return lambda: client.disconnected


@pytest.fixture
def desk(tmp_path: Path, qtbot: QtBot) -> Iterator[Desk]:
    drill = Desk(tmp_path, qtbot)
    yield drill
    drill.stop_all()


def test_banner_safe_resume_starts_a_continuation_that_completes(desk: Desk) -> None:
    session_id = desk.crash_a_turn_at_p6()

    # Flag off: recovery repairs the run; the session is interrupted; resume is refused calmly.
    main, client = desk.start(flag=False)
    hello = client.first(MessageKind.HELLO_OK)
    assert isinstance(hello, HelloOkPush) and hello.safe_resume_enabled is False
    (summary,) = desk.sessions(client, "off").sessions
    assert summary.interrupted and summary.failure_class == "app_restarted"
    client.send(ResumeLatestRequest(session_id=session_id, correlation_id="off"))
    desk.wait(client, MessageKind.RESUME_PARKED)
    parked = client.first(MessageKind.RESUME_PARKED)
    assert isinstance(parked, ResumeParkedPush)
    assert parked.rejection_reasons == ("resume_feature_disabled",)
    assert main.terminate() == 0

    # Flag on: the run was repaired by an earlier start, so nothing resumes by itself.
    main, client = desk.start(flag=True)
    (summary,) = desk.sessions(client, "on").sessions
    assert summary.interrupted, "the banner shows for this session"
    client.send(SessionsOpenRequest(session_id=session_id, correlation_id="open"))
    desk.wait(client, MessageKind.SESSION_OPENED)
    opened = client.first(MessageKind.SESSION_OPENED)
    assert isinstance(opened, SessionOpenedPush)
    cards = [i for i in opened.items if i.type == "tool_card"]
    assert [(c.tool_name, c.status) for c in cards] == [("bash", "succeeded")]
    assert len(committed_runs(desk.data)) == 1

    client.send(ResumeLatestRequest(session_id=session_id, correlation_id="click"))
    desk.wait(client, MessageKind.RESUME_STARTED)
    started = client.first(MessageKind.RESUME_STARTED)
    assert isinstance(started, ResumeStartedPush) and started.correlation_id == "click"
    desk.qtbot.waitUntil(
        lambda: any(
            isinstance(m, RunStatusPush) and m.run_id == started.run_id and m.status == "completed"
            for m in client.received
        ),
        timeout=WAIT_MS,
    )

    # The list row stops saying "interrupted" while the continuation runs, and ends completed.
    def rows() -> list[SessionSummary]:
        return [m.session for m in client.received if isinstance(m, SessionUpdatedPush)]

    desk.qtbot.waitUntil(
        lambda: any(r.last_run_status == "completed" and not r.interrupted for r in rows()),
        timeout=WAIT_MS,
    )
    assert any(r.last_run_status == "running" and not r.interrupted for r in rows()), rows()
    assert rows()[-1].last_run_status == "completed" and not rows()[-1].interrupted, rows()
    items = [m.item for m in client.received if isinstance(m, TranscriptItemPush)]
    markers = [i for i in items if i.type == "continuation_marker"]
    assert [m.run_id for m in markers] == [started.run_id]
    answers = [i for i in items if i.type == "assistant_message" and i.run_id == started.run_id]
    assert answers and answers[-1].model_dump()["text"] == "Counted once."
    assert desk.count() == 1, "the completed tool never ran again"
    runs = committed_runs(desk.data)
    target = runs[-1][0]
    assert target.run_id == started.run_id and target.status == "completed"
    assert target.continuation_source is not None
    assert target.continuation_source["automatic"] is False
    users = [i for i in desk.requests()[-1]["history"] if i["type"] == "user"]
    assert [u["text"] for u in users] == ["count once"]  # no new user message
    # The banner is gone: the session's latest run completed.
    (summary,) = desk.sessions(client, "after").sessions
    assert not summary.interrupted and summary.last_run_status == "completed"
    assert main.terminate() == 0


def test_with_the_flag_on_the_interrupted_session_resumes_at_startup(desk: Desk) -> None:
    session_id = desk.crash_a_turn_at_p6()
    main, client = desk.start(flag=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        runs = committed_runs(desk.data)
        if len(runs) == 2 and runs[-1][0].status == "completed":
            break
        desk.qtbot.wait(100)
    source, target = committed_runs(desk.data)
    assert source[0].failure_class == "app_restarted"
    assert target[0].session_id == session_id
    assert target[0].continuation_source is not None
    assert target[0].continuation_source["automatic"] is True
    assert target[0].status == "completed"
    assert desk.count() == 1
    assert not any(
        m.kind == MessageKind.RESUME_STARTED and m.correlation_id for m in client.received
    )
    assert main.terminate() == 0
    # Opened after another start (the flag off now), the marker still says automatic resume
    # continued it: that is in the ledger, not in the window's memory of this start.
    main, client = desk.start(flag=False)
    client.send(SessionsOpenRequest(session_id=session_id, correlation_id="open"))
    desk.wait(client, MessageKind.SESSION_OPENED)
    opened = client.first(MessageKind.SESSION_OPENED)
    assert isinstance(opened, SessionOpenedPush)
    markers = [i for i in opened.items if i.type == "continuation_marker"]
    assert [getattr(m, "automatic", None) for m in markers] == [True], markers
    assert main.terminate() == 0


def test_a_crash_looping_automatic_continuation_is_not_resumed_again(desk: Desk) -> None:
    session_id = desk.crash_a_turn_at_p6()
    # Auto-resume admits a continuation and the process dies right after the admission.
    crashing = start_main(
        desk.data, {**desk.env, **FLAG, "MAKA_FAILPOINT": "after_continuation_admission_committed"}
    )
    desk.processes.append(crashing)
    assert crashing.process.wait(60) == -9, crashing.stderr()
    runs = committed_runs(desk.data)
    assert len(runs) == 2 and runs[-1][0].continuation_source is not None
    assert runs[-1][0].continuation_source["automatic"] is True

    main, client = desk.start(flag=True)
    # Automatic resume chooses its sessions once, when the host is ready: the guard's line
    # says this one was left out (and nothing else could start it).
    desk.qtbot.waitUntil(lambda: "crash-loop guard" in main_log(desk.data), timeout=WAIT_MS)
    runs = committed_runs(desk.data)
    assert len(runs) == 2, "the guard kept the crash-looping continuation from running again"
    assert runs[-1][0].failure_class == "app_restarted"
    (summary,) = desk.sessions(client, "guard").sessions
    assert summary.interrupted, "the banner still offers Safe resume to the user"
    # ... and says why automatic resume left it for the user (it said nothing).
    assert summary.interrupted_automatic

    # The user can still choose to resume: a second generation continues from the continuation.
    client.send(ResumeLatestRequest(session_id=session_id, correlation_id="manual"))
    desk.wait(client, MessageKind.RESUME_STARTED)
    started = client.first(MessageKind.RESUME_STARTED)
    assert isinstance(started, ResumeStartedPush)
    desk.qtbot.waitUntil(
        lambda: any(
            isinstance(m, RunStatusPush) and m.run_id == started.run_id and m.status == "completed"
            for m in client.received
        ),
        timeout=WAIT_MS,
    )
    assert desk.count() == 1
    assert main.terminate() == 0


def test_a_resume_request_carrying_claimed_facts_is_refused_without_effect(desk: Desk) -> None:
    """The session *can* be resumed (the control at the end proves it), yet a request that
    claims a workspace identity, a run or a high-water closes its connection and changes
    nothing: the ledger still holds the one interrupted run."""
    session_id = desk.crash_a_turn_at_p6()
    main, _ = desk.start(flag=False)  # repair in an earlier pass: nothing resumes by itself
    assert main.terminate() == 0
    main, client = desk.start(flag=True)
    claimed: list[dict[str, Any]] = [
        {"workspaceIdentity": "workspace:v1:00000000-0000-4000-8000-000000000000"},
        {"sourceRunId": committed_runs(desk.data)[0][0].run_id},
        {"sourceRuntimeEventHighWater": 3},
        {"turnId": "turn-forged"},
    ]
    for extra in claimed:
        forger = WireClient(main.socket_name)
        forger.hello(main.token)
        desk.wait(forger, MessageKind.HELLO_OK)
        body = json.dumps({"kind": "sessions.resumeLatest", "sessionId": session_id, **extra})
        forger.send_raw(len(body).to_bytes(4, "big") + body.encode())
        desk.qtbot.waitUntil(_closed(forger), timeout=WAIT_MS)
        assert not any(m.kind.startswith("resume.") for m in forger.received)
    # Each forged frame was refused as it was read (its connection is closed); the honest
    # request below is the later marker: exactly one continuation after it.
    assert len(committed_runs(desk.data)) == 1, "no continuation was admitted"
    assert "[message_invalid]" in main_log(desk.data)
    client.send(ResumeLatestRequest(session_id=session_id, correlation_id="honest"))
    desk.wait(client, MessageKind.RESUME_STARTED)
    assert desk.count() == 1
    assert main.terminate() == 0
