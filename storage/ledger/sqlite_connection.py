"""Opening ``runtime.sqlite``: pragmas, transactions, and the one place SQLite errors get codes.

Python's ``sqlite3`` runs in autocommit mode here (``isolation_level=None``) and every write is an
explicit ``BEGIN IMMEDIATE`` ... ``COMMIT``: the write lock is taken before the first read of the
transaction, so what a writer validates is exactly what it commits on top of, and two processes
never interleave a transaction (the second waits up to the busy timeout, then gets
``store_locked``).

Every ``sqlite3.Error`` that leaves the store passes through ``translate_sqlite_error`` so callers
see a ``StoreRefusal`` with a stable ``StoreCode``, never a raw driver exception.
"""

# No ``from __future__ import annotations`` here: the named tuples below must read real types
# (see ``runtime/ledger/run_records.py``; ``maka sessions`` start-up).

import os
import sqlite3
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple

from runtime.ledger.codes import StoreCode
from runtime.ledger.store_ports import StoreRefusal
from storage.private_files import tighten

DATABASE_NAME = "runtime.sqlite"
BUSY_TIMEOUT_MS = 5000
BULK_CACHE_KIB = 32 * 1024
_SQLITE_MAGIC = b"SQLite format 3\x00"
_HEADER_SIZE = 100

# Primary result codes (https://sqlite.org/rescode.html).
_BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 5, 6, 8, 10, 11, 13, 14, 26
# SQLITE_AUTH: never SQLite's own here (the store sets no authorizer); a PostgreSQL user's
# missing rights leave its adapter with it.
_AUTH = 23


def translate_sqlite_error(error: sqlite3.Error) -> StoreRefusal:
    """Map a driver error to a coded refusal (the only translation point of the store)."""
    code_number = getattr(error, "sqlite_errorcode", None)
    primary = code_number & 0xFF if isinstance(code_number, int) else None
    text = str(error)
    if primary in (_BUSY, _LOCKED) or "database is locked" in text:
        return StoreRefusal(StoreCode.STORE_LOCKED, f"another process holds the database: {text}")
    if primary in (_CORRUPT, _NOTADB) or "not a database" in text or "malformed" in text:
        return StoreRefusal(StoreCode.STORE_CORRUPT, f"the database file is damaged: {text}")
    if primary == _READONLY:
        return StoreRefusal(StoreCode.STORE_READ_ONLY, f"the database is read-only: {text}")
    if primary == _AUTH:
        return StoreRefusal(
            StoreCode.DATABASE_ACCESS_DENIED,
            f"the database refused this user access ({text}); nothing was changed. Connect as "
            "the user that created Maka's ledger, or grant this one rights on it",
        )
    if primary == _FULL:
        return StoreRefusal(
            StoreCode.DISK_FULL,
            f"the disk is full, so the database could not be written ({text}). Free some "
            "space, then try again; everything committed before is kept.",
        )
    if primary in (_IOERR, _CANTOPEN):
        return StoreRefusal(StoreCode.STORE_IO_FAILED, f"cannot read or write the database: {text}")
    if isinstance(error, sqlite3.IntegrityError):
        # Writers validate before inserting; a constraint firing means the stored rows were
        # changed behind the store's back.
        return StoreRefusal(StoreCode.STORE_CORRUPT, f"stored rows violate a constraint: {text}")
    return StoreRefusal(StoreCode.STORE_IO_FAILED, f"database error: {text}")


@contextmanager
def sqlite_errors() -> Iterator[None]:
    """Run a block with every ``sqlite3.Error`` translated into a ``StoreRefusal``."""
    try:
        yield
    except sqlite3.Error as error:
        raise translate_sqlite_error(error) from error


def read_file_user_version(path: Path) -> int | None:
    """``PRAGMA user_version`` read from the file header without opening SQLite.

    Returns ``None`` for a missing or empty file. Used before any connection exists so that a
    database newer than the program is refused without a single byte (or ``-wal``/``-shm`` file)
    being created. When a ``-wal`` file exists the header page may be stale, so the caller must
    confirm with a read-only connection.
    """
    try:
        with path.open("rb") as handle:
            header = handle.read(_HEADER_SIZE)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise StoreRefusal(StoreCode.STORE_CORRUPT, f"{path} is a directory") from None
    except OSError as error:
        raise StoreRefusal(StoreCode.STORE_IO_FAILED, f"cannot read {path}: {error}") from None
    if not header:
        return None
    if len(header) < _HEADER_SIZE or not header.startswith(_SQLITE_MAGIC):
        raise StoreRefusal(StoreCode.STORE_CORRUPT, f"{path} is not a SQLite database")
    version: int = struct.unpack(">I", header[60:64])[0]
    return version


def _configure_common(conn: sqlite3.Connection) -> None:
    # busy_timeout first: every later statement may need to wait for another process.
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")


def _ensure_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL, retrying while another process holds the lock (the mode is persistent,
    so an established database only verifies it)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
            if mode != "wal":
                mode = str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
            if mode != "wal":
                raise StoreRefusal(StoreCode.STORE_IO_FAILED, f"WAL journal mode refused: {mode}")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) and "busy" not in str(error):
                raise
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def connect_writer(path: Path) -> sqlite3.Connection:
    """A read-write connection with the store's pragmas (WAL, ``synchronous=FULL``)."""
    with sqlite_errors():
        conn = sqlite3.connect(
            str(path), isolation_level=None, check_same_thread=False, cached_statements=256
        )
        try:
            _configure_common(conn)
            # Private before the first byte of a new database is written (SQLite gives the
            # -wal and -shm it creates next the database file's mode); an older, wider file
            # is tightened too.
            tighten(path)
            _ensure_wal(conn)
            for suffix in ("-wal", "-shm"):
                tighten(path.with_name(path.name + suffix))
            conn.execute("PRAGMA synchronous = FULL")
            # The page cache stays at SQLite's default (2 MiB) for everyday writes: a T1/T2
            # touches a handful of pages, and a larger cache only hands it fresh, cold page
            # buffers (measured: T1+T2 ~10% slower in CPU with 32 MiB, no gain on a database of
            # a million events). Bulk work raises it for its duration (``bulk_cache``).
        except BaseException:
            conn.close()
            raise
    return conn


class Synchronous(StrEnum):
    """``PRAGMA synchronous`` modes (https://sqlite.org/pragma.html#pragma_synchronous)."""

    OFF = "OFF"
    NORMAL = "NORMAL"
    FULL = "FULL"
    EXTRA = "EXTRA"


_SYNCHRONOUS_BY_NUMBER = dict(enumerate(Synchronous))  # SQLite reports the mode's number


class ConnectionSettings(NamedTuple):
    """The pragmas a connection runs with (``SqliteLedgerStore.connection_settings``)."""

    journal_mode: str
    synchronous: Synchronous
    foreign_keys: bool
    busy_timeout_ms: int
    cache_size: int
    """SQLite's value: negative = KiB, positive = pages."""
    query_only: bool
    user_version: int


def read_settings(conn: sqlite3.Connection) -> ConnectionSettings:
    def pragma(name: str) -> object:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]

    return ConnectionSettings(
        journal_mode=str(pragma("journal_mode")),
        synchronous=_SYNCHRONOUS_BY_NUMBER[int(str(pragma("synchronous")))],
        foreign_keys=bool(pragma("foreign_keys")),
        busy_timeout_ms=int(str(pragma("busy_timeout"))),
        cache_size=int(str(pragma("cache_size"))),
        query_only=bool(pragma("query_only")),
        user_version=int(str(pragma("user_version"))),
    )


_READ_ONLY_COPY_ADVICE = (
    "Copy the data folder to a place your user may write (cp -a keeps it whole) and give the "
    "copy as --data-dir, or give your user write access to the folder."
)


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _folder_writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def reader_uri(path: Path) -> str:
    """The URI of a read-only connection to ``path``: ``mode=ro``, or ``immutable=1`` for a
    database in a folder this user cannot write (a backup on a read-only mount, a folder of
    another user) whose write-ahead log holds nothing.

    ``mode=ro`` needs the WAL index (``-shm``): SQLite creates it beside the database when it
    is missing, which a folder that cannot be written refuses ("unable to open database
    file"). ``immutable=1`` reads the database file alone, without locks or WAL index, so it
    is used only when nothing can be outside that file: no ``-wal`` (every WAL-mode
    connection keeps one while open, so no writer has the database open), or an empty one
    with no ``-shm`` beside it (a writer keeps both). Otherwise ``mode=ro`` reads through the
    ``-shm`` there (SQLite opens it read-only), and a ``-wal`` holding changes without a
    ``-shm`` to read it by is refused with ``data_dir_read_only``: reading the file alone
    would leave those changes out."""
    uri = path.resolve().as_uri()
    folder = path.parent
    if _folder_writable(folder):
        return uri + "?mode=ro"
    wal = _size(path.with_name(path.name + "-wal"))
    shm_present = _size(path.with_name(path.name + "-shm")) is not None
    if wal is None or (wal == 0 and not shm_present):
        return uri + "?immutable=1"
    if shm_present:
        return uri + "?mode=ro"
    raise StoreRefusal(
        StoreCode.DATA_DIR_READ_ONLY,
        f"the data folder {folder} cannot be written, and its database's write-ahead log "
        f"({path.name}-wal) holds changes that SQLite can read only with an index file "
        f"({path.name}-shm) it would have to create there. Nothing was changed. "
        f"{_READ_ONLY_COPY_ADVICE}",
    )


def connect_reader(path: Path) -> sqlite3.Connection:
    """A read-only connection (``mode=ro``, ``query_only``): works while another process owns
    the data directory and can never write, migrate or change the journal mode. In a folder
    this user cannot write it reads as ``reader_uri`` says."""
    uri = reader_uri(path)
    with sqlite_errors():
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        try:
            _configure_common(conn)
            conn.execute("PRAGMA query_only = ON")
        except BaseException:
            conn.close()
            raise
    return conn


@contextmanager
def bulk_cache(conn: sqlite3.Connection) -> Iterator[None]:
    """Raise the page cache to ``BULK_CACHE_KIB`` for a bulk operation (an import, a projection
    rebuild: the index pages of a large ledger stay in memory instead of being read again and
    again), then restore the connection's previous size."""
    with sqlite_errors():
        previous = int(conn.execute("PRAGMA cache_size").fetchone()[0])
        conn.execute(f"PRAGMA cache_size = -{BULK_CACHE_KIB}")
    try:
        yield
    finally:
        with suppress(sqlite3.Error):
            conn.execute(f"PRAGMA cache_size = {previous}")


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; any exception rolls everything back."""
    with sqlite_errors():
        conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        with suppress(sqlite3.Error):  # the original error is the one worth reporting
            conn.execute("ROLLBACK")
        raise
    with sqlite_errors():
        try:
            conn.execute("COMMIT")
        except sqlite3.Error:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise


@contextmanager
def read_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A deferred transaction: several reads see one consistent snapshot."""
    with sqlite_errors():
        conn.execute("BEGIN")
    try:
        yield conn
    finally:
        with suppress(sqlite3.Error):
            conn.execute("COMMIT")
