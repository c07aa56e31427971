"""A restored copy of a folder that is a Git repository is a local clone of it at the user's
HEAD with the snapshot's files on top (docs/design/workspace.md section 4): ``git status``, ``git
diff`` and ``git log`` there show what they showed in the folder; the user's ``.git`` is only
read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

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
