"""A restored or branched copy of a Git repository names the user's remotes and upstreams,
not the user's folder (``storage/checkpoints/checkpoint_remotes.py``), with the real ``git``:
``git status`` there said "up to date with 'origin/main'" (the user's own branch) and a push
went to the user's folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from storage.checkpoints.checkpoint_store import GitCheckpointStore
from tests.helpers.user_git import user_git
from tests.unit.test_checkpoint_store import _tree_state

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
WS = "workspace:v1:2f2f2f2f-1111-2222-3333-4444556677aa"
REMOTE = "https://example.invalid/team/project.git"


def _repository_with_upstream(tmp_path: Path) -> Path:
    """A clone of a team repository, one commit ahead of its upstream, with uncommitted work,
    its remote then pointed at a URL the tests never reach."""
    team = tmp_path / "team"
    team.mkdir()
    user_git(team, "init", "-q", "-b", "main")
    (team / "a.txt").write_text("a\n")
    user_git(team, "add", "a.txt")
    user_git(team, "commit", "-qm", "one")
    folder = tmp_path / "project"
    user_git(tmp_path, "clone", "-q", str(team), str(folder))
    user_git(folder, "remote", "set-url", "origin", REMOTE)
    user_git(folder, "remote", "set-url", "--push", "origin", REMOTE + "-push")
    (folder / "b.txt").write_text("b\n")
    user_git(folder, "add", "b.txt")
    user_git(folder, "commit", "-qm", "two")
    (folder / "a.txt").write_text("a changed\n")
    (folder / "new.txt").write_text("new\n")
    return folder


def test_a_copy_names_the_users_remotes_and_reads_as_the_folder(tmp_path: Path) -> None:
    folder = _repository_with_upstream(tmp_path)
    before = _tree_state(folder / ".git")
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    copy = tmp_path / "project-restored-1"
    store.materialize(WS, snapshot.tree_id, copy, "s", source=folder)
    assert _tree_state(folder / ".git") == before  # the user's repository is never written
    assert user_git(copy, "remote", "-v").splitlines() == [
        f"origin\t{REMOTE} (fetch)",
        f"origin\t{REMOTE}-push (push)",
    ]
    mine = user_git(folder, "status", "--short", "--branch").splitlines()
    theirs = user_git(copy, "status", "--short", "--branch").splitlines()
    assert mine[0] == "## main...origin/main [ahead 1]"
    assert [line for line in theirs if ".maka" not in line] == mine
    upstream = ("rev-parse", "origin/main")
    assert user_git(copy, *upstream) == user_git(folder, *upstream)


def test_a_repository_without_remotes_gives_a_copy_without_any(tmp_path: Path) -> None:
    folder = tmp_path / "alone"
    folder.mkdir()
    user_git(folder, "init", "-q", "-b", "main")
    (folder / "a.txt").write_text("a\n")
    user_git(folder, "add", "a.txt")
    user_git(folder, "commit", "-qm", "one")
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    copy = tmp_path / "alone-restored-1"
    store.materialize(WS, snapshot.tree_id, copy, "s", source=folder)
    assert user_git(copy, "remote") == ""
    assert user_git(copy, "status", "--short", "--branch").splitlines()[0] == "## main"


def test_where_a_branch_pushes_and_included_remotes_come_along(tmp_path: Path) -> None:
    """A user who pushes to a fork (``remote.pushDefault``) keeps pushing there from the copy;
    remotes set in a file the configuration includes come too, and a remote named by a path
    relative to the folder still names the same repository from the copy."""
    folder = _repository_with_upstream(tmp_path)
    (tmp_path / "remotes.inc").write_text('[remote "fork"]\n\turl = ../fork.git\n')
    user_git(folder, "config", "include.path", str(tmp_path / "remotes.inc"))
    user_git(folder, "config", "remote.pushDefault", "fork")
    user_git(folder, "config", "branch.main.pushRemote", "fork")
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    copy = tmp_path / "elsewhere" / "project-restored-1"
    store.materialize(WS, snapshot.tree_id, copy, "s", source=folder)
    assert user_git(copy, "config", "remote.pushDefault").strip() == "fork"
    assert user_git(copy, "config", "branch.main.pushRemote").strip() == "fork"
    assert user_git(copy, "config", "remote.fork.url").strip() == str(tmp_path / "fork.git")
    assert user_git(copy, "config", "remote.origin.url").strip() == REMOTE
