"""A session recorded with workspace checkpoints, looked at later without ``git`` on PATH: the
snapshot cannot be looked up, which does not make it missing. Resume parks without claiming the
snapshot is gone (and offers no rebaseline that could not be captured), ``maka doctor`` reports
the checkpoints as not checked instead of problems, ``maka checkpoints`` says the same."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]

SCRIPT = [
    [
        {
            "text": "Listing.",
            "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "ls"}}],
        },
        {"text": "Listed."},
    ]
]


def test_a_store_that_cannot_be_read_without_git_is_not_reported_missing(tmp_path: Path) -> None:
    data, work, nogit = tmp_path / "data", tmp_path / "work", tmp_path / "bin"
    work.mkdir()
    nogit.mkdir()
    (work / "a.txt").write_text("alpha\n")
    for command in ("bash", "sh", "ls"):
        found = shutil.which(command)
        assert found is not None
        os.symlink(found, nogit / command)
    env = scripted_env(write_script(tmp_path / "s.json", SCRIPT), checkpoints=True)
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "list"]
    crashed = maka(args, data, env={**env, "MAKA_FAILPOINT": "P8"})
    assert crashed.returncode == -9, crashed.stderr
    session = committed_runs(data)[0][0].session_id
    without_git = {**env, "PATH": str(nogit), "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}

    plan = maka(["plan", session, "--json"], data, env=without_git)
    body = json.loads(plan.stdout)
    codes = [d["code"] for d in body["diagnostics"]]
    assert "workspace_checkpoint_missing" not in codes, body["diagnostics"]
    assert "safety_observation_unavailable" in codes, body["diagnostics"]
    assert "git" in json.dumps(body["diagnostics"])
    assert "rebaseline" not in json.dumps(body.get("workspaceOptions") or [])

    doctor = maka(["doctor"], data, env=without_git)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "2 not checked" in doctor.stdout and "PROBLEM" not in doctor.stdout
    listed = maka(["checkpoints", session], data, env=without_git)
    assert "MISSING" not in listed.stdout and "not checked" in listed.stdout, listed.stdout

    # With git back, the same session is verified: nothing was lost.
    again = maka(
        ["plan", session, "--json"], data, env={**env, **{"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}}
    )
    assert "workspace_verified" in again.stdout, again.stdout
