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


def test_a_folder_snapshots_cannot_capture_is_not_offered_a_copy_of_its_current_files(
    tmp_path: Path,
) -> None:
    """A repository with a submodule: snapshots are off for its runs, so no point has one, and
    ``--current-files`` fails the same way (a nested repository): the refusal said to use it."""
    from tests.helpers.user_git import user_git

    lib, work = tmp_path / "lib", tmp_path / "work"
    lib.mkdir()
    work.mkdir()
    (lib / "l.txt").write_text("l\n")
    user_git(lib, "init", "-q")
    user_git(lib, "add", ".")
    user_git(lib, "commit", "-q", "-m", "lib")
    (work / "t.txt").write_text("t\n")
    user_git(work, "init", "-q")
    user_git(work, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    user_git(work, "commit", "-q", "-m", "with a submodule")
    data, env = tmp_path / "data", {"MAKA_WORKSPACE_CHECKPOINTS": "on"}
    ran = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "write n.md saying x"],
        data,
        env=env,
    )
    assert ran.returncode == 0, ran.stderr
    assert "[checkpoint_nested_repository]" in ran.stdout
    [(header, _)] = committed_runs(data)
    points = json.loads(maka(["branch", header.session_id, "--json"], data, env=env).stdout)
    last = points["boundaries"][-1]["eventId"]
    refused = maka(
        ["branch", header.session_id, "--at", last, "--to", str(tmp_path / "c")], data, env=env
    )
    assert refused.returncode == 2 and "[branch_snapshot_unavailable]" in refused.stderr
    assert "--current-files" not in refused.stderr, refused.stderr
    assert "cannot be made either: checkpoint_nested_repository" in refused.stderr
    assert not (tmp_path / "c").exists()
