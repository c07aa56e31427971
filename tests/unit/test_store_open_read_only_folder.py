"""Opening ``runtime.sqlite`` read-only in a folder this user cannot write, an emptied database
the verification stamp says held data, and a session whose folder cannot take the workspace
marker.

Root ignores file modes, so the folder's being unwritable is given to the decision
(``sqlite_connection._folder_writable``); the real read-only mount is in
``tests/e2e/test_cli_read_only_and_nits.py``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from runtime.agent.session_service import SessionService
from runtime.ledger.codes import StoreCode, WorkspaceMarkerCode
from runtime.ledger.store_ports import StoreRefusal
from runtime.providers.offline_demo_provider import OfflineDemoProvider
from storage.ledger import sqlite_connection
from storage.ledger.ledger_store import open_store
from storage.ledger.sqlite_connection import DATABASE_NAME, reader_uri
from storage.ledger.store_open import open_read_connection
from storage.sessions.workspace_identity import WorkspaceMarkerError

pytestmark = pytest.mark.unit


def _database(data_dir: Path) -> Path:
    open_store(data_dir).close()  # a clean close: no -wal, no -shm, a stamp
    path = data_dir / DATABASE_NAME
    assert not path.with_name(DATABASE_NAME + "-wal").exists()
    return path


def _unwritable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_connection, "_folder_writable", lambda folder: False)


def _side(path: Path, suffix: str, size: int) -> None:
    path.with_name(path.name + suffix).write_bytes(b"\0" * size)


def test_a_writable_folder_is_read_with_mode_ro(tmp_path: Path) -> None:
    path = _database(tmp_path / "data")
    assert reader_uri(path).endswith("?mode=ro")


@pytest.mark.parametrize(
    ("wal", "shm", "mode"),
    [
        (None, False, "immutable=1"),  # no writer has it open: the file is all there is
        (None, True, "immutable=1"),  # a -shm left behind without its log
        (0, False, "immutable=1"),  # an empty log and no index: nothing outside the file
        (0, True, "mode=ro"),  # a writer may have it open: read through its index
        (4096, True, "mode=ro"),
    ],
)
def test_a_folder_that_cannot_be_written_is_read_as_its_files_allow(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    wal: int | None,
    shm: bool,
    mode: str,
) -> None:
    path = _database(tmp_path / "data")
    if wal is not None:
        _side(path, "-wal", wal)
    if shm:
        _side(path, "-shm", 32768)
    _unwritable(monkeypatch)
    assert reader_uri(path).endswith("?" + mode)


def test_a_log_with_changes_but_no_index_in_a_folder_that_cannot_be_written_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _database(tmp_path / "data")
    _side(path, "-wal", 4096)
    _unwritable(monkeypatch)
    with pytest.raises(StoreRefusal) as refused:
        open_read_connection(tmp_path / "data")
    assert refused.value.code is StoreCode.DATA_DIR_READ_ONLY
    assert "--data-dir" in refused.value.message


def test_the_immutable_reader_reads_the_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = tmp_path / "data"
    _database(data_dir)
    _unwritable(monkeypatch)
    conn, _path = open_read_connection(data_dir)
    try:
        assert conn.execute("SELECT count(*) FROM sessions").fetchone() == (0,)
        with pytest.raises(sqlite3.OperationalError):  # and never writes
            conn.execute("CREATE TABLE scratch (x)")
    finally:
        conn.close()
    assert not (data_dir / (DATABASE_NAME + "-shm")).exists()


# ---- an emptied database -------------------------------------------------------------------


def test_an_emptied_database_the_stamp_vouched_for_is_refused_by_readers_and_writers(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    path = _database(data_dir)
    stamp = path.with_name(DATABASE_NAME + ".verified")
    recorded = stamp.read_bytes()
    path.write_bytes(b"")
    for read_only in (True, False):
        with pytest.raises(StoreRefusal) as refused:
            open_store(data_dir, read_only=read_only)
        assert refused.value.code is StoreCode.STORE_CORRUPT
        assert stamp.name in refused.value.message
    assert path.stat().st_size == 0
    assert stamp.read_bytes() == recorded
    assert sorted(p.name for p in data_dir.iterdir() if p.name.startswith(DATABASE_NAME)) == [
        DATABASE_NAME,
        stamp.name,
    ]


def test_an_empty_database_without_a_stamp_is_a_new_one(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / DATABASE_NAME).write_bytes(b"")
    with pytest.raises(StoreRefusal) as refused:
        open_store(data_dir, read_only=True)
    assert refused.value.code is StoreCode.STORE_NOT_FOUND
    assert "is empty" in refused.value.message
    with open_store(data_dir) as store:
        assert list(store.list_sessions()) == []
    assert (data_dir / DATABASE_NAME).stat().st_size > 0


# ---- a session whose folder cannot take the marker -----------------------------------------


def test_a_folder_that_cannot_take_the_marker_gets_no_session(tmp_path: Path) -> None:
    store = open_store(tmp_path / "data")
    folder = tmp_path / "work"
    folder.mkdir()

    def no_marker(path: Path) -> str:
        raise WorkspaceMarkerError(
            WorkspaceMarkerCode.WORKSPACE_MARKER_WRITE_FAILED, "cannot create it", path
        )

    service = SessionService(
        store=store,
        provider_factory=OfflineDemoProvider,
        owner_epoch=1,
        workspace_identity=no_marker,
    )
    try:
        with pytest.raises(WorkspaceMarkerError):
            service.create_session(folder, title="hi")
        assert list(store.list_sessions()) == []
    finally:
        store.close()
