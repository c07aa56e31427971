"""The refusal screens: a store the program must not open stops ``maka`` with a clear message,
exit 1, and nothing modified (the database bytes are unchanged, the lock is released)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from storage.instance_lock import LOCK_FILE_NAME
from tests.helpers.maka_process import run_maka

pytestmark = pytest.mark.e2e


def _newer_database(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE future (x)")
    conn.execute("PRAGMA user_version = 999")
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda p: p.write_bytes(b"this is not a database at all" * 100), "store_corrupt"),
        (_newer_database, "schema_newer_than_program"),
    ],
    ids=["corrupt", "newer"],
)
def test_a_refused_store_exits_1_with_its_code_and_changes_nothing(
    data_dir: Path, make: object, code: str
) -> None:
    database = data_dir / "runtime.sqlite"
    make(database)  # type: ignore[operator]
    before = database.read_bytes()
    # With a renderer allowed but no display (offscreen), the message goes to stderr only.
    result = run_maka(data_dir, extra_env={"MAKA_NO_RENDERER": "0"})
    assert result.returncode == 1, result.stderr
    assert f"maka: error [{code}]:" in result.stderr
    assert "Traceback" not in result.stderr
    assert database.read_bytes() == before
    assert not (data_dir / "runtime.sqlite-wal").exists()
    assert not (data_dir / LOCK_FILE_NAME).exists()
