"""A restored copy's new private repository is given the snapshot's objects
(``checkpoint_share``, docs/design/workspace.md section 4): the copy's first look hashes its
files and writes none of them again, and the new repository depends on no other."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import cast

import pytest

from runtime.ledger.checkpoint_ports import CheckpointError, Snapshot
from runtime.ledger.codes import CheckpointFailureCode
from storage.checkpoints import checkpoint_share
from storage.checkpoints.checkpoint_borrow import ALTERNATES
from storage.checkpoints.checkpoint_git import GitRunner
from storage.checkpoints.checkpoint_permissions import RECORD_PATH
from storage.checkpoints.checkpoint_store import START_REF, GitCheckpointStore
from storage.checkpoints.checkpoint_verify import tree_objects
from storage.sessions.workspace_identity import resolve_workspace_identity
from tests.helpers.user_git import user_git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _repository(folder: Path) -> None:
    """A user's repository with packed history and uncommitted work."""
    folder.mkdir()
    user_git(folder, "init", "-q")
    for n in range(40):
        (folder / f"f{n:02d}.txt").write_text(f"file {n}\n" * 40)
    user_git(folder, "add", ".")
    user_git(folder, "commit", "-q", "-m", "first")
    user_git(folder, "gc", "-q")
    (folder / "f00.txt").write_text("changed in the work tree\n")
    (folder / "new.txt").write_text("not committed\n")


def _loose(git_dir: Path) -> dict[str, int]:
    """Every loose object of a repository and its inode."""
    return {
        path.parent.name + path.name: path.stat().st_ino
        for path in (git_dir / "objects").glob("??/*")
    }


def _held_without_alternates(git_dir: Path, object_ids: list[str]) -> list[str]:
    """The ids the repository cannot read on its own."""
    assert not (git_dir / ALTERNATES).exists()
    out = user_git(
        git_dir.parent,
        "--git-dir",
        str(git_dir),
        "cat-file",
        "--batch-check",
        stdin="".join(f"{oid}\n" for oid in object_ids).encode(),
    )
    return [line.split(" ")[0] for line in out.splitlines() if line.endswith(" missing")]


def _start_commit(git_dir: Path) -> str:
    return user_git(git_dir.parent, "--git-dir", str(git_dir), "rev-parse", START_REF).strip()


def _plain_snapshot(tmp_path: Path, files: int) -> tuple[GitCheckpointStore, str, Snapshot]:
    """A folder that is no Git repository (every object its store holds is loose), ``files``
    files in ``sub/``, captured once: the store, the workspace identity, the snapshot."""
    folder = tmp_path / "plain"
    (folder / "sub").mkdir(parents=True)
    for n in range(files):
        (folder / "sub" / f"{n}.txt").write_text(f"{n}\n" * 30)
    store = GitCheckpointStore(tmp_path / "data")
    identity = resolve_workspace_identity(folder).identity
    return store, identity, store.capture(folder, identity, "refs/maka/s/r/1", "m")


def test_the_copys_repository_holds_the_snapshot_and_its_first_look_writes_nothing(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "project"
    _repository(folder)
    store = GitCheckpointStore(tmp_path / "data")
    identity = resolve_workspace_identity(folder).identity
    snapshot = store.capture(folder, identity, "refs/maka/s/r/1", "m")
    assert store.wait_absorbing(60)
    source = store.git_dir(identity)
    objects = [oid for oid, _ in tree_objects(store.git_runner(), source, snapshot.tree_id)]
    source_loose = _loose(source)
    # Both kinds are there to share: the committed files' blobs packed (absorbed from the
    # user's repository), the changed ones and the trees loose.
    assert any(oid in source_loose for oid in objects)
    assert any(oid not in source_loose for oid in objects)

    copy = tmp_path / "copy"
    made = store.materialize(identity, snapshot.tree_id, copy, "s", source=folder)
    target = store.git_dir(made)
    assert _held_without_alternates(target, objects) == []
    shared = _loose(target)
    for oid in objects:
        if oid in source_loose:  # a second name for the same file, not a copy
            assert shared[oid] == source_loose[oid]
    assert list((target / "objects" / "pack").glob("*.pack"))

    before = _loose(target)
    observed = store.observe(copy, made)
    assert observed.tree_id == snapshot.tree_id
    assert _loose(target) == before  # every blob and tree was already there

    # The copy's repository stands alone: with the source's store and the user's repository
    # gone, its snapshot is still whole.
    shutil.rmtree(source)
    shutil.rmtree(folder / ".git")
    assert store.verify_snapshots(made, [snapshot.tree_id]) == {snapshot.tree_id: []}


def test_without_links_the_objects_come_as_a_pack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, identity, snapshot = _plain_snapshot(tmp_path, 20)

    def no_link(*args: object, **kwargs: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(checkpoint_share, "_link", no_link)
    copy = tmp_path / "copy"
    made = store.materialize(identity, snapshot.tree_id, copy, "s")
    target = store.git_dir(made)
    listed = tree_objects(store.git_runner(), target, snapshot.tree_id)
    objects = [oid for oid, _ in listed]
    assert len(objects) > 20
    assert _held_without_alternates(target, objects) == []
    start = {_start_commit(target)}  # the one object the copy's store writes: its ref's commit
    assert set(_loose(target)) == start
    assert store.observe(copy, made).tree_id == snapshot.tree_id
    # No file's blob and no tree written again; the small permission record is written as
    # a loose object whenever no loose one is there (``write_object``), packed or not.
    assert set(_loose(target)) - start <= {oid for oid, path in listed if path == RECORD_PATH}


def test_a_share_that_fails_leaves_the_copy_to_write_its_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, identity, snapshot = _plain_snapshot(tmp_path, 1)

    def broken(*args: object, **kwargs: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("storage.checkpoints.checkpoint_store.share_objects", broken)
    copy = tmp_path / "copy"
    made = store.materialize(identity, snapshot.tree_id, copy, "s")
    assert (copy / "sub" / "0.txt").read_text() == "0\n" * 30
    assert store.observe(copy, made).tree_id == snapshot.tree_id
    assert store.verify_snapshots(made, [snapshot.tree_id]) == {snapshot.tree_id: []}


class _PackFails:
    """A runner whose every command fails, as a pack cut short by a full disk would."""

    def run(self, *args: object, **kwargs: object) -> bytes:
        raise CheckpointError(CheckpointFailureCode.CHECKPOINT_GIT_FAILED, "pack-objects died")


def test_a_share_cut_short_leaves_the_rest_to_the_copys_first_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Half the objects linked, then the pack of the rest fails: the copy is made, its first
    look writes what is missing, and its repository holds the whole snapshot."""
    store, identity, snapshot = _plain_snapshot(tmp_path, 30)
    real_link, real_share = checkpoint_share._link, checkpoint_share.share_objects
    calls = [0]

    def every_other(source: str, target: str) -> None:
        calls[0] += 1
        if calls[0] % 2:
            raise PermissionError(1, "Operation not permitted")
        real_link(source, target)

    def cut_short(runner: object, source: Path, target: Path, ids: Iterable[str]) -> int:
        return real_share(cast(GitRunner, _PackFails()), source, target, ids)

    monkeypatch.setattr(checkpoint_share, "_link", every_other)
    monkeypatch.setattr("storage.checkpoints.checkpoint_store.share_objects", cut_short)
    copy = tmp_path / "copy"
    made = store.materialize(identity, snapshot.tree_id, copy, "s")
    target = store.git_dir(made)
    objects = [
        oid
        for oid, _ in tree_objects(store.git_runner(), store.git_dir(identity), snapshot.tree_id)
    ]
    shared = _loose(target)
    assert 0 < len(shared) < len(objects)  # some shared, the rest not
    assert not list((target / "objects" / "pack").glob("*.pack"))
    assert store.observe(copy, made).tree_id == snapshot.tree_id
    assert _held_without_alternates(target, objects) == []


def test_the_copys_store_keeps_what_it_was_given_packed_through_a_gc(tmp_path: Path) -> None:
    """Nothing of the copy's own names the given objects until its first snapshot: a ref
    (``START_REF``) does, so a retention pass's gc packs them instead of turning the pack into
    one loose object per file, to be pruned a day later and written again."""
    store, identity, snapshot = _plain_snapshot(tmp_path, 30)
    copy = tmp_path / "copy"
    made = store.materialize(identity, snapshot.tree_id, copy, "s")
    target = store.git_dir(made)
    named = user_git(tmp_path, "--git-dir", str(target), "rev-parse", f"{START_REF}^{{tree}}")
    assert named.strip() == snapshot.tree_id
    assert _start_commit(target) in _loose(target)
    objects = [oid for oid, _ in tree_objects(store.git_runner(), target, snapshot.tree_id)]
    store.prune(target, "1.day.ago")
    assert _loose(target) == {}
    assert _held_without_alternates(target, objects) == []
    store.prune(target, "now")
    assert _held_without_alternates(target, objects) == []
    assert store.observe(copy, made).tree_id == snapshot.tree_id
    # Nothing written again but the small permission record (``write_object`` writes it
    # loose whenever no loose copy is there).
    record = {
        oid
        for oid, path in tree_objects(store.git_runner(), target, snapshot.tree_id)
        if path == RECORD_PATH
    }
    assert set(_loose(target)) <= record
