"""An observation starts the last snapshot's presence decision beside its own Git calls, and
the next ``has_snapshot`` of that snapshot takes the answer (storage/checkpoints/
checkpoint_presence.py, ``EarlyAnswers``): one walk where a resume made two in a row, and never
an answer the store has since made untrue (real ``git``)."""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from runtime.ledger.checkpoint_ports import Snapshot
from storage.checkpoints import checkpoint_presence
from storage.checkpoints.checkpoint_git import GitRunner
from storage.checkpoints.checkpoint_presence import last_snapshot_path
from storage.checkpoints.checkpoint_store import GitCheckpointStore

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
WS = "workspace:v1:0f0e0d0c-7777-2222-3333-444455556666"


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the presence walks (``rev-list --objects``) the store makes."""
    seen: list[int] = []
    real = GitRunner.run

    def counting(self: GitRunner, args: Sequence[str], **kwargs: Any) -> bytes:
        if args[0] == "rev-list":
            seen.append(1)
        return real(self, args, **kwargs)

    monkeypatch.setattr(GitRunner, "run", counting)
    return seen


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "a.txt").write_text("alpha\n")
    (folder / "b.txt").write_text("beta\n")
    return folder


def _captured(tmp_path: Path) -> tuple[Path, GitCheckpointStore, Snapshot]:
    """A folder, a store and the folder's first snapshot (the one a resume asks about)."""
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    boundary = store.capture(folder, WS, "refs/maka/s/r/1", "start")
    assert boundary.commit_id is not None
    return folder, store, boundary


def test_a_plan_after_an_observation_walks_the_boundary_once(
    tmp_path: Path, walks: list[int]
) -> None:
    folder, store, boundary = _captured(tmp_path)
    (folder / "a.txt").write_text("changed\n")
    seen = store.observe(folder, WS)
    assert store.has_snapshot(WS, boundary.commit_id, boundary.tree_id)
    assert len(walks) == 1
    assert [c.path for c in store.changes(WS, boundary.tree_id, seen.tree_id)] == ["a.txt"]
    # Taken once: the next question walks again.
    assert store.has_snapshot(WS, boundary.commit_id, boundary.tree_id)
    assert len(walks) == 2


def test_another_snapshot_is_decided_on_its_own(tmp_path: Path, walks: list[int]) -> None:
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    older = store.capture(folder, WS, "refs/maka/s/r/1", "start")
    (folder / "b.txt").write_text("more\n")
    store.capture(folder, WS, "refs/maka/s/r/2", "next")
    assert older.commit_id is not None
    store.observe(folder, WS)  # starts the walk of the last capture, not of ``older``
    assert store.has_snapshot(WS, older.commit_id, older.tree_id)
    assert len(walks) == 2


def test_no_answer_counts_after_the_store_dropped_objects(tmp_path: Path, walks: list[int]) -> None:
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    store.capture(folder, WS, "refs/maka/s/r/1", "start")
    (folder / "c.txt").write_text("gamma\n")
    boundary = store.capture(folder, WS, "refs/maka/s/r/2", "next")
    assert boundary.commit_id is not None
    (folder / "c.txt").unlink()
    store.observe(folder, WS)  # found whole now
    # Then retention drops the snapshot and prunes its objects.
    git_dir = store.git_dir(WS)
    store.delete_refs(git_dir, ["refs/maka/s/r/2"])
    store.prune(git_dir, "now")
    assert not store.has_snapshot(WS, boundary.commit_id, boundary.tree_id)
    assert len(walks) == 2


def test_a_walk_started_while_retention_prunes_is_not_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention runs outside the workspace lock: an observation may start the walk after
    the prune began and finish it before the objects are gone."""
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    store.capture(folder, WS, "refs/maka/s/r/1", "start")
    (folder / "c.txt").write_text("gamma\n")
    boundary = store.capture(folder, WS, "refs/maka/s/r/2", "next")
    assert boundary.commit_id is not None
    (folder / "c.txt").unlink()
    git_dir = store.git_dir(WS)
    store.delete_refs(git_dir, ["refs/maka/s/r/2"])
    real = GitRunner.run

    def observed_during_gc(self: GitRunner, args: Sequence[str], **kwargs: Any) -> bytes:
        if args[0] == "gc":
            store.observe(folder, WS)  # its walk finds the snapshot whole, before gc runs
            for thread in threading.enumerate():
                if thread.name == "maka-presence":
                    thread.join()
        return real(self, args, **kwargs)

    monkeypatch.setattr(GitRunner, "run", observed_during_gc)
    store.prune(git_dir, "now")
    assert not store.has_snapshot(WS, boundary.commit_id, boundary.tree_id)


def test_an_answer_that_is_no_longer_fresh_is_not_taken(
    tmp_path: Path, walks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, store, boundary = _captured(tmp_path)
    monkeypatch.setattr(checkpoint_presence, "EARLY_ANSWER_FRESH_S", -1.0)
    store.observe(folder, WS)
    assert store.has_snapshot(WS, boundary.commit_id, boundary.tree_id)
    assert len(walks) == 2


def test_missing_is_decided_again_after_the_observation_wrote_the_object_back(
    tmp_path: Path, walks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, store, boundary = _captured(tmp_path)
    # The blob of "beta\n" removed by hand; the file's time then moves, so the observation
    # stages it again and writes the blob back, while the early walk may still find it gone.
    beta = _blob_path(store.git_dir(WS), "beta\n")
    assert beta.is_file()
    beta.chmod(0o600)
    beta.unlink()
    earlier = (folder / "b.txt").stat().st_mtime - 60
    os.utime(folder / "b.txt", (earlier, earlier))
    counting = GitRunner.run

    def after_the_walk(self: GitRunner, args: Sequence[str], **kwargs: Any) -> bytes:
        if args[0] == "update-index":  # the early walk has found the blob gone by now
            for thread in threading.enumerate():
                if thread.name == "maka-presence":
                    thread.join()
        return counting(self, args, **kwargs)

    monkeypatch.setattr(GitRunner, "run", after_the_walk)
    store.observe(folder, WS)
    assert beta.is_file()
    assert store.has_snapshot(WS, boundary.commit_id, boundary.tree_id)


def test_a_garbled_note_starts_no_walk(tmp_path: Path, walks: list[int]) -> None:
    folder, store, boundary = _captured(tmp_path)
    note = last_snapshot_path(store.index_path(WS))
    assert note.read_text() == f"{boundary.commit_id} {boundary.tree_id}\n"
    note.write_text("not ids\n")
    store.observe(folder, WS)
    assert walks == []
    assert store.has_snapshot(WS, boundary.commit_id, boundary.tree_id)
    assert len(walks) == 1


def _blob_path(git_dir: Path, text: str) -> Path:
    data = text.encode()
    name = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    return git_dir / "objects" / name[:2] / name[2:]
