"""A restored copy of a folder that is a Git repository is a local clone of it at the user's
HEAD with the snapshot's files on top (docs/design/workspace.md section 4): ``git status``, ``git
diff`` and ``git log`` there show what they showed in the folder; the user's ``.git`` is only
read."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from runtime.ledger.checkpoint_ports import CheckpointError
from runtime.ledger.codes import CheckpointFailureCode
from storage.checkpoints.checkpoint_git import GitRunner
from storage.checkpoints.checkpoint_store import GitCheckpointStore
from tests.helpers.user_git import user_git
from tests.unit.test_checkpoint_store import _tree_state

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
WS = "workspace:v1:4a4a4a4a-1111-2222-3333-444455556666"


def _status(folder: Path) -> list[str]:
    lines = user_git(folder, "status", "--porcelain").splitlines()
    return sorted(line for line in lines if ".maka" not in line)


def test_a_restored_copy_of_a_repository_is_a_clone_with_the_snapshot_on_top(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "repo"
    folder.mkdir()
    user_git(folder, "init", "-q")
    (folder / "a.txt").write_text("one\n")
    (folder / "gone.txt").write_text("committed, then deleted\n")
    user_git(folder, "add", ".")
    user_git(folder, "commit", "-q", "-m", "first")
    (folder / "a.txt").write_text("one\ntwo\n")
    (folder / "gone.txt").unlink()
    (folder / "new.txt").write_text("untracked\n")
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    status = _status(folder)
    assert status == [" D gone.txt", " M a.txt", "?? new.txt"]
    before = _tree_state(folder / ".git")

    copy = tmp_path / "copy"
    store.materialize(WS, snapshot.tree_id, copy, "s", source=folder)
    assert _tree_state(folder / ".git") == before
    assert _status(copy) == status
    assert user_git(copy, "diff") == user_git(folder, "diff")
    assert user_git(copy, "log", "--format=%s") == "first\n"
    assert (copy / "a.txt").read_text() == "one\ntwo\n"


def test_a_copy_of_a_folder_without_a_repository_has_none(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "a.txt").write_text("a\n")
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    copy = tmp_path / "copy"
    store.materialize(WS, snapshot.tree_id, copy, "s", source=folder)
    assert not (copy / ".git").exists()
    assert (copy / "a.txt").read_text() == "a\n"


def _index_sizes(folder: Path) -> dict[str, int]:
    """Each entry of the folder's Git index and the file size its stat data records (0: no
    stat data, Git hashes the file to know whether it changed)."""
    sizes: dict[str, int] = {}
    name = ""
    for line in user_git(folder, "ls-files", "--debug").splitlines():
        if not line.startswith(" "):
            name = line
        elif line.strip().startswith("size:"):
            sizes[name] = int(line.split()[1])
    return sizes


def _racy_by_the_second(tmp_path: Path) -> bool:
    """Whether this Git takes a file written in the same second as its index as possibly
    changed (a build without nanosecond times): it then keeps no stat data for it."""
    probe = tmp_path / "probe"
    probe.mkdir()
    user_git(probe, "init", "-q")
    (probe / "a.txt").write_text("a\n")
    user_git(probe, "add", "a.txt")
    return _index_sizes(probe)["a.txt"] == 0


def _committed_repository(folder: Path) -> None:
    folder.mkdir()
    user_git(folder, "init", "-q")
    for n in range(5):
        (folder / f"f{n}.txt").write_text(f"file {n}\n" * (n + 1))
    user_git(folder, "add", ".")
    user_git(folder, "commit", "-q", "-m", "first")
    (folder / "f0.txt").write_text("changed in the work tree\n")
    (folder / "new.txt").write_text("untracked\n")


def test_the_copys_index_keeps_what_was_just_checked_out(tmp_path: Path) -> None:
    """The clone's index is at HEAD with the stat data of each file checked out unchanged,
    so the user's first ``git status`` there (and the copy's first snapshot) need not hash
    every file; a file that differs from HEAD has none, and a change made later is seen."""
    folder = tmp_path / "repo"
    _committed_repository(folder)
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    copy = tmp_path / "copy"
    store.materialize(WS, snapshot.tree_id, copy, "s", source=folder)

    sizes = _index_sizes(copy)
    assert sizes.pop("f0.txt") == 0  # HEAD's entry: the copy's file is the snapshot's
    kept = {f"f{n}.txt": (copy / f"f{n}.txt").stat().st_size for n in range(1, 5)}
    if _racy_by_the_second(tmp_path):
        # A Git that compares whole seconds smudges entries written in the index's second
        # (it hashes them next time): only whether each is the file's or none is known.
        assert all(sizes[name] in (0, size) for name, size in kept.items())
    else:
        assert sizes == kept
    assert _status(copy) == [" M f0.txt", "?? new.txt"]
    # Same size, the old modification time put back: the stat data does not hide it.
    target = copy / "f2.txt"
    before = target.stat()
    target.write_text(target.read_text().upper())
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert _status(copy) == [" M f0.txt", " M f2.txt", "?? new.txt"]


def test_without_the_checked_out_stat_data_the_copys_index_is_heads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "repo"
    _committed_repository(folder)
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")

    def no_copy(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shutil, "copyfile", no_copy)
    copy = tmp_path / "copy"
    store.materialize(WS, snapshot.tree_id, copy, "s", source=folder)
    assert set(_index_sizes(copy).values()) == {0}
    assert _status(copy) == [" M f0.txt", "?? new.txt"]


def test_a_linked_worktrees_copy_is_a_clone_at_its_head(tmp_path: Path) -> None:
    """A folder whose ``.git`` is a file naming the repository (``git worktree add``) is as
    much a Git repository to its user: the copy is a clone at that worktree's HEAD, and the
    repository it shares is only read."""
    main = tmp_path / "main"
    _committed_repository(main)
    user_git(main, "add", ".")
    user_git(main, "commit", "-q", "-m", "on main")
    user_git(main, "worktree", "add", "-q", "-b", "feature", str(tmp_path / "feature"))
    folder = tmp_path / "feature"
    (folder / "f1.txt").write_text("feature work\n")
    user_git(folder, "commit", "-q", "-am", "on feature")
    (folder / "f2.txt").write_text("not committed\n")
    (folder / "mine.txt").write_text("untracked\n")
    assert (folder / ".git").is_file()
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    status = _status(folder)
    assert status == [" M f2.txt", "?? mine.txt"]
    before = _tree_state(main / ".git")

    copy = tmp_path / "copy"
    store.materialize(WS, snapshot.tree_id, copy, "s", source=folder)
    assert _tree_state(main / ".git") == before
    assert (copy / ".git").is_dir()
    assert _status(copy) == status
    assert user_git(copy, "diff") == user_git(folder, "diff")
    assert user_git(copy, "log", "--format=%s") == "on feature\non main\nfirst\n"


def _failing_clones(
    monkeypatch: pytest.MonkeyPatch, code: CheckpointFailureCode, times: int
) -> list[Path]:
    """The next ``times`` clones fail with ``code``, each leaving what a clone cut short
    leaves (a ``.git``); returns the folders every clone was tried in."""
    real = GitRunner.run_outside
    tried: list[Path] = []

    def failing(self: GitRunner, args: Sequence[str], *, cwd: Path) -> bytes:
        if args[0] == "clone":
            tried.append(cwd)
            if len(tried) <= times:
                (cwd / ".git").mkdir(exist_ok=True)
                raise CheckpointError(code, f"git {args[0]} failed")
        return real(self, args, cwd=cwd)

    monkeypatch.setattr(GitRunner, "run_outside", failing)
    return tried


@pytest.mark.parametrize(
    "case",
    [
        # The user's own gc removed a loose object while it was copied: tried once more.
        (CheckpointFailureCode.CHECKPOINT_GIT_FAILED, 1, 2, True),
        (CheckpointFailureCode.CHECKPOINT_GIT_FAILED, 2, 2, False),
        # A repository too big to copy in time is not tried twice.
        (CheckpointFailureCode.CHECKPOINT_GIT_TIMEOUT, 1, 1, False),
    ],
    ids=["failed-once", "failed-twice", "out-of-time"],
)
def test_a_failed_clone_is_tried_once_more_unless_it_ran_out_of_time(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: tuple[CheckpointFailureCode, int, int, bool],
) -> None:
    code, failures, tries, cloned = case
    folder = tmp_path / "repo"
    _committed_repository(folder)
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    tried = _failing_clones(monkeypatch, code, failures)
    copy = tmp_path / "copy"
    store.materialize(WS, snapshot.tree_id, copy, "s", source=folder)
    assert tried == [copy] * tries
    if cloned:
        assert _status(copy) == [" M f0.txt", "?? new.txt"]
    else:
        assert not (copy / ".git").exists()
    assert (copy / "f0.txt").read_text() == "changed in the work tree\n"


def test_a_sparse_checkouts_copy_reads_as_the_folder_does(tmp_path: Path) -> None:
    """A sparse checkout (files outside its cone are not in the folder; their entries are
    skip-worktree) with ``core.fileMode false``: ``git status`` in the copy shows what it shows
    in the folder. The clone showed every file outside the cone as deleted (``git commit -a``
    there would delete them) and a file whose execute bit differs from its commit as
    modified."""
    folder = tmp_path / "repo"
    (folder / "in").mkdir(parents=True)
    (folder / "out").mkdir()
    (folder / "in" / "i.txt").write_text("in\n")
    (folder / "out" / "o.txt").write_text("out\n")
    (folder / "run.sh").write_text("echo\n")
    user_git(folder, "init", "-q")
    user_git(folder, "add", ".")
    user_git(folder, "commit", "-q", "-m", "first")
    user_git(folder, "sparse-checkout", "set", "in")
    user_git(folder, "config", "core.fileMode", "false")
    (folder / "run.sh").chmod(0o755)
    (folder / "in" / "new.txt").write_text("new\n")
    assert not (folder / "out").exists()
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    copy = tmp_path / "copy"
    store.materialize(WS, snapshot.tree_id, copy, "s", source=folder)
    assert _status(copy) == _status(folder) == ["?? in/new.txt"]
    assert not (copy / "out").exists()
    assert (copy / "run.sh").stat().st_mode & 0o111, "the bits are the folder's"


def test_a_repository_that_converts_line_endings_has_a_copy_that_reads_the_same(
    tmp_path: Path,
) -> None:
    """``core.autocrlf true`` in the repository's configuration: the folder's files are CRLF,
    Git stores them LF and ``git status`` is clean. The copy holds the same bytes, and showed
    every such file modified until it read line endings as the repository does."""
    folder = tmp_path / "repo"
    folder.mkdir()
    user_git(folder, "init", "-q")
    user_git(folder, "config", "core.autocrlf", "true")
    (folder / "dos.txt").write_bytes(b"a\r\nb\r\n")
    user_git(folder, "add", ".")
    user_git(folder, "commit", "-q", "-m", "first")
    (folder / "new.txt").write_bytes(b"n\r\n")
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    copy = tmp_path / "copy"
    store.materialize(WS, snapshot.tree_id, copy, "s", source=folder)
    assert (copy / "dos.txt").read_bytes() == b"a\r\nb\r\n"
    assert _status(copy) == _status(folder) == ["?? new.txt"]
    assert user_git(copy, "config", "--get", "core.autocrlf").strip() == "true"


def test_a_repositorys_own_excludes_file_is_the_copys_too(tmp_path: Path) -> None:
    """``core.excludesFile`` in the repository's configuration (relative: the folder's): the
    copy did not have it, so what it ignores showed up there as new, and a branch's check of
    the copy failed (``branch_copy_mismatch``)."""
    folder = tmp_path / "repo"
    folder.mkdir()
    user_git(folder, "init", "-q")
    (folder / "a.txt").write_text("a\n")
    user_git(folder, "add", ".")
    user_git(folder, "commit", "-q", "-m", "first")
    (folder / "local.ignore").write_text("*.bak\nlocal.ignore\n")
    user_git(folder, "config", "core.excludesFile", "local.ignore")
    (folder / "y.bak").write_text("backup\n")
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    copy = tmp_path / "copy"
    store.materialize(WS, snapshot.tree_id, copy, "s", source=folder)
    assert not (copy / "y.bak").exists()
    (copy / "z.bak").write_text("made in the copy\n")
    assert _status(copy) == _status(folder) == []
    assert store.observe(copy, WS).tree_id == snapshot.tree_id


def _cone_checkout(tmp_path: Path, names: Sequence[str], sparse_index: bool) -> Path:
    """A clone of a repository holding ``names``, checked out sparsely in cone mode with only
    ``in`` (and the top's files) in the folder; ``sparse_index``: with ``index.sparse``."""
    source = tmp_path / "source"
    for name in names:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(f"{name}\n")
    user_git(source, "init", "-q")
    user_git(source, "add", ".")
    user_git(source, "commit", "-q", "-m", "first")
    folder = tmp_path / "repo"
    user_git(tmp_path, "clone", "-q", str(source), str(folder))
    user_git(folder, "sparse-checkout", "init", "--cone")
    if sparse_index:
        user_git(folder, "config", "index.sparse", "true")
    user_git(folder, "sparse-checkout", "set", "in")
    return folder


@pytest.mark.parametrize("sparse_index", [False, True], ids=["full-index", "sparse-index"])
def test_a_cone_sparse_checkout_is_snapshotted_as_it_is_and_its_copy_is_sparse(
    tmp_path: Path, sparse_index: bool
) -> None:
    """Cone mode, with or without ``index.sparse``: the snapshot holds the folder's files only
    (a sparse index was seeded as if it held every file plainly, and the files outside the
    cone came into every snapshot, so a copy held them and its check refused it); the copy is
    sparse as the folder is, and ``git status`` there reads as in the folder."""
    folder = _cone_checkout(
        tmp_path, ("in/a", "in/sub/b", "out/c", "out/deep/d", "top.txt"), sparse_index
    )
    (folder / "notes.md").write_text("new\n")
    assert not (folder / "out").exists()
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    git_dir = str(store.git_dir(WS))
    listed = user_git(
        Path("/"), "--git-dir", git_dir, "ls-tree", "-r", "--name-only", snapshot.tree_id
    )
    assert [n for n in listed.split() if not n.startswith(".maka/")] == [
        "in/a",
        "in/sub/b",
        "notes.md",
        "top.txt",
    ]
    copy = tmp_path / "copy"
    identity = store.materialize(WS, snapshot.tree_id, copy, "s", source=folder)
    assert not (copy / "out").exists()
    assert _status(copy) == _status(folder) == ["?? notes.md"]
    assert user_git(copy, "sparse-checkout", "list").split() == ["in"]
    again = GitCheckpointStore(tmp_path / "copy-data").capture(
        copy, identity, "refs/maka/s/r/1", "m"
    )
    assert again.tree_id == snapshot.tree_id


def test_a_store_seeded_from_a_sparse_index_before_is_rebuilt_at_its_next_capture(
    tmp_path: Path,
) -> None:
    """A private index that holds skip-worktree entries (seeded from a sparse one before such
    a seed was refused): its next capture starts afresh and drops the files outside the cone."""
    import shutil as sh

    folder = _cone_checkout(tmp_path, ("in/a", "out/c"), sparse_index=True)
    store = GitCheckpointStore(tmp_path / "data")
    first = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    # As a store seeded before: its index a copy of the user's sparse one, borrowing objects.
    sh.copyfile(folder / ".git" / "index", store.index_path(WS))
    alternates = store.git_dir(WS) / "objects" / "info" / "alternates"
    alternates.write_text(f"{folder / '.git' / 'objects'}\n")
    (folder / "in" / "b").write_text("b\n")
    second = store.capture(folder, WS, "refs/maka/s/r/2", "m")
    git_dir = str(store.git_dir(WS))
    listed = user_git(
        Path("/"), "--git-dir", git_dir, "ls-tree", "-r", "--name-only", second.tree_id
    )
    assert [n for n in listed.split() if not n.startswith(".maka/")] == ["in/a", "in/b"]
    assert first.tree_id != second.tree_id


def test_a_file_the_user_hides_with_skip_worktree_is_hidden_in_the_copy(tmp_path: Path) -> None:
    """``git update-index --skip-worktree config.ini`` with a local change: the folder's
    ``git status`` does not show it, and neither does the copy's (it showed it modified, and
    ``git commit -a`` there would have committed the local setting)."""
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "config.ini").write_text("db=prod\n")
    user_git(folder, "init", "-q")
    user_git(folder, "add", ".")
    user_git(folder, "commit", "-q", "-m", "first")
    (folder / "config.ini").write_text("db=local\n")
    user_git(folder, "update-index", "--skip-worktree", "config.ini")
    (folder / "n.txt").write_text("new\n")
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    copy = tmp_path / "copy"
    store.materialize(WS, snapshot.tree_id, copy, "s", source=folder)
    assert (copy / "config.ini").read_text() == "db=local\n"
    assert _status(copy) == _status(folder) == ["?? n.txt"]


def test_a_repositorys_own_commit_identity_is_the_copys_too(tmp_path: Path) -> None:
    """``user.name`` and ``user.email`` set in the repository itself (not in the user's global
    file): a commit in the copy failed with "Author identity unknown"."""
    folder = tmp_path / "repo"
    folder.mkdir()
    user_git(folder, "init", "-q")
    user_git(folder, "config", "user.name", "Ada Example")
    user_git(folder, "config", "user.email", "ada@example.invalid")
    (folder / "a.txt").write_text("a\n")
    user_git(folder, "add", ".")
    user_git(folder, "commit", "-q", "-m", "first")
    (folder / "a.txt").write_text("a, edited\n")
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    copy = tmp_path / "copy"
    store.materialize(WS, snapshot.tree_id, copy, "s", source=folder)
    assert user_git(copy, "config", "--local", "--get", "user.name").strip() == "Ada Example"
    assert user_git(copy, "config", "--local", "--get", "user.email").strip() == (
        "ada@example.invalid"
    )
