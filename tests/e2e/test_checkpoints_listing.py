"""``maka checkpoints SESSION`` after a continuation with the current files: the snapshot of
that decision reads as such, not as "after event None"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]

FIRST = {
    "text": "Counting.",
    "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "echo x >> count.txt"}}],
}


def test_the_snapshot_of_a_rebaseline_is_listed_as_such(tmp_path: Path) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    interrupted = write_script(
        tmp_path / "i.json", [[FIRST, {"error": {"message": "the service went away"}}]]
    )
    script = write_script(tmp_path / "s.json", [[FIRST, {"text": "Noted."}]])
    env = {**scripted_env(script, checkpoints=True), "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "count once"]
    assert maka(args, data, env={**env, "MAKA_SCRIPT_FILE": str(interrupted)}).returncode == 1
    session = committed_runs(data)[0][0].session_id
    (work / "a.txt").write_text("edited\n")
    resumed = maka(["resume", session, "--rebaseline", "--json"], data, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr

    listed = maka(["checkpoints", session], data, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "None" not in listed.stdout, listed.stdout
    assert "your current files, as you chose to continue with them" in listed.stdout
    rows = [
        row
        for run in json.loads(maka(["checkpoints", session, "--json"], data, env=env).stdout)[
            "runs"
        ]
        for row in run["checkpoints"]
    ]
    assert [row["runtimeHighWater"] is None for row in rows].count(True) == 1
