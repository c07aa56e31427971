"""The permission record of a first capture seeded from the user's index is found ahead, on a
thread of its own, while Git stages the folder (``LookAhead`` in
storage/checkpoints/checkpoint_permissions.py), then brought up to date with what the staging
did. Whatever the folder holds, the snapshot is the one an unseeded capture takes: the same
tree, permission record included."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from storage.checkpoints import checkpoint_store
from storage.checkpoints.checkpoint_permissions import (
    FoundBits,
    LookAhead,
    permission_record,
    read_cached,
)
from storage.checkpoints.checkpoint_store import GitCheckpointStore
from tests.helpers.user_git import user_git
from tests.unit.test_checkpoint_borrow import WS, _repository

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
LIMIT = 2048


def _modes(folder: Path) -> None:
    """Private files and folders, a chmod of a changed file, a new private folder."""
    (folder / "pkg1" / "f1.txt").chmod(0o600)
    (folder / "pkg2").chmod(0o700)
    (folder / "pkg3" / "f3.txt").write_text("changed, and made private\n")
    (folder / "pkg3" / "f3.txt").chmod(0o640)
    (folder / "secret").mkdir(mode=0o700)
    (folder / "secret" / "key.pem").write_text("k\n")
    (folder / "secret" / "key.pem").chmod(0o400)


def _type_changes(folder: Path) -> None:
    """A tracked file now a link, another now executable."""
    (folder / "pkg1" / "f5.txt").unlink()
    (folder / "pkg1" / "f5.txt").symlink_to("f1.txt")
    (folder / "pkg2" / "f6.txt").chmod(0o755)


def _sizes(folder: Path) -> None:
    """A tracked file over the limit left as it is, another shrunk below it."""
    (folder / "big").mkdir(mode=0o750)
    (folder / "big" / "stays.bin").write_bytes(b"0" * (LIMIT * 2))
    (folder / "big" / "shrinks.bin").write_bytes(b"1" * (LIMIT * 2))
    user_git(folder, "add", "big")
    user_git(folder, "commit", "-q", "-m", "big")
    (folder / "big" / "shrinks.bin").write_bytes(b"small now\n")


def _deletion(folder: Path) -> None:
    """A tracked file deleted: an entry leaves the index (the full pass runs instead)."""
    _modes(folder)
    (folder / "pkg0" / "f4.txt").unlink()


@pytest.mark.parametrize(
    ("change", "ahead_used"),
    [(_modes, True), (_type_changes, True), (_sizes, True), (_deletion, False)],
)
def test_a_seeded_first_capture_is_the_unseeded_one(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    change: Callable[[Path], None],
    ahead_used: bool,
) -> None:
    folder = tmp_path / "project"
    _repository(folder)
    change(folder)
    full_passes: list[Path] = []
    full_pass = permission_record

    def counted(*args: Any, **kwargs: Any) -> FoundBits:
        full_passes.append(Path(str(args[2])))
        return full_pass(*args, **kwargs)

    monkeypatch.setattr(checkpoint_store, "permission_record", counted)
    seeded = GitCheckpointStore(tmp_path / "data", max_file_bytes=LIMIT)
    seeded._absorb_later = lambda workspace_identity: None  # type: ignore[method-assign]
    snap = seeded.capture(folder, WS, "refs/maka/s/r/1", "first")
    assert seeded.borrows(WS), "the capture was seeded"
    assert (full_passes == []) is ahead_used
    hidden = tmp_path / "hidden.git"
    (folder / ".git").rename(hidden)
    try:
        plain = GitCheckpointStore(tmp_path / "plain", max_file_bytes=LIMIT)
        alone = plain.capture(folder, WS, "refs/maka/s/r/1", "first")
    finally:
        hidden.rename(folder / ".git")
    assert not plain.borrows(WS)
    record = user_git(
        tmp_path, "--git-dir", str(seeded.git_dir(WS)), "show", f"{snap.tree_id}:.maka/permissions"
    )
    assert snap.tree_id == alone.tree_id, record
    assert sorted(snap.skipped) == sorted(alone.skipped)


def test_a_chmod_after_the_seeded_capture_is_in_the_next_one(tmp_path: Path) -> None:
    """The look ahead saw the file before the chmod; the index still holds the user's stat
    data for it, so the next capture lists it, and its snapshot has the new bits."""
    folder = tmp_path / "project"
    _repository(folder)
    store = GitCheckpointStore(tmp_path / "data")
    store._absorb_later = lambda workspace_identity: None  # type: ignore[method-assign]
    first = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    target = folder / "pkg2" / "f2.txt"
    os.chmod(target, 0o600)
    second = store.capture(folder, WS, "refs/maka/s/r/2", "second")
    record = user_git(
        tmp_path, "--git-dir", str(store.git_dir(WS)), "show", f"{second.tree_id}:.maka/permissions"
    )
    assert "0600 pkg2/f2.txt\0" in record
    changed = store.changes(WS, first.tree_id, second.tree_id)
    assert [c.path for c in changed] == ["pkg2/f2.txt"]


def test_what_changes_between_the_look_and_the_staging_is_taken_as_staged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file over the limit when looked at that shrinks, and a file chmodded, before Git
    stages the folder: the staging lists both, and the snapshot has them as they are then."""
    folder = tmp_path / "project"
    _repository(folder)
    _sizes(folder)
    (folder / "big" / "shrinks.bin").write_bytes(b"1" * (LIMIT * 2))  # over the limit again

    def meanwhile() -> None:
        (folder / "big" / "shrinks.bin").write_bytes(b"small now\n")
        (folder / "pkg1" / "f1.txt").chmod(0o600)

    class Finished(LookAhead):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            assert super().result() is not None
            meanwhile()

    monkeypatch.setattr(checkpoint_store, "LookAhead", Finished)
    store = GitCheckpointStore(tmp_path / "data", max_file_bytes=LIMIT)
    store._absorb_later = lambda workspace_identity: None  # type: ignore[method-assign]
    snap = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    assert store.borrows(WS)
    assert snap.skipped == ("big/stays.bin",)
    git_dir = str(store.git_dir(WS))
    listed = user_git(tmp_path, "--git-dir", git_dir, "ls-tree", "-r", "--name-only", snap.tree_id)
    assert "big/shrinks.bin" in listed.split()
    record = user_git(tmp_path, "--git-dir", git_dir, "show", f"{snap.tree_id}:.maka/permissions")
    assert "0600 pkg1/f1.txt\0" in record


def test_recent_is_reckoned_from_the_seed_not_from_the_users_last_index_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seeded index keeps the time the user's Git last wrote it. The files changed
    shortly before that (here all of them: the repository was just made, as after a clone)
    are no longer recent when the first capture looks at them a while later: each is looked
    at once, and the next capture does not look at the unchanged ones again."""
    # 1.5 s, not 3 s: still more than Git's one-second ctime, which the window covers.
    monkeypatch.setattr(checkpoint_store, "_RECENT_NS", 1_500_000_000)
    folder = tmp_path / "project"
    _repository(folder)
    time.sleep(1.7)  # the user's last index write is older than the window
    unchanged = str(folder / "pkg2" / "f2.txt")
    looked: list[str] = []
    real_lstat = os.lstat

    def counted(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        looked.append(os.fsdecode(path))
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", counted)
    store = GitCheckpointStore(tmp_path / "data")
    store._absorb_later = lambda workspace_identity: None  # type: ignore[method-assign]
    store.capture(folder, WS, "refs/maka/s/r/1", "first")
    assert store.borrows(WS), "the capture was seeded"
    assert looked.count(unchanged) == 1
    index = store.index_path(WS)
    cached = read_cached(index.with_name(index.name + ".bits"), index)
    assert cached is not None
    assert b"pkg2/f2.txt" not in cached.recent
    looked.clear()
    second = store.capture(folder, WS, "refs/maka/s/r/2", "second")
    assert looked.count(unchanged) == 0
    (folder / "pkg2" / "f2.txt").chmod(0o600)
    third = store.capture(folder, WS, "refs/maka/s/r/3", "third")
    assert [c.path for c in store.changes(WS, second.tree_id, third.tree_id)] == ["pkg2/f2.txt"]
