"""The verification stamp written beside the database (``runtime.sqlite.verified``) when a
writer closes: on a full disk its write fails (best effort), and it left its half-written
``runtime.sqlite.verified.tmp`` behind in the data folder."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from storage.ledger.store_verification import record_verified, stamp_path


def test_a_stamp_that_cannot_be_written_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = tmp_path / "runtime.sqlite"
    sqlite3.connect(database).close()
    database.write_bytes(b"x" * 4096)

    def full(*_: Any, **__: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("json.dump", full)
    record_verified(database)  # best effort: no error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runtime.sqlite"]
    assert not stamp_path(database).exists()
