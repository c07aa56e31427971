"""Single-instance lock on the data directory (``QLockFile``).

Why ``QLockFile`` and not the IPC socket: on Unix, ``QLocalServer.listen()`` with an access option
silently replaces even a *live* server's socket file, and on Windows two servers can share a pipe
name, so "listen failed" can never mean "another instance runs". ``QLockFile`` records the holder's
pid, hostname and application name; with a stale time of 0 it treats a lock whose holder process is
gone (SIGKILL, power loss) as stale and takes it over at once, while a live holder always wins.

Only the lock holder may call ``QLocalServer.removeServer()`` for the data directory's socket
name: the lock is what proves a leftover socket file is stale.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from PySide6.QtCore import QLockFile

LOCK_FILE_NAME = "maka-main.lock"

# How long tryLock waits for a holder that is just releasing (a previous instance exiting).
_TRY_LOCK_MS = 200


class LockOutcome(StrEnum):
    ACQUIRED = "acquired"
    HELD_ELSEWHERE = "held_elsewhere"
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True, slots=True)
class LockResult:
    """``holder_pid`` / ``holder_host`` name the running instance when ``HELD_ELSEWHERE``;
    ``detail`` explains ``UNAVAILABLE`` (permission denied, unwritable directory)."""

    outcome: LockOutcome
    holder_pid: int | None = None
    holder_host: str | None = None
    detail: str = ""


class InstanceLock:
    """Owns ``<data_dir>/maka-main.lock`` for the life of the main process.

    ``release()`` is idempotent and is the very last step of shutdown (DESKTOP.md), after the
    store is closed, so a second instance can never open the store while this one still writes.
    """

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / LOCK_FILE_NAME
        self._lock = QLockFile(str(self._path))
        self._lock.setStaleLockTime(0)
        self._held = False

    @property
    def path(self) -> Path:
        return self._path

    @property
    def held(self) -> bool:
        return self._held

    def acquire(self) -> LockResult:
        if self._held:
            return LockResult(LockOutcome.ACQUIRED)
        if self._lock.tryLock(_TRY_LOCK_MS):
            self._held = True
            return LockResult(LockOutcome.ACQUIRED)
        error = self._lock.error()
        if error == QLockFile.LockError.LockFailedError:
            pid, host = self._holder()
            return LockResult(LockOutcome.HELD_ELSEWHERE, holder_pid=pid, holder_host=host)
        detail = (
            "permission denied"
            if error == QLockFile.LockError.PermissionError
            else "the lock file could not be created"
        )
        return LockResult(LockOutcome.UNAVAILABLE, detail=f"{detail}: {self._path}")

    def release(self) -> None:
        if self._held:
            self._lock.unlock()
            self._held = False

    def _holder(self) -> tuple[int | None, str | None]:
        """The running holder's pid and hostname, or ``(None, None)`` if the file vanished."""
        pid, host, _app = self._lock.getLockInfo()
        return (pid, host) if pid > 0 else (None, None)
