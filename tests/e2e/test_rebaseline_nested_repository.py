"""A rebaseline in a folder that holds a nested repository (docs/design/workspace.md section 4).

An agent's command makes a Git repository inside the session folder (``git init vendor``) and the
app is killed before the snapshot after it (P5): the plan parks on the stale snapshot and offers
``--rebaseline``. The folder cannot be snapshotted while the nested repository is there, and the
rebaseline must still work: the user's decision is recorded with the failed capture
(``workspaceCheckpointFailed`` with ``checkpoint_nested_repository``, ``decidedBy``), the model is
told that files may have changed and to re-read them, and every later surface reads the record.
Real Git, the real ``maka``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script
from tests.helpers.user_git import user_git

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
NEST = {"id": "c1", "name": "bash", "args": {"command": "git init -q vendor"}}


def _codes(body: dict[str, Any]) -> list[str]:
    return [d["code"] for d in body["diagnostics"]]


def test_a_rebaseline_goes_on_when_the_folder_holds_a_nested_repository(tmp_path: Path) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("one\n")
    user_git(work, "init", "-q")
    user_git(work, "add", ".")
    user_git(work, "commit", "-q", "-m", "start")
    record = tmp_path / "requests.jsonl"
    script = write_script(
        tmp_path / "script.json",
        [[{"text": "Nesting.", "toolCalls": [NEST]}, {"text": "Done."}], [{"text": "Re-read."}]],
    )
    env = {**scripted_env(script, record, checkpoints=True), **FLAG}

    crashed = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "make vendor"],
        data,
        env={**env, "MAKA_FAILPOINT": "P5"},
    )
    assert crashed.returncode == -9, crashed.stderr
    assert (work / "vendor" / ".git").is_dir()
    record.unlink(missing_ok=True)
    session = committed_runs(data)[0][0].session_id

    planned = json.loads(maka(["plan", session, "--json"], data, env=env).stdout)
    assert planned["rejectionReasons"] == ["workspace_checkpoint_stale"]
    assert "rebaseline" in planned["workspaceOptions"]
    [note] = [d for d in planned["diagnostics"] if d["code"] == "workspace_rebaseline_uncaptured"]
    assert note["detail"]["reasonCode"] == "checkpoint_nested_repository"
    assert "vendor" in note["message"]
    said = maka(["plan", session], data, env=env).stdout
    assert "--rebaseline (the files as they are now cannot be snapshotted" in said, said
    assert "vendor is a nested repository" in said, said

    resumed = maka(["resume", session, "--rebaseline", "--permission-mode", "auto"], data, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "could not be snapshotted (vendor is a nested repository)" in resumed.stdout

    runs = committed_runs(data)
    assert len(runs) == 2
    header, events = runs[1]
    assert header.status.value == "completed"
    start, fact = events[0], events[1]
    assert "continuationStart" in start["actions"]
    assert "workspaceBaseline" not in start["actions"]  # no snapshot for it to name
    failed = fact["actions"]["workspaceCheckpointFailed"]
    assert failed["reasonCode"] == "checkpoint_nested_repository"
    assert failed["decidedBy"] == "local_user" and failed["runtimeHighWater"] == 1
    assert "vendor" in failed["message"]
    # The continuation ran: the model was called once, told that files may have changed.
    [request] = [json.loads(line) for line in record.read_text().splitlines()]
    told = json.dumps(request["history"])
    assert "no snapshot to tell which" in told and "Re-read any file" in told, told

    later = json.loads(maka(["plan", session, "--json"], data, env=env).stdout)
    assert later["rejectionReasons"] != ["workspace_checkpoint_stale"], later
    assert "workspace_checkpoint_failed" not in later["rejectionReasons"]
    text = maka(["plan", session], data, env=env)
    assert text.returncode in (0, 3) and "Continued with your current files" in text.stdout, (
        text.stdout + text.stderr
    )

    timeline = maka(["timeline", session], data, env=env)
    assert timeline.returncode == 0, timeline.stderr
    assert "continued with the current files, not snapshotted" in timeline.stdout
    assert maka(["timeline", session, "--json"], data, env=env).returncode == 0
    listed = maka(["checkpoints", session], data, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "checkpoint_nested_repository" in listed.stdout
    # Listed as the user's choice, not as a capture that merely failed.
    assert "as you chose to continue with them: not snapshotted" in listed.stdout, listed.stdout

    exported = tmp_path / "export" / "session.jsonl"
    exported.parent.mkdir()
    done = maka(["export", session, "-o", str(exported)], data, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    # The ledger tools read one run's events: each run's lines of the export, as exported.
    per_run: dict[str, list[bytes]] = {}
    for line in exported.read_bytes().splitlines(keepends=True):
        record = json.loads(line)
        if "kind" not in record:  # an event (the other records name their kind)
            per_run.setdefault(str(record["runId"]), []).append(line)
    assert list(per_run) == [runs[0][0].run_id, header.run_id]
    for run_id, lines in per_run.items():
        path = tmp_path / "export" / f"{run_id}.jsonl"
        path.write_bytes(b"".join(lines))
        checked = maka(["ledger", "check", str(path)], data, env=env)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    imported = maka(["import", str(exported)], tmp_path / "other", env=env)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    again = maka(["timeline", session], tmp_path / "other", env=env)
    assert "continued with the current files, not snapshotted" in again.stdout


@pytest.mark.parametrize("way", ["restore", "rebaseline"])
def test_a_repository_made_inside_the_folder_while_maka_was_stopped_keeps_both_ways_forward(
    tmp_path: Path, way: str
) -> None:
    """The user makes a repository inside the folder after a clean stop (the snapshot at the
    stop is whole and current): the plan parked with ``safety_observation_unavailable`` and
    offered neither the rebaseline nor a restored copy; no way forward was accepted. It is now
    a drift whose files cannot be listed, with both ways forward."""
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("one\n")
    user_git(work, "init", "-q")
    user_git(work, "add", ".")
    user_git(work, "commit", "-q", "-m", "start")
    write = {"id": "w1", "name": "write_file", "args": {"path": "notes.md", "content": "hi\n"}}
    script = write_script(
        tmp_path / "script.json",
        [[{"text": "Writing.", "toolCalls": [write]}, {"text": "Done."}], [{"text": "Again."}]],
    )
    env = {**scripted_env(script, checkpoints=True), **FLAG}
    crashed = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "write notes"],
        data,
        env={**env, "MAKA_FAILPOINT": "P6"},
    )
    assert crashed.returncode == -9, crashed.stderr
    session = committed_runs(data)[0][0].session_id
    before = json.loads(maka(["plan", session, "--json"], data, env=env).stdout)
    assert before["disposition"] == "continue", before
    (work / "vendor").mkdir()
    user_git(work / "vendor", "init", "-q")  # the user's own repository, made while stopped

    planned = json.loads(maka(["plan", session, "--json"], data, env=env).stdout)
    assert planned["rejectionReasons"] == ["workspace_drift"], planned
    assert planned["workspaceOptions"] == ["isolated_restore", "rebaseline"], planned
    [drift] = [d for d in planned["diagnostics"] if d["code"] == "workspace_drift"]
    assert "vendor is a nested repository" in drift["message"], drift
    assert drift["detail"]["reasonCode"] == "checkpoint_nested_repository"
    assert "workspace_rebaseline_uncaptured" in _codes(planned)
    [uncompared] = [
        d for d in planned["diagnostics"] if d["code"] == "workspace_rebaseline_uncompared"
    ]
    assert uncompared["message"].startswith("the current files cannot be compared"), uncompared

    if way == "rebaseline":
        args = ["resume", session, "--rebaseline", "--permission-mode", "auto"]
        continued = maka(args, data, env=env)
        assert continued.returncode == 0, continued.stdout + continued.stderr
        assert "could not be snapshotted (vendor is a nested repository)" in continued.stdout
        assert (work / "notes.md").read_text() == "hi\n" and (work / "vendor" / ".git").is_dir()
        return
    copy = tmp_path / "copy"
    restored = maka(
        ["resume", session, "--restore-to", str(copy), "--permission-mode", "auto"], data, env=env
    )
    assert restored.returncode == 0, restored.stdout + restored.stderr
    # The snapshot before the write, as the restore point says (the model is told so).
    assert planned["restorePoint"]["kind"] == "before_later_calls", planned
    assert (copy / "a.txt").read_text() == "one\n" and not (copy / "vendor").exists()
    assert (work / "vendor" / ".git").is_dir()  # the user's folder is left as it is
