"""The cost of a workspace checkpoint store over time, with the real ``git``: a file that was only
touched is compared once, not at every capture (the private index's stat data is refreshed),
and retention frees what only deleted refs reached (snapshots have no parent chain)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from storage.checkpoints.checkpoint_store import TIP_REF, GitCheckpointStore

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
    pytest.mark.usefixtures("staged_both_ways"),
]
WS = "workspace:v1:3d3d3d3d-1111-2222-3333-444455556666"


def _git(git_dir: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True, check=ok
    )


def _index_stat(store: GitCheckpointStore, folder: Path, name: str) -> tuple[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(
        GIT_DIR=str(store.git_dir(WS)),
        GIT_WORK_TREE=str(folder),
        GIT_INDEX_FILE=str(store.index_path(WS)),
    )
    out = subprocess.run(
        ["git", "ls-files", "--debug", "--", name],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    fields = dict(line.strip().split(": ", 1) for line in out.splitlines()[1:3])
    return fields["ctime"], fields["mtime"]


def _file_stat(path: Path) -> tuple[str, str]:
    info = os.stat(path)
    return (
        f"{info.st_ctime_ns // 10**9}:{info.st_ctime_ns % 10**9}",
        f"{info.st_mtime_ns // 10**9}:{info.st_mtime_ns % 10**9}",
    )


def test_a_touched_or_same_mode_chmodded_file_is_refreshed_by_the_next_capture(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    for n in range(5):
        (folder / f"f{n}.txt").write_text(f"{n}\n")
    store = GitCheckpointStore(tmp_path / "data")
    first = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    time.sleep(1.1)  # a new second: the stat data differs for certain
    os.utime(folder / "f1.txt")
    (folder / "f2.txt").chmod(0o644)  # the same mode: only the ctime moves
    assert _index_stat(store, folder, "f1.txt") != _file_stat(folder / "f1.txt")
    second = store.capture(folder, WS, "refs/maka/s/r/2", "m")
    assert second.tree_id == first.tree_id
    for name in ("f1.txt", "f2.txt"):
        assert _index_stat(store, folder, name) == _file_stat(folder / name), name


def test_retention_frees_what_only_deleted_refs_reached(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "keep.txt").write_text("kept\n")
    store = GitCheckpointStore(tmp_path / "data")
    git_dir = store.git_dir(WS)
    big_blobs: list[str] = []
    refs: list[str] = []
    for n in range(6):
        big = folder / f"big-{n}.bin"
        big.write_bytes(os.urandom(200_000))
        snapshot = store.capture(folder, WS, f"refs/maka/s/r{n}/1", "wrote")
        big_blobs.append(_git(git_dir, "rev-parse", f"{snapshot.tree_id}:big-{n}.bin").stdout)
        big.unlink()
        refs += [snapshot.ref, store.capture(folder, WS, f"refs/maka/s/r{n}/2", "deleted").ref]
    assert _git(git_dir, "rev-parse", "--verify", "-q", TIP_REF, ok=False).returncode != 0
    # Keep the last run's refs only, as retention would, and prune everything unreachable.
    store.delete_refs(git_dir, refs[:-2])
    store.prune(git_dir, "now")
    present = [
        _git(git_dir, "cat-file", "-e", blob.strip(), ok=False).returncode == 0
        for blob in big_blobs
    ]
    assert present == [False, False, False, False, False, True]
