"""A question nobody connected can answer: ``maka host`` killed while a terminal's turn waited on
a permission question, restarted with automatic resume on and no window. The continuation asks
again; with no window connected and no terminal viewing the session, the host stops the turn
there instead of waiting for ever, so the session ends and the next interrupted session in the
queue is resumed too. It does not deny the question on the user's behalf: that told the model
the user refused and ended the turn "completed" with its task not done. The command never
runs; the record says the host (not the user) closed the question and stopped the turn, and
what the model is told says so (calling again asks again); Safe resume offers to continue the
stopped turn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.maka_process import MainProcess, main_log, maka_executable, start_main
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform == "win32", reason="terminal clients attach over Unix sockets"),
]

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}


def _script(tmp_path: Path, name: str) -> Path:
    call = {"id": "b1", "name": "bash", "args": {"command": f"echo once >> {name}.txt"}}
    return write_script(
        tmp_path / f"{name}.json", [[{"text": "Counting.", "toolCalls": [call]}, {"text": "Done."}]]
    )


def _statuses(data: Path) -> dict[str, str]:
    listed = maka(["sessions", "--json"], data)
    assert listed.returncode == 0, listed.stderr
    return {
        str(row["sessionId"]): str(row.get("lastRunStatus"))
        for row in json.loads(listed.stdout)["sessions"]
    }


def _asking(data: Path, work: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """``maka run --permission-mode ask`` through the host, left at its question."""
    client = subprocess.Popen(
        [*maka_executable(), "run", "--cwd", str(work), "--permission-mode", "ask", "count"],
        env={**os.environ, **env, "MAKA_DATA_DIR": str(data)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert client.stdout is not None
    deadline = time.monotonic() + 30
    seen = ""
    while "[permission]" not in seen and time.monotonic() < deadline:
        seen += client.stdout.readline()
    assert "[permission]" in seen, seen
    return client


def test_automatic_resume_under_maka_host_stops_at_a_question_nobody_can_answer(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    env = scripted_env(_script(tmp_path, "count"), checkpoints=True)
    folders = [tmp_path / "one", tmp_path / "two"]
    host: MainProcess = start_main(data, env, "host").wait_ready()
    clients: list[subprocess.Popen[str]] = []
    try:
        for work in folders:
            work.mkdir()
            clients.append(_asking(data, work, env))
    finally:
        host.stop()  # SIGKILL: both turns stop at their open question
        for client in clients:
            client.kill()
            client.wait(timeout=30)
            for pipe in (client.stdin, client.stdout):
                if pipe is not None:
                    pipe.close()

    again = start_main(data, {**env, **FLAG}, "host").wait_ready()
    try:
        deadline = time.monotonic() + 60
        statuses = _statuses(data)
        while time.monotonic() < deadline and set(statuses.values()) != {"cancelled"}:
            time.sleep(0.5)
            statuses = _statuses(data)
        assert set(statuses.values()) == {"cancelled"}, (statuses, again.stderr())
    finally:
        again.stop()
    for work in folders:
        assert not (work / "count.txt").exists(), "a denied command never runs"
    decisions = [
        (event["author"], event["actions"]["permissionDecision"]["decision"])
        for _header, events in committed_runs(data)
        for event in events
        if "permissionDecision" in (event.get("actions") or {})
    ]
    # The continuations' questions, closed by the host when it stopped their turns.
    assert decisions == [("host", "deny"), ("host", "deny")], decisions
    log = main_log(data)
    assert log.count("auto-resume outcome: ResumeStarted") == 2, log
    # ``maka host`` has no window: its terminal says what it did on its own too.
    told = again.stderr()
    assert "maka host: startup recovery ended 2 interrupted run(s)" in told, told
    assert told.count(": resumed automatically (run ") == 2, told
    assert told.count(", ended cancelled)") == 2, told
    assert log.count("stopped its turn at a permission question") == 2, log
    # What resuming it does, said (a model that does not ask again is not asked again).
    assert "the model is told the call did not run, and asking for it again asks" in log, log
    for session in _statuses(data):
        # The way on it names is one that offers Safe resume for a cancelled turn (the window's
        # banner offers it only after a crash: "open it in the desktop" led nowhere).
        assert f"resume {session}, or /resume in maka" in log, log
        planned = maka(["plan", session, "--json"], data, env={**env, **FLAG})
        assert json.loads(planned.stdout)["disposition"] == "continue", planned.stdout
        timeline = maka(["timeline", session], data).stdout
        assert "stopped by Maka at a permission question nobody could answer" in timeline
        # The run's header does not say the user cancelled it.
        assert "[cancelled, stopped by Maka]" in timeline, timeline
        assert "cancelled_by_user" not in timeline, timeline
        assert "question closed unanswered" in timeline and "denied" not in timeline, timeline
    continued = [
        [json.loads(json.dumps(event)) for event in events]
        for header, events in committed_runs(data)
        if header.continuation_source is not None
    ]
    assert len(continued) == 2
    for events in continued:
        ending: dict[str, Any] = events[-1]
        assert ending["actions"]["stateDelta"]["abortSource"] == "host", ending
        assert ending["content"]["reason"] == "permission_unanswerable", ending
    said = [
        str(event["content"]["result"]["error"])
        for events in continued
        for event in events
        if (event.get("content") or {}).get("kind") == "function_response"
    ]
    assert said and all(
        text.startswith("Maka stopped the turn at this permission question") for text in said
    ), said
