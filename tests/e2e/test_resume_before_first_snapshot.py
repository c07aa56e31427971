"""A continuation killed before its first snapshot of the folder (real SIGKILL at
``after_continuation_admission_committed`` or ``after_checkpoint_artifact``), checkpoints on,
the real ``maka`` with the scripted provider: nothing ran in it, so its boundary snapshot is the
one its admission was based on (the parent's, the rebaseline's capture, or the snapshot the
restored copy was made from). The next ``maka plan`` continues, ``maka resume`` continues once
with the right history; a continuation that dispatched a writing call still parks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from runtime.ledger.workspace_facts import may_write
from tests.e2e.test_workspace_decisions_cli import Drill, _drifted, _files
from tests.helpers.maka_run import committed_runs, maka

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]

REPLAYED = ["user", "assistant", "tool_call", "tool_result"]


def _killed(drill: Drill, failpoint: str, *decision: str, runs: int = 2) -> None:
    args = ["resume", drill.session, "--json", "--permission-mode", "auto", *decision]
    killed = maka(args, drill.data, env={**drill.env, "MAKA_FAILPOINT": failpoint})
    assert killed.returncode == -9, killed.stderr
    if failpoint == "after_checkpoint_artifact":
        # The first snapshot never holds the model up: its first step may have been asked
        # while the capture ran (the request is set aside: the resume's are counted).
        assert len(drill.requests()) <= 1
        drill.record.unlink(missing_ok=True)
    else:
        assert drill.requests() == []  # killed before any provider call
    committed = committed_runs(drill.data)
    assert len(committed) == runs
    own = [e for e in committed[-1][1] if "workspaceCheckpoint" in e.get("actions", {})]
    assert own == []  # the continuation recorded no snapshot of its own
    dispatched = [
        e["actions"]["toolDispatch"]["toolName"]
        for e in committed[-1][1]
        if "toolDispatch" in e.get("actions", {})
    ]
    assert all(not may_write(name) for name in dispatched)  # no write before its snapshot


def _plan(drill: Drill) -> dict[str, Any]:
    result = maka(["plan", drill.session, "--json"], drill.data, env=drill.env)
    body: dict[str, Any] = json.loads(result.stdout)
    return body


def _codes(body: dict[str, Any]) -> list[str]:
    return [d["code"] for d in body["diagnostics"]]


def _continues_once(drill: Drill, runs: int = 3) -> list[dict[str, Any]]:
    """``maka plan`` says it continues; ``maka resume`` continues exactly once; the requests."""
    planned = _plan(drill)
    assert planned["disposition"] == "continue", planned
    assert "workspace_checkpoint_stale" not in _codes(planned)
    assert "workspace_verified" in _codes(planned)
    code, body = drill.resume()
    assert code == 0, body
    assert body["status"] == "completed"
    code, again = drill.resume()
    assert code == 3 and again["rejectionReasons"] == ["continuation_already_exists"]
    assert len(committed_runs(drill.data)) == runs
    requests = drill.requests()
    assert len(requests) == 2  # the continuation's two model steps, once
    return requests


@pytest.mark.parametrize(
    "failpoint", ["after_continuation_admission_committed", "after_checkpoint_artifact"]
)
def test_a_plain_continuation_killed_before_its_snapshot_continues(
    tmp_path: Path, failpoint: str
) -> None:
    drill = Drill(tmp_path)
    drill.run()  # the bash call ran and was captured; then the provider failed
    _killed(drill, failpoint)
    requests = _continues_once(drill)
    first = requests[0]["history"]
    assert [item["type"] for item in first] == REPLAYED
    assert first[0] == {"type": "user", "text": "count once"}
    assert (drill.work / "report.txt").read_text() == "done\n"
    assert (drill.work / "count.txt").read_text() == "x\n"


def test_a_plain_continuation_killed_before_its_snapshot_parks_on_drift(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.run()
    _killed(drill, "after_continuation_admission_committed")
    (drill.work / "a.txt").write_text("changed\n")
    planned = _plan(drill)
    assert planned["rejectionReasons"] == ["workspace_drift"], planned
    assert planned["workspaceOptions"] == ["isolated_restore", "rebaseline"]
    [drift] = [d for d in planned["diagnostics"] if d["code"] == "workspace_drift"]
    assert drift["detail"]["changedPaths"] == [{"path": "a.txt", "change": "modified"}]
    code, body = drill.resume("--rebaseline")
    assert code == 0, body
    notice = drill.requests()[0]["history"][-1]
    assert notice["type"] == "host_notice" and "- a.txt (modified)" in notice["text"]


def test_a_rebaseline_continuation_killed_before_its_snapshot_continues(tmp_path: Path) -> None:
    """The rebaseline's continuation is killed before its first snapshot (its baseline is its
    own), then the plain continuation after it too (two generations with no capture): the
    baseline is what the last one is compared with."""
    drill, _ = _drifted(tmp_path)
    _killed(drill, "after_continuation_admission_committed", "--rebaseline")
    assert _plan(drill)["disposition"] == "continue"
    _killed(drill, "after_continuation_admission_committed", runs=3)
    planned = _plan(drill)
    [verified] = [d for d in planned["diagnostics"] if d["code"] == "workspace_verified"]
    runs = committed_runs(drill.data)
    baseline = runs[1][1][0]["actions"]["workspaceBaseline"]
    assert verified["detail"]["checkpointRef"] == baseline["checkpointRef"]
    assert verified["detail"]["basisRunId"] == runs[1][0].run_id
    requests = _continues_once(drill, runs=4)
    first = requests[0]["history"]
    assert [item["type"] for item in first] == [*REPLAYED, "host_notice"]
    assert "- count.txt (modified)" in first[-1]["text"]
    assert [[i["type"] for i in r["history"]].count("host_notice") for r in requests] == [1, 1]
    assert (drill.work / "report.txt").read_text() == "done\n"
    assert (drill.work / "count.txt").read_text() == "edited by the user\n"


def test_a_restored_copy_continuation_killed_before_its_snapshot_continues_there(
    tmp_path: Path,
) -> None:
    drill, before = _drifted(tmp_path)
    _killed(drill, "after_continuation_admission_committed", "--restore-to")
    copy = tmp_path / "work-restored-1"
    # The plain continuation in the copy is killed before its snapshot too.
    _killed(drill, "after_checkpoint_artifact", runs=3)
    planned = _plan(drill)
    [verified] = [d for d in planned["diagnostics"] if d["code"] == "workspace_verified"]
    assert verified["detail"]["basis"] == "restored_copy"
    requests = _continues_once(drill, runs=4)
    assert [item["type"] for item in requests[0]["history"]] == REPLAYED
    runs = committed_runs(drill.data)
    assert runs[3][0].cwd == runs[2][0].cwd == str(copy)
    assert runs[3][0].workspace_identity == runs[1][0].workspace_identity
    epochs = {
        e["actions"]["workspaceCheckpoint"]["workspaceEpoch"]
        for e in runs[3][1]
        if "workspaceCheckpoint" in e.get("actions", {})
    }
    assert epochs == {2}
    files = _files(copy)
    files.pop(".maka/workspace.json")
    files.pop(".maka/.gitignore")
    assert files == {
        "a.txt": b"alpha\n",
        "b.txt": b"beta\n",
        "count.txt": b"x\n",
        "report.txt": b"done\n",
    }
    assert _files(drill.work) == before  # the user's folder is untouched
    assert not (tmp_path / "work-restored-2").exists()


def test_a_continuation_killed_after_a_proven_write_continues_rolled_forward(
    tmp_path: Path,
) -> None:
    drill = Drill(tmp_path)
    drill.run()
    # The continuation's write_file call ran (its T2 committed); the capture after it never did:
    # the ledger proves what it wrote, so the snapshot before it is rolled forward.
    args = ["resume", drill.session, "--json", "--permission-mode", "auto"]
    killed = maka(args, drill.data, env={**drill.env, "MAKA_FAILPOINT": "P6"})
    assert killed.returncode == -9, killed.stderr
    planned = _plan(drill)
    assert planned["disposition"] == "continue", planned
    verified = [d for d in planned["diagnostics"] if d["code"] == "workspace_verified"]
    assert verified[0]["detail"]["rolledForward"][0]["path"] == "report.txt"
    (drill.work / "report.txt").write_text("changed by the user\n")
    planned = _plan(drill)
    assert planned["rejectionReasons"] == ["workspace_drift"], planned
    assert planned["workspaceOptions"] == ["isolated_restore", "rebaseline"]


def test_a_restored_copy_changed_before_its_first_snapshot_parks_on_drift(
    tmp_path: Path,
) -> None:
    """The copy is compared with the snapshot it was made from (held in the original folder's
    store): a change in the copy is drift, listed by path; the rebaseline names it."""
    drill, before = _drifted(tmp_path)
    _killed(drill, "after_continuation_admission_committed", "--restore-to")
    copy = tmp_path / "work-restored-1"
    (copy / "a.txt").write_text("changed in the copy\n")
    planned = _plan(drill)
    assert planned["rejectionReasons"] == ["workspace_drift"], planned
    assert planned["workspaceOptions"] == ["isolated_restore", "rebaseline"]
    [drift] = [d for d in planned["diagnostics"] if d["code"] == "workspace_drift"]
    assert drift["detail"]["changedPaths"] == [{"path": "a.txt", "change": "modified"}]
    assert "workspace_rebaseline_uncompared" not in _codes(planned)
    code, body = drill.resume("--rebaseline")
    assert code == 0, body
    notice = drill.requests()[0]["history"][-1]
    assert notice["type"] == "host_notice" and "- a.txt (modified)" in notice["text"]
    baseline = committed_runs(drill.data)[2][1][0]["actions"]["workspaceBaseline"]
    assert baseline["workspaceEpoch"] == 3
    assert (copy / "report.txt").read_text() == "done\n"
    assert _files(drill.work) == before
