"""The upgrade to schema 4 leaves a compact file: a real schema-3 database holding a few MB of
real ledgers, upgraded by opening it, ends at about its old size with no free page, every row and
rowid kept; when SQLite's temporary directory is on a full disk the upgrade still succeeds,
uncompacted, and says so (``storage/ledger/upgrade_compaction.py``)."""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.ledger import upgrade_compaction
from storage.ledger.ledger_schema import SCHEMA_VERSION, migrate
from storage.ledger.ledger_store import open_store
from storage.ledger.sqlite_connection import DATABASE_NAME, connect_writer
from storage.ledger.upgrade_compaction import Compaction
from tests.helpers.schema_v3 import current_store_with_history, table_rows, write_schema_3

_RUNS = 120  # about 3 MB at schema 3: more than SQLite's 2 MiB page cache


def _pragmas(database: Path) -> dict[str, object]:
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        return {
            name: conn.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("user_version", "page_count", "freelist_count", "page_size", "quick_check")
        }
    finally:
        conn.close()


def _on_disk(database: Path) -> int:
    wal = database.with_name(database.name + "-wal")
    return database.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


@pytest.fixture(scope="module")
def schema_3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("schema3")
    return write_schema_3(current_store_with_history(base / "current", _RUNS), base / "old")


def _copy(old: Path, target_dir: Path) -> Path:
    target_dir.mkdir()
    shutil.copy(old, target_dir / DATABASE_NAME)
    return target_dir / DATABASE_NAME


def test_the_upgrade_leaves_a_compact_file_with_every_row(schema_3: Path, tmp_path: Path) -> None:
    old = _copy(schema_3, tmp_path / "data")
    rows = table_rows(old)
    size_3 = old.stat().st_size
    pages_3 = _pragmas(old)

    # What the upgrade alone leaves (the migration, no compaction), for comparison.
    bare = _copy(schema_3, tmp_path / "bare")
    conn = connect_writer(bare)
    try:
        assert migrate(conn) == 3
    finally:
        conn.close()  # the last connection checkpoints the WAL into the file
    uncompacted = _pragmas(bare)
    assert uncompacted["quick_check"] == "ok"
    assert int(str(uncompacted["freelist_count"])) * 3 > int(str(uncompacted["page_count"]))

    with open_store(old.parent) as store:
        assert store.schema_version() == SCHEMA_VERSION
        assert store.diagnose().ok
        assert _on_disk(old) == old.stat().st_size, "the WAL was truncated"
    after = _pragmas(old)
    size_4 = old.stat().st_size
    print(
        f"schema 3: {size_3} bytes, {pages_3['page_count']} pages; upgrade alone: "
        f"{bare.stat().st_size} bytes, {uncompacted['page_count']} pages, "
        f"{uncompacted['freelist_count']} free; compacted: {size_4} bytes, "
        f"{after['page_count']} pages, {after['freelist_count']} free"
    )
    assert after["quick_check"] == "ok"
    assert after["user_version"] == SCHEMA_VERSION
    assert after["freelist_count"] == 0
    assert size_4 == int(str(after["page_count"])) * int(str(after["page_size"]))
    assert size_4 < bare.stat().st_size * 0.6
    assert size_4 < size_3 * 1.15  # schema 4's indexes cost a little more than schema 3's
    assert table_rows(old) == rows


def test_a_current_database_is_not_compacted_on_open(tmp_path: Path) -> None:
    data = tmp_path / "data"
    open_store(data).close()
    database = data / DATABASE_NAME
    conn = sqlite3.connect(database)
    try:  # free pages in a current database: opening it leaves them to later writes
        conn.execute("CREATE TABLE filler (x BLOB)")
        conn.execute("INSERT INTO filler VALUES (zeroblob(200000))")
        conn.commit()
        conn.execute("DROP TABLE filler")
        conn.commit()
    finally:
        conn.close()
    free = _pragmas(database)["freelist_count"]
    assert int(str(free)) > 40
    open_store(data).close()
    assert _pragmas(database)["freelist_count"] == free


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A real, tiny ``tmpfs`` filled to the last byte (needs ``mount``: root)."""
    mount_point = tmp_path / "full"
    mount_point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        fd = os.open(mount_point / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass
        finally:
            os.close(fd)
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_no_room_for_the_compaction_still_upgrades(
    schema_3: Path,
    tmp_path: Path,
    full_disk: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    old = _copy(schema_3, tmp_path / "data")
    rows = table_rows(old)
    real_compaction = upgrade_compaction.compact_after_upgrade
    outcomes: list[upgrade_compaction.Compaction] = []

    def with_full_temporary_disk(conn: sqlite3.Connection, path: Path) -> Compaction:
        # The upgrade has committed (it needs temporary space too); from here on SQLite's
        # temporary directory, where VACUUM builds its copy, is the full disk.
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        conn.execute(f"PRAGMA temp_store_directory = '{full_disk}'")
        try:
            outcome = real_compaction(conn, path)
        finally:
            conn.execute("PRAGMA temp_store_directory = ''")
        outcomes.append(outcome)
        return outcome

    monkeypatch.setattr(upgrade_compaction, "compact_after_upgrade", with_full_temporary_disk)
    with caplog.at_level(logging.WARNING, logger="maka.storage.ledger.upgrade_compaction"):
        store = open_store(old.parent)
    try:
        assert store.schema_version() == SCHEMA_VERSION
        assert store.diagnose().ok
    finally:
        store.close()
    [outcome] = outcomes
    assert "full" in outcome.skipped, outcome
    assert "was not compacted" in caplog.text and "full" in caplog.text, caplog.text
    after = _pragmas(old)
    assert after["quick_check"] == "ok"
    assert after["user_version"] == SCHEMA_VERSION
    assert int(str(after["freelist_count"])) * 3 > int(str(after["page_count"])), "still free"
    assert table_rows(old) == rows
