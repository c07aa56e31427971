"""A `maka run` in a folder that is a Git repository leaves its snapshot store self-contained
when it exits (app/commands/cli_session_host.py): the store's first capture borrowed the
user's objects, and the copy that ends the borrowing runs in the background; a command whose
turn ends at once would otherwise cut it short every time."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.helpers.maka_run import maka
from tests.helpers.user_git import user_git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def test_a_run_in_a_git_repository_leaves_its_store_self_contained(tmp_path: Path) -> None:
    work = tmp_path / "work"
    for n in range(400):
        folder = work / f"pkg{n % 8}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n}.txt").write_text(f"file {n}\n" * 400)
    user_git(work, "init", "-q")
    user_git(work, "add", "-A")
    user_git(work, "commit", "-qm", "first")
    (work / "pkg1" / "f1.txt").write_text("uncommitted work\n")
    data = tmp_path / "data"
    result = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "list files"], data)
    assert result.returncode == 0, result.stderr
    [store] = (data / "checkpoints").glob("*.git")
    assert not (store / "objects" / "info" / "alternates").exists(), "still borrows"
    assert not (store / "trees.scratch").exists()
    doctor = maka(["doctor"], data)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr


@pytest.mark.parametrize("kind", ["package", "worktree"])
def test_a_run_in_a_package_or_a_worktree_borrows_and_ends_self_contained(
    tmp_path: Path, kind: str
) -> None:
    """A session folder inside a larger repository (a monorepo's package), or that package in
    a linked worktree of it: the first snapshot borrows (the copy that ends the borrowing
    brings its objects as one pack, not one loose object per file), holds the folder's
    changes and nothing the repository ignores, and the repository's ``.git`` is left as it
    was."""
    top = tmp_path / "mono"
    for n in range(400):
        folder = top / ("pkg" if n % 2 else "other") / f"d{n % 8}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n}.txt").write_text(f"file {n}\n" * 400)
    (top / ".gitignore").write_text("node_modules/\n")
    user_git(top, "init", "-q")
    user_git(top, "add", "-A")
    user_git(top, "commit", "-qm", "first")
    work = top / "pkg"
    if kind == "worktree":
        user_git(top, "worktree", "add", "-q", "--detach", str(tmp_path / "linked"))
        work = tmp_path / "linked" / "pkg"  # a package of a linked worktree
    (work / "d1" / "f1.txt").write_text("uncommitted work\n")
    (work / "node_modules").mkdir()
    (work / "node_modules" / "dep.js").write_text("ignored\n")
    user_git(work, "status", "--porcelain")
    before = {str(path): path.read_bytes() for path in (top / ".git").rglob("*") if path.is_file()}
    data = tmp_path / "data"
    result = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "list files"], data)
    assert result.returncode == 0, result.stderr
    [store] = (data / "checkpoints").glob("*.git")
    assert not (store / "objects" / "info" / "alternates").exists(), "still borrows"
    packed = sum(p.stat().st_size for p in (store / "objects" / "pack").glob("*.pack"))
    loose = sum(1 for _ in (store / "objects").glob("??/*"))
    assert packed > 0 and loose < 20, "the borrowed objects came as one pack"
    refs = user_git(store, "--git-dir", str(store), "for-each-ref", "--format=%(objectname)")
    commit = refs.split()[-1]  # the run's last snapshot
    names = user_git(store, "--git-dir", str(store), "ls-tree", "-r", "--name-only", commit)
    assert "d1/f1.txt" in names.split() and "node_modules/dep.js" not in names.split()
    shown = user_git(store, "--git-dir", str(store), "show", f"{commit}:d1/f1.txt")
    assert shown == "uncommitted work\n"
    after = {str(path): path.read_bytes() for path in (top / ".git").rglob("*") if path.is_file()}
    assert after == before


@pytest.mark.parametrize("name", [b"bad\xff", b"x\n?abc", b"line\nbreak"])
def test_a_file_name_of_any_bytes_still_ends_the_borrowing(tmp_path: Path, name: bytes) -> None:
    """A committed file whose name is not UTF-8, or holds a newline (one starting the next line
    with ``?``, Git's mark of a missing object): the walk over the store's objects once printed
    names and decoded them, so the copy that ends the borrowing died with a traceback and the
    snapshots depended on the user's ``.git`` for good."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    (Path(work).joinpath(os.fsdecode(name))).write_bytes(b"odd\n")
    user_git(work, "init", "-q")
    user_git(work, "add", "-A")
    user_git(work, "commit", "-qm", "first")
    (work / "a.txt").write_text("uncommitted work\n")
    data = tmp_path / "data"
    result = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "list files"], data)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    [store] = (data / "checkpoints").glob("*.git")
    assert not (store / "objects" / "info" / "alternates").exists(), "still borrows"
    # The snapshots hold without the user's repository.
    shutil.rmtree(work / ".git")
    doctor = maka(["doctor", "--verify-snapshots"], data)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "0 missing" in doctor.stdout, doctor.stdout
