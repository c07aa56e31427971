"""What a restored copy holds when it cannot be the folder at the stop (docs/design/workspace.md
section 4), end to end with the real ``maka`` and the real ``git``: a stale snapshot (the run was
killed between a writing call's result and the capture after it) and a boundary snapshot gone from
the checkpoint store (restore from the latest earlier one that exists). The offer, the transcript
marker and the host notice the model gets (the exact provider request) say which point of the
history the copy reflects."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from app.host.desktop_services import DesktopServices
from storage.ledger.ledger_store import open_store
from tests.e2e.test_workspace_decisions_cli import Drill, _files
from tests.helpers.maka_run import committed_runs, maka

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


def _checkpoints(events: list[Any]) -> list[dict[str, Any]]:
    return [
        e["actions"]["workspaceCheckpoint"]
        for e in events
        if "workspaceCheckpoint" in e.get("actions", {})
    ]


def _delete_snapshot(data: Path, commit_id: str) -> None:
    """Remove one checkpoint's commit object from the private store (as a damaged disk or a
    careless clean-up would): its fact stays, its artifact is gone."""
    [loose] = list((data / "checkpoints").glob(f"*.git/objects/{commit_id[:2]}/{commit_id[2:]}"))
    loose.unlink()


# For people, calls are named by what they did; the model's notice names them by call id.
STALE_REFLECTS = (
    'the folder as it was before the command "echo x >> count.txt"; what it changed is not in '
    "the copy"
)
STALE_NOTICE = (
    "Note from the host: the user chose to continue in a restored copy of the folder. The copy "
    "holds the files as they were before your bash call c1: what that call changed is not in "
    "these files, even though its result above says it ran. Re-read the files before you "
    "rely on what you saw of them earlier."
)


def test_a_copy_of_a_stale_snapshot_says_it_predates_the_last_command(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.run("P6")  # the bash call's T2 committed; the capture after it never ran
    before = _files(drill.work)
    assert before["count.txt"] == b"x\n"

    code, parked = drill.resume()
    assert code == 3 and parked["rejectionReasons"] == ["workspace_checkpoint_stale"]
    assert parked["workspaceOptions"] == ["isolated_restore", "rebaseline"]
    assert parked["restorePoint"]["kind"] == "before_later_calls"
    assert parked["restorePoint"]["reflects"] == STALE_REFLECTS
    # The stale park names the command and the files that differ from the last snapshot.
    [stale] = [d for d in parked["diagnostics"] if d["code"] == "workspace_checkpoint_stale"]
    assert stale["message"] == (
        'the command "echo x >> count.txt" may have changed files after the last snapshot; '
        "1 file differs from that snapshot"
    )
    assert stale["detail"]["changedPaths"] == [{"path": "count.txt", "change": "added"}]
    note = [d for d in parked["diagnostics"] if d["code"] == "workspace_restore_point"]
    assert [d["message"] for d in note] == [f"a restored copy would hold {STALE_REFLECTS}"]
    text = maka(["plan", drill.session], drill.data, env=drill.env).stdout
    assert f"session lives in the copy). The copy holds {STALE_REFLECTS}." in text

    args = ["resume", drill.session, "--json", "--permission-mode", "auto", "--restore-to"]
    result = maka(args, drill.data, env=drill.env)
    assert result.returncode == 0, result.stderr
    copy = tmp_path / "work-restored-1"
    assert f"[workspace] Continued in a restored copy at {copy}, holding {STALE_REFLECTS}." in (
        result.stderr
    )
    # The copy is the folder before the command: no count.txt; the continuation wrote its report.
    files = _files(copy)
    files.pop(".maka/workspace.json")
    files.pop(".maka/.gitignore")
    assert files == {"a.txt": b"alpha\n", "b.txt": b"beta\n", "report.txt": b"done\n"}
    assert _files(drill.work) == before

    # The exact first request: the replayed history, no new user message, then the notice.
    first = drill.requests()[0]["history"]
    assert [item["type"] for item in first] == [
        "user",
        "assistant",
        "tool_call",
        "tool_result",
        "host_notice",
    ]
    assert first[-1] == {"type": "host_notice", "text": STALE_NOTICE}
    runs = committed_runs(drill.data)
    transition = runs[1][1][0]["actions"]["workspaceTransition"]
    assert transition["restorePoint"] == "before_later_calls"
    assert transition["laterCalls"] == [{"toolName": "bash", "toolCallId": "c1"}]
    assert transition["checkpointRef"] == _checkpoints(runs[0][1])[-1]["checkpointRef"]
    # The desktop's transcript marks the continuation in the same words: the command, as the
    # user knows it from the earlier run, not the call's id.
    services = DesktopServices(open_store(drill.data), drill.data, safe_resume_enabled=True)
    try:
        services.recover_at_startup()
        texts = [getattr(item, "text", "") for item in services.open_session(drill.session).items]
    finally:
        services.close()
    assert f"Continued in a restored copy at {copy}, holding {STALE_REFLECTS}." in texts


def test_a_missing_snapshot_offers_a_copy_of_the_latest_earlier_one(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.run()  # captures at the start and after the bash call; then the provider failed
    start, boundary = _checkpoints(committed_runs(drill.data)[0][1])
    _delete_snapshot(drill.data, boundary["commitId"])
    # (Unchanged, the folder's tree would be the snapshot's, which its tree in the store proves
    # without the commit: test_a_snapshot_without_its_commit_is_verified_by_its_tree.)
    (drill.work / "notes.txt").write_text("written after the stop\n")
    before = _files(drill.work)

    code, parked = drill.resume()
    assert code == 3 and parked["rejectionReasons"] == ["workspace_checkpoint_missing"]
    assert parked["workspaceOptions"] == ["isolated_restore", "rebaseline"]
    reflects = (
        "the folder at an earlier point (the snapshot taken at the start of a run, before any "
        "call that may have written, less than a minute before the stop), because the snapshot "
        "taken at the stop is gone; the agent's later changes (the command \"echo x >> "
        'count.txt") are not in it'
    )
    assert parked["restorePoint"] == {
        "kind": "earlier_snapshot",
        "checkpointRef": start["checkpointRef"],
        "reflects": reflects,
    }
    text = maka(["plan", drill.session], drill.data, env=drill.env).stdout
    assert f"The copy holds {reflects}." in text

    args = ["resume", drill.session, "--json", "--permission-mode", "auto", "--restore-to"]
    result = maka(args, drill.data, env=drill.env)
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    copy = tmp_path / "work-restored-1"
    assert body["workspacePath"] == str(copy)
    assert f"[workspace] Continued in a restored copy at {copy}, holding {reflects}." in (
        result.stderr
    )
    files = _files(copy)
    files.pop(".maka/workspace.json")
    files.pop(".maka/.gitignore")
    assert files == {"a.txt": b"alpha\n", "b.txt": b"beta\n", "report.txt": b"done\n"}
    assert _files(drill.work) == before

    first = drill.requests()[0]["history"]
    assert first[-1] == {
        "type": "host_notice",
        "text": "Note from the host: the user chose to continue in a restored copy of the "
        "folder. The snapshot taken when this session stopped was lost, so the copy holds the "
        "files as they were at an earlier point (the snapshot taken at the start of a run, "
        "before any call that may have written, less than a minute before the stop): the "
        "changes made by your later calls (the bash call c1) are not in these files. Re-read "
        "the files before you rely on what you saw of them earlier.",
    }
    transition = committed_runs(drill.data)[1][1][0]["actions"]["workspaceTransition"]
    assert transition["restorePoint"] == "earlier_snapshot"
    assert transition["checkpointRef"] == start["checkpointRef"]
    assert transition["treeId"] == start["treeId"]
    assert transition["lostCheckpointRef"] == boundary["checkpointRef"]
    assert transition["workspaceEpoch"] == 2


def test_a_snapshot_without_its_commit_is_verified_by_its_tree(tmp_path: Path) -> None:
    """The boundary snapshot's commit object is gone but its tree is whole in the store, and the
    folder is unchanged: its tree is the recorded one, so the resume continues, saying it
    compared by the tree."""
    drill = Drill(tmp_path)
    drill.run()
    _start, boundary = _checkpoints(committed_runs(drill.data)[0][1])
    _delete_snapshot(drill.data, boundary["commitId"])
    code, resumed = drill.resume()
    assert code == 0 and resumed["status"] == "completed", resumed
    [verified] = [d for d in resumed["diagnostics"] if d["code"] == "workspace_verified"]
    assert verified["detail"]["comparedBy"] == "treeId"
    assert "compared by the folder's tree" in verified["message"]


def test_restore_is_refused_with_its_code_when_no_snapshot_is_left(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.run()
    for checkpoint in _checkpoints(committed_runs(drill.data)[0][1]):
        _delete_snapshot(drill.data, checkpoint["commitId"])
    (drill.work / "notes.txt").write_text("written after the stop\n")
    code, parked = drill.resume()
    assert code == 3 and parked["workspaceOptions"] == ["rebaseline"]
    assert "restorePoint" not in parked

    code, refused = drill.resume("--restore-to")
    assert code == 3
    assert refused["disposition"] == "refused"
    assert refused["code"] == "workspace_restore_unavailable"
    assert refused["rejectionReasons"] == ["workspace_checkpoint_missing"]
    assert f"maka resume {drill.session} --rebaseline" in refused["message"]
    text = maka(["resume", drill.session, "--restore-to"], drill.data, env=drill.env)
    assert text.returncode == 3
    assert "Refused: [workspace_restore_unavailable]" in text.stdout
    assert len(committed_runs(drill.data)) == 1 and drill.requests() == []
    assert not (tmp_path / "work-restored-1").exists()


def test_empty_folders_are_drift_and_come_back_in_a_restored_copy(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    (drill.work / "logs").mkdir()
    drill.run()
    (drill.work / "logs").rmdir()  # removed while stopped
    (drill.work / "cache" / "tmp").mkdir(parents=True)  # made while stopped
    code, parked = drill.resume()
    assert code == 3 and parked["rejectionReasons"] == ["workspace_drift"]
    [drift] = [d for d in parked["diagnostics"] if d["code"] == "workspace_drift"]
    assert drift["message"] == "2 folders changed since the snapshot taken at the stop"
    assert drift["detail"]["changedPaths"] == [
        {"path": "cache/tmp/", "change": "added"},
        {"path": "logs/", "change": "deleted"},
    ]
    code, body = drill.resume("--restore-to")
    assert code == 0, body
    copy = tmp_path / "work-restored-1"
    assert (copy / "logs").is_dir() and not any((copy / "logs").iterdir())
    assert not (copy / "cache").exists()
    assert not (drill.work / "logs").exists()  # the user's folder is left as it is


def test_a_call_settled_as_not_run_leaves_the_copy_at_the_stop(tmp_path: Path) -> None:
    """Killed after the bash call's T1, before it ran; the user settles it "did not run".
    The snapshot before it is then the folder at the stop, as the drift check already rolls it
    forward: the copy is not said to predate the call, and the model gets no notice that the
    call's changes are missing."""
    drill = Drill(tmp_path)
    drill.run("P2")
    settled = maka(["settle", drill.session, "c1", "--not-run"], drill.data, env=drill.env)
    assert settled.returncode == 0, settled.stderr
    (drill.work / "a.txt").write_text("changed by the user\n")

    code, parked = drill.resume()
    assert code == 3 and parked["rejectionReasons"] == ["workspace_drift"]
    assert parked["restorePoint"]["kind"] == "at_stop"
    assert parked["restorePoint"]["reflects"] == "the folder as it was at the stop"
    assert "workspace_restore_point" not in [d["code"] for d in parked["diagnostics"]]
    text = maka(["plan", drill.session], drill.data, env=drill.env).stdout
    assert "sleep" not in text and 'before the command "echo x >> count.txt"' not in text

    args = ["resume", drill.session, "--json", "--permission-mode", "auto", "--restore-to"]
    result = maka(args, drill.data, env=drill.env)
    assert result.returncode == 0, result.stderr
    copy = tmp_path / "work-restored-1"
    assert f"[workspace] Continued in a restored copy at {copy}." in result.stderr
    assert (copy / "a.txt").read_text() == "alpha\n"
    first = drill.requests()[0]["history"]
    assert "host_notice" not in [item["type"] for item in first]
