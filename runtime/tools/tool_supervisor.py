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
- On Linux the supervisor is a child subreaper (``PR_SET_CHILD_SUBREAPER``): a process the
  command starts that leaves its group and session (``setsid``, a double fork, ``nohup … &``)
  is re-parented to the supervisor, not to init, so it stays a descendant. Stopping the command
  stops the group *and* every descendant, and the supervisor reaps them. Elsewhere (macOS) only
  the group is stopped: a process that calls ``setsid`` there can escape.
- A byte ``k`` on WATCH_FD stops everything now (a timeout, a cancelled turn) and goes on
  reporting. Before it exits, the supervisor reports ``stopped N`` when it stopped N processes
  that were still running after the command's own process had ended (background processes).
- MODE ``background``: once the command has ended and no descendant is left, the supervisor exits
  by itself (a background shell may outlive its tool call, never the host).
"""

from __future__ import annotations

import contextlib
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
_PR_SET_CHILD_SUBREAPER = 36
_LINUX = sys.platform.startswith("linux")


def _become_subreaper() -> bool:
    """Linux: orphaned descendants are re-parented to this process instead of init."""
    if not _LINUX:
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process ``/proc`` shows (Linux)."""
    found: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
            found[int(name)] = int(fields[1])
        except (OSError, ValueError, IndexError):
            continue
    return found


def descendants(root: int) -> set[int]:
    """Every process below ``root`` (Linux; empty elsewhere). Zombies are included: they are
    reaped, not signalled, but signalling them is harmless."""
    if not _LINUX:
        return set()
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _living(pids: set[int]) -> set[int]:
    """Those of ``pids`` that still run (not zombies)."""
    alive: set[int] = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                state = stat.read().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            alive.add(pid)
    return alive


def _signal_all(pids: set[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            continue


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


def stop_everything(group: int, grace_seconds: float = _GRACE_SECONDS) -> int:
    """Stop the command's group and every descendant of this process (those that left the
    group included): SIGTERM, then SIGKILL what is left after ``grace_seconds``, again until
    nothing below this process runs (a process may fork while it is being stopped). Returns how
    many running processes were found below this process."""
    seen = _living(descendants(os.getpid()))
    if not seen and not _group_alive(group):
        return 0
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGTERM)
    _signal_all(seen, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)
        if not _group_alive(group) and not _living(descendants(os.getpid())):
            return len(seen)
    for _ in range(50):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
        left = _living(descendants(os.getpid()))
        if not left:
            break
        seen |= left
        _signal_all(left, signal.SIGKILL)
        time.sleep(_POLL_SECONDS)
    return len(seen)


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


# C901: the supervisor's whole life in one place (start, report, reap, watch, stop), with its
# closures sharing the child and the status pipe; the signal-safe order matters more than size.
def main(argv: list[str]) -> int:  # noqa: C901
    if len(argv) < 5 or argv[3] != "--":
        return 2
    watch_fd, status_fd, mode, command = int(argv[0]), int(argv[1]), argv[2], argv[4:]
    status = os.fdopen(status_fd, "w", buffering=1, encoding="utf-8", errors="replace")
    me = os.getpid()
    reaping = _become_subreaper()
    preexec = (lambda: _die_with(me)) if _LINUX else None
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
    created = _create_time(child.pid) if _LINUX else ""
    status.write(f"pid {child.pid} {created}".rstrip() + "\n")
    ended = threading.Event()
    lock = threading.Lock()

    def report(line: str) -> None:
        with lock, contextlib.suppress(OSError, ValueError):
            status.write(line + "\n")
            status.flush()

    def stop() -> None:
        """Stop what runs; report the processes left behind by a command that had ended."""
        command_ended = ended.is_set()
        stopped = stop_everything(child.pid)
        if command_ended and stopped:
            report(f"stopped {stopped}")
        ended.wait(_GRACE_SECONDS)

    def on_signal(signum: int, frame: object) -> None:
        del signum, frame
        stop()
        os._exit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    # ``ended`` is set before "exit" is reported: the host closes the watch pipe only after it
    # has read "exit", and ``stop`` must then know the command had ended.
    def reap_command() -> None:
        code = child.wait()
        ended.set()
        report(f"exit {code}")

    def reap_all() -> None:
        """As a subreaper, every orphan below is this process's child: reap each (the
        command's exit status is reported from the same wait)."""
        while True:
            try:
                pid, wait_status = os.waitpid(-1, 0)
            except ChildProcessError:
                time.sleep(0.1)
                continue
            except InterruptedError:
                continue
            if pid == child.pid:
                ended.set()
                report(f"exit {os.waitstatus_to_exitcode(wait_status)}")

    threading.Thread(target=reap_all if reaping else reap_command, daemon=True).start()
    poll = 0.25 if mode == "background" else None
    while True:
        ready, _, _ = select.select([watch_fd], [], [], poll)
        if ready:
            try:
                data = os.read(watch_fd, 64)
            except OSError:
                break
            if not data:
                break
            if b"k" in data:
                stop_everything(child.pid)
        elif ended.is_set() and not _group_alive(child.pid) and not descendants(me):
            return 0
    stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
