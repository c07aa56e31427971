"""A path the folder's ignore rules take in after its first capture leaves the next snapshot
(docs/design/workspace.md section 1: the policy excludes what the folder's ``.gitignore`` files
ignore), and the checkpoint says which paths left, with the real ``git``."""

from __future__ import annotations

import shutil
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
