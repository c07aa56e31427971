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


def test_each_run_says_which_folder_its_snapshots_are_of(tmp_path: Path) -> None:
    """After a continuation in a restored copy the session's runs worked in two folders: the
    listing says, per run, which folder (and workspace) its snapshots were taken of."""
    from tests.e2e.test_workspace_decisions_cli import _drifted

    drill, _ = _drifted(tmp_path)
    code, body = drill.resume("--restore-to")
    assert code == 0, body
    copy = tmp_path / "work-restored-1"
    (first, _), (second, _) = committed_runs(drill.data)
    assert (first.cwd, second.cwd) == (str(drill.work), str(copy))

    listed = maka(["checkpoints", drill.session], drill.data, env=drill.env)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert f"  run {first.run_id} in {drill.work}: mode git_v1" in lines, listed.stdout
    assert f"  run {second.run_id} in {copy}: mode git_v1" in lines, listed.stdout

    document = json.loads(maka(["checkpoints", drill.session, "--json"], drill.data).stdout)
    assert [(run["runId"], run["cwd"], run["workspaceIdentity"]) for run in document["runs"]] == [
        (first.run_id, str(drill.work), first.workspace_identity),
        (second.run_id, str(copy), second.workspace_identity),
    ]
    assert first.workspace_identity != second.workspace_identity


def test_the_timeline_and_the_listing_name_a_snapshot_by_the_same_labelled_id(
    tmp_path: Path,
) -> None:
    """``maka timeline`` names each snapshot by its commit, and says so; ``maka checkpoints``
    lists that commit beside the snapshot's tree, labelled, so a user can match the two (the
    JSON keeps both fields as they were)."""
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    script = write_script(tmp_path / "s.json", [[FIRST, {"text": "Noted."}]])
    env = scripted_env(script, checkpoints=True)
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "count once"]
    assert maka(args, data, env=env).returncode == 0
    session = committed_runs(data)[0][0].session_id

    document = json.loads(maka(["checkpoints", session, "--json"], data, env=env).stdout)
    rows = [row for run in document["runs"] for row in run["checkpoints"]]
    assert len(rows) >= 2
    assert all(row["commitId"] != row["treeId"] for row in rows)
    timeline = maka(["timeline", session], data, env=env).stdout
    listed = maka(["checkpoints", session], data, env=env).stdout
    for row in rows:
        commit, tree = row["commitId"][:12], row["treeId"][:12]
        at = row["runtimeHighWater"]
        assert f"snapshot at event {at} (commit {commit})" in timeline, timeline
        line = next(line for line in listed.splitlines() if row["checkpointRef"] in line)
        assert f"commit {commit}  tree {tree}  after event {at}" in line, listed


def test_the_snapshot_taken_with_an_answer_about_a_call_is_listed_as_such(
    tmp_path: Path,
) -> None:
    """A settled call's answer takes the folder as the new starting point: its snapshot was
    listed as "your current files, as you chose to continue with them", a choice the user
    never made."""
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    script = write_script(tmp_path / "s.json", [[FIRST, {"text": "Noted."}]])
    env = {**scripted_env(script, checkpoints=True), "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "count once"]
    assert maka(args, data, env={**env, "MAKA_FAILPOINT": "P4"}).returncode == -9
    session = committed_runs(data)[0][0].session_id
    (work / "a.txt").write_text("edited\n")
    settled = maka(["settle", session, "c1", "--not-run", "--note", "checked"], data, env=env)
    assert settled.returncode == 0, settled.stdout + settled.stderr
    listed = maka(["checkpoints", session], data, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "the folder as you answered about an interrupted call" in listed.stdout, listed.stdout
    assert "as you chose to continue with them" not in listed.stdout
    rows = [
        row
        for run in json.loads(maka(["checkpoints", session, "--json"], data, env=env).stdout)[
            "runs"
        ]
        for row in run["checkpoints"]
    ]
    assert [row.get("decision") for row in rows if row["runtimeHighWater"] is None] == ["settle"]
