"""Entries that change type between two captures (docs/design/workspace.md section 1: everything
under the folder is captured): a folder replaced by a file or a link, a file replaced by a folder.
Each is an ordinary change: captured, compared as added / deleted paths and restored, with the real
``git``; no capture ever fails on one."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from runtime.ledger.checkpoint_ports import PathChange, TreeChange
from storage.checkpoints.checkpoint_store import GitCheckpointStore

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
WS = "workspace:v1:7a7a7a7a-1111-2222-3333-444455556666"


def _files(root: Path) -> dict[str, str]:
    """Every entry under ``root`` but the marker: file bytes, ``->target`` for links, ``/``
    for folders."""
    found: dict[str, str] = {}
    for here, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(here) / name
            key = path.relative_to(root).as_posix()
            if key.startswith(".maka"):
                continue
            if path.is_symlink():
                found[key] = "->" + os.readlink(path)
            elif path.is_dir():
                found[key] = "/"
            else:
                found[key] = path.read_text()
    return found


def _start(folder: Path) -> None:
    (folder / "lib").mkdir(parents=True)
    (folder / "lib" / "a.py").write_text("a\n")
    (folder / "out").mkdir()
    (folder / "out" / "o.txt").write_text("o\n")
    (folder / "shared").mkdir()
    (folder / "shared" / "a.py").write_text("shared a\n")
    (folder / "util").write_text("u\n")
    (folder / "gone").write_text("becomes an empty folder\n")


def _retype(folder: Path) -> None:
    shutil.rmtree(folder / "lib")
    os.symlink("shared", folder / "lib")  # its old file name exists through the link
    shutil.rmtree(folder / "out")
    (folder / "out").write_text("x\n")
    (folder / "util").unlink()
    (folder / "util").mkdir()
    (folder / "util" / "__init__.py").write_text("i\n")
    (folder / "gone").unlink()
    (folder / "gone").mkdir()


EXPECTED = [
    TreeChange("gone", PathChange.DELETED),
    TreeChange("gone/", PathChange.ADDED),
    TreeChange("lib", PathChange.ADDED),
    TreeChange("lib/a.py", PathChange.DELETED),
    TreeChange("out", PathChange.ADDED),
    TreeChange("out/o.txt", PathChange.DELETED),
    TreeChange("util", PathChange.DELETED),
    TreeChange("util/__init__.py", PathChange.ADDED),
]


def test_type_changes_are_captured_compared_and_restored(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    _start(folder)
    store = GitCheckpointStore(tmp_path / "data")
    first = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    _retype(folder)
    after = _files(folder)

    observed = store.observe(folder, WS)
    assert store.changes(WS, first.tree_id, observed.tree_id) == EXPECTED
    second = store.capture(folder, WS, "refs/maka/s/r/2", "second")
    assert second.tree_id == observed.tree_id
    assert store.changes(WS, first.tree_id, second.tree_id) == EXPECTED
    # The same folder captured from nothing gives the same tree: nothing was left out.
    fresh = GitCheckpointStore(tmp_path / "fresh").observe(folder, WS)
    assert fresh.tree_id == second.tree_id

    copy = tmp_path / "copy"
    store.materialize(WS, second.tree_id, copy, "s")
    assert _files(copy) == after
    back = tmp_path / "back"
    store.materialize(WS, first.tree_id, back, "s")
    _start(tmp_path / "expected")
    assert _files(back) == _files(tmp_path / "expected")


def test_changing_types_back_and_forth_never_fails_a_capture(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    _start(folder)
    store = GitCheckpointStore(tmp_path / "data")
    first = store.capture(folder, WS, "refs/maka/s/r/1", "first")
    _retype(folder)
    store.capture(folder, WS, "refs/maka/s/r/2", "second")
    # And back again: each folder a file, each file a folder.
    (folder / "lib").unlink()
    shutil.rmtree(folder / "util")
    os.remove(folder / "out")
    (folder / "gone").rmdir()
    shutil.rmtree(folder / "shared")
    _start(folder)
    third = store.capture(folder, WS, "refs/maka/s/r/3", "third")
    assert third.tree_id == first.tree_id
    assert store.changes(WS, first.tree_id, store.observe(folder, WS).tree_id) == []
