"""``maka branch S`` (the points, no ``--at``) reads without owning the data folder, as ``maka
timeline`` does. It took the folder and ran startup recovery: a run a killed ``maka run`` left
marked running was ended by the listing, so the next ``maka host`` start did not find it
interrupted and its automatic resume never took it up; and a ``maka run`` owning the folder
made the listing fail with ``store_locked``. A run not ended is said, not silently left out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from storage.instance_lock import InstanceLock, LockOutcome
from tests.e2e.test_workspace_checkpoints_cli import Drill
from tests.helpers.maka_run import committed_runs, maka

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


def test_listing_the_points_repairs_nothing_and_says_why_a_run_is_not_listed(
    tmp_path: Path,
) -> None:
    drill = Drill(tmp_path)
    drill.run("P8")
    session = drill.session
    listed = maka(["branch", session, "--json"], drill.data, env=drill.env)
    assert listed.returncode == 0, listed.stderr
    [(header, _)] = committed_runs(drill.data)
    assert str(header.status) == "running", "the listing ended nothing"
    document = json.loads(listed.stdout)
    assert document["boundaries"] == []
    assert document["runsNotListed"] == [{"runId": header.run_id, "reason": "awaiting_repair"}]
    text = maka(["branch", session], drill.data, env=drill.env)
    assert f"run {header.run_id} is still marked running" in text.stdout
    assert f"maka plan {session} repairs it" in text.stdout
    # Another Maka process owns the folder (a ``maka run`` serving no host): the listing reads.
    lock = InstanceLock(drill.data)
    assert lock.acquire().outcome is LockOutcome.ACQUIRED
    try:
        held = maka(["branch", session, "--json"], drill.data, env=drill.env)
        assert held.returncode == 0, held.stderr
        assert json.loads(held.stdout)["runsNotListed"] == [
            {"runId": header.run_id, "reason": "running"}
        ]
    finally:
        lock.release()
    # Once repaired, its points are listed.
    drill.plan()
    after = json.loads(maka(["branch", session, "--json"], drill.data, env=drill.env).stdout)
    assert "runsNotListed" not in after and after["boundaries"], after
