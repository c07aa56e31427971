"""Process trees: kill a tool's whole tree, and track background shells across restarts.

A shell started by a tool runs in its own session / process group, so one signal reaches the
group; children that moved to another group are found through psutil and killed too. A
background shell is recorded by pid *and* process create time (in a JSON-lines file in the data
directory), so that after a restart a reused pid is never mistaken for ours: the safety
inspector asks ``live_shells`` before it lets a session resume.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

_CREATE_TIME_TOLERANCE = 0.05


def kill_process_tree(pid: int, *, grace_seconds: float = 1.0) -> None:
    """Terminate, then kill, ``pid`` and every descendant (including its process group)."""
    try:
        root = psutil.Process(pid)
        members = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        members = []
    _signal_group(pid, signal.SIGTERM)
    for member in members:
        with contextlib.suppress(psutil.Error):
            member.terminate()
    _, alive = psutil.wait_procs(members, timeout=grace_seconds)
    _signal_group(pid, getattr(signal, "SIGKILL", signal.SIGTERM))
    for member in alive:
        with contextlib.suppress(psutil.Error):
            member.kill()
    psutil.wait_procs(alive, timeout=grace_seconds)


def _signal_group(pid: int, signum: int) -> None:
    if os.name == "nt":
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signum)


@dataclass(frozen=True, slots=True)
class ShellRecord:
    pid: int
    create_time: float
    session_id: str
    run_id: str
    command: str
    started_at: int


def _same_process(record: ShellRecord) -> psutil.Process | None:
    try:
        process = psutil.Process(record.pid)
        if abs(process.create_time() - record.create_time) > _CREATE_TIME_TOLERANCE:
            return None
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return process
    except psutil.Error:
        return None


BACKGROUND_SHELLS_FILE = "background-shells.jsonl"


class BackgroundShellRegistry:
    """Background shells of every session, in ``<data dir>/background-shells.jsonl``."""

    @classmethod
    def in_data_dir(cls, data_dir: Path) -> BackgroundShellRegistry:
        return cls(data_dir / BACKGROUND_SHELLS_FILE)

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        return self._path

    def record(self, record: ShellRecord) -> None:
        line = json.dumps(asdict(record), sort_keys=True) + "\n"
        with self._lock:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                os.write(fd, line.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)

    def records(self) -> list[ShellRecord]:
        try:
            lines = self._path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        out: list[ShellRecord] = []
        for line in lines:
            try:
                out.append(ShellRecord(**json.loads(line)))
            except (json.JSONDecodeError, TypeError):
                continue  # a torn last line after a crash
        return out

    def live_shells(self, session_id: str | None = None) -> list[ShellRecord]:
        """Recorded shells that are still running (same pid and create time)."""
        return [
            record
            for record in self.records()
            if (session_id is None or record.session_id == session_id)
            and _same_process(record) is not None
        ]

    def stop(self, records: Sequence[ShellRecord]) -> None:
        for record in records:
            if _same_process(record) is not None:
                kill_process_tree(record.pid)

    def stop_all(self, session_id: str | None = None) -> None:
        self.stop(self.live_shells(session_id))


def process_create_time(pid: int) -> float:
    return float(psutil.Process(pid).create_time())
