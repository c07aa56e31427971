"""A damaged object of the private store stops spreading once a check finds it
(docs/design/workspace.md section 5, "Integrity"), with the real ``git`` and real folders.

Git never writes an object again that it believes it has, and the private index names the
objects of unchanged files, so a blob swapped in the store stood in every later snapshot. A check
that finds it (a restore's, ``verify_snapshots`` as ``maka doctor --verify-snapshots`` and an
export run it) moves it aside, kept, and the next capture stages the folder from the start: it
writes the right bytes again, so the new snapshot and the old ones naming that object are whole.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import zlib
from pathlib import Path
from typing import NamedTuple

import pytest

from runtime.ledger.checkpoint_ports import CheckpointError
from runtime.ledger.codes import RestoreCode
from storage.checkpoints import checkpoint_store
from storage.checkpoints.checkpoint_store import GitCheckpointStore
from tests.unit.test_checkpoint_verify import loose_path_of, object_id_of, swap_blob

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
WS = "workspace:v1:9c9c9c9c-1111-2222-3333-444455556666"
DAMAGED_DIR = "maka-damaged"  # where a private repository keeps what was moved aside
PLANTED = b"planted by someone else, longer than the real content\n"


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("the real content\n")
    (folder / "sub" / "b.txt").write_text("b\n")
    return folder


class _Swapped(NamedTuple):
    folder: Path
    store: GitCheckpointStore
    git_dir: Path
    tree: str  # the first snapshot's tree
    blob: str  # a.txt's blob in it, swapped in the store for PLANTED


def _swapped(tmp_path: Path) -> _Swapped:
    """A folder captured once, then a.txt's blob swapped in the private store."""
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    git_dir = store.git_dir(WS)
    tree = store.capture(folder, WS, "refs/maka/s/r/1", "m").tree_id
    blob = object_id_of(git_dir, f"{tree}:a.txt")
    swap_blob(git_dir, blob, PLANTED)
    return _Swapped(folder, store, git_dir, tree, blob)


@pytest.fixture(params=["in-process", "git"])
def writer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a capture stages and writes its tree: in this process (a small index) and
    through Git's ``update-index`` / ``write-tree``."""
    if request.param == "git":
        monkeypatch.setattr(checkpoint_store, "index_here", lambda *_: False)
    return str(request.param)


def test_a_check_moves_a_swapped_blob_aside_and_the_next_capture_writes_it_again(
    tmp_path: Path, writer: str
) -> None:
    folder, store, git_dir, first, blob = _swapped(tmp_path)

    # A capture after the damage (another file changed, a.txt not): it names the damaged
    # blob again, from the index.
    (folder / "sub" / "b.txt").write_text("b, edited\n")
    second = store.capture(folder, WS, "refs/maka/s/r/2", "m").tree_id
    assert second != first
    assert object_id_of(git_dir, f"{second}:a.txt") == blob

    found = store.verify_snapshots(WS, [first, second])
    for tree in (first, second):
        [damaged] = found[tree]
        assert (damaged.object_id, damaged.path, damaged.missing) == (blob, "a.txt", False)

    (folder / "sub" / "b.txt").write_text("b, edited again\n")
    third = store.capture(folder, WS, "refs/maka/s/r/3", "m").tree_id
    assert object_id_of(git_dir, f"{third}:a.txt") == blob
    # The capture after the check wrote the blob again from the folder: the new snapshot and
    # both older ones are what they recorded.
    assert store.verify_snapshots(WS, [first, second, third]) == {
        first: [],
        second: [],
        third: [],
    }
    # The damaged bytes were moved aside, kept, and each object told where they went.
    aside = git_dir / DAMAGED_DIR / blob
    assert zlib.decompress(aside.read_bytes()).endswith(PLANTED)
    assert {d.moved_to for tree in (first, second) for d in found[tree]} == {str(aside)}
    # The old snapshot restores, with the right bytes.
    copy = tmp_path / "copy"
    store.materialize(WS, first, copy, "s")
    assert (copy / "a.txt").read_text() == "the real content\n"
    assert (copy / "sub" / "b.txt").read_text() == "b\n"
    assert aside.exists()  # kept, never deleted


def test_a_refused_restore_sets_the_damage_aside_too(tmp_path: Path) -> None:
    folder, store, git_dir, tree, _ = _swapped(tmp_path)
    # Unchanged folder: the capture takes the same tree, damaged blob and all.
    assert store.capture(folder, WS, "refs/maka/s/r/2", "m").tree_id == tree

    copy = tmp_path / "copy"
    with pytest.raises(CheckpointError) as refused:
        store.materialize(WS, tree, copy, "s")
    assert refused.value.code is RestoreCode.WORKSPACE_RESTORE_SNAPSHOT_DAMAGED
    assert f"moved aside to {git_dir / DAMAGED_DIR}" in refused.value.message
    assert "the next capture of the folder writes them again" in refused.value.message
    assert not copy.exists()

    # Still refused before a capture: what is moved aside is gone from the store.
    with pytest.raises(CheckpointError):
        store.materialize(WS, tree, copy, "s")
    assert store.damaged_aside(WS, [tree])[tree][0].path == "a.txt"

    assert store.capture(folder, WS, "refs/maka/s/r/3", "m").tree_id == tree
    assert store.verify_snapshots(WS, [tree]) == {tree: []}
    assert store.damaged_aside(WS, [tree]) == {tree: []}
    store.materialize(WS, tree, copy, "s")
    assert (copy / "a.txt").read_text() == "the real content\n"


def test_a_damaged_folder_tree_is_set_aside_and_written_again(tmp_path: Path, writer: str) -> None:
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    git_dir = store.git_dir(WS)
    tree = store.capture(folder, WS, "refs/maka/s/r/1", "m").tree_id
    sub = object_id_of(git_dir, f"{tree}:sub")
    path = loose_path_of(git_dir, sub)
    path.chmod(0o600)
    path.write_bytes(zlib.compress(zlib.decompress(path.read_bytes()).replace(b"b.txt", b"c.txt")))

    [damaged] = store.verify_snapshots(WS, [tree])[tree]
    assert damaged.path == "sub" and damaged.moved_to
    # Gone now: the walk lists the folder's tree as damaged, and nothing under it.
    assert [d.path for d in store.verify_snapshots(WS, [tree])[tree]] == ["sub"]
    (folder / "a.txt").write_text("changed\n")
    newer = store.capture(folder, WS, "refs/maka/s/r/2", "m").tree_id
    assert store.verify_snapshots(WS, [tree, newer]) == {tree: [], newer: []}


def test_a_damaged_object_the_store_borrows_is_left_where_it_is(tmp_path: Path) -> None:
    """Only the private repository's own loose objects are ever moved: one read through
    ``objects/info/alternates`` (the user's store, say) is told as packed and left."""
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    git_dir = store.git_dir(WS)
    tree = store.capture(folder, WS, "refs/maka/s/r/1", "m").tree_id
    blob = object_id_of(git_dir, f"{tree}:a.txt")
    other = tmp_path / "users.git"
    borrowed = loose_path_of(other, blob)
    borrowed.parent.mkdir(parents=True)
    os.rename(loose_path_of(git_dir, blob), borrowed)
    (git_dir / "objects" / "info" / "alternates").write_text(f"{other / 'objects'}\n")
    swap_blob(other, blob, PLANTED)
    before = borrowed.read_bytes()

    [damaged] = store.verify_snapshots(WS, [tree])[tree]
    assert damaged.packed and not damaged.moved_to and not damaged.missing
    assert borrowed.read_bytes() == before
    assert not (git_dir / DAMAGED_DIR).exists()
    with pytest.raises(CheckpointError) as refused:
        store.materialize(WS, tree, tmp_path / "copy", "s")
    assert "cannot be moved aside: the snapshot stays damaged" in refused.value.message


def test_a_loose_object_that_no_longer_inflates_is_set_aside(tmp_path: Path) -> None:
    """Git reads a loose object cut short as missing; its file is still moved aside (kept),
    and the next capture writes the object again."""
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    git_dir = store.git_dir(WS)
    tree = store.capture(folder, WS, "refs/maka/s/r/1", "m").tree_id
    blob = object_id_of(git_dir, f"{tree}:a.txt")
    path = loose_path_of(git_dir, blob)
    path.chmod(0o600)
    path.write_bytes(path.read_bytes()[:6])

    [damaged] = store.verify_snapshots(WS, [tree])[tree]
    assert damaged.path == "a.txt" and damaged.moved_to == str(git_dir / DAMAGED_DIR / blob)
    assert store.capture(folder, WS, "refs/maka/s/r/2", "m").tree_id == tree
    assert store.verify_snapshots(WS, [tree]) == {tree: []}


def test_the_in_process_writer_sets_a_swapped_blob_aside_when_it_stages_that_content(
    tmp_path: Path,
) -> None:
    """A file changed back to content the store holds loose: the writer reads the first bytes
    of that object before freshening it, finds another header (another size), moves it aside
    and writes the right bytes, without any check run."""
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    git_dir = store.git_dir(WS)
    first = store.capture(folder, WS, "refs/maka/s/r/1", "m").tree_id
    blob = object_id_of(git_dir, f"{first}:a.txt")
    (folder / "a.txt").write_text("for a while\n")
    store.capture(folder, WS, "refs/maka/s/r/2", "m")
    swap_blob(git_dir, blob, PLANTED)

    (folder / "a.txt").write_text("the real content\n")
    assert store.capture(folder, WS, "refs/maka/s/r/3", "m").tree_id == first
    assert (git_dir / DAMAGED_DIR / blob).exists()
    assert zlib.decompress(loose_path_of(git_dir, blob).read_bytes()).endswith(
        b"the real content\n"
    )
    assert store.verify_snapshots(WS, [first]) == {first: []}


def test_setting_aside_waits_for_a_capture_in_progress(tmp_path: Path) -> None:
    """The move and the index's removal happen under the workspace lock every capture holds
    from its first listing to its ref (here held by a second store of the same data folder,
    as another process would): never between a capture's staging and its tree."""
    folder, capturing, git_dir, tree, blob = _swapped(tmp_path)
    checking = GitCheckpointStore(tmp_path / "data")
    found: list[object] = []
    with capturing.locked(WS):
        thread = threading.Thread(
            target=lambda: found.append(checking.verify_snapshots(WS, [tree]))
        )
        thread.start()
        time.sleep(1.5)  # the re-hash is done by now; the move waits for the lock
        assert thread.is_alive()
        assert loose_path_of(git_dir, blob).exists() and capturing.index_path(WS).exists()
    thread.join(30)
    assert found and not loose_path_of(git_dir, blob).exists()
    assert not capturing.index_path(WS).exists()
    assert capturing.capture(folder, WS, "refs/maka/s/r/2", "m").tree_id == tree
    assert checking.verify_snapshots(WS, [tree]) == {tree: []}
