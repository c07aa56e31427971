"""A path the folder's ignore rules take in after its first capture leaves the next snapshot
(docs/design/workspace.md section 1: the policy excludes what the folder's ``.gitignore`` files
ignore), and the checkpoint says which paths left, with the real ``git``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from runtime.ledger.checkpoint_ports import PathChange, TreeChange
from storage.checkpoints import checkpoint_store
from storage.checkpoints.checkpoint_store import GitCheckpointStore

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
WS = "workspace:v1:1e1e1e1e-1111-2222-3333-444455556666"


def test_a_newly_ignored_path_leaves_the_next_snapshot(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    (folder / "logs").mkdir(parents=True)
    (folder / "app.py").write_text("print(1)\n")
    (folder / "secret.env").write_text("TOKEN=1\n")
    (folder / "logs" / "a.log").write_text("a\n")
    store = GitCheckpointStore(tmp_path / "data")
    first = store.capture(folder, WS, "refs/maka/s/r/1", "m")

    (folder / ".gitignore").write_text("secret.env\nlogs/\n")
    (folder / "secret.env").write_text("TOKEN=2\n")  # new content: still left out
    second = store.capture(folder, WS, "refs/maka/s/r/2", "m")
    assert store.changes(WS, first.tree_id, second.tree_id) == [
        TreeChange(".gitignore", PathChange.ADDED),
        TreeChange("logs/a.log", PathChange.DELETED),
        TreeChange("secret.env", PathChange.DELETED),
    ]
    assert store.now_ignored(WS, [first.commit_id, second.commit_id]) == {
        second.commit_id: ["logs/a.log", "secret.env"]
    }
    # A fresh look at the folder agrees, and the next capture keeps them out.
    assert GitCheckpointStore(tmp_path / "fresh").observe(folder, WS).tree_id == second.tree_id
    (folder / "logs" / "b.log").write_text("b\n")
    third = store.capture(folder, WS, "refs/maka/s/r/3", "m")
    assert third.tree_id == second.tree_id
    assert store.now_ignored(WS, [third.commit_id]) == {}


def _user_repository(folder: Path) -> None:
    """A user's repository tracking files its own rules ignore (added with ``add -f``)."""
    (folder / "logs").mkdir(parents=True)
    (folder / "app.py").write_text("print(1)\n")
    (folder / ".gitignore").write_text("*.env\nlogs/\n")
    (folder / "secret.env").write_text("TOKEN=1\n")
    (folder / "old.env").write_text("OLD=1\n")
    (folder / "logs" / "a.log").write_text("a\n")
    env = {**os.environ, "HOME": str(folder.parent), "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["add", "-f", "secret.env", "old.env", "logs/a.log"],
        ["-c", "user.name=U", "-c", "user.email=u@x", "commit", "-q", "-m", "first"],
    ):
        subprocess.run(["git", *args], cwd=folder, env=env, check=True, capture_output=True)


def _unseeded(tmp_path: Path, folder: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """What a store that does not borrow the user's index captures of ``folder``."""
    with monkeypatch.context() as patched:
        patched.setattr(checkpoint_store, "seed", lambda *args: None)
        return GitCheckpointStore(tmp_path / "plain").observe(folder, WS).tree_id


@pytest.mark.parametrize("rules_edited", [False, True])
def test_a_seeded_first_capture_keeps_what_the_users_git_tracks(
    tmp_path: Path, rules_edited: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index seeded from the user's holds their force-added ignored files. Git does not
    count a file it tracks as ignored, nor do snapshots (``checkpoint_tracked``): the first
    capture keeps them (not a deleted one: it left as deleted), names none as left out, and
    equals a capture made without the seed. With the ``.gitignore`` itself edited to match a
    tracked file too (staged by the capture, so the sweep reads the edited rules), that file
    stays as well; without the user's repository the rules leave them all out."""
    folder = tmp_path / "work"
    _user_repository(folder)
    (folder / "old.env").unlink()  # tracked and ignored, now deleted
    if rules_edited:
        (folder / ".gitignore").write_text("*.env\nlogs/\napp.py\n")
    store = GitCheckpointStore(tmp_path / "data")
    store._absorb_later = lambda workspace_identity: None  # type: ignore[method-assign]
    snap = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    assert store.borrows(WS)
    assert store.now_ignored(WS, [snap.commit_id]) == {}
    assert _tree_names(store.git_dir(WS), snap.tree_id) == [
        ".gitignore",
        "app.py",
        "logs/a.log",
        "secret.env",
    ]
    assert snap.tree_id == _unseeded(tmp_path, folder, monkeypatch)
    shutil.rmtree(folder / ".git")
    plain_store = GitCheckpointStore(tmp_path / "no-repository")
    plain = plain_store.capture(folder, WS, "refs/maka/s/r/1", "m")
    expected = [".gitignore"] + ([] if rules_edited else ["app.py"])
    assert _tree_names(plain_store.git_dir(WS), plain.tree_id) == expected


def _tree_names(git_dir: Path, tree: str) -> list[str]:
    """The files of a snapshot's tree, the permission record left aside."""
    listed = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "-r", "--name-only", tree],
        capture_output=True,
        check=True,
        text=True,
    ).stdout.split()
    return [name for name in listed if not name.startswith(".maka/")]
