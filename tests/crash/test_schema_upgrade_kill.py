"""SIGKILL during the upgrade of a schema-3 database holding real ledgers: after every step of
the migration ran (tables rebuilt, version set) but before its commit, the database is still
the old one, byte for byte in every row, and the next open upgrades it completely."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from storage.ledger.ledger_schema import SCHEMA_VERSION
from storage.ledger.ledger_store import open_store
from tests.helpers.schema_v3 import (
    current_store_with_history,
    current_store_with_ledgers,
    table_rows,
    write_schema_3,
)

pytestmark = pytest.mark.crash

REPO = Path(__file__).resolve().parents[2]
_OPEN = (
    "import sys; from pathlib import Path; from storage.ledger.ledger_store import open_store; "
    "open_store(Path(sys.argv[1])).close(); print('OPENED')"
)


def _version(database: Path) -> int:
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def test_a_kill_before_the_upgrade_commits_leaves_the_old_database(tmp_path: Path) -> None:
    old = write_schema_3(current_store_with_ledgers(tmp_path / "current"), tmp_path / "old")
    before = table_rows(old)
    killed = subprocess.run(
        [sys.executable, "-c", _OPEN, str(old.parent)],
        cwd=REPO,
        env={**os.environ, "MAKA_FAILPOINT": "migration_before_commit"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    assert "OPENED" not in killed.stdout
    assert _version(old) == 3
    assert table_rows(old) == before
    conn = sqlite3.connect(f"file:{old}?mode=ro", uri=True)
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()
    assert "chosen_tool_event_ids" not in tables
    assert not any(name.endswith("_v4") for name in tables)

    with open_store(old.parent) as store:
        assert store.schema_version() == SCHEMA_VERSION
        report = store.diagnose()
        assert report.ok, report.to_json()
    assert table_rows(old) == before


def _pragma(database: Path, name: str) -> int:
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        value = conn.execute(f"PRAGMA {name}").fetchone()[0]
    finally:
        conn.close()
    return int(value) if name != "quick_check" else int(value == "ok")


def _killed_at(point: str, data_dir: Path) -> None:
    killed = subprocess.run(
        [sys.executable, "-c", _OPEN, str(data_dir)],
        cwd=REPO,
        env={**os.environ, "MAKA_FAILPOINT": point},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    assert "OPENED" not in killed.stdout


# More than SQLite's page cache, so that VACUUM writes its copy into the WAL over a while.
_HISTORY_RUNS = 120


def test_a_kill_while_compacting_leaves_the_upgraded_database(tmp_path: Path) -> None:
    """Killed inside VACUUM, its copy half built: the upgrade stays committed, the database
    valid, every row kept, the free pages still there; the next open works."""
    current = current_store_with_history(tmp_path / "current", _HISTORY_RUNS)
    old = write_schema_3(current, tmp_path / "old")
    before = table_rows(old)
    _killed_at("migration_compacting", old.parent)
    assert _version(old) == SCHEMA_VERSION
    assert _pragma(old, "quick_check") == 1
    assert _pragma(old, "freelist_count") * 3 > _pragma(old, "page_count"), "not compacted"
    assert table_rows(old) == before

    with open_store(old.parent) as store:
        assert store.schema_version() == SCHEMA_VERSION
        report = store.diagnose()
        assert report.ok, report.to_json()
    assert _pragma(old, "quick_check") == 1
    assert table_rows(old) == before


def test_a_kill_after_compacting_leaves_the_compacted_database(tmp_path: Path) -> None:
    """Killed after VACUUM committed into the WAL, before the file was rewritten from it: the
    next connection reads the compacted database, and the next open's checkpoint shrinks the
    file."""
    current = current_store_with_history(tmp_path / "current", _HISTORY_RUNS)
    old = write_schema_3(current, tmp_path / "old")
    before = table_rows(old)
    size_3 = old.stat().st_size
    _killed_at("migration_after_compaction", old.parent)
    assert old.stat().st_size > size_3 * 1.5, "the file itself is still the uncompacted one"
    assert _version(old) == SCHEMA_VERSION
    assert _pragma(old, "quick_check") == 1
    assert _pragma(old, "freelist_count") == 0
    assert table_rows(old) == before

    with open_store(old.parent) as store:
        report = store.diagnose()
        assert report.ok, report.to_json()
    assert old.stat().st_size < size_3 * 1.15
    assert _pragma(old, "quick_check") == 1
    assert table_rows(old) == before
