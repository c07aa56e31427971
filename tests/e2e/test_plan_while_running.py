"""``maka plan`` while another ``maka run`` still runs the session's turn (a real process, the
data folder read-only to ``plan``): the call without a result is running, not unknown, so the
plan must not offer ``maka settle`` for it nor a new message; once that process is killed with
SIGKILL, ``maka timeline`` (which never repairs) says the run awaits repair and counts the call
among the problems, and the next ``plan`` repairs the run and offers both."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.maka_process import maka_executable
from tests.helpers.maka_run import maka, scripted_env, write_script

pytestmark = pytest.mark.e2e

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
STEPS = [
    {
        "text": "Waiting.",
        "toolCalls": [{"id": "s1", "name": "bash", "args": {"command": "sleep 60"}}],
    },
    {"text": "Done."},
]


def _running_call(data: Path) -> str:
    """The session id once the sleeping call's dispatch is committed."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        listed = maka(["sessions", "--json"], data)
        sessions = json.loads(listed.stdout)["sessions"] if listed.returncode == 0 else []
        if sessions:
            session = str(sessions[0]["sessionId"])
            planned = maka(["plan", session, "--json"], data)
            operations = json.loads(planned.stdout).get("operations", [])
            if operations:
                return session
        time.sleep(0.2)
    raise AssertionError("the call was never dispatched")


def test_a_call_of_a_turn_still_running_is_not_offered_to_settle(tmp_path: Path) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    env = {
        **os.environ,
        **scripted_env(write_script(tmp_path / "script.json", [STEPS])),
        "MAKA_DATA_DIR": str(data),
    }
    env.pop("MAKA_RUNTIME_SAFE_BOUNDARY_RESUME", None)
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "wait"]
    runner = subprocess.Popen(
        [*maka_executable(), *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        session = _running_call(data)
        for flag in ({}, FLAG):  # Safe resume off (the default) and on
            text = maka(["plan", session], data, env=flag)
            assert text.returncode == 3, text.stderr
            assert "maka settle" not in text.stdout, text.stdout
            assert "carry on with a new message" not in text.stdout, text.stdout
            # Nothing is resumable yet, whatever the setting: no advice to turn it on.
            assert "Turn Safe resume on" not in text.stdout, text.stdout
            assert "latest turn has not ended" in text.stdout
            # Said to be running, not unknown (docs/design/cli.md), and with Safe resume off
            # that is not why nothing resumes: not said while the turn runs.
            assert "s1: no result yet" in text.stdout, text.stdout
            assert "may still be running" in text.stdout
            assert "indeterminate" not in text.stdout, text.stdout
            assert "resume_feature_disabled" not in text.stdout, text.stdout
            body = json.loads(maka(["plan", session, "--json"], data, env=flag).stdout)
            [call] = body["operations"]
            assert call["turnRunning"] is True and body["readOnly"] is True
        running = json.loads(maka(["timeline", session, "--json"], data).stdout)
        assert "awaitingRepair" not in running  # its process holds the data folder
    finally:
        os.killpg(runner.pid, signal.SIGKILL)
        runner.wait(timeout=30)

    left = maka(["timeline", session, "--only-problems"], data)
    assert left.returncode == 0, left.stderr
    assert "is still marked running, but no Maka process has this data folder open" in left.stdout
    assert "bash: no result yet" in left.stdout, left.stdout
    [run_id] = json.loads(maka(["timeline", session, "--json"], data).stdout)["awaitingRepair"]

    after = maka(["plan", session], data, env=FLAG)  # this plan repairs the killed run first
    assert after.returncode == 3, after.stderr
    assert f"maka settle {session} s1 --ran" in after.stdout, after.stdout
    assert "may still be running" not in after.stdout
    body = json.loads(maka(["plan", session, "--json"], data, env=FLAG).stdout)
    assert "turnRunning" not in body["operations"][0]
    repaired = json.loads(maka(["timeline", session, "--json"], data).stdout)
    assert "awaitingRepair" not in repaired
    assert [run["runId"] for run in repaired["runs"]] == [run_id]
