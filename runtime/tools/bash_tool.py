"""``bash``: run a shell command in the session folder.

The command runs in its own process group with stdin closed, under a supervisor that kills the
group if this host dies (``supervised_spawn``), and its process is recorded right after the spawn
(``ToolContext.process_recorder``); stdout and stderr are merged and capped (the head is kept,
the rest counted); a timeout or a cancelled turn kills the whole process tree. Leftover children
still holding the output pipe after the shell exits are killed too, and when the call ends the
supervisor stops whatever is left of the group and, on Linux, every other descendant (those that
left with ``setsid``, a double fork or ``nohup … &`` included): a foreground command owns
everything it started. How many such background processes were stopped is in the result
(``backgroundStopped``), so the card can say so.
Long-lived work asks for ``background: true``: the shell outlives the call (never the host), its
output goes to a log file, and it is recorded by pid and create time so the safety inspector can
see it.

Recovery mode ``never_auto_retry``: a shell command's effects cannot be observed afterwards, so an
interrupted one stays ``indeterminate`` forever.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any

from runtime.ledger.crash_points import CrashPoint, failpoint
from runtime.ledger.event_model import RecoveryMode
from runtime.tools.process_identity import LEASE_DEADLINE_WHY, stopped_by_host
from runtime.tools.process_tree import (
    BackgroundShellRegistry,
    ShellRecord,
    process_create_time,
)
from runtime.tools.supervised_spawn import SpawnFailed, SupervisedCommand
from runtime.tools.tool_contract import PreparedCall, ToolContext, ToolFailure, ToolOutput

MAX_TIMEOUT_SECONDS = 3600
_PIPE_DRAIN_SECONDS = 2.0


def _shell() -> list[str]:
    for candidate in ("bash", "sh"):
        found = shutil.which(candidate)
        if found:
            return [found, "-c"]
    raise ToolFailure("no POSIX shell (bash or sh) was found on this machine")


class _CappedReader(threading.Thread):
    def __init__(self, stream: IO[bytes], cap: int) -> None:
        super().__init__(daemon=True)
        self._stream = stream
        self._cap = cap
        self.head = bytearray()
        self.dropped = 0

    def run(self) -> None:
        while True:
            try:
                chunk = self._stream.read1(65536) if hasattr(self._stream, "read1") else b""
            except (OSError, ValueError):
                return
            if not chunk:
                return
            room = self._cap - len(self.head)
            if room > 0:
                self.head.extend(chunk[:room])
            self.dropped += max(0, len(chunk) - max(room, 0))

    def text(self) -> str:
        body = self.head.decode("utf-8", errors="replace")
        if self.dropped:
            body += f"\n[output truncated: {self.dropped} more bytes not shown]"
        return body


@dataclass(frozen=True, slots=True)
class BashPlan:
    """``bash``: the command line, its own timeout (None = the host's default) and whether it
    runs detached."""

    command: str
    timeout_seconds: float | None
    background: bool


class BashTool:
    name = "bash"
    description = (
        "Run a shell command in the session folder and return its exit code and output. "
        "Set background to true for servers and other long-running commands."
    )
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "minLength": 1, "description": "the command line"},
            "timeout_seconds": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TIMEOUT_SECONDS,
                "description": "kill the command after this many seconds (default 120)",
            },
            "background": {"type": "boolean", "description": "detach and return at once"},
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    read_only = False
    recovery_mode: RecoveryMode = "never_auto_retry"

    def prepare(self, args: Mapping[str, Any], ctx: ToolContext) -> PreparedCall[BashPlan]:
        del ctx
        command = str(args["command"])
        timeout = args.get("timeout_seconds")
        plan = BashPlan(
            command=command,
            timeout_seconds=None if timeout is None else float(timeout),
            background=bool(args.get("background")),
        )
        return PreparedCall(self.name, args, summary=f"run: {command}", plan=plan)

    def run(self, prepared: PreparedCall[BashPlan], ctx: ToolContext) -> ToolOutput:
        plan = prepared.plan
        command = plan.command
        if ctx.cancel.is_cancelled():
            raise ToolFailure("cancelled before the command started")
        failpoint(CrashPoint.P3)  # tool started; the command has not been spawned
        if plan.background:
            return self._run_background(command, ctx)
        timeout = ctx.bash_timeout_seconds if plan.timeout_seconds is None else plan.timeout_seconds
        process = _spawn(command, ctx, stdout=subprocess.PIPE)
        try:
            assert process.stdout is not None
            reader = _CappedReader(process.stdout, ctx.output_cap_bytes)
            reader.start()
            unregister = ctx.cancel.on_cancel(process.kill)
            timed_out = False
            started = time.monotonic()
            try:
                try:
                    exit_code = process.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    process.kill()
                    exit_code = process.wait()
                reader.join(_PIPE_DRAIN_SECONDS)
                if reader.is_alive():
                    process.kill()
                    reader.join(_PIPE_DRAIN_SECONDS)
            finally:
                unregister()
                process.stdout.close()
        finally:
            process.release()
        result: dict[str, Any] = {
            "exitCode": exit_code,
            "output": reader.text(),
            "durationMs": int((time.monotonic() - started) * 1000),
        }
        if process.stopped_background:
            result["backgroundStopped"] = process.stopped_background
        why = stopped_by_host(process.pid)
        if why is None and getattr(process, "stopped_at_deadline", False):
            why = LEASE_DEADLINE_WHY
        if why is not None:
            result["stoppedByHost"] = True
            return ToolOutput(
                result | {"error": f"the command was stopped by Maka: {why}"}, is_error=True
            )
        if ctx.cancel.is_cancelled():
            result["cancelled"] = True
            return ToolOutput(result | {"error": "the command was cancelled"}, is_error=True)
        if timed_out:
            result["timedOut"] = True
            return ToolOutput(
                result | {"error": f"the command timed out after {timeout:g} s"}, is_error=True
            )
        return ToolOutput(result, is_error=exit_code != 0)

    def _run_background(self, command: str, ctx: ToolContext) -> ToolOutput:
        registry = ctx.shell_registry
        if not isinstance(registry, BackgroundShellRegistry):
            raise ToolFailure("background shells are not available in this host")
        logs = registry.path.parent / "shell-logs"
        logs.mkdir(parents=True, exist_ok=True)
        log_path = logs / f"{ctx.run_id or 'run'}-{time.time_ns()}.log"
        with open(log_path, "wb") as log:
            process = _spawn(command, ctx, stdout=log, background=True)
        registry.record(
            ShellRecord(
                pid=process.pid,
                create_time=process.create_time or process_create_time(process.pid),
                session_id=ctx.session_id,
                run_id=ctx.run_id,
                command=command,
                started_at=int(time.time() * 1000),
            )
        )
        process.hold_until_host_exits()
        return ToolOutput({"pid": process.pid, "background": True, "logPath": os.fspath(log_path)})


def _spawn(
    command: str, ctx: ToolContext, *, stdout: int | IO[Any], background: bool = False
) -> SupervisedCommand:
    """Start ``command`` so that it dies with this host, and record its process right away
    (the record is what lets a later start see it if it somehow survived)."""
    try:
        process = SupervisedCommand(
            [*_shell(), command], cwd=ctx.cwd, stdout=stdout, background=background
        )
    except (OSError, SpawnFailed) as error:
        raise ToolFailure(f"the command could not be started: {error}") from None
    if ctx.process_recorder is not None:
        try:
            ctx.process_recorder(
                ctx,
                "bash",
                command,
                process.pid,
                process.process_group,
                create_time=process.create_time,
            )
        except Exception as error:
            process.kill()
            process.release()
            reason = f" ({error})" if str(error) else ""
            raise ToolFailure(
                "the command was stopped at once: its process could not be recorded"
                f"{reason}, so a crash could not have been detected"
            ) from None
    return process
