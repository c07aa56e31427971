"""``maka run ... | head -2``: the reader of the command's output goes away mid-turn. The turn is
cancelled cleanly (its run ends ``cancelled`` with its terminal event) instead of being left
marked running for the next start to repair as a crash; no traceback. Its ending says what
stopped it: the output's reader ended, not a cancel of the user's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.maka_process import maka_executable
from tests.helpers.maka_run import committed_runs, scripted_env, write_script

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(sys.platform == "win32", reason="pipes")]

LOUD = {"id": "l1", "name": "bash", "args": {"command": "seq 1 3000"}}
STEPS = [{"text": "Counting.", "toolCalls": [LOUD]}, {"text": "Counted. " * 2000}]


def test_a_reader_that_goes_away_cancels_the_turn_cleanly(tmp_path: Path) -> None:
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    env = {
        **os.environ,
        **scripted_env(write_script(tmp_path / "script.json", [STEPS])),
        "MAKA_DATA_DIR": str(data),
    }
    child = subprocess.Popen(
        [*maka_executable(), "run", "--cwd", str(work), "--permission-mode", "auto", "count"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.readline()  # as `head -1` reads, then leaves
    child.stdout.close()
    err = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    assert child.wait(timeout=60) != 0
    assert "Traceback" not in err, err
    [(header, events)] = committed_runs(data)
    assert header.status.value == "cancelled", (header, err)
    assert events[-1].get("status") == "cancelled"  # its terminal event, not a repair
    # Its ending says why: the output's reader ended, not a cancel of the user's.
    ending: dict[str, Any] = dict(events[-1].get("content") or {})
    assert ending.get("reason") == "output_closed", ending
    assert "the program reading its output ended" in str(ending.get("message")), ending
    assert "the program reading its output ended" in err, err
    timeline = subprocess.run(
        [*maka_executable(), "timeline", header.session_id],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "run cancelled (stopped: the program reading its output ended)" in timeline, timeline


def _closed(args: list[str], data: Path, closed_fd: int) -> subprocess.CompletedProcess[bytes]:
    """``maka ARGS`` with one standard stream closed (``>&-``, ``<&-``), the others kept."""
    env = {**os.environ, "MAKA_DATA_DIR": str(data), "MAKA_WORKSPACE_CHECKPOINTS": "on"}
    env.pop("MAKA_PROVIDER", None)
    return subprocess.run(
        [*maka_executable(), *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        preexec_fn=lambda: os.close(closed_fd),  # the child's own stream
        timeout=60,
        check=False,
    )


def test_a_closed_stdout_or_stdin_is_the_empty_stream(tmp_path: Path) -> None:
    """Closed stdout: every printing command failed with a traceback, and ``maka run`` left
    its run to be repaired. Closed stdin: a question waited for an answer for ever. Now the
    output goes nowhere and a closed stdin is the end of input (the question is denied)."""
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    ran = _closed(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "write a.md saying 1"], data, 1
    )
    assert ran.returncode == 0, ran.stderr
    assert b"Traceback" not in ran.stderr
    [(header, _)] = committed_runs(data)
    assert header.status.value == "completed"
    assert (work / "a.md").read_text() == "1\n"
    listed = _closed(["sessions"], data, 1)
    assert listed.returncode == 0 and b"Traceback" not in listed.stderr, listed.stderr
    asked = _closed(
        ["run", "--session", header.session_id, "--permission-mode", "ask", "write b.md saying 2"],
        data,
        0,
    )
    assert asked.returncode == 0, asked.stderr
    assert b"Traceback" not in asked.stderr
    assert b"denied permission" in asked.stdout
    assert not (work / "b.md").exists()
