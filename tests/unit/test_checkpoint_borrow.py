"""The first capture of a folder that is a Git repository borrows what the user's Git knows,
read-only (storage/checkpoints/checkpoint_borrow.py): a copy of the user's index as the private
index's seed, the user's object store as an alternate; the store then makes itself
self-contained, so no ``git gc`` of the user's, no history rewrite and no deletion of their
repository can break a snapshot. The user's ``.git`` stays byte for byte (and time for time)
what it was."""

from __future__ import annotations

import os
import shutil
import subprocess
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from storage.checkpoints.checkpoint_borrow import (
    ALTERNATES,
    copy_borrowed,
    needed_objects,
    own_packed,
)
from storage.checkpoints.checkpoint_git import GitRunner
from storage.checkpoints.checkpoint_store import GitCheckpointStore
from tests.helpers.user_git import user_git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
WS = "workspace:v1:0f0e0d0c-1111-2222-3333-77775555aaaa"


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(HOME=str(home), GIT_AUTHOR_NAME="U", GIT_AUTHOR_EMAIL="u@x")
    env.update(GIT_COMMITTER_NAME="U", GIT_COMMITTER_EMAIL="u@x", GIT_CONFIG_NOSYSTEM="1")
    return env


def _state(root: Path) -> dict[str, tuple[int, int, bytes]]:
    found: dict[str, tuple[int, int, bytes]] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        body = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        found[str(path.relative_to(root))] = (info.st_mode, info.st_mtime_ns, body)
    return found


def _repository(folder: Path, files: int = 40) -> None:
    folder.mkdir()
    user_git(folder, "init", "-q")
    for n in range(files):
        sub = folder / f"pkg{n % 4}"
        sub.mkdir(exist_ok=True)
        (sub / f"f{n}.txt").write_text(f"file {n}\n" * 50)
    (folder / "gone-later.txt").write_text("committed, then reset away\n")
    user_git(folder, "add", ".")
    user_git(folder, "commit", "-q", "-m", "first")
    user_git(folder, "gc", "-q")  # most objects packed, as in a real repository
    (folder / "pkg0" / "f0.txt").write_text("changed in the work tree\n")
    (folder / "untracked.txt").write_text("new\n")


def _loose_count(git_dir: Path) -> int:
    return sum(1 for p in (git_dir / "objects").glob("??/*"))


def _store(tmp_path: Path, *, absorb: bool) -> GitCheckpointStore:
    store = GitCheckpointStore(tmp_path / "data")
    if not absorb:
        store._absorb_later = lambda workspace_identity: None  # type: ignore[method-assign]
    return store


def _tree_from_scratch(tmp_path: Path, folder: Path, owner: Path | None = None) -> str:
    """The tree a new store that borrows nothing captures of ``folder``: the ``.git`` of
    ``owner`` (the folder itself by default) is hidden meanwhile."""
    dot = (owner or folder) / ".git"
    hidden = tmp_path / "hidden.git"
    fresh = GitCheckpointStore(tmp_path / "data-scratch")
    ws = "workspace:v1:0f0e0d0c-1111-2222-3333-77775555ffff"
    dot.rename(hidden)
    try:
        snapshot = fresh.capture(folder, ws, "refs/maka/s/r/1", "from scratch")
        assert not fresh.borrows(ws)
        return snapshot.tree_id
    finally:
        hidden.rename(dot)


def test_the_first_capture_borrows_and_leaves_the_users_git_as_it_was(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    _repository(folder)
    before = _state(folder / ".git")
    store = _store(tmp_path, absorb=False)
    first = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    git_dir = store.git_dir(WS)
    # The user's object store first; then the store's own folder of trees (``write_tree``).
    assert (git_dir / ALTERNATES).read_text().splitlines() == [
        os.path.realpath(folder / ".git/objects"),
        os.path.realpath(git_dir / "trees.scratch" / "objects"),
    ]
    # The unchanged files' objects were neither hashed into nor written to the private store.
    assert _loose_count(git_dir) < 15
    (folder / "pkg1" / "f1.txt").write_text("an edit\n")
    second = store.capture(folder, WS, "refs/maka/s/r/2", "second")
    assert _state(folder / ".git") == before, "the user's .git is byte (and time) identical"
    listed = user_git(
        tmp_path, "--git-dir", str(git_dir), "ls-tree", "-r", "--name-only", first.tree_id
    )
    names = listed.split()
    assert "untracked.txt" in names and "gone-later.txt" in names and "pkg3/f39.txt" in names
    shown = user_git(tmp_path, "--git-dir", str(git_dir), "show", f"{first.tree_id}:pkg0/f0.txt")
    assert shown == "changed in the work tree\n", "the work tree, not the user's index"
    assert second.tree_id != first.tree_id
    # The seed never holds more than a fresh capture would: the same tree from scratch.
    assert _tree_from_scratch(tmp_path, folder) == second.tree_id


def test_a_snapshot_survives_the_users_gc_after_a_reset_once_absorbed(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    _repository(folder)
    (folder / "second.txt").write_text("only in the second commit\n")
    user_git(folder, "add", "second.txt")
    user_git(folder, "commit", "-q", "-m", "second")
    store = _store(tmp_path, absorb=False)
    snap = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    assert store.borrows(WS)
    assert store.absorb_borrowed(WS)
    assert not store.borrows(WS)
    assert not (store.git_dir(WS) / ALTERNATES).exists()
    # Its folder of trees too: they were copied in with the borrowed objects.
    assert not (store.git_dir(WS) / "trees.scratch").exists()
    # The user rewrites history and prunes everything it no longer reaches.
    user_git(folder, "reset", "-q", "--hard", "HEAD~1")
    user_git(folder, "reflog", "expire", "--expire=now", "--all")
    user_git(folder, "gc", "-q", "--prune=now")
    assert (
        subprocess.run(
            ["git", "cat-file", "-e", f"{snap.tree_id}"],
            cwd=folder,
            env=_env(tmp_path),
            check=False,
            capture_output=True,
        ).returncode
        != 0
    ), "the user's repository does not hold the snapshot"
    assert store.has_snapshot(WS, snap.commit_id, snap.tree_id)
    copy = tmp_path / "copy"
    store.materialize(WS, snap.tree_id, copy, "s")
    assert (copy / "second.txt").read_text() == "only in the second commit\n"
    assert (copy / "pkg2" / "f6.txt").read_text() == "file 6\n" * 50


def test_a_snapshot_survives_the_users_repository_being_deleted(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    _repository(folder)
    store = _store(tmp_path, absorb=True)
    snap = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    store.wait_absorbing()  # the capture started the absorption in the background
    assert not store.borrows(WS)
    shutil.rmtree(folder / ".git")
    assert store.has_snapshot(WS, snap.commit_id, snap.tree_id)
    (folder / "pkg3" / "f3.txt").write_text("later\n")
    again = store.capture(folder, WS, "refs/maka/s/r/2", "after the repository went")
    assert store.changes(WS, snap.tree_id, again.tree_id)[0].path == "pkg3/f3.txt"
    copy = tmp_path / "copy"
    store.materialize(WS, snap.tree_id, copy, "s")
    assert (copy / "pkg1" / "f5.txt").read_text() == "file 5\n" * 50


def test_before_absorption_a_pruned_borrowed_object_reads_missing_not_wrong(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "project"
    _repository(folder)
    store = _store(tmp_path, absorb=False)
    snap = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    shutil.rmtree(folder / ".git")
    assert not store.has_snapshot(WS, snap.commit_id, snap.tree_id)
    # The next capture still works (the index is rebuilt from the folder), and is whole.
    again = store.capture(folder, WS, "refs/maka/s/r/2", "again")
    assert again.tree_id == snap.tree_id
    assert store.has_snapshot(WS, again.commit_id, again.tree_id)
    # An alternate that provides nothing any more is dropped (retention never waits on it).
    assert store.absorb_borrowed(WS)
    assert not store.borrows(WS)


def test_a_folder_moved_before_absorption_borrows_from_its_new_place(tmp_path: Path) -> None:
    """The folder renamed between a capture and the end of absorption (a killed run, then
    ``mv``): the store borrowed from the old place, so the first snapshot read missing and
    every later capture named blobs nothing held (a ``mv`` keeps the stat data, so no file was
    hashed again), recorded as taken. The store now borrows from where the repository is."""
    folder = tmp_path / "project"
    _repository(folder)
    store = _store(tmp_path, absorb=False)
    first = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    moved = tmp_path / "project-moved"
    folder.rename(moved)
    assert not store.has_snapshot(WS, first.commit_id, first.tree_id)
    (moved / "pkg2" / "f2.txt").write_text("changed after the move\n")
    second = store.capture(moved, WS, "refs/maka/s/r/2", "moved")
    git_dir = store.git_dir(WS)
    assert (git_dir / ALTERNATES).read_text().splitlines()[0] == os.path.realpath(
        moved / ".git" / "objects"
    )
    assert store.has_snapshot(WS, first.commit_id, first.tree_id)
    assert store.has_snapshot(WS, second.commit_id, second.tree_id)
    # ``maka sessions relocate`` tells the store at once (before any capture there).
    (tmp_path / "project-moved-again").mkdir()
    again = tmp_path / "project-moved-again" / "project"
    moved.rename(again)
    assert not store.has_snapshot(WS, second.commit_id, second.tree_id)
    store.follow_folder(WS, again)
    assert store.has_snapshot(WS, second.commit_id, second.tree_id)
    moved = again
    assert store.absorb_borrowed(WS) and not store.borrows(WS)
    shutil.rmtree(moved / ".git")
    assert store.has_snapshot(WS, first.commit_id, first.tree_id)
    assert store.has_snapshot(WS, second.commit_id, second.tree_id)


def test_an_absorption_that_finds_objects_gone_lets_the_next_capture_hash_again(
    tmp_path: Path,
) -> None:
    """Absorbed after the folder moved (before any capture there): the borrowed objects are
    gone from where the store looked, the alternate is dropped, and so is the index naming
    them: the next capture seeds where the repository now is, and is whole."""
    folder = tmp_path / "project"
    _repository(folder)
    store = _store(tmp_path, absorb=False)
    store.capture(folder, WS, "refs/maka/s/r/1", "first")
    moved = tmp_path / "project-moved"
    folder.rename(moved)
    assert store.absorb_borrowed(WS)
    assert not store.index_path(WS).exists()
    again = store.capture(moved, WS, "refs/maka/s/r/2", "moved")
    assert store.has_snapshot(WS, again.commit_id, again.tree_id)
    assert store.absorb_borrowed(WS)
    shutil.rmtree(moved / ".git")
    assert store.has_snapshot(WS, again.commit_id, again.tree_id)


def test_an_object_only_an_old_snapshot_reached_does_not_drop_the_index(tmp_path: Path) -> None:
    """The user pruned an object only the first snapshot reached (a rewrite, then ``git gc``)
    before absorption: that snapshot reads missing for good, but the index names nothing
    missing, so it stays (dropping it made every later capture hash like a first one)."""
    folder = tmp_path / "project"
    _repository(folder)
    store = _store(tmp_path, absorb=False)
    first = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    # The committed gone-later.txt, borrowed by the first snapshot, is rewritten out of the
    # history and pruned.
    user_git(folder, "rm", "-q", "gone-later.txt")
    user_git(folder, "commit", "-q", "--amend", "-m", "first, rewritten")
    user_git(folder, "reflog", "expire", "--expire=now", "--all")
    user_git(folder, "gc", "-q", "--prune=now")
    assert not store.has_snapshot(WS, first.commit_id, first.tree_id)
    store.capture(folder, WS, "refs/maka/s/r/2", "second")
    assert store.absorb_borrowed(WS)
    assert store.index_path(WS).exists()


def test_retention_absorbs_before_it_prunes(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    _repository(folder)
    store = _store(tmp_path, absorb=False)
    snap = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    store.prune(store.git_dir(WS), "now")
    assert not store.borrows(WS)
    shutil.rmtree(folder / ".git")
    assert store.has_snapshot(WS, snap.commit_id, snap.tree_id)


def _unmerged(folder: Path) -> None:
    """``pkg1/f1.txt`` changed on two branches: the merge leaves it in conflict (stages 1-3)."""
    user_git(folder, "add", "-A")
    user_git(folder, "commit", "-q", "-m", "work")
    branch = user_git(folder, "rev-parse", "--abbrev-ref", "HEAD").strip()
    user_git(folder, "checkout", "-q", "-b", "other")
    (folder / "pkg1" / "f1.txt").write_text("theirs\n")
    user_git(folder, "commit", "-q", "-am", "theirs")
    user_git(folder, "checkout", "-q", branch)
    (folder / "pkg1" / "f1.txt").write_text("ours\n")
    user_git(folder, "commit", "-q", "-am", "ours")
    merged = subprocess.run(
        ["git", "merge", "-q", "other"],
        cwd=folder,
        env=_env(folder.parent),
        capture_output=True,
        check=False,
    )
    assert merged.returncode != 0  # in conflict
    assert " 1\tpkg1/f1.txt" in user_git(folder, "ls-files", "-s", "pkg1/f1.txt")


@pytest.mark.parametrize(
    "odd",
    [
        ["update-index", "--assume-unchanged", "pkg0/f0.txt"],
        ["update-index", "--skip-worktree", "pkg1/f1.txt"],
        ["update-index", "--add", "--cacheinfo", "160000," + "1" * 40 + ",vendor/lib"],
        "unmerged",
    ],
    ids=["assume-unchanged", "skip-worktree", "submodule", "unmerged"],
)
def test_an_index_git_would_not_look_through_is_not_seeded(
    tmp_path: Path, odd: list[str] | str
) -> None:
    folder = tmp_path / "project"
    _repository(folder)
    if odd == "unmerged":
        _unmerged(folder)
    else:
        user_git(folder, *odd)
    store = _store(tmp_path, absorb=False)
    snap = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    assert not store.borrows(WS)
    shown = user_git(
        tmp_path, "--git-dir", str(store.git_dir(WS)), "show", f"{snap.tree_id}:pkg0/f0.txt"
    )
    assert shown == "changed in the work tree\n"


def test_a_seeded_file_over_the_size_limit_is_left_out(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    _repository(folder)
    (folder / "big.bin").write_bytes(b"0" * 4096)
    user_git(folder, "add", "big.bin")
    user_git(folder, "commit", "-q", "-m", "big")
    store = GitCheckpointStore(tmp_path / "data", max_file_bytes=2048)
    store._absorb_later = lambda workspace_identity: None  # type: ignore[method-assign]
    snap = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    assert store.borrows(WS)
    assert "big.bin" in snap.skipped
    listed = user_git(
        tmp_path, "--git-dir", str(store.git_dir(WS)), "ls-tree", "-r", "--name-only", snap.tree_id
    )
    assert "big.bin" not in listed.split()


def test_a_seeded_capture_over_the_size_limit_equals_an_unseeded_one(tmp_path: Path) -> None:
    """A folder whose only file is over the limit: left out with it, from the tree and the
    permission record alike, as when the index is not seeded (the trees, record included,
    are the same object)."""
    folder = tmp_path / "project"
    _repository(folder)
    (folder / "assets").mkdir(mode=0o750)
    (folder / "assets" / "big.bin").write_bytes(b"0" * 4096)
    (folder / "pkg1" / "large.bin").write_bytes(b"1" * 4096)
    user_git(folder, "add", "assets", "pkg1")
    user_git(folder, "commit", "-q", "-m", "big")
    seeded = GitCheckpointStore(tmp_path / "data", max_file_bytes=2048)
    seeded._absorb_later = lambda workspace_identity: None  # type: ignore[method-assign]
    snap = seeded.capture(folder, WS, "refs/maka/s/r/1", "first")
    assert seeded.borrows(WS)
    hidden = tmp_path / "hidden.git"
    (folder / ".git").rename(hidden)
    try:
        plain = GitCheckpointStore(tmp_path / "plain", max_file_bytes=2048)
        alone = plain.capture(folder, WS, "refs/maka/s/r/1", "first")
    finally:
        hidden.rename(folder / ".git")
    assert not plain.borrows(WS)
    assert sorted(snap.skipped) == sorted(alone.skipped) == ["assets/big.bin", "pkg1/large.bin"]
    assert snap.tree_id == alone.tree_id
    record = user_git(
        tmp_path,
        "--git-dir",
        str(seeded.git_dir(WS)),
        "show",
        f"{snap.tree_id}:.maka/permissions",
    )
    assert "assets" not in record and "pkg1/" in record


def test_content_the_users_store_already_holds_never_touches_their_object_files(
    tmp_path: Path,
) -> None:
    """Git "freshens" (sets the time of) the file holding an object it is asked to write when an
    alternate holds it: a file staged then changed back, a copy of a tracked file, an empty file.
    Their objects are copied into the private store first, so the user's files keep their
    times."""
    folder = tmp_path / "project"
    _repository(folder)
    (folder / "empty.txt").write_text("")
    user_git(folder, "add", "empty.txt")
    user_git(folder, "commit", "-q", "-m", "empty")
    user_git(folder, "gc", "-q")
    (folder / "pkg1" / "f1.txt").write_text("staged, then changed back\n")
    user_git(folder, "add", "pkg1/f1.txt")
    (folder / "pkg1" / "f1.txt").write_text("file 1\n" * 50)
    shutil.copy(folder / "pkg2" / "f2.txt", folder / "copy-of-f2.txt")
    (folder / "another-empty.txt").write_text("")
    before = _state(folder / ".git")
    store = _store(tmp_path, absorb=True)
    snap = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    store.wait_absorbing()
    assert _state(folder / ".git") == before
    shown = user_git(
        tmp_path, "--git-dir", str(store.git_dir(WS)), "show", f"{snap.tree_id}:pkg1/f1.txt"
    )
    assert shown == "file 1\n" * 50


@pytest.mark.parametrize("version", [2, 4])  # Git writes 3 only for extended flags
def test_files_the_users_git_stored_converted_are_taken_as_they_are(
    tmp_path: Path, version: int
) -> None:
    """With line-ending conversion the user's blob is not the file's bytes: such entries are
    staged again from the folder (their recorded size differs from their blob's), whatever
    version of the index the user's Git writes."""
    folder = tmp_path / "project"
    folder.mkdir()
    user_git(folder, "init", "-q")
    user_git(folder, "config", "core.autocrlf", "true")
    (folder / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    (folder / "plain.txt").write_bytes(b"no conversion here\n")
    user_git(folder, "add", ".")
    user_git(folder, "commit", "-q", "-m", "converted")
    user_git(folder, "update-index", "--index-version", str(version))
    assert (folder / ".git" / "index").read_bytes()[4:8] == version.to_bytes(4, "big")
    before = _state(folder / ".git")
    store = _store(tmp_path, absorb=False)
    snap = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    assert store.borrows(WS), "the seed is used for the entries stored as they are"
    raw = subprocess.run(
        [
            "git",
            "--git-dir",
            str(store.git_dir(WS)),
            "cat-file",
            "blob",
            f"{snap.tree_id}:crlf.txt",
        ],
        capture_output=True,
        check=True,
    ).stdout
    assert raw == b"one\r\ntwo\r\n", "the file's bytes, not the user's converted blob"
    assert _state(folder / ".git") == before


@pytest.mark.parametrize("where", [".gitattributes", "pkg2/.gitattributes"])
def test_a_repository_with_a_filter_is_not_seeded(tmp_path: Path, where: str) -> None:
    folder = tmp_path / "project"
    _repository(folder)
    (folder / where).write_text("*.secret filter=crypt\n")
    user_git(folder, "add", where)
    user_git(folder, "commit", "-q", "-m", "attributes")
    store = _store(tmp_path, absorb=False)
    store.capture(folder, WS, "refs/maka/s/r/1", "first")
    assert not store.borrows(WS)


def test_an_absorption_after_an_earlier_copy_packs_nothing_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that ended (or was killed) after its absorption's copy left that copy as a
    pack of the store's own: the next absorption counts what it holds and copies nothing
    again (before, it counted only loose objects and packed everything borrowed once more)."""
    folder = tmp_path / "project"
    _repository(folder)
    store = _store(tmp_path, absorb=False)
    store.capture(folder, WS, "refs/maka/s/r/1", "first")
    git_dir = store.git_dir(WS)
    runner = store._git_runner()
    index = store.index_path(WS)
    needed = needed_objects(runner, git_dir, index)
    copy_borrowed(runner, git_dir, needed)  # the killed absorption's copy
    [pack] = (git_dir / "objects" / "pack").glob("*.idx")
    assert own_packed(pack.parent) >= {oid for oid in needed if _loose(git_dir, oid) is None}
    commands: list[str] = []
    run = GitRunner.run

    def recorded(self: GitRunner, args: Sequence[str], **kwargs: Any) -> bytes:
        commands.append(next(arg for arg in args if not arg.startswith("-") and "=" not in arg))
        return run(self, args, **kwargs)

    monkeypatch.setattr(GitRunner, "run", recorded)
    assert store.absorb_borrowed(WS) is True
    assert "pack-objects" not in commands, commands
    assert not (git_dir / ALTERNATES).exists()
    (folder / ".git").rename(tmp_path / "hidden.git")
    assert user_git(tmp_path, "--git-dir", str(git_dir), "fsck", "--connectivity-only") == ""


def _loose(git_dir: Path, oid: str) -> Path | None:
    path = git_dir / "objects" / oid[:2] / oid[2:]
    return path if path.exists() else None


def test_own_packed_reads_the_object_names_of_each_whole_pack(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    _repository(folder)
    user_git(folder, "gc", "-q")
    pack_dir = folder / ".git" / "objects" / "pack"
    [idx] = pack_dir.glob("*.idx")
    listed = user_git(folder, "show-index", stdin=idx.read_bytes())
    assert own_packed(pack_dir) == {line.split()[1] for line in listed.splitlines()}
    # A pack index whose pack is missing, or an index cut short, counts for nothing.
    body = idx.read_bytes()
    idx.write_bytes(body[:-41])
    assert own_packed(pack_dir) == set()
    idx.write_bytes(body)
    idx.with_suffix(".pack").rename(tmp_path / "aside.pack")
    assert own_packed(pack_dir) == set()
    assert own_packed(tmp_path / "no such folder") == set()


def _scratch_loose(git_dir: Path) -> int:
    return sum(1 for _ in (git_dir / "trees.scratch" / "objects").glob("??/*"))


def test_the_first_capture_writes_only_the_trees_of_folders_that_changed(tmp_path: Path) -> None:
    """The trees the user's index holds valid are copied in (one pack, beside the staging),
    so ``write-tree`` writes the changed folders' trees and the root's, not every folder's;
    the snapshot is the one a capture from nothing makes."""
    folder = tmp_path / "project"
    _repository(folder)  # pkg0/f0.txt changed, untracked.txt new: the root and pkg0 change
    before = _state(folder / ".git")
    store = _store(tmp_path, absorb=False)
    first = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    git_dir = store.git_dir(WS)
    # The root's, pkg0's and the permission record's folder's; no other folder's.
    assert _scratch_loose(git_dir) == 3
    assert len(list((git_dir / "trees.scratch" / "objects" / "pack").glob("*.pack"))) == 1
    assert _state(folder / ".git") == before
    assert store.absorb_borrowed(WS) is True
    (folder / ".git").rename(tmp_path / "hidden.git")
    try:
        fresh = GitCheckpointStore(tmp_path / "data2")
        assert fresh.capture(folder, WS, "refs/maka/s/r/1", "x").tree_id == first.tree_id
        assert user_git(tmp_path, "--git-dir", str(git_dir), "fsck", "--connectivity-only") == ""
    finally:
        (tmp_path / "hidden.git").rename(folder / ".git")


def test_a_copy_of_trees_that_fails_leaves_every_tree_to_write_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import storage.checkpoints.checkpoint_borrow as borrow

    folder = tmp_path / "project"
    _repository(folder)
    store = _store(tmp_path, absorb=False)
    monkeypatch.setattr(borrow, "cached_trees", lambda data: ["0" * 40])  # no such object
    first = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    git_dir = store.git_dir(WS)
    # The root's, the four folders' and the permission record's folder's, by write-tree.
    assert _scratch_loose(git_dir) == 6
    assert _tree_from_scratch(tmp_path, folder) == first.tree_id


def test_a_copied_repository_is_not_written_again_file_by_file(tmp_path: Path) -> None:
    """A repository copied (a backup restored, ``cp -a``) keeps its index, but every file's
    ``ctime`` is new, so every entry differs from the stat data it records and is staged
    again. Their contents are all in the user's store: none is compressed and written into
    the private store (that took seconds at 10,000 files), only the changed and new files'."""
    original = tmp_path / "original"
    _repository(original)
    folder = tmp_path / "project"
    shutil.copytree(original, folder, symlinks=True)  # times kept, every ctime new
    store = _store(tmp_path, absorb=False)
    store.capture(folder, WS, "refs/maka/s/r/1", "first")
    git_dir = store.git_dir(WS)
    scratch = git_dir / "trees.scratch" / "objects"
    written = [*(git_dir / "objects").glob("??/*"), *scratch.glob("??/*")]
    kinds = sorted(zlib.decompress(path.read_bytes()).split(b" ", 1)[0] for path in written)
    # The changed file, the new one and the permission record; the commit; three trees.
    assert kinds.count(b"blob") == 3, kinds


def _linked(tmp_path: Path, kind: str) -> tuple[Path, Path]:
    """A folder whose ``.git`` is a file naming its repository: a linked worktree of a
    repository, or a submodule of a superproject. The folder and the ``.git`` folder its
    objects are in."""
    main = tmp_path / "main"
    _repository(main)
    user_git(main, "add", ".")
    user_git(main, "commit", "-q", "-m", "second")
    if kind == "worktree":
        folder = tmp_path / "feature"
        user_git(main, "worktree", "add", "-q", "-b", "feature", str(folder))
        objects_in = main / ".git"
    else:
        top = tmp_path / "super"
        top.mkdir()
        user_git(top, "init", "-q")
        user_git(
            top, "-c", "protocol.file.allow=always", "submodule", "-q", "add", str(main), "sub"
        )
        user_git(top, "commit", "-q", "-m", "with a submodule")
        folder = top / "sub"
        objects_in = top / ".git" / "modules" / "sub"
    assert (folder / ".git").is_file()
    (folder / "pkg2" / "f2.txt").write_text("changed in this work tree\n")
    (folder / "mine.txt").write_text("untracked here\n")
    return folder, objects_in


@pytest.mark.parametrize("kind", ["worktree", "submodule"])
def test_a_folder_whose_git_is_a_file_borrows_its_repository(tmp_path: Path, kind: str) -> None:
    """A linked worktree's (or a submodule's) ``.git`` is a file naming the repository; its
    index is there and its objects in the repository's common folder: the first capture
    borrows them as for a ``.git`` folder, writes the same snapshot as a capture from
    scratch, and leaves the user's repository as it was."""
    folder, objects_in = _linked(tmp_path, kind)
    user_git(folder, "status", "--porcelain")  # the user's index as their Git keeps it
    before = _state(objects_in)
    store = _store(tmp_path, absorb=False)
    snap = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    git_dir = store.git_dir(WS)
    assert (git_dir / ALTERNATES).read_text().splitlines()[0] == os.path.realpath(
        objects_in / "objects"
    )
    assert _loose_count(git_dir) < 15, "the unchanged files' objects are borrowed"
    assert _state(objects_in) == before
    shown = user_git(tmp_path, "--git-dir", str(git_dir), "show", f"{snap.tree_id}:pkg2/f2.txt")
    assert shown == "changed in this work tree\n"

    assert _tree_from_scratch(tmp_path, folder) == snap.tree_id
    assert store.absorb_borrowed(WS)
    assert not store.borrows(WS)
    assert store.has_snapshot(WS, snap.commit_id, snap.tree_id)


@pytest.mark.parametrize(
    "body", [b"gitdir: nowhere\n", b"not a git file\n", b"gitdir: a\ngitdir: b\n", b""]
)
def test_a_git_file_that_names_no_repository_is_not_seeded(tmp_path: Path, body: bytes) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "a.txt").write_text("a\n")
    (folder / ".git").write_bytes(body)
    store = _store(tmp_path, absorb=False)
    snap = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    assert not store.borrows(WS)
    names = user_git(
        tmp_path, "--git-dir", str(store.git_dir(WS)), "ls-tree", "--name-only", snap.tree_id
    )
    assert names.split() == [".maka", "a.txt"]  # the permission record, the file


def _monorepo(tmp_path: Path, *, version: int = 2) -> Path:
    """A repository with a package folder and another; the package changed and added to."""
    top = tmp_path / "mono"
    top.mkdir()
    user_git(top, "init", "-q")
    for n in range(30):
        for part in ("pkg/src", "other"):
            (top / part).mkdir(parents=True, exist_ok=True)
            (top / part / f"f{n}.txt").write_text(f"{part} {n}\n" * 20)
    (top / "pkg" / "run.sh").write_text("#!/bin/sh\n")
    (top / "pkg" / "run.sh").chmod(0o755)
    user_git(top, "add", ".")
    user_git(top, "commit", "-q", "-m", "first")
    user_git(top, "update-index", "--index-version", str(version))
    user_git(top, "status", "--porcelain")
    (top / "pkg" / "src" / "f3.txt").write_text("changed in the package\n")
    (top / "pkg" / "src" / "f4.txt").unlink()
    (top / "pkg" / "new.txt").write_text("untracked in the package\n")
    return top


@pytest.mark.parametrize("version", [2, 4])  # Git writes 3 only for extended flags
def test_a_folder_inside_a_repository_borrows_its_part_of_the_index(
    tmp_path: Path, version: int
) -> None:
    """A session folder that is a package of a larger repository: the seed is the part of the
    repository's index under the folder, its names relative to it (index versions 2 to 4
    read); the snapshot is the one a capture from scratch makes, and the repository's ``.git``
    is left as it was."""
    top = _monorepo(tmp_path, version=version)
    folder = top / "pkg"
    before = _state(top / ".git")
    store = _store(tmp_path, absorb=False)
    snap = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    git_dir = store.git_dir(WS)
    assert (git_dir / ALTERNATES).read_text().splitlines()[0] == os.path.realpath(
        top / ".git" / "objects"
    )
    assert _loose_count(git_dir) < 12, "the unchanged files' objects are borrowed"
    assert _state(top / ".git") == before
    listed = user_git(tmp_path, "--git-dir", str(git_dir), "ls-tree", "-r", snap.tree_id)
    names = [line.split("\t")[1] for line in listed.splitlines()]
    assert "src/f0.txt" in names and "new.txt" in names and "src/f4.txt" not in names
    assert not any(name.startswith(("other/", "pkg/")) for name in names)
    assert "100755 blob" in next(line for line in listed.splitlines() if "run.sh" in line)

    assert _tree_from_scratch(tmp_path, folder, top) == snap.tree_id
    assert store.absorb_borrowed(WS)
    assert store.has_snapshot(WS, snap.commit_id, snap.tree_id)


def test_a_package_is_seeded_only_from_plain_entries_of_its_own(tmp_path: Path) -> None:
    """An entry Git would not look at (here ``skip-worktree``) refuses the seed when it is in
    the folder, not when it is elsewhere in the repository; a split index and a filter named
    in a ``.gitattributes`` above the folder refuse it too."""
    top = _monorepo(tmp_path)
    user_git(top, "update-index", "--skip-worktree", "other/f1.txt")
    store = _store(tmp_path, absorb=False)
    store.capture(top / "pkg", WS, "refs/maka/s/r/1", "first")
    assert store.borrows(WS)

    ws2 = "workspace:v1:0f0e0d0c-1111-2222-3333-77775555bbbb"
    user_git(top, "update-index", "--skip-worktree", "pkg/src/f1.txt")
    inside = GitCheckpointStore(tmp_path / "data2")
    inside.capture(top / "pkg", ws2, "refs/maka/s/r/1", "first")
    assert not inside.borrows(ws2)

    user_git(top, "update-index", "--no-skip-worktree", "pkg/src/f1.txt")
    user_git(top, "update-index", "--split-index")
    ws4 = "workspace:v1:0f0e0d0c-1111-2222-3333-77775555dddd"
    split = GitCheckpointStore(tmp_path / "data4")
    split.capture(top / "pkg", ws4, "refs/maka/s/r/1", "first")
    assert not split.borrows(ws4)

    user_git(top, "update-index", "--no-split-index")
    for shared in (top / ".git").glob("sharedindex.*"):
        shared.unlink()
    (top / ".gitattributes").write_text("*.txt filter=lfs\n")
    ws3 = "workspace:v1:0f0e0d0c-1111-2222-3333-77775555cccc"
    filtered = GitCheckpointStore(tmp_path / "data3")
    filtered.capture(top / "pkg", ws3, "refs/maka/s/r/1", "first")
    assert not filtered.borrows(ws3)
