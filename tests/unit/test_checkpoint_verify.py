"""A restore checks the snapshot's stored bytes before it writes anything (docs/design/workspace.md
section 4), with the real ``git``: an object swapped or removed in the private repository is refused
with ``workspace_restore_snapshot_damaged`` and no copy is made."""

from __future__ import annotations

import os
import shutil
import subprocess
import zlib
from pathlib import Path

import pytest

from runtime.ledger.checkpoint_ports import CheckpointError
from runtime.ledger.codes import RestoreCode
from storage.checkpoints.checkpoint_store import GitCheckpointStore

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
WS = "workspace:v1:9c9c9c9c-1111-2222-3333-444455556666"


def _object_id(git_dir: Path, spec: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-parse", spec],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def _loose(git_dir: Path, object_id: str) -> Path:
    return git_dir / "objects" / object_id[:2] / object_id[2:]


def swap_blob(git_dir: Path, object_id: str, body: bytes) -> None:
    """Put other bytes under a blob's name, as a hand (or a disk) could."""
    path = _loose(git_dir, object_id)
    path.chmod(0o600)
    path.write_bytes(zlib.compress(b"blob %d\0" % len(body) + body))


def _store(tmp_path: Path) -> tuple[GitCheckpointStore, str]:
    folder = tmp_path / "work"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("the real content\n")
    (folder / "sub" / "b.txt").write_text("b\n")
    store = GitCheckpointStore(tmp_path / "data")
    return store, store.capture(folder, WS, "refs/maka/s/r/1", "m").tree_id


def test_a_swapped_blob_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    store, tree = _store(tmp_path)
    git_dir = store.git_dir(WS)
    assert store.verify_snapshots(WS, [tree]) == {tree: []}
    swap_blob(git_dir, _object_id(git_dir, f"{tree}:a.txt"), b"planted by someone else\n")

    copy = tmp_path / "copy"
    with pytest.raises(CheckpointError) as refused:
        store.materialize(WS, tree, copy, "s")
    assert refused.value.code is RestoreCode.WORKSPACE_RESTORE_SNAPSHOT_DAMAGED
    assert "a.txt" in refused.value.message
    assert not copy.exists()
    [damaged] = store.verify_snapshots(WS, [tree])[tree]
    assert damaged.path == "a.txt" and not damaged.missing


def test_a_swapped_folder_or_a_removed_file_is_refused(tmp_path: Path) -> None:
    store, tree = _store(tmp_path)
    git_dir = store.git_dir(WS)
    sub = _object_id(git_dir, f"{tree}:sub")
    blob = _object_id(git_dir, f"{tree}:sub/b.txt")
    path = _loose(git_dir, sub)
    path.chmod(0o600)
    raw = zlib.decompress(path.read_bytes())
    path.write_bytes(zlib.compress(raw.replace(b"b.txt", b"c.txt")))
    assert [d.path for d in store.verify_snapshots(WS, [tree])[tree]] == ["sub"]
    os.remove(_loose(git_dir, blob))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CheckpointError) as refused:
        store.materialize(WS, tree, empty, "s")
    assert refused.value.code is RestoreCode.WORKSPACE_RESTORE_SNAPSHOT_DAMAGED
    assert list(empty.iterdir()) == []
