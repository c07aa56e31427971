"""A snapshot whose stored bytes Git cannot even read (a damaged entry in a pack of the private
store: ``fatal: packed object ... is corrupt``), end to end with the real ``maka`` and ``git``.
``maka checkpoints`` and ``maka doctor`` called every snapshot of the store MISSING ("its Git
objects are gone") though only one was damaged and nothing was gone, and ``maka doctor
--verify-snapshots`` re-hashed none and said "damaged: 0". Now the damaged one is DAMAGED, the
others present and re-hashed, and a damaged file in a pack is found by the re-hash."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from runtime.ledger.checkpoint_ports import CheckpointError
from storage.checkpoints.checkpoint_store import GitCheckpointStore
from tests.helpers.maka_run import committed_runs, maka, run_auto, snapshot_facts
from tests.helpers.user_git import user_git

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


def damage_stored_object(git_dir: Path, object_id: str) -> None:
    """Overwrite part of ``object_id``'s stored bytes (its pack entry, or its loose file) so
    that Git cannot inflate them."""
    loose = git_dir / "objects" / object_id[:2] / object_id[2:]
    if loose.is_file():
        body = bytearray(loose.read_bytes())
        where, length = 2, len(body) - 2
        path = loose
    else:
        for index in sorted((git_dir / "objects" / "pack").glob("*.idx")):
            listed = subprocess.run(
                ["git", "verify-pack", "-v", str(index)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            for line in listed.splitlines():
                fields = line.split()
                if fields and fields[0] == object_id:
                    path = index.with_suffix(".pack")
                    body = bytearray(path.read_bytes())
                    # (an entry: its type and size header, then the deflated bytes)
                    where, length = int(fields[4]) + 4, int(fields[3]) - 4
                    break
            else:
                continue
            break
        else:
            raise AssertionError(f"{object_id} is not stored in {git_dir}")
    for offset in range(where, where + max(1, min(length, 24))):
        body[offset] ^= 0x5A
    path.chmod(0o600)
    path.write_bytes(bytes(body))


def _two_snapshots(tmp_path: Path) -> tuple[Path, list[dict[str, Any]], Path]:
    data, work = tmp_path / "data", tmp_path / "work"
    (work / "lib").mkdir(parents=True)
    (work / "lib" / "a.txt").write_text("the real content\n")
    run_auto(data, work, "write one.md saying 1")
    snapshots = snapshot_facts(data)
    assert len(snapshots) >= 2
    git_dir = GitCheckpointStore(data).git_dir(snapshots[-1]["workspaceIdentity"])
    return data, snapshots, git_dir


@pytest.mark.parametrize("packed", [False, True], ids=["loose", "packed"])
def test_a_snapshot_whose_folder_cannot_be_read_is_damaged_and_the_others_present(
    tmp_path: Path, packed: bool
) -> None:
    data, snapshots, git_dir = _two_snapshots(tmp_path)
    first, last = snapshots[0], snapshots[-1]
    assert first["treeId"] != last["treeId"]
    if packed:
        user_git(git_dir, "repack", "-a", "-d", "-q")
    damage_stored_object(git_dir, last["treeId"])
    session = committed_runs(data)[0][0].session_id

    listed = maka(["checkpoints", session, "--json"], data)
    assert listed.returncode == 0, listed.stderr
    rows = [row for run in json.loads(listed.stdout)["runs"] for row in run["checkpoints"]]
    by_tree = {row["treeId"]: row for row in rows}
    assert by_tree[first["treeId"]]["present"] is True
    assert by_tree[last["treeId"]]["present"] is False
    assert by_tree[last["treeId"]]["damagedAside"][0]["objectId"] == last["treeId"]
    shown = maka(["checkpoints", session], data).stdout
    assert "DAMAGED: 1 folder object(s) whose stored bytes cannot be read" in shown
    assert "MISSING" not in shown

    doctor = maka(["doctor", "--json"], data)
    assert doctor.returncode == 1
    problems = json.loads(doctor.stdout)["problems"]
    assert [p["code"] for p in problems] == ["workspace_checkpoint_damaged"], problems
    assert "cannot be read" in problems[0]["message"]
    said = maka(["doctor"], data).stdout
    assert "0 missing, 1 damaged" in said

    verified = maka(["doctor", "--verify-snapshots"], data).stdout
    assert f"snapshots re-hashed: {len(snapshots)}, damaged: 1" in verified
    if packed:
        assert "packed (or read from a store it borrows)" in problems[0]["message"]
        return
    # A loose file: as doctor said, the check moved it aside, and the next capture of the
    # folder (which still holds those files) writes it again: the snapshot is whole again.
    assert "--verify-snapshots moves the damaged object aside" in problems[0]["message"]
    run_auto(data, tmp_path / "work", "read one.md")
    after = maka(["doctor", "--json"], data)
    assert after.returncode == 0, after.stdout


@pytest.mark.parametrize("packed", [False, True], ids=["loose", "packed"])
def test_a_file_whose_stored_bytes_cannot_be_read_is_found_by_the_re_hash(
    tmp_path: Path, packed: bool
) -> None:
    """A damaged file does not stop the walk that decides presence (a file's bytes are not
    read there): the re-hash a restore makes finds it, where it stopped with a Git error."""
    data, snapshots, git_dir = _two_snapshots(tmp_path)
    blob = user_git(git_dir, "rev-parse", f"{snapshots[0]['treeId']}:lib/a.txt").strip()
    if packed:
        user_git(git_dir, "repack", "-a", "-d", "-q")
    damage_stored_object(git_dir, blob)
    carrier = GitCheckpointStore(data)
    found = carrier.verify_snapshots(snapshots[0]["workspaceIdentity"], [snapshots[0]["treeId"]])
    [damaged] = found[snapshots[0]["treeId"]]
    assert (damaged.object_id, damaged.path, damaged.missing) == (blob, "lib/a.txt", False)
    copy = tmp_path / "copy"
    with pytest.raises(CheckpointError):
        carrier.materialize(snapshots[0]["workspaceIdentity"], snapshots[0]["treeId"], copy, "s")
    assert not (copy / "lib" / "a.txt").exists()


@pytest.mark.parametrize("packed", [False, True], ids=["loose", "packed"])
def test_a_plan_says_the_stop_s_snapshot_is_damaged_when_git_cannot_read_it(
    tmp_path: Path, packed: bool
) -> None:
    """``maka plan`` looks at the store through a stand-in that borrows its objects: it did
    not see that the unreadable object lies in the store itself, and parked saying the
    snapshot taken at the stop "is gone from the checkpoint store", where ``maka doctor`` and
    ``maka checkpoints`` said damaged."""
    data, work = tmp_path / "data", tmp_path / "work"
    (work / "lib").mkdir(parents=True)
    (work / "lib" / "a.txt").write_text("the real content\n")
    killed = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "write one.md saying 1"],
        data,
        env={"MAKA_FAILPOINT": "P4"},
    )
    assert killed.returncode == -9, killed.stderr
    [header, _] = committed_runs(data)[0]
    snapshot = snapshot_facts(data)[-1]
    git_dir = GitCheckpointStore(data).git_dir(snapshot["workspaceIdentity"])
    if packed:
        user_git(git_dir, "repack", "-a", "-d", "-q")
    damage_stored_object(git_dir, snapshot["treeId"])
    (work / "lib" / "a.txt").write_text("edited by the user since\n")

    plan = maka(
        ["plan", header.session_id, "--json"], data, env={"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
    )
    said = json.dumps(json.loads(plan.stdout))
    assert "workspace_checkpoint_missing" in said, said
    assert "is not whole in the checkpoint store" in said, said
    assert "Git cannot read the stored bytes of 1 of its objects" in said, said
    assert "gone from the checkpoint store" not in said, said
    assert "moved" not in said, said
    assert "damagedAside" not in said, said  # (what makes --restore-to say "moved aside")
    text = maka(
        ["plan", header.session_id], data, env={"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
    ).stdout
    assert "taken at the stop is gone or damaged." in text, text
