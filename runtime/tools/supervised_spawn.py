"""Start a tool's command so that it never outlives this host (docs/design/recovery.md section 9).

POSIX (Linux, macOS): the command runs under ``tool_supervisor``, which watches a pipe only this
process holds and kills the command's whole process group when the pipe closes, which the kernel
does for us when this process dies, SIGKILL included. On Linux the supervisor is also a child
subreaper and kills every descendant, those that left the group with ``setsid`` included; on macOS
its descendant tracker remembers the processes the command starts and kills those (see
``tool_supervisor``, and docs/crash-contract.md for what each platform guarantees).
Windows: the command runs in a Job Object with kill-on-close. The test-only failpoint
``MAKA_FAILPOINT=tool_supervisor_disabled`` starts the command without either, so tests can make
a survivor on purpose.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import psutil

from runtime.ledger.crash_points import CrashPoint, failpoint_active
from runtime.tools.process_tree import kill_process_tree, process_create_time
from runtime.tools.windows_job import attach_kill_on_close_job, close_job

_SUPERVISOR_SCRIPT = Path(__file__).with_name("tool_supervisor.py")
_RELEASE_WAIT_SECONDS = 5.0


def _frozen() -> bool:
    main_module = sys.modules.get("__main__")
    return bool(getattr(sys, "frozen", False)) or hasattr(main_module, "__compiled__")


def supervisor_command() -> list[str]:
    """This program's supervisor: the bundle runs its own module, a source install the script
    with an isolated interpreter and no site packages (it needs only the standard library)."""
    if _frozen():
        return [sys.executable, "-m", "runtime.tools.tool_supervisor"]
    return [sys.executable, "-I", "-S", os.fspath(_SUPERVISOR_SCRIPT)]


def _create_time_now(pid: int) -> float | None:
    try:
        return process_create_time(pid)
    except psutil.Error:
        return None


def _test_options() -> list[str]:
    """Test-only: the supervisor skips its child subreaper, so its descendant tracker (the path
    of macOS) runs on Linux too."""
    if failpoint_active(CrashPoint.TOOL_SUPERVISOR_NO_SUBREAPER):
        return ["--no-subreaper"]
    return []


class SpawnFailed(Exception):
    pass


class SupervisedCommand:
    """One command. ``pid`` / ``process_group`` name the command's own process (not the
    supervisor's) and ``create_time`` its start time when known (read while it could not yet
    have been reaped, so a command that ends at once still has an identity); ``wait`` returns
    its exit code; ``kill`` stops its tree now; ``release`` (always call it) stops what is left
    of its group and reaps the supervisor."""

    def __init__(
        self,
        argv: list[str],
        *,
        cwd: Path,
        stdout: int | IO[Any],
        background: bool = False,
    ) -> None:
        self._watch: int | None = None
        self._supervisor: subprocess.Popen[bytes] | None = None
        self._job: int | None = None
        self._exit_code: int | None = None
        self._ended = threading.Event()
        self.stdout: IO[bytes] | None = None
        self.create_time: float | None = None
        self.stopped_background = 0
        """Processes the command left running that were stopped when the call ended."""
        self.stopped_at_deadline = False
        """The supervisor ended the command at the stop deadline (``set_stop_deadline``): this
        process could not renew its session leases in time."""
        self._status_reader: threading.Thread | None = None
        if os.name == "nt" or failpoint_active(CrashPoint.TOOL_SUPERVISOR_DISABLED):
            self._start_direct(argv, cwd, stdout)
        else:
            self._start_supervised(argv, cwd, stdout, background)

    # ---- starting -----------------------------------------------------------------------------

    def _start_direct(self, argv: list[str], cwd: Path, stdout: int | IO[Any]) -> None:
        if sys.platform == "win32":
            process = subprocess.Popen(
                argv,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=subprocess.STDOUT,
                creationflags=subprocess.CREATE_NEW_PROCESS_GROUP,
            )
            self._job = attach_kill_on_close_job(process)
            group = 0
        else:
            process = subprocess.Popen(
                argv,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            group = process.pid
        self.pid = process.pid
        self.process_group = group
        self.create_time = _create_time_now(process.pid)  # before the reaper can reap it
        self.stdout = process.stdout

        def reap() -> None:
            self._exit_code = process.wait()
            self._ended.set()

        threading.Thread(target=reap, daemon=True).start()

    def _start_supervised(
        self, argv: list[str], cwd: Path, stdout: int | IO[Any], background: bool
    ) -> None:
        watch_read, watch_write = os.pipe()
        status_read, status_write = os.pipe()
        try:
            supervisor = subprocess.Popen(
                [
                    *supervisor_command(),
                    str(watch_read),
                    str(status_write),
                    "background" if background else "foreground",
                    *_test_options(),
                    "--",
                    *argv,
                ],
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=subprocess.STDOUT,
                pass_fds=(watch_read, status_write),
                start_new_session=True,
            )
        except BaseException:
            for fd in (watch_read, watch_write, status_read, status_write):
                os.close(fd)
            raise
        os.close(watch_read)
        os.close(status_write)
        self._watch = watch_write
        _watch_started(watch_write)
        self._supervisor = supervisor
        self.stdout = supervisor.stdout
        status = os.fdopen(status_read, "r", encoding="utf-8", errors="replace")
        first = status.readline().strip()
        if not first.startswith("pid "):
            status.close()
            self.release()
            raise SpawnFailed(first.removeprefix("error ").strip() or "the command did not start")
        words = first.split()
        self.pid = int(words[1])
        self.process_group = self.pid
        self.create_time = float(words[2]) if len(words) > 2 else None

        def read_status() -> None:
            with status:
                for line in status:
                    if line.startswith("exit "):
                        with contextlib.suppress(ValueError):
                            self._exit_code = int(line.split()[1])
                            self._ended.set()
                    elif line.startswith("stopped "):
                        with contextlib.suppress(ValueError):
                            self.stopped_background = int(line.split()[1])
                    elif line.strip() == "deadline":  # said before the command's exit
                        self.stopped_at_deadline = True
            if self._exit_code is None:  # the supervisor itself was killed
                self._exit_code = supervisor.wait()
            self._ended.set()

        self._status_reader = threading.Thread(target=read_status, daemon=True)
        self._status_reader.start()

    # ---- running ------------------------------------------------------------------------------

    def wait(self, timeout: float | None = None) -> int:
        """The command's exit code (negative: the signal that ended it); raises
        ``subprocess.TimeoutExpired`` when it has not ended within ``timeout`` seconds."""
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired("tool command", timeout or 0.0)
        assert self._exit_code is not None
        return self._exit_code

    def kill(self) -> None:
        """Stop the command's whole tree now (a timeout or a cancelled turn)."""
        if self._watch is not None:
            with contextlib.suppress(OSError):
                os.write(self._watch, b"k")  # the supervisor stops every descendant
        kill_process_tree(self.pid)
        if self.process_group > 0:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process_group, getattr(signal, "SIGKILL", signal.SIGTERM))

    def release(self) -> None:
        """The command is done with: whatever is left of its group is stopped (the supervisor
        does it when its watch pipe closes), and the supervisor is reaped."""
        if self._watch is not None:
            _watch_closing(self._watch)
            os.close(self._watch)
            self._watch = None
        if self._supervisor is not None:
            try:
                self._supervisor.wait(_RELEASE_WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                kill_process_tree(self._supervisor.pid)
            if self._status_reader is not None:
                self._status_reader.join(_RELEASE_WAIT_SECONDS)
        if self._job is not None:
            close_job(self._job)
            self._job = None

    def hold_until_host_exits(self) -> None:
        """A background command: keep the watch pipe open for the rest of this process's life
        (the supervisor exits by itself when the command's group is empty)."""
        if self._watch is not None:
            _HELD_WATCHES.append(self._watch)
            self._watch = None
        if self._supervisor is not None:
            threading.Thread(target=self._supervisor.wait, daemon=True).start()
            self._supervisor = None
        if self._job is not None:
            _HELD_JOBS.append(self._job)
            self._job = None


_HELD_WATCHES: list[int] = []
_LIVE_WATCHES: set[int] = set()
_DEADLINE_LOCK = threading.Lock()
_DEADLINE: list[float] = []
_DEADLINE_SOURCE: list[Callable[[], float | None]] = []


def set_stop_deadline(deadline: float) -> None:
    """Every supervised command of this process, running or started later, is stopped by its
    supervisor at ``deadline`` (a ``time.monotonic()`` value) unless a later call moves it on.
    A host on a shared ledger calls it after every lease renewal (its runway deadline): stopped
    or cut off, it cannot, and its commands end by themselves (``tool_supervisor``)."""
    with _DEADLINE_LOCK:
        _send_deadline_locked(deadline)


def _send_deadline_locked(deadline: float) -> None:
    """``deadline`` becomes the one sent, to every running command (``_DEADLINE_LOCK`` held)."""
    _DEADLINE[:] = [deadline]
    message = f"d{deadline:.3f};".encode()
    for watch in _LIVE_WATCHES:
        with contextlib.suppress(OSError):
            os.write(watch, message)


def set_stop_deadline_source(source: Callable[[], float | None] | None) -> None:
    """Where a command started from now on reads its first deadline: the live one (the host's
    lease runway after its latest renewal), not the one last sent, which lags it by up to a
    feed's tick. After an outage, the write that dispatched the command may itself have renewed
    the lease a moment ago; the deadline last sent then lies in the past and would end the
    command before it did anything. ``None``: the deadline last sent, as before."""
    with _DEADLINE_LOCK:
        _DEADLINE_SOURCE[:] = [source] if source is not None else []


def _watch_started(watch: int) -> None:
    with _DEADLINE_LOCK:
        _LIVE_WATCHES.add(watch)
        live = _DEADLINE_SOURCE[0]() if _DEADLINE_SOURCE else None
        if live is not None and (not _DEADLINE or live > _DEADLINE[0]):
            _send_deadline_locked(live)  # the newer deadline, to every running command too
        elif _DEADLINE:
            with contextlib.suppress(OSError):
                os.write(watch, f"d{_DEADLINE[0]:.3f};".encode())


def _watch_closing(watch: int) -> None:
    with _DEADLINE_LOCK:
        _LIVE_WATCHES.discard(watch)


_HELD_JOBS: list[int] = []
