"""A checkpoint store whose objects were pruned or removed by hand (docs/design/workspace.md
sections 1, 3): the private index is only a cache, so captures and observations go on; a snapshot
whose objects are gone is said to be missing, and one Git cannot look up right now is not (real
``git``)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any, cast

import pytest

from runtime.continuation.checkpoint_evidence import checkpoint_evidence
from runtime.continuation.continuation_planner import SafetyObservation
from runtime.continuation.workspace_gate import WorkspaceTree, workspace_gate
from runtime.ledger.checkpoint_ports import CheckpointError
from runtime.ledger.codes import ParkReason
from runtime.ledger.event_model import RuntimeEvent
from storage.checkpoints.checkpoint_git import GitCommand, GitRunner, find_git
from storage.checkpoints.checkpoint_store import GitCheckpointStore

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
WS = "workspace:v1:0f0e0d0c-1111-2222-3333-444455556666"


def _git(
    git_dir: Path,
    *args: str,
    index: Path | None = None,
    work: Path | None = None,
    stdin: str | None = None,
) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_DIR"] = str(git_dir)
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    if work is not None:
        env["GIT_WORK_TREE"] = str(work)
    return subprocess.run(
        ["git", *args],
        input=stdin,
        cwd=work or git_dir,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _remove_all_objects(git_dir: Path) -> None:
    for path in (git_dir / "objects").rglob("*"):
        if path.is_file() and path.parent.name not in ("info",):
            path.chmod(stat.S_IWUSR | stat.S_IRUSR)
            path.unlink()


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "a.txt").write_text("alpha\n")
    (folder / "b.txt").write_text("beta\n")
    return folder


def test_an_index_naming_objects_a_manual_gc_pruned_is_rebuilt(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    first = store.capture(folder, WS, "refs/maka/s/r/1", "start")
    git_dir, index = store.git_dir(WS), store.index_path(WS)
    # A capture killed after staging a new file, before its commit: the index names a blob no
    # ref reaches; then the user runs `git gc --prune=now` in the store.
    (folder / "c.txt").write_text("gamma\n")
    _git(git_dir, "update-index", "--add", "c.txt", index=index, work=folder)
    _git(git_dir, "gc", "--quiet", "--prune=now")
    blob = _git(git_dir, "ls-files", "-s", "c.txt", index=index, work=folder).split()[1]
    gone = _git(git_dir, "cat-file", "--batch-check", stdin=f"{blob}\n")
    assert gone.strip() == f"{blob} missing"  # the index names a pruned object
    assert store.has_snapshot(WS, first.commit_id, first.tree_id)

    seen = store.observe(folder, WS)
    assert [(c.path, c.change.value) for c in store.changes(WS, first.tree_id, seen.tree_id)] == [
        ("c.txt", "added")
    ]
    second = store.capture(folder, WS, "refs/maka/s/r/2", "next")
    assert second.tree_id == seen.tree_id
    assert store.has_snapshot(WS, second.commit_id, second.tree_id)
    assert _git(git_dir, "cat-file", "-t", blob) == "blob\n"
    assert store.has_snapshot(WS, first.commit_id, first.tree_id)  # the earlier one stays


def test_with_every_object_removed_old_snapshots_are_missing_and_new_ones_work(
    tmp_path: Path,
) -> None:
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    first = store.capture(folder, WS, "refs/maka/s/r/1", "start")
    _remove_all_objects(store.git_dir(WS))

    assert not store.has_snapshot(WS, first.commit_id, first.tree_id)
    seen = store.observe(folder, WS)
    assert seen.tree_id == first.tree_id  # the same files make the same tree
    second = store.capture(folder, WS, "refs/maka/s/r/2", "after the damage")
    assert store.has_snapshot(WS, second.commit_id, second.tree_id)
    # Snapshots stand alone: the one whose objects are gone is no parent of the next.
    parents = _git(store.git_dir(WS), "rev-list", "--parents", "-n", "1", second.commit_id)
    assert parents.split() == [second.commit_id]
    pairs = [(first.commit_id, first.tree_id), (second.commit_id, second.tree_id)]
    assert store.present_snapshots(WS, pairs) == {(second.commit_id, second.tree_id)}
    assert store.present_snapshots(WS, list(reversed(pairs))) == {
        (second.commit_id, second.tree_id)
    }


def test_a_snapshot_git_cannot_look_up_now_is_not_called_missing(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    first = store.capture(folder, WS, "refs/maka/s/r/1", "start")
    real = find_git()
    assert real is not None
    # A git that fails to read objects (a lock held elsewhere, a disk error).
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case "$a" in cat-file|rev-list) '
        'echo "fatal: cannot read" >&2; exit 128;; esac; done\n'
        f'exec {real.path} "$@"\n'
    )
    wrapper.chmod(0o755)
    flaky = GitCheckpointStore(
        tmp_path / "data", git=GitCommand(str(wrapper), real.version, real.version_text)
    )
    with pytest.raises(CheckpointError):
        flaky.has_snapshot(WS, first.commit_id, first.tree_id)
    assert flaky.present_snapshots(WS, [(first.commit_id, first.tree_id)]) == set()
    assert store.has_snapshot(WS, first.commit_id, first.tree_id)

    # The resume's evidence: a snapshot that cannot be looked up now parks as an observation
    # that failed (try again), never as a missing snapshot (which offers to give it up).
    events = _run_with_snapshot(first.commit_id, first.tree_id)
    seen = SafetyObservation(WS, str(folder), True, (), (), WorkspaceTree(first.tree_id))
    evidence = checkpoint_evidence(flaky, events, seen)
    assert evidence is not None and evidence.problem is not None
    assert "could not be looked up" in evidence.problem
    [finding] = workspace_gate(events, evidence)
    assert finding.reason is ParkReason.SAFETY_OBSERVATION_UNAVAILABLE
    [finding] = workspace_gate(events, checkpoint_evidence(store, events, seen))
    assert finding.code == "workspace_verified"
    _remove_all_objects(store.git_dir(WS))
    [finding] = workspace_gate(events, checkpoint_evidence(store, events, seen))
    assert finding.reason is ParkReason.WORKSPACE_CHECKPOINT_MISSING


def _run_with_snapshot(commit_id: str, tree_id: str) -> list[RuntimeEvent]:
    def event(n: int, actions: dict[str, Any]) -> RuntimeEvent:
        body = {"id": f"r-{n}", "runId": "r", "role": "system", "actions": actions}
        return cast(RuntimeEvent, body)

    protocol = {"toolBoundary": "t1_after_preflight_v1", "workspaceCheckpoints": {"mode": "git_v1"}}
    snapshot = {
        "workspaceIdentity": WS,
        "workspaceEpoch": 1,
        "checkpointRef": "refs/maka/s/r/1",
        "commitId": commit_id,
        "treeId": tree_id,
    }
    return [event(0, {"runtimeProtocol": protocol}), event(1, {"workspaceCheckpoint": snapshot})]


def test_a_snapshot_with_one_file_gone_is_missing_not_comparable(tmp_path: Path) -> None:
    """The commit and its top tree are there, but a file (or a folder) under it was removed by
    hand: it can be neither compared nor copied, so it is missing, and the folder can be
    captured anew."""
    folder = _folder(tmp_path)
    (folder / "sub").mkdir()
    (folder / "sub" / "c.txt").write_text("gamma\n")
    store = GitCheckpointStore(tmp_path / "data")
    first = store.capture(folder, WS, "refs/maka/s/r/1", "start")
    git_dir = store.git_dir(WS)
    for spec in (f"{first.tree_id}:a.txt", f"{first.tree_id}:sub"):
        whole = GitCheckpointStore(tmp_path / f"copy-{len(spec)}")
        shutil.copytree(store.root, whole.root)
        object_id = _git(whole.git_dir(WS), "rev-parse", spec).strip()
        loose = whole.git_dir(WS) / "objects" / object_id[:2] / object_id[2:]
        assert whole.has_snapshot(WS, first.commit_id, first.tree_id)
        loose.unlink()
        assert not whole.has_snapshot(WS, first.commit_id, first.tree_id), spec
        events = _run_with_snapshot(first.commit_id, first.tree_id)
        seen = SafetyObservation(
            WS, str(folder), True, (), (), WorkspaceTree(whole.observe(folder, WS).tree_id)
        )
        [finding] = workspace_gate(events, checkpoint_evidence(whole, events, seen))
        assert finding.reason is ParkReason.WORKSPACE_CHECKPOINT_MISSING
        # The index's cache still names the removed object, so a plain capture would reuse it;
        # rebuilt from the folder, the snapshot is whole again.
        again = whole.capture(folder, WS, "refs/maka/s/r/2", "after", rebuild_index=True)
        assert again.tree_id == first.tree_id
        assert whole.has_snapshot(WS, again.commit_id, again.tree_id)
        assert whole.has_snapshot(WS, first.commit_id, first.tree_id)  # the same objects
    assert store.has_snapshot(WS, first.commit_id, first.tree_id)
    assert git_dir.is_dir()


class _CountingRunner:
    """The store's own runner, counting the Git calls it makes."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def run(self, args: Any, **kwargs: Any) -> bytes:
        self.calls.append(str(args[0]))
        return cast(bytes, self.inner.run(args, **kwargs))


def test_a_listing_decides_each_snapshot_as_the_planner_does_in_a_few_calls(
    tmp_path: Path,
) -> None:
    """Many snapshots sharing most of their files: the listing's batch says exactly the
    snapshots reaching a removed file or folder are missing, as ``has_snapshot`` (the
    planner's check) says one by one, with a few Git calls whatever the number of snapshots."""
    folder = _folder(tmp_path)
    (folder / "sub" / "deep").mkdir(parents=True)
    (folder / "sub" / "deep" / "c.txt").write_text("gamma\n")
    store = GitCheckpointStore(tmp_path / "data")
    snapshots = []
    for n in range(12):
        if n == 4:
            (folder / "sub" / "deep" / "d.txt").write_text("only in 4 and 5\n")
        if n == 6:
            (folder / "sub" / "deep" / "d.txt").unlink()
        if n == 8:
            (folder / "sub" / "e.txt").write_text("from 8 on\n")
        (folder / "a.txt").write_text(f"alpha {n % 3}\n")  # trees repeat: shared objects
        snapshots.append(store.capture(folder, WS, f"refs/maka/s/r/{n}", f"n{n}"))
    pairs = [(s.commit_id, s.tree_id) for s in snapshots]
    git_dir = store.git_dir(WS)
    assert store.present_snapshots(WS, pairs) == set(pairs)

    def remove(spec: str) -> None:
        object_id = _git(git_dir, "rev-parse", spec).strip()
        (git_dir / "objects" / object_id[:2] / object_id[2:]).unlink()

    remove(f"{snapshots[4].tree_id}:sub/deep/d.txt")  # a file only 4 and 5 hold
    remove(f"{snapshots[9].tree_id}:sub")  # a folder from 8 on (it holds e.txt)
    counting = _CountingRunner(store._git_runner())
    store._git_runner = lambda: cast(GitRunner, counting)  # type: ignore[method-assign]
    present = store.present_snapshots(WS, pairs)
    expected = {pairs[n] for n in (0, 1, 2, 3, 6, 7)}
    assert present == expected
    assert len(counting.calls) <= 5, counting.calls  # batch-check, rev-list, tree depth reads
    one_by_one = {pair for pair in pairs if store.has_snapshot(WS, *pair)}
    assert one_by_one == expected


def test_a_snapshot_taken_elsewhere_is_verified_by_its_tree_when_the_folder_is_unchanged(
    tmp_path: Path,
) -> None:
    """The snapshot was taken by another data folder's store (another host on a shared ledger,
    or this folder's store deleted): this one keeps nothing of the workspace. The folder's tree,
    captured into a store made for it here, is the tree the ledger recorded: verified, without
    the snapshot's objects. A changed folder, or calls rolled forward, stay missing."""
    folder = _folder(tmp_path)
    elsewhere = GitCheckpointStore(tmp_path / "host-a")
    first = elsewhere.capture(folder, WS, "refs/maka/s/r/1", "start")
    events = _run_with_snapshot(first.commit_id, first.tree_id)
    here = GitCheckpointStore(tmp_path / "host-b")
    assert not here.has_repository(WS)
    unseen = SafetyObservation(WS, str(folder), True, (), (), None)  # no store here: no tree
    evidence = checkpoint_evidence(here, events, unseen)
    assert evidence is not None and evidence.by_tree_id and evidence.snapshot_present
    [finding] = workspace_gate(events, evidence)
    assert finding.code == "workspace_verified" and finding.reason is None
    assert finding.detail["comparedBy"] == "treeId"
    assert "not in this data folder" in finding.message
    # The data folder's own ledger (no other host): the snapshot was lost here, not taken by
    # another host; on a shared ledger, another host may hold it.
    assert "another host" not in finding.message and "lost it" in finding.message
    shared = GitCheckpointStore(tmp_path / "host-d")
    shared.missing_note = "another host's data folder"
    [finding] = workspace_gate(events, checkpoint_evidence(shared, events, unseen))
    assert "another host took it" in finding.message, finding.message
    assert here.has_repository(WS)  # the store made for it, where the continuation captures

    changed = GitCheckpointStore(tmp_path / "host-c")
    (folder / "a.txt").write_text("changed while nobody ran\n")
    [finding] = workspace_gate(events, checkpoint_evidence(changed, events, unseen))
    assert finding.reason is ParkReason.WORKSPACE_CHECKPOINT_MISSING
    (folder / "a.txt").write_text("alpha\n")
    # A store that has the tree whole (the one made above) verifies it again; one that lost
    # objects is not trusted, even when its capture names the same tree (its index's cache).
    seen = SafetyObservation(WS, str(folder), True, (), (), WorkspaceTree(first.tree_id))
    [finding] = workspace_gate(events, checkpoint_evidence(here, events, seen))
    assert finding.code == "workspace_verified"
    _remove_all_objects(here.git_dir(WS))
    assert not here.has_tree(WS, first.tree_id)
    [finding] = workspace_gate(events, checkpoint_evidence(here, events, seen))
    assert finding.reason is ParkReason.WORKSPACE_CHECKPOINT_MISSING
