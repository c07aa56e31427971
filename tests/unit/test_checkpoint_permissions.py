"""Every entry's permission bits in workspace checkpoints (docs/design/workspace.md section 1), with
the real ``git``: a restored copy gets them back (private files, private and read-only folders, the
folder itself), and a permission change is drift."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.ledger.checkpoint_ports import PathChange, TreeChange
from storage.checkpoints.checkpoint_permissions import decode_record, encode_record
from storage.checkpoints.checkpoint_store import GitCheckpointStore

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or os.name != "posix", reason="needs git and POSIX modes"
)
WS = "workspace:v1:5b5b5b5b-1111-2222-3333-444455556666"


def _bits(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    (folder / "keys").mkdir(parents=True)
    (folder / "keys" / "private.env").write_text("TOKEN=1\n")
    (folder / "keys" / "private.env").chmod(0o600)
    (folder / "keys").chmod(0o700)
    (folder / "frozen.txt").write_text("do not edit\n")
    (folder / "frozen.txt").chmod(0o444)
    (folder / "run.sh").write_text("#!/bin/sh\n")
    (folder / "run.sh").chmod(0o750)
    (folder / "empty").mkdir()
    (folder / "empty").chmod(0o711)
    (folder / "readonly").mkdir()
    (folder / "readonly" / "r.txt").write_text("r\n")
    (folder / "readonly").chmod(0o555)
    folder.chmod(0o700)
    return folder


def test_a_restored_copy_gets_every_entrys_permission_bits_back(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    copy = tmp_path / "copy"
    try:
        store.materialize(WS, snapshot.tree_id, copy, "s")
        assert _bits(copy / "keys" / "private.env") == 0o600
        assert _bits(copy / "keys") == 0o700
        assert _bits(copy / "frozen.txt") == 0o444
        assert _bits(copy / "run.sh") == 0o750
        assert _bits(copy / "empty") == 0o711
        assert _bits(copy / "readonly") == 0o555
        assert _bits(copy / "readonly" / "r.txt") == 0o644
        assert _bits(copy) == 0o700  # as private as the folder it copies
        # The record is the store's own: the copy holds the user's files and its marker only.
        assert sorted(os.listdir(copy / ".maka")) == [".gitignore", "workspace.json"]
        assert (copy / "keys" / "private.env").read_text() == "TOKEN=1\n"
    finally:
        for path in (copy / "readonly", folder / "readonly"):
            if path.exists():
                path.chmod(0o755)


def test_a_permission_change_is_drift_and_a_chmod_back_is_not(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    first = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    (folder / "keys" / "private.env").chmod(0o644)
    (folder / "keys").chmod(0o755)
    (folder / "empty").chmod(0o755)
    changed = store.observe(folder, WS)
    assert store.changes(WS, first.tree_id, changed.tree_id) == [
        TreeChange("empty/", PathChange.MODIFIED),
        TreeChange("keys/", PathChange.MODIFIED),
        TreeChange("keys/private.env", PathChange.MODIFIED),
    ]
    second = store.capture(folder, WS, "refs/maka/s/r/2", "m")
    assert second.tree_id == changed.tree_id
    (folder / "keys" / "private.env").chmod(0o600)
    (folder / "keys").chmod(0o700)
    (folder / "empty").chmod(0o711)
    assert store.observe(folder, WS).tree_id == first.tree_id
    (folder / "readonly").chmod(0o755)


def test_a_content_change_is_not_also_counted_as_a_permission_change(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "a.txt").write_text("a\n")
    store = GitCheckpointStore(tmp_path / "data")
    first = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    (folder / "a.txt").write_text("b\n")
    (folder / "a.txt").chmod(0o600)
    (folder / "new").mkdir()
    (folder / "new" / "n.txt").write_text("n\n")
    after = store.observe(folder, WS)
    assert store.changes(WS, first.tree_id, after.tree_id) == [
        TreeChange("a.txt", PathChange.MODIFIED),
        TreeChange("new/n.txt", PathChange.ADDED),
    ]


names = st.text(st.characters(blacklist_characters="\0", blacklist_categories=["Cs"]), min_size=1)


@given(st.dictionaries(names, st.integers(0, 0o7777)))
def test_the_record_reads_back_whatever_the_names(bits: dict[str, int]) -> None:
    assert decode_record(encode_record(bits)) == bits
