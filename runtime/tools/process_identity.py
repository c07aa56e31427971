"""Whose process is this? Tool processes recorded by pid, create time and boot id.

A pid alone is not an identity: after a restart (or a reboot) the same number may belong to an
unrelated program. A record names a process only while the pid exists, was created at the
recorded time (within a clock tick) and the machine has not rebooted since (the boot id). This is
what lets startup say "that command is still running" without ever stopping a stranger.

``live_tool_processes`` is the one query every surface uses (the safety inspector, **Stop it**,
the CLI, attestation: a call with a live process cannot be settled by the user yet).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from runtime.ledger.process_records import ToolProcessRecord, ToolProcessTable
from runtime.tools.process_tree import process_create_time
from runtime.tools.tool_contract import ToolContext

_CREATE_TIME_TOLERANCE = 0.05
_BOOT_ID_FILE = Path("/proc/sys/kernel/random/boot_id")
STOP_GRACE_SECONDS = 3.0


def current_boot_id() -> str:
    """This boot's identity: the kernel's boot id on Linux, the boot time elsewhere."""
    with contextlib.suppress(OSError):
        text = _BOOT_ID_FILE.read_text(encoding="ascii").strip()
        if text:
            return text
    return f"boot-time:{int(psutil.boot_time())}"


@dataclass(frozen=True, slots=True)
class ProcessIdentity:
    pid: int
    process_group: int
    create_time: float
    boot_id: str


def identify(pid: int, process_group: int, create_time: float | None = None) -> ProcessIdentity:
    """The identity of a process this host just started. ``create_time`` is its start time as
    read by whoever started it (before it could be reaped); without it, psutil reads it now
    (raises ``psutil.Error`` if the process is already gone)."""
    if create_time is None:
        create_time = process_create_time(pid)
    return ProcessIdentity(pid, process_group, create_time, current_boot_id())


class TableProcessRecorder:
    """``ToolContext.process_recorder`` writing to the host table with this host's epoch."""

    def __init__(self, table: ToolProcessTable, owner_epoch: int) -> None:
        self._table = table
        self._owner_epoch = owner_epoch

    def __call__(
        self,
        ctx: ToolContext,
        tool_name: str,
        command: str,
        pid: int,
        process_group: int,
        *,
        create_time: float | None = None,
    ) -> None:
        identity = identify(pid, process_group, create_time)
        self._table.record_tool_process(
            ToolProcessRecord(
                operation_id=ctx.operation_id or f"unbound:{ctx.run_id}",
                session_id=ctx.session_id,
                run_id=ctx.run_id,
                tool_name=tool_name,
                command=command,
                pid=pid,
                process_group=process_group,
                create_time=identity.create_time,
                boot_id=identity.boot_id,
                owner_epoch=self._owner_epoch,
                started_at=time.time_ns() // 1_000_000,
            )
        )


def running_process(record: ToolProcessRecord) -> psutil.Process | None:
    """The recorded process if it still runs (same boot, pid and create time; not a zombie)."""
    if record.boot_id != current_boot_id():
        return None
    try:
        process = psutil.Process(record.pid)
        if abs(process.create_time() - record.create_time) > _CREATE_TIME_TOLERANCE:
            return None
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return process
    except psutil.Error:
        return None


def live_tool_processes(
    table: ToolProcessTable,
    *,
    session_id: str | None = None,
    operation_id: str | None = None,
    before_epoch: int | None = None,
) -> list[ToolProcessRecord]:
    """Recorded tool processes that still run, optionally of one session or one operation, and
    only those started by an owner epoch older than ``before_epoch`` (an earlier start)."""
    return [
        record
        for record in table.list_tool_processes(session_id=session_id, operation_id=operation_id)
        if (before_epoch is None or record.owner_epoch < before_epoch)
        and running_process(record) is not None
    ]


def surviving_process(table: ToolProcessTable) -> Callable[[str], str | None]:
    """For attestation (docs/design/recovery.md section 8): given an operation id, a description of
    a process of that call still running (``bash `cmd` (pid N)``), or None when none is."""

    def check(operation_id: str) -> str | None:
        live = live_tool_processes(table, operation_id=operation_id)
        return describe(live[0]) if live else None

    return check


def forget_ended(table: ToolProcessTable, *, before_epoch: int) -> int:
    """Delete records of earlier starts whose process has ended; return how many."""
    removed = 0
    for record in table.list_tool_processes():
        if record.owner_epoch < before_epoch and running_process(record) is None:
            table.delete_tool_process(record.operation_id, record.pid)
            removed += 1
    return removed


def _group_members(record: ToolProcessRecord) -> list[psutil.Process]:
    members: list[psutil.Process] = []
    root = running_process(record)
    if root is not None:
        with contextlib.suppress(psutil.Error):
            members = [root, *root.children(recursive=True)]
    return members


def _signal_group(group: int, signum: int) -> None:
    if os.name == "nt" or group <= 0:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)


def _group_alive(group: int) -> bool:
    if os.name == "nt" or group <= 0:
        return False
    try:
        os.killpg(group, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


_STOPPED_BY_HOST: dict[int, str] = {}
_STOPPED_LOCK = threading.Lock()


LEASE_DEADLINE_WHY = (
    "this Maka process could not renew its session leases in time (the database did not "
    "answer), so the command was ended before another host could take the session over; it "
    "did not fail by itself, and it may have done part of its work"
)


def note_stopped_by_host(pid: int, why: str) -> None:
    """Say why this host is about to stop the tool process ``pid`` itself (not the turn's
    cancel or timeout): the tool's result then says so, instead of a bare exit by a signal
    that the model, and the user, would read as the command failing by itself."""
    with _STOPPED_LOCK:
        _STOPPED_BY_HOST[pid] = why


def stopped_by_host(pid: int) -> str | None:
    """Why this host stopped the process ``pid`` (``note_stopped_by_host``), once; or None."""
    with _STOPPED_LOCK:
        return _STOPPED_BY_HOST.pop(pid, None)


def stop_tool_process(
    record: ToolProcessRecord, *, grace_seconds: float = STOP_GRACE_SECONDS
) -> bool:
    """Terminate the recorded process and its group, kill what is left after ``grace_seconds``.

    Only ever signals a process that *is* the recorded one (pid + create time + boot id), and
    its group only while that process still leads it. True when nothing of it runs any more."""
    members = _group_members(record)
    if not members:
        return True
    group = record.process_group if _leads_group(record) else 0
    _signal_group(group, signal.SIGTERM)
    for member in members:
        with contextlib.suppress(psutil.Error):
            member.terminate()
    deadline = time.monotonic() + grace_seconds
    _, alive = psutil.wait_procs(members, timeout=grace_seconds)
    while group and _group_alive(group) and time.monotonic() < deadline:
        time.sleep(0.05)
    _signal_group(group, getattr(signal, "SIGKILL", signal.SIGTERM))
    for member in alive:
        with contextlib.suppress(psutil.Error):
            member.kill()
    _, still = psutil.wait_procs(alive, timeout=grace_seconds)
    return not still


def _leads_group(record: ToolProcessRecord) -> bool:
    if os.name == "nt" or record.process_group <= 0:
        return False
    try:
        return os.getpgid(record.pid) == record.process_group
    except (ProcessLookupError, PermissionError):
        return False


def how_to_stop(record: ToolProcessRecord) -> str:
    """The shell command a person can type to stop it themselves."""
    if sys.platform == "win32":
        return f"taskkill /T /F /PID {record.pid}"
    if record.process_group > 0:
        return f"kill -TERM -- -{record.process_group}"
    return f"kill -TERM {record.pid}"


def describe(record: ToolProcessRecord, *, width: int = 80) -> str:
    """``bash `sleep 30; echo done` (pid 1234)``: what a park diagnostic names."""
    command = " ".join(record.command.split())
    if len(command) > width:
        command = command[: width - 1] + "…"
    return f"{record.tool_name} `{command}` (pid {record.pid})"


__all__ = [
    "LEASE_DEADLINE_WHY",
    "ProcessIdentity",
    "TableProcessRecorder",
    "current_boot_id",
    "describe",
    "forget_ended",
    "how_to_stop",
    "identify",
    "live_tool_processes",
    "note_stopped_by_host",
    "running_process",
    "stop_tool_process",
    "stopped_by_host",
    "surviving_process",
]
