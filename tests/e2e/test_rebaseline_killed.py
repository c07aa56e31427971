"""A ``maka resume --rebaseline`` killed (real SIGKILL) between its capture of the current files
and the continuation's admission (``after_rebaseline_captured``): nothing is admitted, no fact
names the capture (``maka doctor`` reports its ref as an orphan), the session stays parked on
the changed files, and a new ``--rebaseline`` makes exactly one continuation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.e2e.test_workspace_decisions_cli import _drifted, _files
from tests.helpers.maka_run import committed_runs, maka

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


def _orphans(data: Path) -> list[str]:
    doctor = maka(["doctor", "--json"], data)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    orphans: list[str] = json.loads(doctor.stdout)["workspaceCheckpoints"]["orphans"]
    return orphans


def test_a_rebaseline_killed_after_its_capture_admits_nothing(tmp_path: Path) -> None:
    drill, before = _drifted(tmp_path)
    assert _orphans(drill.data) == []
    args = ["resume", drill.session, "--json", "--permission-mode", "auto", "--rebaseline"]
    env = {**drill.env, "MAKA_FAILPOINT": "after_rebaseline_captured"}
    killed = maka(args, drill.data, env=env)
    assert killed.returncode == -9, killed.stderr

    # Nothing admitted: one run, no provider call, the folder as the user left it.
    runs = committed_runs(drill.data)
    assert len(runs) == 1 and drill.requests() == []
    assert _files(drill.work) == before
    # The capture exists as a ref that no fact names: an orphan the doctor names.
    [orphan] = _orphans(drill.data)
    assert orphan.endswith("/0") and f"refs/maka/{drill.session}/run_" in orphan  # the new run
    assert runs[0][0].run_id not in orphan
    listed = json.loads(maka(["checkpoints", drill.session, "--json"], drill.data).stdout)
    refs = [c.get("checkpointRef") for run in listed["runs"] for c in run["checkpoints"]]
    assert orphan.split(" ", 1)[1] not in refs

    # Still parked on the changed files, both ways forward offered.
    code, parked = drill.resume()
    assert code == 3 and parked["rejectionReasons"] == ["workspace_drift"]
    assert parked["workspaceOptions"] == ["isolated_restore", "rebaseline"]

    code, body = drill.resume("--rebaseline")
    assert code == 0, body
    assert body["status"] == "completed"
    runs = committed_runs(drill.data)
    assert len(runs) == 2
    baseline = runs[1][1][0]["actions"]["workspaceBaseline"]
    assert baseline["checkpointRef"] != orphan.split(" ", 1)[1]
    assert baseline["workspaceEpoch"] == 2
    assert [c["path"] for c in baseline["changedPaths"]] == ["b.txt", "count.txt", "new.txt"]
    notices = [i for i in drill.requests()[0]["history"] if i["type"] == "host_notice"]
    assert len(notices) == 1 and "3 files in the folder changed" in notices[0]["text"]
    # Once: a third resume starts nothing.
    code, again = drill.resume("--rebaseline")
    assert code == 3 and again["rejectionReasons"] == ["continuation_already_exists"]
    assert len(committed_runs(drill.data)) == 2
    # The killed capture is still only an orphan (retention removes it); the new one is named.
    assert _orphans(drill.data) == [orphan]
