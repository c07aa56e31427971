"""Materializing a snapshot into a restored copy (docs/design/workspace.md section 4) with the real
``git``: the copy holds the snapshot byte for byte, links as links, a marker of its own; the user's
folder and the workspace's persistent index are untouched; a folder in use is refused."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from runtime.continuation.workspace_transition import default_restore_path
from runtime.ledger.checkpoint_ports import CheckpointError
from runtime.ledger.codes import RestoreCode
from storage.checkpoints.checkpoint_store import GitCheckpointStore
from storage.sessions.workspace_identity import read_workspace_identity, resolve_workspace_identity
from tests.unit.test_checkpoint_store import _tree_state

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def test_a_restored_copy_is_the_snapshot_and_the_folder_is_untouched(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "a.txt").write_bytes(b"alpha\r\n")
    (work / "sub" / "tool.sh").write_bytes(b"#!/bin/sh\necho hi\n")
    (work / "sub" / "tool.sh").chmod(0o755)
    os.symlink("a.txt", work / "link")
    identity = resolve_workspace_identity(work).identity
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(work, identity, "refs/maka/s/r/1", "m")
    (work / "a.txt").write_bytes(b"changed after the stop\n")
    (work / "new.txt").write_text("new\n")
    before = _tree_state(work)
    index = store.index_path(identity).read_bytes()

    copy = tmp_path / "copy"
    new_identity = store.materialize(identity, snapshot.tree_id, copy, "s")

    assert _tree_state(work) == before
    assert store.index_path(identity).read_bytes() == index
    assert (copy / "a.txt").read_bytes() == b"alpha\r\n"
    assert os.readlink(copy / "link") == "a.txt"
    assert (copy / "sub" / "tool.sh").stat().st_mode & 0o777 == 0o755
    assert not (copy / "new.txt").exists()
    marker = read_workspace_identity(copy)
    assert marker is not None and marker.identity == new_identity != identity
    assert store.restore_attempts("s") == [str(copy)]
    assert store.restore_attempts("other") == []

    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep").write_text("mine")
    with pytest.raises(CheckpointError) as refused:
        store.materialize(identity, snapshot.tree_id, busy, "s")
    assert refused.value.code is RestoreCode.WORKSPACE_RESTORE_TARGET_NOT_EMPTY
    assert sorted(p.name for p in busy.iterdir()) == ["keep"]
    # What is in the way is named as it is: a file, or a link that leads nowhere (a loop).
    (tmp_path / "a-file").write_text("mine")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for name, what in (("a-file", "is a file, not a folder"), ("loop", "is a link that leads")):
        with pytest.raises(CheckpointError) as refused:
            store.materialize(identity, snapshot.tree_id, tmp_path / name, "s")
        assert refused.value.code is RestoreCode.WORKSPACE_RESTORE_TARGET_NOT_EMPTY
        assert f"{tmp_path / name} {what}" in refused.value.message
    assert (tmp_path / "a-file").read_text() == "mine"
    empty = tmp_path / "empty"
    empty.mkdir()
    store.materialize(identity, snapshot.tree_id, empty, "s")
    assert (empty / "a.txt").read_bytes() == b"alpha\r\n"


def test_the_default_copy_name_skips_every_folder_that_exists(tmp_path: Path) -> None:
    folder = tmp_path / "proj"
    assert default_restore_path(str(folder)) == tmp_path / "proj-restored-1"
    (tmp_path / "proj-restored-1").mkdir()
    (tmp_path / "proj-restored-2").write_text("a file, not a folder")
    assert default_restore_path(str(folder) + "/") == tmp_path / "proj-restored-3"


def test_missing_folders_above_the_copy_are_made_and_a_file_in_the_way_is_said(
    tmp_path: Path,
) -> None:
    """``--to ~/branches/x`` with no ``~/branches`` yet: made, as ``git clone`` makes it
    (the copy's failure said only "No such file or directory"). A file where a folder above
    it should be is refused, nothing written."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    identity = resolve_workspace_identity(work).identity
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(work, identity, "refs/maka/s/r/1", "m")
    copy = tmp_path / "branches" / "deeper" / "copy"
    store.materialize(identity, snapshot.tree_id, copy, "s")
    assert (copy / "a.txt").read_text() == "a\n"
    (tmp_path / "plain").write_text("mine")
    with pytest.raises(CheckpointError) as refused:
        store.materialize(identity, snapshot.tree_id, tmp_path / "plain" / "x" / "copy", "s")
    assert refused.value.code is RestoreCode.WORKSPACE_RESTORE_FAILED
    assert f"{tmp_path / 'plain'} is a file, not a folder" in str(refused.value)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere" / "deeper")
    with pytest.raises(CheckpointError) as dangling:
        store.materialize(identity, snapshot.tree_id, tmp_path / "dangling" / "copy", "s")
    assert f"{tmp_path / 'dangling'} is a link that leads to no folder" in str(dangling.value)
    assert (tmp_path / "plain").read_text() == "mine"


def test_a_link_to_an_empty_folder_takes_the_copy_in_that_folder(tmp_path: Path) -> None:
    """``--to`` a link to an empty folder (a linked projects folder): the copy goes into the
    folder it leads to, with the source folder's bits (they were left at the 0700 of the
    copy's making, the link's own bits being looked at, so a branch there failed its check
    with ``branch_copy_mismatch`` after writing the files)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    work.chmod(0o750)
    identity = resolve_workspace_identity(work).identity
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(work, identity, "refs/maka/s/r/1", "m")
    empty = tmp_path / "empty"
    empty.mkdir()
    empty.chmod(0o755)
    link = tmp_path / "link"
    link.symlink_to(empty)
    new_identity = store.materialize(identity, snapshot.tree_id, link, "s")
    assert link.is_symlink() and os.readlink(link) == str(empty)
    assert (empty / "a.txt").read_text() == "a\n"
    assert empty.stat().st_mode & 0o777 == 0o750
    marker = read_workspace_identity(empty)
    assert marker is not None and marker.identity == new_identity
    assert store.restore_attempts("s") == [str(empty)]
    observed = store.observe(empty, new_identity)
    assert observed.tree_id == snapshot.tree_id
