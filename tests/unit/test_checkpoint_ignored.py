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


def _unseeded(tmp_path: Path, folder: Path) -> str:
    hidden = tmp_path / "hidden.git"
    (folder / ".git").rename(hidden)
    try:
        return GitCheckpointStore(tmp_path / "plain").observe(folder, WS).tree_id
    finally:
        hidden.rename(folder / ".git")


@pytest.mark.parametrize("rules_edited", [False, True])
def test_a_seeded_first_capture_leaves_out_what_the_rules_ignore(
    tmp_path: Path, rules_edited: bool
) -> None:
    """The index seeded from the user's holds their force-added ignored files: the first
    capture leaves them out, says which (not a deleted one: it left as deleted), and equals a
    capture made without the seed. With the ``.gitignore`` itself edited (staged by the
    capture), the sweep reads the edited rules."""
    folder = tmp_path / "work"
    _user_repository(folder)
    (folder / "old.env").unlink()  # tracked and ignored, now deleted
    if rules_edited:
        (folder / ".gitignore").write_text("*.env\nlogs/\napp.py\n")
    store = GitCheckpointStore(tmp_path / "data")
    store._absorb_later = lambda workspace_identity: None  # type: ignore[method-assign]
    snap = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    assert store.borrows(WS)
    left = ["logs/a.log", "secret.env"] + (["app.py"] if rules_edited else [])
    assert store.now_ignored(WS, [snap.commit_id]) == {snap.commit_id: sorted(left)}
    assert snap.tree_id == _unseeded(tmp_path, folder)
