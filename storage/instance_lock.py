"""Single-instance lock on the data directory (an OS file lock, no Qt).

Why a file lock and not the IPC socket: on Unix, ``QLocalServer.listen()`` with an access option
silently replaces even a *live* server's socket file, and on Windows two servers can share a pipe
name, so "listen failed" can never mean "another instance runs". The operating system releases a
file lock when its holder dies (SIGKILL, power loss), so a stale lock never blocks a new start,
while a live holder always wins. The file records the holder's pid and hostname for the message
a second instance prints.

Why no Qt: the CLI commands (``maka plan``, ``maka sessions``) take the same lock and must start
without loading Qt; the desktop and the CLI share this one implementation.

On Unix the lock is ``flock`` on ``maka-main.lock``; the holder unlinks the file before
unlocking, and a taker checks that the file it locked is still the one at the path (else it
retries), so two processes can never both hold a lock. On Windows it is ``msvcrt.locking`` on a
byte far past the text.

Only the lock holder may call ``QLocalServer.removeServer()`` for the data directory's socket
name: the lock is what proves a leftover socket file is stale.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple

LOCK_FILE_NAME = "maka-main.lock"

# How long acquire waits for a holder that is just releasing (a previous instance exiting).
_TRY_LOCK_MS = 200
_WINDOWS_LOCK_OFFSET = 1 << 20


class LockOutcome(StrEnum):
    ACQUIRED = "acquired"
    HELD_ELSEWHERE = "held_elsewhere"
    UNAVAILABLE = "unavailable"


class LockResult(NamedTuple):
    """``holder_pid`` / ``holder_host`` name the running instance when ``HELD_ELSEWHERE``;
    ``detail`` explains ``UNAVAILABLE`` (permission denied, unwritable directory)."""

    outcome: LockOutcome
    holder_pid: int | None = None
    holder_host: str | None = None
    detail: str = ""
    error: OSError | None = None  # why it is UNAVAILABLE (full disk, read-only file or folder)


def _host_name() -> str:
    """This machine's name, as ``socket.gethostname()`` gives it: on POSIX both are the
    ``uname`` node name, read here without importing ``socket`` (every command that takes or
    tests the lock, ``maka sessions`` included, would pay for it at start-up)."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


def _try_lock(fd: int) -> bool:
    """Take the lock on ``fd`` without waiting; False when someone else holds it."""
    if sys.platform == "win32":
        import msvcrt

        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _try_lock_shared(fd: int) -> bool:
    """A shared lock on ``fd`` (open for reading only) without waiting; False when someone
    holds the lock (on Windows, a byte lock, as ``_try_lock`` takes it)."""
    if sys.platform == "win32":
        return _try_lock(fd)
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _unlock(fd: int) -> None:
    if sys.platform == "win32":
        import msvcrt

        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        with contextlib.suppress(OSError):
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        return
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_UN)


class InstanceLock:
    """Owns ``<data_dir>/maka-main.lock`` for the life of the main process.

    ``release()`` is idempotent and is the very last step of shutdown (docs/design/desktop.md),
    after the store is closed, so a second instance can never open the store while this one
    still writes.
    """

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / LOCK_FILE_NAME
        self._fd: int | None = None

    @property
    def path(self) -> Path:
        return self._path

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> LockResult:
        if self._fd is not None:
            return LockResult(LockOutcome.ACQUIRED)
        deadline = time.monotonic() + _TRY_LOCK_MS / 1000
        while True:
            try:
                fd = os.open(
                    self._path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600
                )
            except PermissionError as error:
                return LockResult(
                    LockOutcome.UNAVAILABLE,
                    detail=f"permission denied: {self._path}",
                    error=error,
                )
            except OSError as error:
                return LockResult(
                    LockOutcome.UNAVAILABLE,
                    detail=f"the lock file could not be created: {self._path}",
                    error=error,
                )
            if _try_lock(fd):
                if self._still_at_path(fd):
                    self._fd = fd
                    self._write_holder(fd)
                    return LockResult(LockOutcome.ACQUIRED)
                _unlock(fd)  # the holder removed it while we waited: lock the new one
                os.close(fd)
                continue
            os.close(fd)
            if time.monotonic() >= deadline:
                pid, host = self._holder()
                return LockResult(LockOutcome.HELD_ELSEWHERE, holder_pid=pid, holder_host=host)
            time.sleep(0.02)

    def unheld(self) -> bool:
        """Whether no process holds the lock now, found without writing anything: for a data
        folder this process cannot write (a read-only mount, another user's folder), where
        ``acquire`` is ``UNAVAILABLE``. The file is opened read-only and locked shared for a
        moment (a live holder's exclusive lock refuses it; the operating system dropped a
        killed holder's). No file: nobody holds it (a holder keeps its file until it lets go).
        False when it cannot be told (the file cannot be read): a live holder is never
        taken for gone."""
        for _ in range(5):
            try:
                fd = os.open(self._path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except FileNotFoundError:
                return True
            except OSError:
                return False
            try:
                if not _try_lock_shared(fd):
                    return False
                try:
                    at_path = self._still_at_path(fd)
                finally:
                    _unlock(fd)
            except OSError:
                return False
            finally:
                os.close(fd)
            if at_path:
                return True
            # (the holder let go and removed it while we looked: look at the file there now)
        return False

    def release(self) -> None:
        fd = self._fd
        if fd is None:
            return
        self._fd = None
        if sys.platform == "win32":
            _unlock(fd)
            os.close(fd)
            with contextlib.suppress(OSError):
                self._path.unlink()
            return
        with contextlib.suppress(OSError):
            self._path.unlink()
        _unlock(fd)
        os.close(fd)

    def _still_at_path(self, fd: int) -> bool:
        if sys.platform == "win32":
            return True
        try:
            at_path = os.stat(self._path)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (at_path.st_dev, at_path.st_ino) == (mine.st_dev, mine.st_ino)

    def _write_holder(self, fd: int) -> None:
        text = f"{os.getpid()}\nmaka\n{_host_name()}\n".encode()
        with contextlib.suppress(OSError):
            os.lseek(fd, 0, os.SEEK_SET)
            os.ftruncate(fd, 0)
            os.write(fd, text)

    def _holder(self) -> tuple[int | None, str | None]:
        """The running holder's pid and hostname, or ``(None, None)`` if unknown."""
        try:
            lines = self._path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return None, None
        try:
            pid = int(lines[0])
        except (IndexError, ValueError):
            return None, None
        host = lines[2] if len(lines) > 2 else None
        return (pid, host) if pid > 0 else (None, None)
