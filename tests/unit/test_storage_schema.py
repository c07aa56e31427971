"""Opening ``runtime.sqlite``: pragmas, migrations in one transaction, refusal of a newer schema
(without touching a byte) and of files that are not our database."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from runtime.ledger.codes import StoreCode
from runtime.ledger.store_ports import StoreRefusal
from storage.ledger import ledger_schema
from storage.ledger.ledger_schema import SCHEMA_VERSION
from storage.ledger.ledger_store import open_store
from storage.ledger.sqlite_connection import DATABASE_NAME, Synchronous, translate_sqlite_error


def _fingerprint(folder: Path) -> dict[str, str]:
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.iterdir())
    }


def _newer_database(folder: Path, *, wal: bool) -> None:
    conn = sqlite3.connect(folder / DATABASE_NAME)
    if wal:
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE sentinel (value TEXT)")
    conn.execute("INSERT INTO sentinel VALUES ('from the future')")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()  # the last connection checkpoints and removes -wal/-shm


@pytest.mark.parametrize("wal", [False, True])
@pytest.mark.parametrize("read_only", [False, True])
def test_a_newer_schema_is_refused_and_not_modified(
    data_dir: Path, wal: bool, read_only: bool
) -> None:
    _newer_database(data_dir, wal=wal)
    before = _fingerprint(data_dir)
    assert list(before) == [DATABASE_NAME]
    with pytest.raises(StoreRefusal) as refused:
        open_store(data_dir, read_only=read_only)
    assert refused.value.code is StoreCode.SCHEMA_NEWER_THAN_PROGRAM
    assert _fingerprint(data_dir) == before  # same bytes, and no -wal/-shm appeared


def test_a_newer_schema_behind_a_live_wal_is_refused(data_dir: Path) -> None:
    """A writer of the newer program still has the file open: the header page may be stale, so
    the version is confirmed through SQLite."""
    holder = sqlite3.connect(data_dir / DATABASE_NAME)
    holder.execute("PRAGMA journal_mode = WAL")
    holder.execute("PRAGMA wal_autocheckpoint = 0")
    holder.execute("CREATE TABLE sentinel (value TEXT)")
    holder.commit()
    holder.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    holder.commit()
    try:
        with pytest.raises(StoreRefusal) as refused:
            open_store(data_dir)
        assert refused.value.code is StoreCode.SCHEMA_NEWER_THAN_PROGRAM
        assert holder.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 5
    finally:
        holder.close()


@pytest.mark.parametrize(
    "content",
    [b"this is a text file, not a database\n" * 10, bytes(range(256)) * 8, b"SQLite format 3"],
)
def test_a_file_that_is_not_a_database_is_store_corrupt(data_dir: Path, content: bytes) -> None:
    (data_dir / DATABASE_NAME).write_bytes(content)
    for read_only in (False, True):
        with pytest.raises(StoreRefusal) as refused:
            open_store(data_dir, read_only=read_only)
        assert refused.value.code is StoreCode.STORE_CORRUPT
    assert (data_dir / DATABASE_NAME).read_bytes() == content


def test_a_damaged_database_body_is_store_corrupt(data_dir: Path) -> None:
    open_store(data_dir).close()
    path = data_dir / DATABASE_NAME
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # smash the schema page after the header
    path.write_bytes(bytes(data))
    with pytest.raises(StoreRefusal) as refused:
        open_store(data_dir)
    assert refused.value.code is StoreCode.STORE_CORRUPT


def test_a_foreign_sqlite_database_is_not_adopted(data_dir: Path) -> None:
    conn = sqlite3.connect(data_dir / DATABASE_NAME)
    conn.execute("CREATE TABLE notes (text TEXT)")
    conn.commit()
    conn.close()
    before = _fingerprint(data_dir)
    with pytest.raises(StoreRefusal) as refused:
        open_store(data_dir)
    assert refused.value.code is StoreCode.STORE_CORRUPT
    conn = sqlite3.connect(data_dir / DATABASE_NAME)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    assert [row[0] for row in conn.execute("SELECT name FROM sqlite_master")] == ["notes"]
    conn.close()
    assert set(_fingerprint(data_dir)) >= set(before)


def test_writer_pragmas(data_dir: Path) -> None:
    with open_store(data_dir) as store:
        settings = store.connection_settings()
        assert settings.journal_mode == "wal"
        assert settings.synchronous is Synchronous.FULL
        assert settings.foreign_keys
        assert settings.busy_timeout_ms == 5000
        assert settings.user_version == SCHEMA_VERSION
        assert not settings.query_only
    with open_store(data_dir, read_only=True) as reader:
        assert reader.connection_settings().query_only


def test_durability_is_traded_only_through_a_named_setting(data_dir: Path) -> None:
    """Benchmarks and row-level tests skip the fsyncs through ``set_synchronous``; nothing
    outside the store gets at its connection."""
    with open_store(data_dir) as store:
        store.set_synchronous(Synchronous.OFF)
        assert store.connection_settings().synchronous is Synchronous.OFF
        public = [getattr(store, name) for name in dir(store) if not name.startswith("_")]
        assert not [value for value in public if isinstance(value, sqlite3.Connection)]


def test_read_only_open_needs_an_existing_current_database(data_dir: Path) -> None:
    with pytest.raises(StoreRefusal) as missing:
        open_store(data_dir, read_only=True)
    assert missing.value.code is StoreCode.STORE_NOT_FOUND
    assert not (data_dir / DATABASE_NAME).exists()
    conn = sqlite3.connect(data_dir / DATABASE_NAME)
    conn.execute("CREATE TABLE x (y)")
    conn.execute("PRAGMA user_version = 0")
    conn.commit()
    conn.close()
    with pytest.raises(StoreRefusal) as old:
        open_store(data_dir, read_only=True)
    assert old.value.code is StoreCode.SCHEMA_UPGRADE_REQUIRED


def test_migrations_apply_in_one_transaction(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing step rolls every step back: no table, version still 0."""
    broken = dict(ledger_schema.MIGRATIONS)
    broken[SCHEMA_VERSION + 1] = ("CREATE TABLE fine (x)", "THIS IS NOT SQL")
    monkeypatch.setattr(ledger_schema, "MIGRATIONS", broken)
    monkeypatch.setattr(ledger_schema, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    with pytest.raises(StoreRefusal):
        open_store(data_dir)
    conn = sqlite3.connect(data_dir / DATABASE_NAME)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone() == (
        0,
    )
    conn.close()


def test_an_older_database_is_migrated_forward(data_dir: Path) -> None:
    conn = sqlite3.connect(data_dir / DATABASE_NAME, isolation_level=None)
    for statement in ledger_schema.MIGRATIONS[1]:
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO sessions VALUES ('s', '/w', 't', 1)")
    conn.close()
    with open_store(data_dir) as store:
        assert store.schema_version() == SCHEMA_VERSION
        assert [session.session_id for session in store.list_sessions()] == ["s"]


def test_a_database_missing_its_tables_is_store_corrupt(data_dir: Path) -> None:
    open_store(data_dir).close()
    conn = sqlite3.connect(data_dir / DATABASE_NAME)
    conn.execute("DROP TABLE tool_journal_events")
    conn.commit()
    conn.close()
    with pytest.raises(StoreRefusal) as refused:
        open_store(data_dir)
    assert refused.value.code is StoreCode.STORE_CORRUPT


def test_sqlite_errors_translate_to_store_codes() -> None:
    locked = sqlite3.OperationalError("database is locked")
    locked.sqlite_errorcode = 5
    assert translate_sqlite_error(locked).code is StoreCode.STORE_LOCKED
    corrupt = sqlite3.DatabaseError("file is not a database")
    corrupt.sqlite_errorcode = 26
    assert translate_sqlite_error(corrupt).code is StoreCode.STORE_CORRUPT
    readonly = sqlite3.OperationalError("attempt to write a readonly database")
    readonly.sqlite_errorcode = 8
    assert translate_sqlite_error(readonly).code is StoreCode.STORE_READ_ONLY
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = 13
    assert translate_sqlite_error(full).code is StoreCode.DISK_FULL
    constraint = sqlite3.IntegrityError("UNIQUE constraint failed")
    assert translate_sqlite_error(constraint).code is StoreCode.STORE_CORRUPT


def test_a_data_directory_that_is_a_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "not-a-dir"
    target.write_text("x")
    with pytest.raises(StoreRefusal) as refused:
        open_store(target)
    assert refused.value.code is StoreCode.STORE_IO_FAILED
