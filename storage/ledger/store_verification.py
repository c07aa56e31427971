"""Verify ``runtime.sqlite`` before a writer's first write, and refuse a damaged one untouched.

A writer's first writes (a migration, the owner-epoch bump of startup recovery) would land on top
of whatever the file holds. On a damaged file that buries the damage and changes bytes that a
restore or a forensic copy needs, so ``open_store`` calls ``verify_before_write`` before any of
them and refuses with ``store_corrupt`` (the file stays byte-identical).

What is checked, and what it costs:

- Always (microseconds to a few milliseconds, whatever the size): the 100-byte header (magic,
  page size, the fixed payload fractions, a file length that is a whole number of pages), and
  ``PRAGMA quick_check`` of the small tables the startup writes touch (``meta``, which holds the
  owner epoch, and ``continuation_claims``), plus reading the owner epoch itself.
- The whole file with ``PRAGMA quick_check`` (every b-tree page, about 3 s per GB) whenever the
  file may have changed since Maka last had it verified: when the *verification stamp*
  (``runtime.sqlite.verified``, written by the last writer that closed the store cleanly, or by
  a full check that passed) does not match the database and WAL files' identity (device, inode,
  size, modification and change times). Any write by another program, a restored copy, a crash
  with an unfinished WAL, or an overwritten page changes at least the change time, which no
  ordinary program can set back. So the full check runs after exactly the events that can damage
  the file behind Maka's back, and a normal start pays only the cheap checks.

A restored backup or a copied data folder is such an event: its stamp cannot match (a copy has
its own inode and times), and no stamp that a changed file could not match can be checked without
reading the whole file (a sample of pages would miss a changed page elsewhere). So the whole-file
check is kept for a copy, and it does not hold the window back: the desktop opens the store on
its start-up worker while the window is already up, every request waits until the store is open,
and nothing is written before the check passes (it runs before the migration and the owner-epoch
bump). What it adds is progress: ``observing_whole_file_checks`` lets the opener hear how much of
the file the check has read (the thread's own read bytes, from ``/proc``, against the file's
size; where the system has no such count the observer hears only the start and the end), and
the window says "Checking the whole database (copied, restored or changed outside Maka): N%…".

The stamp is trust in Maka's own last clean close, not a checksum: damage the operating system
hides from every timestamp (a failing disk) is caught only by the cheap checks or when SQLite
meets it, as before (``maka doctor`` runs the full integrity check on demand).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from runtime.ledger.codes import StoreCode
from runtime.ledger.command_words import maka_command
from runtime.ledger.store_ports import StoreRefusal
from storage.ledger.sqlite_connection import sqlite_errors

STAMP_SUFFIX = ".verified"
_SMALL_TABLES = ("meta", "continuation_claims")
_STAMP_FIELDS = ("st_dev", "st_ino", "st_size", "st_mtime_ns", "st_ctime_ns")


def damaged_advice() -> str:
    """What to do about a damaged database, said after ``store_corrupt``'s detail (the command
    worded as this process suggests commands: ``maka_command``)."""
    return (
        f"Nothing was changed. Run {maka_command('doctor')} to see what is damaged, then restore "
        "the data folder from a backup, or move this database aside and bring sessions back with "
        "'maka import' from an export."
    )


def damaged(detail: str) -> StoreRefusal:
    """``store_corrupt`` with what to do about it."""
    return StoreRefusal(
        StoreCode.STORE_CORRUPT, f"the database is damaged ({detail}). {damaged_advice()}"
    )


def stamp_path(path: Path) -> Path:
    return path.with_name(path.name + STAMP_SUFFIX)


def _identity(path: Path) -> list[int] | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return [int(getattr(info, field)) for field in _STAMP_FIELDS]


def _current_stamp(path: Path) -> dict[str, Any]:
    wal = _identity(path.with_name(path.name + "-wal"))
    return {
        "database": _identity(path),
        # An empty WAL holds nothing (read-only connections leave one behind): same as none.
        "wal": wal if wal is not None and wal[2] > 0 else None,
    }


def _read_stamp(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(stamp_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def refuse_lost_database(path: Path) -> None:
    """An empty ``path`` is SQLite's first open before its first write, a new database; but
    where the stamp recorded the database holding data, the file was emptied behind Maka's back
    (a failed copy, a full disk, a truncation): a lost ledger, refused with ``store_corrupt``
    before anything would build a new database over it (the file and the stamp untouched)."""
    try:
        if os.stat(path).st_size != 0:
            return
    except OSError:
        return
    stamp = _read_stamp(path)
    recorded = stamp.get("database") if stamp is not None else None
    if not isinstance(recorded, list) or len(recorded) != len(_STAMP_FIELDS):
        return
    size = recorded[_STAMP_FIELDS.index("st_size")]
    if not isinstance(size, int) or size <= 0:
        return
    raise StoreRefusal(
        StoreCode.STORE_CORRUPT,
        f"the database {path} is empty (0 bytes), but {stamp_path(path).name} beside it "
        f"records that it held {size} bytes when Maka last closed it: its data is lost, not "
        "new. Nothing was changed. Restore the data folder from a backup; or, to start over "
        f"with a new database, move {path.name} and {stamp_path(path).name} aside and bring "
        "sessions back with 'maka import' from an export.",
    )


def record_verified(path: Path) -> None:
    """Write the stamp for the database as it is now (after a clean close, or after a full
    check passed). Best effort: without a stamp the next open simply checks everything."""
    if _identity(path) is None:
        return
    target = stamp_path(path)
    temp = target.with_name(target.name + ".tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(_current_stamp(path), handle)
        os.replace(temp, target)
    except OSError:
        # (a full disk: no half-written stamp left beside the database)
        with contextlib.suppress(OSError):
            temp.unlink()


def forget_verified(path: Path) -> None:
    """Drop the stamp (the next open checks the whole file)."""
    with contextlib.suppress(OSError):
        stamp_path(path).unlink()


def check_header(path: Path) -> None:
    """The header fields SQLite itself requires, and a length of whole pages."""
    try:
        with path.open("rb") as handle:
            header = handle.read(100)
            size = os.fstat(handle.fileno()).st_size
    except OSError as error:
        raise StoreRefusal(StoreCode.STORE_IO_FAILED, f"cannot read {path}: {error}") from None
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise damaged(f"the header names an invalid page size {page_size}")
    if header[21:24] != b"\x40\x20\x20":
        raise damaged("the header's fixed fields are wrong")
    if size % page_size:
        raise damaged(f"its length {size} is not a whole number of {page_size}-byte pages")


CheckProgress = Callable[[float], None]
"""Told the share (0.0 to 1.0) of the database file a whole-file check has read: 0.0 when it
starts, 1.0 once it passed, and in between as it reads (every ``PROGRESS_INTERVAL_S``)."""
PROGRESS_INTERVAL_S = 0.25
_observer = threading.local()


@contextlib.contextmanager
def observing_whole_file_checks(observer: CheckProgress) -> Iterator[None]:
    """Within the block, a whole-file check run on this thread (``open_store`` on a copy, a
    restored backup, a file changed behind Maka's back) reports its progress to ``observer``
    (called on another thread while the check reads)."""
    previous = getattr(_observer, "value", None)
    _observer.value = observer
    try:
        yield
    finally:
        _observer.value = previous


def _thread_read_bytes(native_id: int) -> int | None:
    """Bytes this process's thread has read (``rchar`` of ``/proc/self/task/<id>/io``; None
    where the system does not count them)."""
    try:
        with open(f"/proc/self/task/{native_id}/io", "rb") as handle:
            for line in handle:
                if line.startswith(b"rchar:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


@contextlib.contextmanager
def _reporting(path: Path) -> Iterator[None]:
    """Report the whole-file check that runs in the block to this thread's observer."""
    observer: CheckProgress | None = getattr(_observer, "value", None)
    if observer is None:
        yield
        return
    native_id = threading.get_native_id()
    start = _thread_read_bytes(native_id)
    try:
        size = max(1, os.stat(path).st_size)
    except OSError:
        size = 1
    done = threading.Event()

    def watch() -> None:
        while start is not None and not done.wait(PROGRESS_INTERVAL_S):
            read = _thread_read_bytes(native_id)
            if read is not None:
                observer(min(0.99, max(0.0, (read - start) / size)))

    observer(0.0)
    watcher = threading.Thread(target=watch, name="maka-check-progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
    observer(1.0)


def _quick_check(conn: sqlite3.Connection, table: str | None) -> None:
    pragma = f"PRAGMA quick_check({table})" if table else "PRAGMA quick_check(1)"
    rows = [str(row[0]) for row in conn.execute(pragma).fetchall()]
    if rows != ["ok"]:
        where = f"table {table}" if table else "integrity check"
        raise damaged(f"{where}: {'; '.join(rows)[:300]}")


def verify_before_write(path: Path, conn: sqlite3.Connection) -> bool:
    """Refuse a damaged database (``store_corrupt``) before anything is written to it. Returns
    whether the whole file was checked (False: the stamp vouched for it, see the module)."""
    check_header(path)
    full = _read_stamp(path) != _current_stamp(path)
    try:
        with sqlite_errors():
            tables = {
                str(row[0])
                for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            if full:
                with _reporting(path):
                    _quick_check(conn, None)
            else:
                for table in _SMALL_TABLES:
                    if table in tables:
                        _quick_check(conn, table)
            row = (
                conn.execute("SELECT value FROM meta WHERE key = 'owner_epoch'").fetchone()
                if "meta" in tables
                else (0,)  # schema 0: nothing of Maka's yet; the migration creates it
            )
    except StoreRefusal as refusal:
        if refusal.code is StoreCode.STORE_CORRUPT and damaged_advice() not in refusal.message:
            raise damaged(refusal.message) from None
        raise
    if row is None or not isinstance(row[0], int) or row[0] < 0:
        raise damaged(f"the owner epoch is {None if row is None else row[0]!r}")
    if full:
        record_verified(path)
    return full
