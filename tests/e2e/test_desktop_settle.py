"""Settling an unknown outcome through the desktop main process, end to end (docs/design/recovery.md
section 8): the real ``maka`` main process (scripted provider, real tools and store) with the test
playing the renderer over the real socket.

A turn is killed inside its ``bash`` command (P4: the command ran, its result was never
recorded). The next start (Safe resume on) parks the automatic resume on the unknown outcome;
the session's card offers the choice (command in full); "It ran" is recorded, the card reads as
confirmed, the standing park goes and Safe resume continues once: the command never runs again
and the provider receives the attested result. A second, different answer is refused with
``operation_settled``; ``maka doctor`` stays clean.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import (
    AttestationChoice,
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
    SessionsOpenRequest,
    SessionUpdatedPush,
    ToolCardItem,
    ToolSettledPush,
    ToolsSettleRequest,
    TranscriptItemPush,
    TurnsSendRequest,
)
from runtime.ledger.attestation import Attestation, attestation_result
from tests.helpers.maka_process import MainProcess, start_main
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script
from tests.helpers.wire_client import WireClient

pytestmark = pytest.mark.e2e

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
COMMAND = "echo x >> count.txt"
SCRIPT = [
    [
        {
            "text": "Counting.",
            "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": COMMAND}}],
        },
        {"text": "Counted once."},
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

    def start(self, failpoint: str | None = None) -> tuple[MainProcess, WireClient]:
        env = {**self.env, **FLAG}
        if failpoint:
            env["MAKA_FAILPOINT"] = failpoint
        main = start_main(self.data, env).wait_ready()
        self.processes.append(main)
        client = WireClient(main.socket_name)
        client.hello(main.token)
        self.wait(client, MessageKind.HELLO_OK)
        return main, client

    def wait(self, client: WireClient, kind: MessageKind) -> None:
        self.qtbot.waitUntil(lambda: client.has(kind), timeout=WAIT_MS)

    def crash_inside_bash(self) -> str:
        main, client = self.start(failpoint="P4")
        client.send(SessionsCreateRequest(cwd=str(self.work), correlation_id="create"))
        self.wait(client, MessageKind.SESSION_UPDATED)
        created = client.first(MessageKind.SESSION_UPDATED)
        assert isinstance(created, SessionUpdatedPush)
        session_id = created.session.session_id
        client.send(TurnsSendRequest(session_id=session_id, text="count once"))
        self.wait(client, MessageKind.PERMISSION_REQUESTED)
        ask = client.first(MessageKind.PERMISSION_REQUESTED)
        assert isinstance(ask, PermissionRequestedPush)
        client.send(
            PermissionsAnswerRequest(
                session_id=session_id, request_id=ask.request_id, decision=PermissionDecision.ALLOW
            )
        )
        assert main.process.wait(60) == -9, main.stderr()
        assert self.count() == 1
        return session_id

    def count(self) -> int:
        path = self.work / "count.txt"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.record.read_text().splitlines()]


@pytest.fixture
def desk(tmp_path: Path, qtbot: QtBot) -> Iterator[Desk]:
    drill = Desk(tmp_path, qtbot)
    yield drill
    for process in drill.processes:
        process.stop()


def _settled(client: WireClient, tag: str) -> ToolSettledPush | None:
    for message in client.all(MessageKind.TOOL_SETTLED):
        if message.correlation_id == tag:
            assert isinstance(message, ToolSettledPush)
            return message
    return None


def test_it_ran_is_recorded_and_safe_resume_continues_once(desk: Desk) -> None:
    session_id = desk.crash_inside_bash()
    main, client = desk.start()
    desk.wait(client, MessageKind.RESUME_PARKED)  # the automatic resume parked on it
    parked = client.first(MessageKind.RESUME_PARKED)
    assert isinstance(parked, ResumeParkedPush)
    assert parked.rejection_reasons == ("dangling_tool_state",)

    client.send(SessionsOpenRequest(session_id=session_id, correlation_id="open"))
    desk.wait(client, MessageKind.SESSION_OPENED)
    opened = client.first(MessageKind.SESSION_OPENED)
    assert isinstance(opened, SessionOpenedPush)
    (card,) = [item for item in opened.items if isinstance(item, ToolCardItem)]
    assert card.status == "indeterminate" and card.settleable
    assert card.args_full == COMMAND

    note = "count.txt has one line"
    client.send(
        ToolsSettleRequest(
            session_id=session_id,
            tool_call_id="c1",
            outcome=AttestationChoice.RAN,
            note=note,
            correlation_id="ran",
        )
    )
    desk.qtbot.waitUntil(lambda: _settled(client, "ran") is not None, timeout=WAIT_MS)
    answer = _settled(client, "ran")
    assert answer is not None and answer.recorded and answer.resume_available
    cards = [
        m.item
        for m in client.received
        if isinstance(m, TranscriptItemPush) and isinstance(m.item, ToolCardItem)
    ]
    assert cards[-1].attestation is AttestationChoice.RAN
    assert cards[-1].attestation_note == note and not cards[-1].settleable

    other = ToolsSettleRequest(
        session_id=session_id,
        tool_call_id="c1",
        outcome=AttestationChoice.NOT_RUN,
        correlation_id="again",
    )
    client.send(other)
    desk.qtbot.waitUntil(lambda: _settled(client, "again") is not None, timeout=WAIT_MS)
    refused = _settled(client, "again")
    assert refused is not None and not refused.recorded and refused.code == "operation_settled"

    # A restart now does not bring back the park from before the answer: its boundary changed.
    assert main.terminate() == 0
    main, client = desk.start()
    client.send(SessionsOpenRequest(session_id=session_id, correlation_id="reopen"))
    desk.wait(client, MessageKind.SESSION_OPENED)
    client.ask_marker("after-open")  # answered after what stands for the session was sent
    desk.qtbot.waitUntil(lambda: client.answered("after-open"), timeout=WAIT_MS)
    assert not client.has(MessageKind.RESUME_PARKED)

    client.send(ResumeLatestRequest(session_id=session_id, correlation_id="click"))
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
    assert desk.count() == 1  # never re-run
    assert main.terminate() == 0

    source_events: list[Any] = list(committed_runs(desk.data)[0][1])
    payload = next(
        e["actions"]["toolRecovery"]["payload"]
        for e in source_events
        if "attestedAt" in str(e.get("actions", {}).get("toolRecovery", ""))
    )
    attestation = Attestation(payload["attestedAt"], payload["ownerEpoch"], payload["note"])
    last = desk.requests()[-1]["history"]
    assert last[-1] == {
        "type": "tool_result",
        "id": "c1",
        "name": "bash",
        "result": attestation_result(True, attestation),
        "isError": False,
    }
    doctor = maka(["doctor"], desk.data, env=desk.env)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr


def test_with_snapshots_on_the_card_says_it_takes_the_folder_and_one_answer_resumes(
    desk: Desk,
) -> None:
    """Checkpoints on, a Git folder with uncommitted work (docs/design/workspace.md section 3):
    before the answer the card says that answering takes the folder as it is now and names the
    file the command changed; "It ran" also records the baseline, so Safe resume is offered at
    once (no stale snapshot) and the command never runs again."""
    git = ["git", "-c", "user.name=Tester", "-c", "user.email=tester@example.invalid"]
    (desk.work / "notes.txt").write_text("a draft\n")
    subprocess.run([*git, "init", "-q"], cwd=desk.work, check=True)
    subprocess.run([*git, "add", "."], cwd=desk.work, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "start"], cwd=desk.work, check=True)
    (desk.work / "notes.txt").write_text("a draft, edited and not committed\n")
    desk.env["MAKA_WORKSPACE_CHECKPOINTS"] = "on"
    session_id = desk.crash_inside_bash()
    _main, client = desk.start()
    desk.wait(client, MessageKind.RESUME_PARKED)
    parked = client.first(MessageKind.RESUME_PARKED)
    assert isinstance(parked, ResumeParkedPush)
    assert "workspace_checkpoint_stale" in parked.rejection_reasons

    client.send(SessionsOpenRequest(session_id=session_id, correlation_id="open"))
    desk.wait(client, MessageKind.SESSION_OPENED)
    opened = client.first(MessageKind.SESSION_OPENED)
    assert isinstance(opened, SessionOpenedPush)
    (card,) = [item for item in opened.items if isinstance(item, ToolCardItem)]
    assert card.settleable and card.settle_folder is not None
    assert card.settle_folder.compared and card.settle_folder.changed_paths == ["count.txt"]

    client.send(
        ToolsSettleRequest(
            session_id=session_id,
            tool_call_id="c1",
            outcome=AttestationChoice.RAN,
            correlation_id="ran",
        )
    )
    desk.qtbot.waitUntil(lambda: _settled(client, "ran") is not None, timeout=WAIT_MS)
    answer = _settled(client, "ran")
    assert answer is not None and answer.recorded and answer.resume_available

    client.send(ResumeLatestRequest(session_id=session_id, correlation_id="click"))
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
    assert desk.count() == 1  # never re-run
    history = json.dumps(desk.requests()[-1]["history"])
    assert "count.txt" in history and "changed since the last snapshot" in history
