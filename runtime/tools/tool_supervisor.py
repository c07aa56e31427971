"""The tool supervisor: a command dies with the process that started it
(docs/design/recovery.md section 9).

Run as ``python -I -S tool_supervisor.py WATCH_FD STATUS_FD MODE -- PROGRAM ARGS...`` (a frozen
bundle: ``maka -m runtime.tools.tool_supervisor ...``). Standard library only, so it starts in a
few milliseconds without the site packages.

- It starts PROGRAM in a new process group (stdin closed, stdout/stderr inherited from the host),
  then points its own stdout and stderr at the null device, so only the command's processes hold
  the host's output pipe.
- It reports on STATUS_FD: ``pid N [CREATE_TIME]`` once the command runs, ``exit CODE`` when it
  ends (a negative code is the signal that ended it), or ``error TEXT`` if it could not start.
  CREATE_TIME (Linux) is the command's start time, read before the supervisor can reap it, so
  the host can record the process's identity even when a quick command has already ended.
- WATCH_FD is the read end of a pipe whose write end only the host holds. When it reaches end of
  file (the host closed it, or the host died in any way, SIGKILL included) the supervisor
  terminates the command's whole process group, kills what is left after one second, and exits.
- On Linux the command's first process also gets ``PR_SET_PDEATHSIG``: if the supervisor itself
  is killed, the shell goes too.
- MODE ``background``: once the command has ended and its group is empty, the supervisor exits by
  itself (a background shell may outlive its tool call, never the host).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time

_GRACE_SECONDS = 1.0
_POLL_SECONDS = 0.02
_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """In the command's process, before exec: SIGKILL when the supervisor dies (Linux)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the supervisor died before the request took effect
        os._exit(137)


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def stop_group(group: int, grace_seconds: float = _GRACE_SECONDS) -> None:
    """SIGTERM the group, SIGKILL it if anything is left after ``grace_seconds``."""
    try:
        os.killpg(group, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)
        if not _group_alive(group):
            return
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return


def _create_time(pid: int) -> str:
    """The process's start time in seconds since the epoch, as the kernel counts it (boot time
    plus the start tick; the same figure psutil gives), or "" where ``/proc`` cannot say. The
    process is this supervisor's unreaped child, so its ``/proc`` entry exists even if it has
    already exited."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            fields = stat.read().rpartition(")")[2].split()
        with open("/proc/stat", encoding="ascii", errors="replace") as system:
            boot = next(line.split()[1] for line in system if line.startswith("btime "))
        return repr(int(boot) + int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, StopIteration):
        return ""


def _silence_own_output() -> None:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


def main(argv: list[str]) -> int:
    if len(argv) < 5 or argv[3] != "--":
        return 2
    watch_fd, status_fd, mode, command = int(argv[0]), int(argv[1]), argv[2], argv[4:]
    status = os.fdopen(status_fd, "w", buffering=1, encoding="utf-8", errors="replace")
    me = os.getpid()
    preexec = (lambda: _die_with(me)) if sys.platform.startswith("linux") else None
    try:
        child = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            process_group=0,
            preexec_fn=preexec,  # noqa: PLW1509 - no thread has started yet
        )
    except OSError as error:
        status.write(f"error {error}\n")
        return 1
    _silence_own_output()
    created = _create_time(child.pid) if sys.platform.startswith("linux") else ""
    status.write(f"pid {child.pid} {created}".rstrip() + "\n")
    ended = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        del signum, frame
        stop_group(child.pid)
        ended.wait(_GRACE_SECONDS)
        os._exit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    def reap() -> None:
        code = child.wait()
        try:
            status.write(f"exit {code}\n")
            status.flush()
        except OSError:
            pass
        ended.set()

    threading.Thread(target=reap, daemon=True).start()
    poll = 0.25 if mode == "background" else None
    while True:
        ready, _, _ = select.select([watch_fd], [], [], poll)
        if ready:
            try:
                if not os.read(watch_fd, 64):
                    break
            except OSError:
                break
        elif ended.is_set() and not _group_alive(child.pid):
            return 0
    stop_group(child.pid)
    ended.wait(_GRACE_SECONDS)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
