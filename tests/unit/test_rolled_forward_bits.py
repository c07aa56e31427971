"""The permission bits a proven write left (runtime/continuation/checkpoint_evidence.py
``ExpectedBits``): a file it created has 0644 less the umask, a file it found keeps the bits the
checkpoint's permission record has for it; anything else is not known and not compared. The
end-to-end drill is tests/e2e/test_rolled_forward_permissions.py."""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

import pytest

from runtime.continuation.checkpoint_evidence import (
    ExpectedBits,
    expected_bits,
    process_umask,
)
from runtime.continuation.expected_tree import ExpectedFile, expected_tree
from runtime.continuation.presence_memo import PresenceMemo
from runtime.ledger.checkpoint_ports import CheckpointCarrier, CheckpointError
from runtime.ledger.codes import CheckpointFailureCode
from tests.helpers.expected_tree_events import run_start, write_done
from tests.unit.test_workspace_facts import _fact


def test_the_writes_say_which_files_they_created() -> None:
    events = [run_start(), _fact("ck1")]
    events += write_done("w1", "new.txt", there=False)
    events += write_done("w2", "new.txt", there=True)  # written again: keeps the new file's bits
    events += write_done("w3", "old.txt", there=True)
    events += write_done("w4", "old.txt", there=True)
    tree = expected_tree(events)
    assert tree.stale_after is None
    assert {path: f.created for path, f in tree.files.items()} == {
        "new.txt": True,
        "old.txt": False,
    }


def _file(path: str, created: bool | None, *, exists: bool = True) -> ExpectedFile:
    return ExpectedFile(
        path, exists, "sha256:x" if exists else None, 1 if exists else None, created
    )


def test_the_bits_expected_of_each_file() -> None:
    bits = ExpectedBits({"old.txt": 0o600, "run.sh": 0o4755}, 0o022)
    assert bits.of(_file("new.txt", True)) == 0o644
    assert bits.of(_file("old.txt", False)) == 0o600
    assert bits.of(_file("run.sh", False)) == 0o4755  # the umask takes no special bits
    assert bits.of(_file("ignored.txt", False)) is None  # not in the record: not known
    assert bits.of(_file("odd.txt", None)) is None
    assert bits.of(_file("gone.txt", None, exists=False)) is None  # a deletion has no bits
    private = ExpectedBits(None, 0o077)
    assert private.of(_file("new.txt", True)) == 0o600
    assert private.of(_file("old.txt", False)) is None  # a snapshot without a record


class _Store:
    def __init__(self, record: dict[str, int] | None, *, fails: bool = False) -> None:
        self.record = record
        self.fails = fails
        self.reads: list[tuple[str, str]] = []

    def recorded_bits(self, workspace_identity: str, tree_id: str) -> dict[str, int] | None:
        self.reads.append((workspace_identity, tree_id))
        if self.fails:
            raise CheckpointError(CheckpointFailureCode.CHECKPOINT_GIT_FAILED, "locked")
        return self.record


@pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits")
def test_the_record_is_read_once_through_the_plans_wrapper_and_only_when_needed() -> None:
    store = _Store({"old.txt": 0o600})
    files = {"new.txt": _file("new.txt", True), "old.txt": _file("old.txt", False)}
    bits = expected_bits(PresenceMemo(cast(CheckpointCarrier, store)), "ws", "tree", files)
    assert bits is not None and bits.recorded == {"old.txt": 0o600}
    assert store.reads == [("ws", "tree")]

    only_new = expected_bits(cast(CheckpointCarrier, store), "ws", "tree", {"n": _file("n", True)})
    assert only_new is not None and only_new.recorded is None
    assert store.reads == [("ws", "tree")]  # a new file needs no record

    gone = {"g": _file("g", None, exists=False)}
    assert expected_bits(cast(CheckpointCarrier, store), "ws", "tree", gone) is None

    broken = _Store(None, fails=True)
    found = expected_bits(cast(CheckpointCarrier, broken), "ws", "tree", files)
    assert found is not None and found.recorded is None  # compared by content alone

    plain = expected_bits(cast(CheckpointCarrier, object()), "ws", "tree", files)
    assert plain is not None and plain.recorded is None  # a carrier without records


@pytest.mark.skipif(os.name == "nt", reason="POSIX umask")
def test_the_umask_is_read_without_changing_it(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        assert process_umask() == 0o027
        assert os.umask(0o027) == 0o027  # left as it was
    finally:
        os.umask(old)
