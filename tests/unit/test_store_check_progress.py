"""A copied or restored database is checked in full before its first write, and whoever opens it
hears how far the check is (the desktop's window shows it): from 0 when it starts, as the file
is read, to 1 once it passed. A database the last clean close vouched for is not checked in
full, and nothing is heard."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from runtime.ledger.codes import StoreCode
from runtime.ledger.store_ports import StoreRefusal
from storage.ledger import store_verification
from storage.ledger.ledger_store import open_store
from storage.ledger.store_verification import observing_whole_file_checks, stamp_path
from tests.helpers.stored_run import import_run


def _stored(data_dir: Path, events: int) -> Path:
    from bench.bench_ledger import generate

    import_run(data_dir, generate(events))
    return data_dir / "runtime.sqlite"


def _copy(source: Path, target_dir: Path) -> Path:
    """A data folder restored from a backup: the database's bytes, not its stamp's identity."""
    target_dir.mkdir()
    shutil.copyfile(source, target_dir / source.name)
    shutil.copyfile(stamp_path(source), stamp_path(target_dir / source.name))
    return target_dir / source.name


def test_a_copied_database_is_checked_in_full_with_its_progress_heard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = _stored(tmp_path / "original", 6000)
    copy = _copy(original, tmp_path / "restored")
    assert copy.read_bytes() == original.read_bytes()
    monkeypatch.setattr(store_verification, "PROGRESS_INTERVAL_S", 0.001)
    heard: list[float] = []
    check = store_verification._quick_check

    def check_then_let_it_be_heard(conn: Any, table: str | None) -> None:
        # (the check of a small file can end before the watcher's first look on a busy
        # machine: the watcher gets up to 5 s more, still inside the check, to report the
        # bytes it read; a count that never moves is still never heard)
        check(conn, table)
        deadline = time.monotonic() + 5
        while table is None and time.monotonic() < deadline:
            if any(0.0 < share < 1.0 for share in heard):
                break
            time.sleep(0.01)

    monkeypatch.setattr(store_verification, "_quick_check", check_then_let_it_be_heard)
    with observing_whole_file_checks(heard.append):
        open_store(copy.parent).close()
    assert heard[0] == 0.0 and heard[-1] == 1.0, heard
    assert heard == sorted(heard), heard  # it only moves forward
    if Path("/proc/self/task").is_dir():  # the thread's read bytes are counted: shares between
        assert any(0.0 < share < 1.0 for share in heard), heard
    # its clean close vouched for it: the next open checks the small tables only, and says nothing
    heard.clear()
    with observing_whole_file_checks(heard.append):
        open_store(copy.parent).close()
    assert heard == []


def test_a_damaged_copy_is_refused_without_saying_it_passed(tmp_path: Path) -> None:
    original = _stored(tmp_path / "original", 1500)
    copy = _copy(original, tmp_path / "restored")
    data = bytearray(copy.read_bytes())
    page = 4096
    middle = (len(data) // page // 2) * page
    data[middle + 8 : middle + 40] = b"\xff" * 32  # a b-tree page's cells overwritten
    copy.write_bytes(bytes(data))
    before = copy.read_bytes()
    heard: list[float] = []
    with observing_whole_file_checks(heard.append), pytest.raises(StoreRefusal) as refused:
        open_store(copy.parent)
    assert refused.value.code is StoreCode.STORE_CORRUPT
    assert heard and heard[0] == 0.0 and 1.0 not in heard
    assert copy.read_bytes() == before  # nothing written before the check passed
