"""Whether ``maka plan`` promises a restored copy that is a clone of the folder's Git repository
(``_clonable``): only when the copy will be one. A repository with no commit yet is not cloned
(the copy then has no repository), so the plan once promised a clone it never made."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runtime.continuation.resume_service import _clonable
from tests.helpers.user_git import user_git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git")


def _commit(folder: Path) -> None:
    user_git(folder, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")


def test_only_a_repository_with_a_commit_is_promised_a_clone(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert not _clonable(str(plain))

    repo = tmp_path / "repo"
    repo.mkdir()
    user_git(repo, "init", "-q")
    (repo / "a.txt").write_text("a\n")
    user_git(repo, "add", "a.txt")
    assert not _clonable(str(repo)), "no commit yet: the copy will have no repository"
    _commit(repo)
    assert _clonable(str(repo))
    user_git(repo, "pack-refs", "--all")  # the branch's ref only in packed-refs
    assert _clonable(str(repo))
    user_git(repo, "checkout", "-q", "--detach")
    assert _clonable(str(repo))

    linked = tmp_path / "linked"
    user_git(repo, "worktree", "add", "-q", "--detach", str(linked))
    assert (linked / ".git").is_file() and _clonable(str(linked))
