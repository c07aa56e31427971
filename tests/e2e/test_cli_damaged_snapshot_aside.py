"""A blob swapped in a workspace's private store, end to end with the real ``maka`` and the real
``git`` (docs/design/workspace.md section 5, "Integrity"): every ``maka run`` after the damage
took it into its snapshots too (Git never writes again an object it believes it has), and the
user could not get a good snapshot back though the folder still held the right bytes. ``maka
doctor --verify-snapshots`` now moves the damaged object aside, kept, says where, and the next
``maka run`` writes it again from the folder: its snapshots and the older ones verify again."""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path
from typing import Any

import pytest

from storage.checkpoints.checkpoint_store import GitCheckpointStore
from tests.helpers.maka_run import committed_runs, maka, run_auto, snapshot_facts
from tests.helpers.user_git import user_git
from tests.unit.test_checkpoint_verify import swap_blob

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]
PLANTED = b"planted by someone else, not what the folder holds\n"


def _doctor(data: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    result = maka(["doctor", "--json", *extra], data)
    return result.returncode, json.loads(result.stdout)


def _damaged_store(tmp_path: Path) -> tuple[Path, Path, dict[str, Any], Path, str]:
    """A folder with two runs' snapshots, a.txt's blob swapped in the store after the first:
    the second run's snapshots take the damaged blob too (a.txt did not change)."""
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("the real content\n")
    run_auto(data, work, "write one.md saying 1")
    [first, *_] = snapshot_facts(data)
    git_dir = GitCheckpointStore(data).git_dir(first["workspaceIdentity"])
    blob = user_git(git_dir, "rev-parse", f"{first['treeId']}:a.txt").strip()
    swap_blob(git_dir, blob, PLANTED)
    run_auto(data, work, "write two.md saying 2")
    return data, work, first, git_dir, blob


def test_after_the_doctor_the_next_run_writes_the_damaged_blob_again(tmp_path: Path) -> None:
    data, work, first, _, _ = _damaged_store(tmp_path)
    code, report = _doctor(data, "--verify-snapshots")
    assert code == 1
    damaged = [p for p in report["problems"] if p["code"] == "workspace_checkpoint_damaged"]
    assert len(damaged) == len(snapshot_facts(data)) >= 4, report["problems"]

    run_auto(data, work, "write three.md saying 3")
    code, report = _doctor(data, "--verify-snapshots")
    assert code == 0, report["problems"]
    assert report["workspaceCheckpoints"]["damaged"] == 0
    assert report["workspaceCheckpoints"]["verified"] == len(snapshot_facts(data))
    # The first snapshot restores, with the folder's bytes.
    copy = tmp_path / "copy"
    GitCheckpointStore(data).materialize(first["workspaceIdentity"], first["treeId"], copy, "s")
    assert (copy / "a.txt").read_text() == "the real content\n"
    assert not (copy / "two.md").exists()


def test_the_doctor_says_what_it_moved_aside_and_where(tmp_path: Path) -> None:
    data, _, _, git_dir, blob = _damaged_store(tmp_path)
    code, report = _doctor(data, "--verify-snapshots")
    assert code == 1
    aside = git_dir / "maka-damaged" / blob
    assert report["workspaceCheckpoints"].get("movedAside") == [
        {
            "store": git_dir.name,
            "objectId": blob,
            "path": "a.txt",
            "missing": False,
            "movedTo": str(aside),
        }
    ]
    damaged = [p for p in report["problems"] if p["code"] == "workspace_checkpoint_damaged"]
    assert "the next capture of the folder writes them again" in damaged[0]["message"]
    assert zlib.decompress(aside.read_bytes()).endswith(PLANTED)  # kept, not deleted
    # Before a capture the snapshots are damaged, not missing: their bytes were moved aside.
    said = maka(["doctor"], data).stdout
    assert "workspace_checkpoint_damaged" in said, said
    assert "workspace_checkpoint_missing" not in said, said
    assert f"moved aside (to {aside.parent})" in said, said
    code, report = _doctor(data)
    assert code == 1 and report["workspaceCheckpoints"]["missing"] == []
    assert len(report["workspaceCheckpoints"]["damagedAside"]) == len(snapshot_facts(data))


def test_the_doctor_says_in_words_what_it_moved_aside(tmp_path: Path) -> None:
    data, _, _, git_dir, blob = _damaged_store(tmp_path)
    said = maka(["doctor", "--verify-snapshots"], data)
    assert said.returncode == 1
    aside = git_dir / "maka-damaged" / blob
    assert f"moved aside: {blob} (a.txt) of {git_dir.name} to {aside}" in said.stdout
    assert "the next capture of each folder writes them again" in said.stdout, said.stdout


def test_a_plan_says_the_stop_s_snapshot_was_moved_aside_not_lost(tmp_path: Path) -> None:
    """The snapshot taken at a crash was found damaged and moved aside, and the folder no
    longer holds those bytes (a.txt edited since), so no capture can write them again: ``maka
    plan`` parks on the missing snapshot and says where its objects went, not that the store
    lost it."""
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("the real content\n")
    killed = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "write one.md saying 1"],
        data,
        env={"MAKA_FAILPOINT": "P4"},
    )
    assert killed.returncode == -9, killed.stderr
    [header, _] = committed_runs(data)[0]
    snapshot = snapshot_facts(data)[-1]
    git_dir = GitCheckpointStore(data).git_dir(snapshot["workspaceIdentity"])
    blob = user_git(git_dir, "rev-parse", f"{snapshot['treeId']}:a.txt").strip()
    swap_blob(git_dir, blob, PLANTED)
    assert _doctor(data, "--verify-snapshots")[0] == 1
    (work / "a.txt").write_text("edited by the user since\n")

    plan = maka(
        ["plan", header.session_id, "--json"], data, env={"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
    )
    body = json.loads(plan.stdout)
    said = json.dumps(body)
    assert "workspace_checkpoint_missing" in said, said
    assert "a check found it damaged and moved 1 of its objects aside, kept, to " in said, said
    assert str(git_dir / "maka-damaged") in said, said
    assert "lost it" not in said, said
    # A restored copy cannot be made from it, and the refusal says why, not "none is left".
    restore = maka(
        ["resume", header.session_id, "--restore-to", "--permission-mode", "auto"],
        data,
        env={"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"},
    )
    printed = restore.stdout + restore.stderr
    assert restore.returncode == 3, printed
    assert "Refused: [workspace_restore_unavailable] the snapshot a restored copy would be" in (
        printed
    )
    assert "was found damaged and its objects were moved aside" in printed, printed
    assert "no snapshot of the folder is left" not in printed, printed
    assert len(committed_runs(data)) == 1


def test_checkpoints_and_branch_call_them_damaged_not_missing(tmp_path: Path) -> None:
    """Until a capture writes the moved objects again, ``maka checkpoints`` said such a snapshot
    was MISSING and ``maka branch`` offered only ``--current-files``, while the doctor called
    it damaged; all three now say damaged, and where its objects went."""
    data, _, first, git_dir, _ = _damaged_store(tmp_path)
    assert _doctor(data, "--verify-snapshots")[0] == 1
    aside = git_dir / "maka-damaged"
    session = committed_runs(data)[0][0].session_id
    listed = json.loads(maka(["checkpoints", session, "--json"], data).stdout)
    rows = [row for run in listed["runs"] for row in run["checkpoints"]]
    assert rows and all(row.get("damagedAside") for row in rows), rows
    text = maka(["checkpoints", session], data).stdout
    assert "MISSING" not in text, text
    assert text.count(f"DAMAGED: 1 object(s) moved aside to {aside}") == len(rows), text
    points = json.loads(maka(["branch", session, "--json"], data).stdout)["boundaries"]
    bound = [p for p in points if p.get("checkpointRef")]
    assert bound and all(p.get("damagedAside") and not p["snapshotKept"] for p in bound)
    said = maka(["branch", session], data).stdout
    assert "no snapshot (--current-files)" not in said, said
    assert "snapshot damaged, moved aside" in said, said
    assert first["checkpointRef"] in json.dumps(points)


def test_a_stale_park_says_its_last_snapshot_was_found_damaged(tmp_path: Path) -> None:
    """A command killed after its result (P6), the file it appended to edited since, and the
    snapshot before it found damaged by a restore's check (its objects moved aside): ``maka
    plan``, where that refusal sends the user, says why the current files cannot be compared
    (it said only that there is no snapshot to compare them with)."""
    from tests.helpers.crashed_session import FLAG, crashed_run

    crashed = crashed_run(tmp_path, "P6", files={"n.txt": "one\n"})
    data, work, session = crashed.data, crashed.work, crashed.session_id
    env = {**crashed.env, **FLAG}
    [checkpoint] = snapshot_facts(data)[-1:]
    git_dir = GitCheckpointStore(data).git_dir(checkpoint["workspaceIdentity"])
    blob = user_git(
        Path("/"), "--git-dir", str(git_dir), "rev-parse", f"{checkpoint['treeId']}:n.txt"
    ).strip()
    (work / "n.txt").write_text("edited by the user\n")
    swap_blob(git_dir, blob, PLANTED)
    copy = tmp_path / "copy"
    refused = maka(["resume", session, "--restore-to", str(copy)], data, env=env)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "[workspace_restore_snapshot_damaged]" in refused.stdout, refused.stdout
    assert (git_dir / "maka-damaged" / blob).is_file() and not copy.exists()
    planned = maka(["plan", session, "--json"], data, env=env)
    notes = [
        d
        for d in json.loads(planned.stdout)["diagnostics"]
        if d["code"] == "workspace_rebaseline_uncompared"
    ]
    assert len(notes) == 1, planned.stdout
    assert "(the last one is not whole: a check found it damaged" in notes[0]["message"]
    assert notes[0]["detail"] == {"damagedAside": True}, notes
    said = maka(["plan", session], data, env=env).stdout
    assert "moved 1 of its objects aside" in said, said
