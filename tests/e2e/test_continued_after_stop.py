"""What a continuation's marker says it followed: a turn the user stopped (Ctrl+C in the real
``maka run``, its command ended), then continued with the real ``maka resume``: the TUI's
/transcript says "Continued with Safe resume after the stop", not "after Maka stopped" (Maka
did not stop)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.maka_process import maka_executable
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child"),
]

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
STEPS = [
    {
        "text": "Waiting.",
        "toolCalls": [{"id": "s1", "name": "bash", "args": {"command": "sleep 60"}}],
    },
    {"text": "Carried on."},
]


def _stopped_turn(tmp_path: Path) -> tuple[Path, dict[str, str], str]:
    """A real ``maka run`` whose running command the user stopped with Ctrl+C: the data
    folder, the environment and the session."""
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    env = scripted_env(write_script(tmp_path / "script.json", [STEPS]))
    run = subprocess.Popen(
        [*maka_executable(), "run", "--cwd", str(work), "--permission-mode", "auto", "wait"],
        env={**os.environ, **env, "MAKA_DATA_DIR": str(data)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert run.stdout is not None
    seen = ""
    deadline = time.monotonic() + 30
    while "[tool] bash" not in seen and time.monotonic() < deadline:
        seen += run.stdout.readline()
    time.sleep(0.5)  # the command is running
    run.send_signal(signal.SIGINT)  # Ctrl+C: the user stops the turn
    seen += run.stdout.read()
    run.wait(timeout=30)
    run.stdout.close()
    [(header, _events)] = committed_runs(data)
    assert header.status.value == "cancelled", seen
    return data, env, header.session_id


def test_a_continuation_after_a_stop_says_so(tmp_path: Path) -> None:
    data, env, session = _stopped_turn(tmp_path)
    resumed = maka(["resume", session, "--permission-mode", "auto"], data, env={**env, **FLAG})
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    shown = maka(["tui", "--session", session], data, env=env, stdin="/transcript\n/quit\n")
    assert shown.returncode == 0, shown.stderr
    assert "--- Continued with Safe resume after the stop ---" in shown.stdout, shown.stdout
    assert "after Maka stopped" not in shown.stdout


def test_the_plan_lists_the_stopped_command_as_stopped_as_the_timeline_does(
    tmp_path: Path,
) -> None:
    """The command's record is whole (its result is saved), but it did not run to its end:
    ``maka plan`` says it was stopped, as ``maka timeline`` does, not "completed"."""
    data, env, session = _stopped_turn(tmp_path)
    timeline = maka(["timeline", session], data, env={**env, **FLAG})
    assert "bash: stopped when the turn was cancelled" in timeline.stdout, timeline.stdout
    planned = maka(["plan", session], data, env={**env, **FLAG})
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "  bash s1: stopped when the turn was cancelled (matching_response)" in (
        planned.stdout.splitlines()
    ), planned.stdout
    assert "s1: completed" not in planned.stdout
    document = json.loads(maka(["plan", session, "--json"], data, env={**env, **FLAG}).stdout)
    [operation] = document["operations"]
    assert (operation["status"], operation["stopped"]) == ("completed", "cancelled")
