"""Git commands started ahead of their input (storage/checkpoints/checkpoint_store.py,
``GitRunner.start_ahead``), with the real ``git``. The staging started beside the listings:
given no paths it writes nothing and leaves no lock; a capture process killed while it waits
leaves neither the lock nor a running Git behind, and the next capture works; deletions staged
through its ``--remove`` and entries dropped in the same capture record what a capture from
nothing records. The comparison an observation starts with the last snapshot: what the drift
check then gets is what comparing the two trees afresh gives, taken once."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from storage.checkpoints.checkpoint_store import GitCheckpointStore
from tests.helpers.processes import pid_running

pytestmark = [
    pytest.mark.skipif(
        shutil.which("git") is None or os.name != "posix", reason="needs git and POSIX signals"
    ),
    pytest.mark.usefixtures("staged_both_ways"),
]
WS = "workspace:v1:5a5a5a5a-1111-2222-3333-444455556666"


_STAGE = ["update-index", "-z", "--add", "--remove", "--replace", "--stdin"]


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    (folder / "lib").mkdir(parents=True)
    (folder / "lib" / "a.txt").write_text("a\n")
    (folder / "util").write_text("util\n")
    (folder / "gone.txt").write_text("gone\n")
    (folder / "big.bin").write_bytes(b"x" * 100)
    (folder / "keep.txt").write_text("keep\n")
    return folder


def test_a_staging_ended_without_paths_writes_nothing(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    store.capture(folder, WS, "refs/maka/s/r/1", "m")
    index = store.index_path(WS)
    before = (index.read_bytes(), index.stat().st_mtime_ns)
    (folder / "keep.txt").write_text("changed\n")  # something it would stage, if told
    runner = store._git_runner()
    git_dir = store.git_dir(WS)

    ahead = runner.start_ahead(_STAGE, git_dir=git_dir, work_tree=folder, index=index)
    assert ahead is not None
    ahead.cancel()
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before
    assert not index.with_name(index.name + ".lock").exists()

    ahead = runner.start_ahead(_STAGE, git_dir=git_dir, work_tree=folder, index=index)
    assert ahead is not None
    ahead.finish(None)
    assert index.read_bytes() == before[0]
    ahead.cancel()  # once ended, nothing more happens
    with pytest.raises(RuntimeError):
        ahead.finish(b"keep.txt\0")

    ahead = runner.start_ahead(_STAGE, git_dir=git_dir, work_tree=folder, index=index)
    assert ahead is not None
    ahead.finish(b"keep.txt\0")
    assert index.read_bytes() != before[0]  # given its paths, it stages them


def test_a_capture_killed_while_the_staging_waits_leaves_no_lock(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    data = tmp_path / "data"
    GitCheckpointStore(data).capture(folder, WS, "refs/maka/s/r/1", "m")
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from storage.checkpoints.checkpoint_store import GitCheckpointStore
        store = GitCheckpointStore(Path({str(data)!r}))
        ahead = store._git_runner().start_ahead(
            {_STAGE!r},
            git_dir=store.git_dir({WS!r}),
            work_tree=Path({str(folder)!r}),
            index=store.index_path({WS!r}),
        )
        print(ahead._process.pid, flush=True)
        time.sleep(60)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert child.stdout is not None
    git_pid = int(child.stdout.readline())
    store = GitCheckpointStore(data)
    lock = store.index_path(WS).with_name(store.index_path(WS).name + ".lock")
    for _ in range(500):  # the staging holds the index's lock while it waits for its paths
        if lock.exists():
            break
        time.sleep(0.01)
    assert lock.exists()
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()
    for _ in range(500):  # its input closed, the staging ends by itself
        if not pid_running(git_pid):
            break
        time.sleep(0.01)
    assert not pid_running(git_pid)
    assert not lock.exists()
    (folder / "keep.txt").write_text("after the crash\n")
    after = store.capture(folder, WS, "refs/maka/s/r/2", "m")
    fresh = GitCheckpointStore(tmp_path / "fresh").capture(folder, WS, "refs/maka/f/r/1", "m")
    assert after.tree_id == fresh.tree_id


def test_deletions_and_dropped_entries_in_one_capture(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data", max_file_bytes=1_000)
    store.capture(folder, WS, "refs/maka/s/r/1", "m")
    (folder / "gone.txt").unlink()  # deleted: the staging's --remove
    shutil.rmtree(folder / "lib")
    (folder / "lib").symlink_to("keep.txt")  # lib/a.txt is beyond a link now: dropped
    (folder / "util").unlink()
    (folder / "util").mkdir()
    (folder / "util" / "__init__.py").write_text("i\n")  # a file became a folder
    (folder / "big.bin").write_bytes(b"x" * 2_000)  # over the size limit: dropped
    (folder / "keep.txt").write_text("edited\n")

    mine = store.capture(folder, WS, "refs/maka/s/r/2", "m")
    fresh = GitCheckpointStore(tmp_path / "fresh", max_file_bytes=1_000).capture(
        folder, WS, "refs/maka/f/r/1", "m"
    )
    assert mine.tree_id == fresh.tree_id
    assert mine.skipped == ("big.bin",)
    listed = subprocess.run(
        ["git", "--git-dir", str(store.git_dir(WS)), "ls-tree", "-r", "--name-only", mine.tree_id],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "gone.txt" not in listed and "lib/a.txt" not in listed and "big.bin" not in listed
    assert {"lib", "util/__init__.py", "keep.txt"} <= set(listed)
    assert store.observe(folder, WS).tree_id == mine.tree_id


def _fresh_changes(tmp_path: Path, store: GitCheckpointStore, old: str, new: str) -> object:
    """The comparison made afresh, by a store that made nothing ahead (same repository)."""
    other = GitCheckpointStore(store.root.parent)
    assert not other._compared._kept
    return other.changes(WS, old, new)


def test_an_observation_compares_with_the_last_snapshot_ahead(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    boundary = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    (folder / "keep.txt").write_text("edited\n")
    (folder / "gone.txt").unlink()
    (folder / "new").mkdir()  # an empty folder: compared as ``new/``
    (folder / "lib" / "a.txt").chmod(0o600)  # a permission change: from the records

    seen = store.observe(folder, WS)
    assert list(store._compared._kept) == [(store.git_dir(WS), boundary.tree_id, seen.tree_id)]
    mine = store.changes(WS, boundary.tree_id, seen.tree_id)
    assert not store._compared._kept  # taken once
    assert mine == _fresh_changes(tmp_path, store, boundary.tree_id, seen.tree_id)
    assert {change.path for change in mine} == {"keep.txt", "gone.txt", "new/", "lib/a.txt"}
    assert store.changes(WS, boundary.tree_id, seen.tree_id) == mine  # made again when asked


def test_nothing_is_compared_ahead_for_an_unchanged_folder(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    boundary = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    seen = store.observe(folder, WS)
    assert seen.tree_id == boundary.tree_id
    assert not store._compared._kept
    assert store.changes(WS, boundary.tree_id, seen.tree_id) == []


def test_an_older_boundary_is_compared_afresh(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    older = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    (folder / "keep.txt").write_text("second\n")
    store.capture(folder, WS, "refs/maka/s/r/2", "m")
    (folder / "top.txt").write_text("third\n")
    seen = store.observe(folder, WS)
    mine = store.changes(WS, older.tree_id, seen.tree_id)  # not the pair compared ahead
    assert {change.path for change in mine} == {"keep.txt", "top.txt"}
    assert mine == _fresh_changes(tmp_path, store, older.tree_id, seen.tree_id)
