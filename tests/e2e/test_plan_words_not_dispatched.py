"""A turn killed while its permission question waited: the call never ran (definitely not
dispatched). With the folder changed since, the plan's "Or carry on with a new message" line
ended "; the model is told which calls are unsettled", while no call is (the model is told of
none, and no "note: ... the model is told" line follows)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.maka_process import maka_executable
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = pytest.mark.e2e

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}


def test_a_call_that_never_ran_is_not_called_unsettled(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("before\n")
    call = {"id": "w1", "name": "write_file", "args": {"path": "dr.txt", "content": "x\n"}}
    script = write_script(tmp_path / "script.json", [[{"toolCalls": [call]}, {"text": "ok"}]])
    env = {**scripted_env(script, checkpoints=True), **FLAG}
    data = tmp_path / "data"
    full = dict(os.environ)
    full.pop("MAKA_FAILPOINT", None)
    full.update({**env, "MAKA_DATA_DIR": str(data)})
    with subprocess.Popen(
        [*maka_executable(), "run", "--cwd", str(work), "--permission-mode", "ask", "go"],
        env=full,
        stdin=subprocess.PIPE,  # kept open: the question waits for ever
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as process:
        assert process.stdout is not None
        seen = b""
        deadline = time.monotonic() + 60
        while b"Allow? [y/N]" not in seen:
            assert time.monotonic() < deadline, seen
            seen += os.read(process.stdout.fileno(), 4096)
        process.send_signal(signal.SIGKILL)
        process.wait(30)
    session = committed_runs(data)[0][0].session_id
    (work / "a.txt").write_text("changed while Maka was stopped\n")
    planned = maka(["plan", session], data, env=env)
    assert planned.returncode == 3, planned.stdout
    assert "definitely_not_dispatched" in planned.stdout, planned.stdout
    assert "Or carry on with a new message" in planned.stdout, planned.stdout
    assert "the model is told which calls are unsettled" not in planned.stdout, planned.stdout
