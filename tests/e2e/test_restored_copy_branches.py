"""A restored copy of a Git repository holds the user's local branches, tags and stash, and
their HEAD as it is (``storage/checkpoints/checkpoint_remotes.carry_local_refs``), end to end:
a real ``maka run`` killed at a failpoint, then ``maka resume --restore-to``, the real ``git``.

The copy is a clone of the user's repository, which had only the branch checked out: the
user's other branches (which a clone makes ``origin/*``) went with its ``origin``, so a drill
found ``feat`` and ``side`` gone from ``git branch`` there, the stash gone, and with a detached
HEAD the copy on another branch, and ``main`` missing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.e2e.test_workspace_decisions_cli import Drill
from tests.helpers.user_git import user_git

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


def _tree_state(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every entry under ``root``: mode, mtime and bytes (link targets for links)."""
    state: dict[str, tuple[int, int, bytes]] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        body = (
            os.readlink(path).encode()
            if path.is_symlink()
            else path.read_bytes()
            if path.is_file()
            else b""
        )
        state[str(path.relative_to(root))] = (info.st_mode, info.st_mtime_ns, body)
    return state


def _commit(folder: Path, name: str, text: str, message: str) -> None:
    (folder / name).write_text(text)
    user_git(folder, "add", name)
    user_git(folder, "commit", "-qm", message)


def _repository(work: Path, *, detached: bool) -> None:
    """Branches main, feat (with an upstream) and side, each at a commit of its own, a tag,
    two stash entries, and uncommitted work; HEAD on main, or detached at feat's commit (where
    ``git clone`` would check ``feat`` out)."""
    user_git(work, "init", "-q", "-b", "main")
    user_git(work, "add", ".")
    user_git(work, "commit", "-qm", "first")
    user_git(work, "checkout", "-qb", "feat")
    _commit(work, "f.txt", "feature\n", "on feat")
    user_git(work, "tag", "v1")
    user_git(work, "branch", "--set-upstream-to", "main")
    user_git(work, "checkout", "-qb", "side", "main")
    _commit(work, "s.txt", "side\n", "on side")
    user_git(work, "checkout", "-q", "main")
    _commit(work, "m.txt", "main\n", "on main")
    for name, message in (("a.txt", "one"), ("b.txt", "two")):
        (work / name).write_text(f"stashed {message}\n")
        user_git(work, "stash", "push", "-q", "-m", message)
    if detached:
        user_git(work, "checkout", "-q", "--detach", "feat")
    (work / "a.txt").write_text("alpha, edited\n")
    (work / "n.txt").write_text("untracked\n")


def _refs(folder: Path) -> list[str]:
    listed = user_git(
        folder,
        "for-each-ref",
        "--format=%(refname) %(objectname) %(upstream)",
        "refs/heads",
        "refs/tags",
        "refs/stash",
    )
    return listed.splitlines()


def _head(folder: Path) -> tuple[str, str]:
    """The branch HEAD is on (``HEAD`` when detached) and its commit."""
    name = user_git(folder, "rev-parse", "--symbolic-full-name", "HEAD").strip()
    return name, user_git(folder, "rev-parse", "HEAD").strip()


def _status(folder: Path) -> list[str]:
    listed = user_git(folder, "--no-optional-locks", "status", "--porcelain")
    return sorted(line for line in listed.splitlines() if ".maka" not in line)


@pytest.mark.parametrize("detached", [False, True], ids=["on main", "detached HEAD"])
def test_a_restored_copy_holds_the_users_branches_and_stash(tmp_path: Path, detached: bool) -> None:
    drill = Drill(tmp_path)
    _repository(drill.work, detached=detached)
    status = _status(drill.work)  # at the boundary: the snapshot before the first call
    said = user_git(drill.work, "--no-optional-locks", "status").splitlines()[0]
    drill.run("P5")  # killed at the failpoint, the first call's count.txt written
    refs, head = _refs(drill.work), _head(drill.work)
    stashes = user_git(drill.work, "stash", "list")
    assert [line.split()[0] for line in refs] == [
        "refs/heads/feat",
        "refs/heads/main",
        "refs/heads/side",
        "refs/stash",
        "refs/tags/v1",
    ]
    assert head[0] == ("HEAD" if detached else "refs/heads/main")
    assert len(stashes.splitlines()) == 2
    before = _tree_state(drill.work / ".git")

    code, body = drill.resume("--restore-to")
    assert code == 0, body
    copy = tmp_path / "work-restored-1"
    assert body["workspacePath"] == str(copy)
    assert _tree_state(drill.work / ".git") == before  # the user's repository is only read

    listing = ("branch", "--format=%(refname:short) %(objectname)")
    shown = user_git(copy, *listing).splitlines()
    # As the user's, "(HEAD detached at refs/heads/feat)" included.
    assert shown == user_git(drill.work, *listing).splitlines()
    assert [line for line in shown if not line.startswith("(")] == [
        f"{name} {user_git(drill.work, 'rev-parse', name).strip()}"
        for name in ("feat", "main", "side")
    ]
    # Every branch at its commit with its upstream, the tag, the stash; HEAD as the user's.
    assert _refs(copy) == refs
    assert _head(copy) == head
    assert user_git(copy, "stash", "list") == stashes
    assert user_git(copy, "log", "--all", "--format=%H") == user_git(
        drill.work, "log", "--all", "--format=%H"
    )
    # The same changes against that HEAD as in the user's folder at the boundary (the
    # continuation's own report.txt aside), and no operation in progress.
    assert [line for line in _status(copy) if "report.txt" not in line] == status
    assert user_git(copy, "status").splitlines()[0] == said  # "On branch main", "HEAD detached"
    assert not (copy / ".git" / "MERGE_HEAD").exists()
