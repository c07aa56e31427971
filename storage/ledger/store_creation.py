"""Create ``runtime.sqlite`` complete or not at all, and name why a data folder cannot be written.

A new database is built under a temporary name in the data directory
(``runtime.sqlite.new-<pid>-<random>``): created, migrated to the current schema in one
transaction, checkpointed, synced, closed; only then published under its real name in one atomic
step (``os.link``, which fails if someone else published first; the loser discards its copy).
A process killed at any point before that leaves only its temporary file, which a later writer
removes once that process is gone; readers never see a database at schema 0 or a rollback journal
beside ``runtime.sqlite``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import sys
from pathlib import Path

from runtime.ledger.codes import StoreCode
from runtime.ledger.crash_points import CrashPoint, failpoint
from runtime.ledger.store_ports import StoreRefusal
from storage.ledger.ledger_schema import migrate
from storage.ledger.sqlite_connection import connect_writer, sqlite_errors

_NEW_INFIX = ".new-"
DISK_FULL_ADVICE = "Free some space, then start Maka again; everything saved before is kept."
READ_ONLY_ADVICE = (
    "Give your user read and write access to it (or to the file), or copy the data folder "
    "somewhere writable and give the copy as --data-dir."
)
READ_ONLY_FS_ADVICE = (
    "Copy the data folder somewhere writable and give the copy as --data-dir (or, to start "
    "afresh, choose another --data-dir on a disk Maka may write to)."
)
_SQLITE_SIDE_FILES = ("", "-wal", "-shm", "-journal")


def os_refusal(error: OSError, what: str) -> StoreRefusal:
    """A coded refusal for an operating-system error on the data folder: ``disk_full``,
    ``data_dir_read_only``, else ``store_io_failed``."""
    if error.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return StoreRefusal(
            StoreCode.DISK_FULL,
            f"the disk is full: {what} failed. {DISK_FULL_ADVICE}",
        )
    if error.errno == errno.EROFS:  # no access right helps: the whole disk is read-only
        return StoreRefusal(
            StoreCode.DATA_DIR_READ_ONLY,
            f"the data folder is on a read-only file system: {what} failed. {READ_ONLY_FS_ADVICE}",
        )
    if error.errno in (errno.EACCES, errno.EPERM):
        return StoreRefusal(
            StoreCode.DATA_DIR_READ_ONLY,
            f"the data folder cannot be written: {what} failed ({error.strerror}). "
            f"{READ_ONLY_ADVICE}",
        )
    return StoreRefusal(StoreCode.STORE_IO_FAILED, f"{what} failed: {error}")


_PROBE_BYTES = 64 * 1024


def probe_io_failure(data_dir: Path) -> StoreRefusal | None:
    """After SQLite reported a bare I/O error (it does not say which): write and sync a small
    probe file in the data folder to learn whether the disk is full or the folder read-only.
    None when the probe succeeds (the failure was something else)."""
    probe = data_dir / f".maka-write-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"\0" * _PROBE_BYTES)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as error:
        refusal = os_refusal(error, f"writing in {data_dir}")
        return None if refusal.code is StoreCode.STORE_IO_FAILED else refusal
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()
    return None


def _pid_alive(pid: int) -> bool:
    if sys.platform == "win32":
        return True  # no cheap probe: leave the file (it is harmless) rather than guess
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_abandoned(data_dir: Path, name: str) -> None:
    """Remove temporary databases left by processes that are gone."""
    with contextlib.suppress(OSError):
        for entry in data_dir.iterdir():
            if not entry.name.startswith(name + _NEW_INFIX):
                continue
            try:
                pid = int(entry.name[len(name + _NEW_INFIX) :].split("-", 1)[0])
            except ValueError:
                continue
            if pid != os.getpid() and not _pid_alive(pid):
                with contextlib.suppress(OSError):
                    entry.unlink()


def _unlink_all(temp: Path) -> None:
    for suffix in _SQLITE_SIDE_FILES:
        with contextlib.suppress(OSError):
            temp.with_name(temp.name + suffix).unlink()


def _fsync(path: Path, *, directory: bool = False) -> None:
    if directory and os.name == "nt":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def create_database(path: Path) -> None:
    """Publish a fully migrated database at ``path`` unless one appears there first."""
    data_dir = path.parent
    remove_abandoned(data_dir, path.name)
    temp = data_dir / f"{path.name}{_NEW_INFIX}{os.getpid()}-{secrets.token_hex(4)}"
    try:
        conn = connect_writer(temp)
        try:
            failpoint(CrashPoint.FIRST_OPEN_BEFORE_MIGRATE)
            with sqlite_errors():
                migrate(conn)
                # Everything into the main file, so the file alone is the whole database.
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        for suffix in ("-wal", "-journal"):
            side = temp.with_name(temp.name + suffix)
            if side.exists() and side.stat().st_size:
                raise StoreRefusal(
                    StoreCode.STORE_IO_FAILED, f"the new database left a non-empty {side.name}"
                )
        _fsync(temp)
        failpoint(CrashPoint.FIRST_OPEN_BEFORE_PUBLISH)
        _publish(temp, path)
        failpoint(CrashPoint.FIRST_OPEN_AFTER_PUBLISH)
        _fsync(data_dir, directory=True)
    except OSError as error:
        raise os_refusal(error, f"creating the database in {data_dir}") from None
    finally:
        _unlink_all(temp)


def _publish(temp: Path, path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if path.stat().st_size == 0:
            # An empty file is what SQLite (or an older Maka) leaves when killed before its
            # first write: nothing to keep, so the complete database replaces it.
            os.replace(temp, path)
            return
    try:
        if hasattr(os, "link") and os.name != "nt":
            os.link(temp, path)  # atomic, and never replaces a database published meanwhile
        else:
            os.rename(temp, path)  # Windows: fails if the target exists, like link
    except FileExistsError:
        pass  # another process published first; its database is as complete as ours
