"""A file the user's Git tracks is in the snapshots even where the ignore rules match it, as
Git counts it (storage/checkpoints/checkpoint_tracked.py): committed before its folder went into
``.gitignore``, or added with ``git add -f``. A restored copy of the repository then holds it as
the folder did, and ``git status`` there shows what it showed in the folder; once the user's Git
stops tracking it, it leaves the next snapshot as any ignored path does. Real ``git``, real
folders."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from storage.checkpoints import checkpoint_store
from storage.checkpoints.checkpoint_store import GitCheckpointStore
from tests.helpers.user_git import user_git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
WS = "workspace:v1:7a7a7a7a-1111-2222-3333-444455556666"


def _repository(folder: Path, *, attributes: str = "") -> None:
    """A user's repository whose ``build/keep.txt`` is tracked although ``build/`` is ignored,
    edited since its commit; ``build/junk.o`` is ignored and untracked."""
    (folder / "build").mkdir(parents=True)
    (folder / ".gitignore").write_text("build/\n")
    if attributes:
        (folder / ".gitattributes").write_text(attributes)
    (folder / "a.txt").write_text("a\n")
    (folder / "build" / "keep.txt").write_text("v1\n")
    user_git(folder, "init", "-q")
    user_git(folder, "add", ".")
    user_git(folder, "add", "-f", "build/keep.txt")
    user_git(folder, "commit", "-q", "-m", "first")
    (folder / "build" / "keep.txt").write_text("v2, not committed\n")
    (folder / "build" / "junk.o").write_text("built\n")


def _names(store: GitCheckpointStore, tree: str) -> list[str]:
    git_dir = str(store.git_dir(WS))
    listed = user_git(Path("/"), "--git-dir", git_dir, "ls-tree", "-r", "-z", "--name-only", tree)
    return [name for name in listed.split("\0") if name and not name.startswith(".maka")]


def _listed(git_dir: str, tree: str) -> str:
    return user_git(Path("/"), "--git-dir", git_dir, "ls-tree", "-r", "--name-only", tree)


def _status(folder: Path) -> list[str]:
    lines = user_git(folder, "status", "--porcelain").splitlines()
    return sorted(line for line in lines if ".maka" not in line)


def test_a_restored_copy_holds_a_tracked_file_the_rules_ignore(tmp_path: Path) -> None:
    folder = tmp_path / "repo"
    _repository(folder)
    store = GitCheckpointStore(tmp_path / "data")
    store._absorb_later = lambda workspace_identity: None  # type: ignore[method-assign]
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    assert store.borrows(WS), "the first capture was seeded from the user's index"
    assert _names(store, snapshot.tree_id) == [".gitignore", "a.txt", "build/keep.txt"]
    assert store.now_ignored(WS, [snapshot.commit_id]) == {}
    copy = tmp_path / "copy"
    store.materialize(WS, snapshot.tree_id, copy, "s", source=folder)
    assert _status(copy) == _status(folder) == [" M build/keep.txt"]
    assert (copy / "build" / "keep.txt").read_text() == "v2, not committed\n"
    assert not (copy / "build" / "junk.o").exists()


def test_a_file_the_user_stops_tracking_leaves_the_next_snapshot(tmp_path: Path) -> None:
    folder = tmp_path / "repo"
    _repository(folder)
    store = GitCheckpointStore(tmp_path / "data")
    first = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    (folder / "a.txt").write_text("a, edited\n")
    second = store.capture(folder, WS, "refs/maka/s/r/2", "m")
    assert "build/keep.txt" in _names(store, second.tree_id), "still tracked: kept"
    user_git(folder, "rm", "-q", "--cached", "build/keep.txt")
    third = store.capture(folder, WS, "refs/maka/s/r/3", "m")
    assert _names(store, third.tree_id) == [".gitignore", "a.txt"]
    assert store.now_ignored(WS, [first.commit_id, second.commit_id, third.commit_id]) == {
        third.commit_id: ["build/keep.txt"]
    }
    # Tracked again, it is not ignored any more; a store that starts afresh agrees.
    user_git(folder, "add", "-f", "build/keep.txt")
    fresh = GitCheckpointStore(tmp_path / "fresh").capture(folder, WS, "refs/maka/s/r/1", "m")
    assert "build/keep.txt" in _names(GitCheckpointStore(tmp_path / "fresh"), fresh.tree_id)


def test_a_first_capture_without_a_seed_takes_the_tracked_files_the_rules_ignore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repository whose index cannot be borrowed (an ``ident`` attribute: its blobs are not
    the files' bytes) starts from an empty index: the listing of new files leaves ignored
    files out, and those the user's Git tracks are staged beside them."""
    folder = tmp_path / "repo"
    _repository(folder, attributes="*.c ident\n")
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    assert not store.borrows(WS), "no seed: the user's blobs may not be the files' bytes"
    names = _names(store, snapshot.tree_id)
    assert names == [".gitattributes", ".gitignore", "a.txt", "build/keep.txt"]
    # The same with the seed refused for any reason, and the index rebuilt from the folder.
    monkeypatch.setattr(checkpoint_store, "seed", lambda *args: None)
    again = store.capture(folder, WS, "refs/maka/s/r/2", "m", rebuild_index=True)
    assert again.tree_id == snapshot.tree_id


def test_a_package_of_a_monorepo_keeps_its_tracked_files_the_rules_ignore(tmp_path: Path) -> None:
    top = tmp_path / "mono"
    package = top / "pkg"
    package.mkdir(parents=True)
    (top / ".gitignore").write_text("*.log\n")
    (package / "app.py").write_text("print(1)\n")
    (package / "keep.log").write_text("tracked\n")
    (package / "other.log").write_text("not tracked\n")
    user_git(top, "init", "-q")
    user_git(top, "add", ".")
    user_git(top, "add", "-f", "pkg/keep.log")
    user_git(top, "commit", "-q", "-m", "first")
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(package, WS, "refs/maka/s/r/1", "m")
    assert _names(store, snapshot.tree_id) == ["app.py", "keep.log"]


def test_without_a_repository_the_rules_leave_the_file_out(tmp_path: Path) -> None:
    folder = tmp_path / "repo"
    _repository(folder)
    shutil.rmtree(folder / ".git")
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    assert _names(store, snapshot.tree_id) == [".gitignore", "a.txt"]


@pytest.mark.parametrize("attributes", ["", "*.c ident\n"], ids=["seeded", "from-empty"])
def test_a_file_force_added_after_the_first_capture_joins_the_next_snapshot(
    tmp_path: Path, attributes: str
) -> None:
    """``git add -f`` of an ignored file after the first capture: Git tracks it from then on,
    so the next snapshot holds it (and a restored copy with it), whether the first capture
    was seeded from the user's index or started from an empty one."""
    folder = tmp_path / "repo"
    _repository(folder, attributes=attributes)
    store = GitCheckpointStore(tmp_path / "data")
    store._absorb_later = lambda workspace_identity: None  # type: ignore[method-assign]
    first = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    assert store.borrows(WS) is (not attributes)
    assert "build/junk.o" not in _names(store, first.tree_id)
    (folder / "a.txt").write_text("a, edited\n")
    second = store.capture(folder, WS, "refs/maka/s/r/2", "m")
    assert "build/junk.o" not in _names(store, second.tree_id), "ignored, not tracked"
    user_git(folder, "add", "-f", "build/junk.o")
    third = store.capture(folder, WS, "refs/maka/s/r/3", "m")
    assert "build/junk.o" in _names(store, third.tree_id)
    copy = tmp_path / "copy"
    store.materialize(WS, third.tree_id, copy, "s", source=folder)
    assert (copy / "build" / "junk.o").read_text() == "built\n"
    # The clone's rules ignore it and its HEAD lacks it: it is added to the copy's index, as
    # it is to the user's, or the copy's own snapshot would drop it.
    assert _status(copy) == _status(folder) == [" M a.txt", " M build/keep.txt", "A  build/junk.o"]
    again = GitCheckpointStore(tmp_path / "copy-data").capture(copy, WS, "refs/maka/s/r/1", "m")
    assert again.tree_id == third.tree_id
    # Its content changes are captured from then on, as for any tracked file.
    (folder / "build" / "junk.o").write_text("built again\n")
    fourth = store.capture(folder, WS, "refs/maka/s/r/4", "m")
    assert fourth.tree_id != third.tree_id
    user_git(folder, "rm", "-q", "-f", "--cached", "build/junk.o")
    fifth = store.capture(folder, WS, "refs/maka/s/r/5", "m")
    assert "build/junk.o" not in _names(store, fifth.tree_id)
    assert store.now_ignored(WS, [fourth.commit_id, fifth.commit_id]) == {
        fifth.commit_id: ["build/junk.o"]
    }


@pytest.mark.parametrize("attributes", ["", "*.c ident\n"], ids=["seeded", "from-empty"])
def test_makas_own_files_stay_out_even_when_the_user_commits_them(
    tmp_path: Path, attributes: str
) -> None:
    """A user who ran ``git add -f .`` has the workspace marker (and an older one) in their
    commits: snapshots still leave Maka's own files out, say nothing of them as newly
    ignored, and a copy of a snapshot is made (before, the snapshot held the source's marker
    and the copy's check refused it: ``branch_copy_mismatch``)."""
    folder = tmp_path / "repo"
    _repository(folder, attributes=attributes)
    (folder / ".maka").mkdir()
    (folder / ".maka" / ".gitignore").write_text("*\n")
    (folder / ".maka" / "workspace.json").write_text("{}\n")
    (folder / ".maka-workspace.json").write_text("{}\n")
    user_git(folder, "add", "-f", ".maka/workspace.json", ".maka-workspace.json")
    user_git(folder, "commit", "-q", "-m", "the markers too")
    store = GitCheckpointStore(tmp_path / "data")
    store._absorb_later = lambda workspace_identity: None  # type: ignore[method-assign]
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    git_dir = str(store.git_dir(WS))
    listed = _listed(git_dir, snapshot.tree_id)
    assert ".maka/workspace.json" not in listed.splitlines()
    assert ".maka-workspace.json" not in listed.splitlines()
    assert store.now_ignored(WS, [snapshot.commit_id]) == {}
    (folder / "a.txt").write_text("a, edited\n")
    user_git(folder, "add", "a.txt")  # the user's index moves: the tracked files are read again
    second = store.capture(folder, WS, "refs/maka/s/r/2", "m")
    listed = _listed(git_dir, second.tree_id)
    assert ".maka/workspace.json" not in listed.splitlines()
    assert store.now_ignored(WS, [snapshot.commit_id, second.commit_id]) == {}


def test_a_tracked_file_over_the_size_limit_untracked_later_is_not_named_left_out(
    tmp_path: Path,
) -> None:
    """A file the user tracks under an ignore rule that is over the size limit was never in a
    snapshot: when the user stops tracking it, no snapshot names it as left out (it said
    "left out, now ignored" of a file no snapshot held)."""
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / ".gitignore").write_text("*.log\n")
    (folder / "a.txt").write_text("a\n")
    (folder / "big.log").write_bytes(b"x" * 500)
    user_git(folder, "init", "-q")
    user_git(folder, "add", ".")
    user_git(folder, "add", "-f", "big.log")
    user_git(folder, "commit", "-q", "-m", "first")
    store = GitCheckpointStore(tmp_path / "data", max_file_bytes=100)
    store._absorb_later = lambda workspace_identity: None  # type: ignore[method-assign]
    first = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    assert first.skipped == ("big.log",)
    assert "big.log" not in _names(store, first.tree_id)
    (folder / "a.txt").write_text("a, edited\n")
    second = store.capture(folder, WS, "refs/maka/s/r/2", "m")
    user_git(folder, "rm", "-q", "--cached", "big.log")
    third = store.capture(folder, WS, "refs/maka/s/r/3", "m")
    assert _names(store, third.tree_id) == [".gitignore", "a.txt"]
    commits = [first.commit_id, second.commit_id, third.commit_id]
    assert store.now_ignored(WS, commits) == {}


def test_the_users_index_is_read_again_only_when_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listing of what the user's Git tracks under the ignore rules runs at a folder's
    first capture and then only when the user's index changed: not at every capture."""
    from storage.checkpoints.checkpoint_tracked import newly_tracked as real

    calls: list[int] = []

    def counted(*args: object, **kwargs: object) -> tuple[list[bytes], str]:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(checkpoint_store, "newly_tracked", counted)
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "a.txt").write_text("a\n")
    user_git(folder, "init", "-q")  # no index yet
    store = GitCheckpointStore(tmp_path / "data")
    for n in range(3):
        (folder / "a.txt").write_text(f"a {n}\n")
        store.capture(folder, WS, f"refs/maka/s/r/{n}", "m")
    assert len(calls) == 1
    user_git(folder, "add", "a.txt")  # the user's index appears
    store.capture(folder, WS, "refs/maka/s/r/3", "m")
    store.capture(folder, WS, "refs/maka/s/r/4", "m")
    assert len(calls) == 2


@pytest.mark.parametrize("attributes", ["", "*.c ident\n"], ids=["seeded", "from-empty"])
def test_every_look_at_the_folder_sees_a_file_force_added_since_the_last_capture(
    tmp_path: Path, attributes: str
) -> None:
    """``git add -f`` of an ignored file while nothing captures (Maka stopped): every look at
    the folder (``maka plan``, a resume's drift check) holds it, the second as the first. The
    first look left its note of the user's index behind, so the second thought that index
    already read, left the file out and called the folder unchanged; and the other way, after
    ``git rm --cached``."""
    folder = tmp_path / "repo"
    _repository(folder, attributes=attributes)
    store = GitCheckpointStore(tmp_path / "data")
    store._absorb_later = lambda workspace_identity: None  # type: ignore[method-assign]
    captured = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    assert "build/junk.o" not in _names(store, captured.tree_id)
    user_git(folder, "add", "-f", "build/junk.o")
    looks = [store.observe(folder, WS).tree_id for _ in range(3)]
    assert "build/junk.o" in _names(store, looks[0])
    assert looks == [looks[0]] * 3, "each look the same"
    added = store.capture(folder, WS, "refs/maka/s/r/2", "m")
    assert added.tree_id == looks[0]
    user_git(folder, "rm", "-q", "--cached", "build/junk.o")
    looks = [store.observe(folder, WS).tree_id for _ in range(3)]
    assert "build/junk.o" not in _names(store, looks[0])
    assert looks == [looks[0]] * 3, "each look the same"


@pytest.mark.parametrize(
    "names",
    [["feat.txt"], ["a b*[1]?.txt", "#x!.txt "], ["new\nline.txt", "cr\rx.txt"]],
    ids=["plain", "special-characters", "line-breaks"],
)
def test_a_file_the_rules_came_to_ignore_after_the_snapshot_is_not_staged_in_the_copy(
    tmp_path: Path, names: list[str]
) -> None:
    """A file the snapshot held untracked, which a line the user added to
    ``.git/info/exclude`` since ignores (the copy takes that file as it is now), was staged in
    the restored copy (``A  feat.txt``): one ``git commit`` there away from committing what
    the user never added. It shows untracked, as the folder showed it at the snapshot, and the
    copy's own snapshot holds it (a branch checks that)."""
    folder = tmp_path / "repo"
    _repository(folder)
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(f"{name}\n")
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    assert set(names) <= set(_names(store, snapshot.tree_id))
    before = _status(folder)
    exclude = folder / ".git" / "info" / "exclude"
    exclude.write_text(exclude.read_text() + "".join(f"/{n[:2]}*\n" for n in names))
    assert _status(folder) != before, "the user's rules now ignore them"

    copy = tmp_path / "copy"
    store.materialize(WS, snapshot.tree_id, copy, "s", source=folder)
    assert _status(copy) == before
    assert not any(line.startswith("A") for line in _status(copy))
    again = GitCheckpointStore(tmp_path / "data2").capture(copy, WS, "refs/maka/s/r/1", "m")
    assert _names(GitCheckpointStore(tmp_path / "data2"), again.tree_id) == _names(
        store, snapshot.tree_id
    )


def test_a_file_under_a_folder_the_rules_came_to_ignore_is_added_as_before(
    tmp_path: Path,
) -> None:
    """No rule can name a file again under a folder the rules ignore: it is added to the
    copy's index, so the copy still holds it (its snapshot and a branch's check agree)."""
    folder = tmp_path / "repo"
    _repository(folder)
    (folder / "gen").mkdir()
    (folder / "gen" / "out.txt").write_text("out\n")
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    exclude = folder / ".git" / "info" / "exclude"
    exclude.write_text(exclude.read_text() + "gen/\n")
    copy = tmp_path / "copy"
    store.materialize(WS, snapshot.tree_id, copy, "s", source=folder)
    assert "A  gen/out.txt" in _status(copy)
    again = GitCheckpointStore(tmp_path / "data2").capture(copy, WS, "refs/maka/s/r/1", "m")
    assert "gen/out.txt" in _names(GitCheckpointStore(tmp_path / "data2"), again.tree_id)
