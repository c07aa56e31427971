"""Settling a ``bash`` call killed at P4 takes the folder as the new baseline in the
attestation's transaction (docs/design/workspace.md section 3), all or nothing: the real
``maka settle`` is SIGKILLed after the capture's ref exists and inside the transaction (the bundle
inserted, the baseline fact not yet; both inserted, not committed). Afterwards neither the
attestation nor the baseline is recorded, Safe resume still parks on the unknown call, and the
answer given again records both once; a kill after the commit leaves both. Real Git folder with
uncommitted work, checkpoints on, the real ``maka`` command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.e2e.test_resume_proven_writes import Drill
from tests.e2e.test_settle_rebaselines import STEPS, _baselines
from tests.helpers.maka_run import committed_runs, maka

pytestmark = [pytest.mark.crash, pytest.mark.skipif(shutil.which("git") is None, reason="git")]

INSIDE = ["settle_baseline_captured", "settle_before_baseline_fact", "settle_after_baseline_fact"]


def _attestations(data: Path) -> int:
    return sum(
        1
        for _header, events in committed_runs(data)
        for event in events
        if str(event["id"]).endswith("_attest_decision")
    )


def _settle(drill: Drill, failpoint: str | None = None) -> int:
    env = dict(drill.env)
    if failpoint is not None:
        env["MAKA_FAILPOINT"] = failpoint
    result = maka(["settle", drill.session, "b1", "--ran"], drill.data, env=env)
    return result.returncode


@pytest.mark.parametrize("point", INSIDE)
def test_a_kill_inside_the_settling_records_neither(tmp_path: Path, point: str) -> None:
    drill = Drill(tmp_path, STEPS)
    drill.run("P4")
    assert _settle(drill, point) == -9
    assert _attestations(drill.data) == 0
    assert _baselines(drill.data) == []
    parked = drill.plan()
    assert parked["disposition"] != "continue"
    assert "workspace_checkpoint_stale" in parked["rejectionReasons"]

    assert _settle(drill) == 0  # the same answer again: both, once
    assert _attestations(drill.data) == 1
    assert len(_baselines(drill.data)) == 1
    assert drill.plan()["disposition"] == "continue"
    code, body = drill.resume()
    assert code == 0, body
    assert (drill.work / "count.txt").read_text() == "once\n"


def test_a_kill_after_the_commit_leaves_both(tmp_path: Path) -> None:
    drill = Drill(tmp_path, STEPS)
    drill.run("P4")
    assert _settle(drill, "attestation_after_commit") == -9
    assert _attestations(drill.data) == 1
    assert len(_baselines(drill.data)) == 1
    assert drill.plan()["disposition"] == "continue"
    assert _settle(drill) == 0  # an identical answer is a no-op, and captures nothing
    assert _attestations(drill.data) == 1
    assert len(_baselines(drill.data)) == 1
    doctor = maka(["doctor", "--json"], drill.data, env=drill.env)
    assert json.loads(doctor.stdout)["ok"] is True, doctor.stdout
