"""The tool supervisor: a command dies with the process that started it
(docs/design/recovery.md section 9).

Run as ``python -I -S tool_supervisor.py WATCH_FD STATUS_FD MODE [--no-subreaper] -- PROGRAM
ARGS...`` (a frozen
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
  stops the group *and* every descendant, and the supervisor reaps them.
- Where there is no subreaper (macOS; Linux if ``prctl`` refuses) a ``DescendantTracker`` is the
  nearest equivalent: every 50 ms it reads the process table (``/proc``; ``libproc`` on macOS)
  and remembers, by pid *and* start time, every process below the supervisor or below a process
  it remembers, and every process whose environment carries this call's mark
  (``MAKA_TOOL_CALL_MARK``, set in the command's environment and inherited by what it starts).
  A process that later re-parents to init or launchd (``setsid`` and a double fork) is still
  known, and stopping the command stops every remembered process still alive with the same
  start time (never a recycled pid). The gap left: a process that sheds the mark (``env -i``,
  another user through ``sudo``) *and* whose parent exits between two reads of the table (within
  50 ms of its start) is never seen, so it escapes. On Linux with the subreaper the tracker does
  not run: the subreaper already keeps every descendant below the supervisor, without polling.
  Test-only: ``--no-subreaper`` (which the host passes under
  ``MAKA_FAILPOINT=tool_supervisor_no_subreaper``) makes the supervisor skip the subreaper, so
  the tracker's path runs on Linux.
- A byte ``k`` on WATCH_FD stops everything now (a timeout, a cancelled turn) and goes on
  reporting. Before it exits, the supervisor reports ``stopped N`` when it stopped N processes
  that were still running after the command's own process had ended (background processes).
- ``dSECONDS;`` on WATCH_FD sets a stop deadline, a ``time.monotonic()`` value (the system's
  monotonic clock, the same in every process of the machine); a later one replaces it. When it
  passes, the supervisor stops everything as for ``k``. A host on a shared ledger sends its lease's
  runway deadline after every renewal (docs/design/hosts.md section 2, "fencing the world"): a
  host that is stopped (SIGSTOP) or cut off cannot renew, and its commands end by that deadline,
  before another host may take the session over, without the host having to run.
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

TYPE_CHECKING = False  # not ``typing``'s: the supervisor imports only what it runs with
if TYPE_CHECKING:
    import ctypes
    from collections.abc import Callable, Mapping

_GRACE_SECONDS = 1.0
_POLL_SECONDS = 0.02
_TRACK_SECONDS = 0.05
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_LINUX = sys.platform.startswith("linux")
_DARWIN = sys.platform == "darwin"

NO_SUBREAPER_OPTION = "--no-subreaper"
"""Test-only: the supervisor does not become a subreaper, so tests on Linux run the path of
platforms without one (the host passes it under ``CrashPoint.TOOL_SUPERVISOR_NO_SUBREAPER``)."""
MARK_VARIABLE = "MAKA_TOOL_CALL_MARK"
"""Where there is no subreaper: the environment variable that marks this call's processes."""


def _become_subreaper(wanted: bool = True) -> bool:
    """Linux: orphaned descendants are re-parented to this process instead of init."""
    if not _LINUX or not wanted:
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


class ProcessEntry:
    """One process in the table: its parent, its start time in the kernel's own unit (with the
    pid, its identity: a recycled pid starts later) and whether it runs (not a zombie)."""

    __slots__ = ("parent", "running", "start")

    def __init__(self, parent: int, start: int, running: bool) -> None:
        self.parent = parent
        self.start = start
        self.running = running

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProcessEntry):
            return NotImplemented
        return (self.parent, self.start, self.running) == (other.parent, other.start, other.running)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ProcessEntry({self.parent}, {self.start}, {self.running})"


def _linux_table() -> dict[int, ProcessEntry]:
    """Every process ``/proc`` shows: start time in clock ticks since boot."""
    found: dict[int, ProcessEntry] = {}
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
            found[int(name)] = ProcessEntry(
                int(fields[1]), int(fields[19]), fields[0] not in (b"Z", b"X")
            )
        except (OSError, ValueError, IndexError):
            continue
    return found


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process ``/proc`` shows (Linux)."""
    return {pid: entry.parent for pid, entry in _linux_table().items()}


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


_PROC_PIDTBSDINFO = 3
_BSDINFO_SIZE = 136
"""``sizeof(struct proc_bsdinfo)`` (macOS ``<sys/proc_info.h>``)."""
_SZOMB = 5
_CTL_KERN = 1
_KERN_ARGMAX = 8
_KERN_PROCARGS2 = 49


def parse_bsdinfo(data: bytes) -> tuple[int, ProcessEntry] | None:
    """A macOS ``struct proc_bsdinfo``: its pid and entry (start time in microseconds), or None
    when it is short."""
    if len(data) < _BSDINFO_SIZE:
        return None
    status, pid, parent = (int.from_bytes(data[at : at + 4], sys.byteorder) for at in (4, 12, 16))
    seconds = int.from_bytes(data[120:128], sys.byteorder)
    microseconds = int.from_bytes(data[128:136], sys.byteorder)
    return pid, ProcessEntry(parent, seconds * 1_000_000 + microseconds, status != _SZOMB)


def procargs_environment(data: bytes) -> bytes:
    """The environment in a macOS ``KERN_PROCARGS2`` buffer (argc, the executable's path, NUL
    padding, argc arguments, then the environment), its entries each ended by a NUL."""
    if len(data) < 4:
        return b""
    argc = int.from_bytes(data[:4], sys.byteorder)
    rest = data[4:]
    end = rest.find(b"\0")
    if end < 0:
        return b""
    parts = rest[end:].lstrip(b"\0").split(b"\0")
    environment = parts[argc:]
    if b"" in environment:
        environment = environment[: environment.index(b"")]
    return b"".join(entry + b"\0" for entry in environment)


_darwin_calls: list[ctypes.CDLL] = []


def _darwin_libc() -> ctypes.CDLL:
    """The C library with the typed ``libproc`` and ``sysctl`` calls (macOS), loaded once."""
    if not _darwin_calls:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.proc_listallpids.argtypes = [ctypes.c_void_p, ctypes.c_int]
        libc.proc_listallpids.restype = ctypes.c_int
        libc.proc_pidinfo.argtypes = [
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_uint64,
            ctypes.c_void_p,
            ctypes.c_int,
        ]
        libc.proc_pidinfo.restype = ctypes.c_int
        libc.sysctl.argtypes = [
            ctypes.POINTER(ctypes.c_int),
            ctypes.c_uint,
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_size_t),
            ctypes.c_void_p,
            ctypes.c_size_t,
        ]
        libc.sysctl.restype = ctypes.c_int
        _darwin_calls.append(libc)
    return _darwin_calls[0]


def _darwin_table() -> dict[int, ProcessEntry]:
    """Every process ``libproc`` shows (macOS): start time in microseconds since the epoch."""
    import ctypes

    found: dict[int, ProcessEntry] = {}
    try:
        libc = _darwin_libc()
        count = int(libc.proc_listallpids(None, 0))
        pids = (ctypes.c_int * (max(count, 0) + 256))()
        count = int(libc.proc_listallpids(pids, ctypes.sizeof(pids)))
    except (OSError, AttributeError):
        return found
    info = ctypes.create_string_buffer(_BSDINFO_SIZE)
    for pid in pids[: max(count, 0)]:
        if pid <= 0:
            continue
        if libc.proc_pidinfo(pid, _PROC_PIDTBSDINFO, 0, info, _BSDINFO_SIZE) != _BSDINFO_SIZE:
            continue
        parsed = parse_bsdinfo(info.raw)
        if parsed is not None and parsed[0] == pid:
            found[pid] = parsed[1]
    return found


def _darwin_environment(pid: int) -> bytes | None:
    import ctypes

    try:
        libc = _darwin_libc()
        size = ctypes.c_size_t(ctypes.sizeof(ctypes.c_int))
        argmax = ctypes.c_int(0)
        name = (ctypes.c_int * 2)(_CTL_KERN, _KERN_ARGMAX)
        if libc.sysctl(name, 2, ctypes.byref(argmax), ctypes.byref(size), None, 0) != 0:
            return None
        buffer = ctypes.create_string_buffer(max(argmax.value, 4096))
        size = ctypes.c_size_t(ctypes.sizeof(buffer))
        name = (ctypes.c_int * 3)(_CTL_KERN, _KERN_PROCARGS2, pid)
        if libc.sysctl(name, 3, buffer, ctypes.byref(size), None, 0) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return procargs_environment(buffer.raw[: size.value])


def process_table() -> dict[int, ProcessEntry]:
    """Every process this platform shows (empty where it shows none)."""
    if _LINUX:
        return _linux_table()
    if _DARWIN:
        return _darwin_table()
    return {}


def process_environment(pid: int) -> bytes | None:
    """``pid``'s environment, each entry ended by a NUL: ``b""`` when it has none yet (a process
    in the middle of ``exec``, a zombie), None when it cannot be read (another user's)."""
    if _LINUX:
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                return environ.read()
        except FileNotFoundError:
            return b""
        except OSError:
            return None
    if _DARWIN:
        return _darwin_environment(pid)
    return None


class DescendantTracker:
    """Where there is no subreaper: remember every process this call started, so that stopping
    the call stops them after they left its group and session, re-parented to init or launchd.

    ``poll`` (every ``_TRACK_SECONDS`` on a thread, and before each stop) reads the process table
    and remembers, as (pid, start time), each process below ``root`` or below a remembered one,
    and each whose environment carries this call's mark. A remembered process stays known while
    the table shows it with the same start time; ``living`` answers only those, so a recycled
    pid is never signalled. Disabled (the subreaper runs), it does nothing."""

    def __init__(
        self,
        root: int,
        *,
        enabled: bool = True,
        table: Callable[[], Mapping[int, ProcessEntry]] = process_table,
        environment: Callable[[int], bytes | None] = process_environment,
    ) -> None:
        self.enabled = enabled
        self._root = root
        self._table = table
        self._environment = environment
        self.mark = f"{root}-{os.urandom(8).hex()}"
        self._needle = f"\0{MARK_VARIABLE}={self.mark}\0".encode()
        self._known: dict[int, int] = {}
        self._checked: dict[int, int] = {}
        """Processes whose environment was read without the mark: not read again."""
        self._lock = threading.RLock()

    def environment(self) -> dict[str, str] | None:
        """The command's environment: this process's with the mark (None: unchanged)."""
        return {**os.environ, MARK_VARIABLE: self.mark} if self.enabled else None

    def start(self, interval: float = _TRACK_SECONDS) -> None:
        """Poll now, then every ``interval`` on a daemon thread (call it once the command runs)."""
        if self.enabled:
            self.poll()
            threading.Thread(target=self._watch, args=(interval,), daemon=True).start()

    def _watch(self, interval: float) -> None:
        while True:
            time.sleep(interval)
            self.poll()

    def _marked(self, pid: int, start: int) -> bool:
        found = self._environment(pid)
        if found is None or (found and self._needle not in b"\0" + found + b"\0"):
            self._checked[pid] = start
            return False
        return bool(found)

    def poll(self) -> Mapping[int, ProcessEntry]:
        """Read the table and remember what is new; return the table."""
        table = self._table()
        with self._lock:

            def same(pid: int, start: int) -> bool:
                entry = table.get(pid)
                return entry is not None and entry.start == start

            known = {pid: start for pid, start in self._known.items() if same(pid, start)}
            self._checked = {pid: at for pid, at in self._checked.items() if same(pid, at)}
            children: dict[int, list[int]] = {}
            for pid, entry in table.items():
                children.setdefault(entry.parent, []).append(pid)
                fresh = pid not in known and self._checked.get(pid) != entry.start
                if fresh and pid != self._root and entry.running and self._marked(pid, entry.start):
                    known[pid] = entry.start
            stack = [self._root, *known]
            while stack:
                for child in children.get(stack.pop(), ()):
                    if known.get(child) != table[child].start:
                        known[child] = table[child].start
                        stack.append(child)
            self._known = known
        return table

    def living(self) -> set[int]:
        """The remembered processes that still run, after a fresh poll (empty when disabled)."""
        if not self.enabled:
            return set()
        table = self.poll()
        with self._lock:
            return {pid for pid in self._known if table[pid].running}


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


def stop_everything(
    group: int, grace_seconds: float = _GRACE_SECONDS, tracker: DescendantTracker | None = None
) -> int:
    """Stop the command's group and every descendant of this process (those that left the
    group included) and every process ``tracker`` remembers: SIGTERM, then SIGKILL what is left
    after ``grace_seconds``, again until nothing below this process runs (a process may fork
    while it is being stopped). Returns how many running processes were found."""

    def below() -> set[int]:
        found = _living(descendants(os.getpid()))
        if tracker is not None:
            found |= tracker.living()
        return found

    seen = below()
    if not seen and not _group_alive(group):
        return 0
    # Frozen first, then asked to end, then let go: signalled one at a time while running, a
    # shell whose child was just ended would run its next command (``sleep 6; echo late >>
    # f``) before its own SIGTERM arrived. Stopped, nothing runs or forks until every process
    # has its SIGTERM pending, and each takes it as it continues.
    for signum in (signal.SIGSTOP, signal.SIGTERM, signal.SIGCONT):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signum)
        _signal_all(seen, signum)
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)
        if not _group_alive(group) and not below():
            return len(seen)
    for _ in range(50):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
        left = below()
        if not left:
            break
        seen |= left
        _signal_all(left, signal.SIGKILL)
        time.sleep(_POLL_SECONDS)
    return len(seen)


def _anything_left(group: int, tracker: DescendantTracker) -> bool:
    """Whether the command's group, a descendant or a remembered process is still there."""
    return _group_alive(group) or bool(descendants(os.getpid())) or bool(tracker.living())


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


def parse_arguments(argv: list[str]) -> tuple[int, int, str, bool, list[str]] | None:
    """``WATCH_FD STATUS_FD MODE [--no-subreaper] -- PROGRAM ARGS...``: the two descriptors, the
    mode, whether to become a subreaper and the command; None when they are not that."""
    if "--" not in argv[3:]:
        return None
    split = argv.index("--", 3)
    options, command = argv[3:split], argv[split + 1 :]
    if not command or any(option != NO_SUBREAPER_OPTION for option in options):
        return None
    try:
        return int(argv[0]), int(argv[1]), argv[2], not options, command
    except ValueError:
        return None


# C901: the supervisor's whole life in one place (start, report, reap, watch, stop), with its
# closures sharing the child and the status pipe; the signal-safe order matters more than size.
def main(argv: list[str]) -> int:  # noqa: C901
    parsed = parse_arguments(argv)
    if parsed is None:
        return 2
    watch_fd, status_fd, mode, subreaper, command = parsed
    status = os.fdopen(status_fd, "w", buffering=1, encoding="utf-8", errors="replace")
    me = os.getpid()
    reaping = _become_subreaper(subreaper)
    tracker = DescendantTracker(me, enabled=not reaping)
    preexec = (lambda: _die_with(me)) if _LINUX else None
    try:
        child = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            process_group=0,
            preexec_fn=preexec,  # noqa: PLW1509 - no thread has started yet
            env=tracker.environment(),
        )
    except OSError as error:
        status.write(f"error {error}\n")
        return 1
    tracker.start()
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
        stopped = stop_everything(child.pid, tracker=tracker)
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
    deadline: float | None = None
    pending = b""
    while True:
        timeout = poll
        if deadline is not None:
            left = max(deadline - time.monotonic(), 0.0)
            timeout = left if timeout is None else min(timeout, left)
        ready, _, _ = select.select([watch_fd], [], [], timeout)
        if ready:
            try:
                data = os.read(watch_fd, 64)
            except OSError:
                break
            if not data:
                break
            if b"k" in data:
                stop_everything(child.pid, tracker=tracker)
            *tokens, pending = (pending + data.replace(b"k", b"")).split(b";")
            for token in tokens:
                if token.startswith(b"d"):
                    with contextlib.suppress(ValueError):
                        deadline = float(token[1:])
        if deadline is not None and time.monotonic() >= deadline:
            deadline = None
            report("deadline")
            stop_everything(child.pid, tracker=tracker)
        elif not ready and ended.is_set() and not _anything_left(child.pid, tracker):
            return 0
    stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
