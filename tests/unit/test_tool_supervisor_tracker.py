"""The tool supervisor's descendant tracker, the nearest equivalent of a child subreaper where
there is none (macOS): what it remembers, what it forgets, what it never signals."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from runtime.ledger.crash_points import CrashPoint
from runtime.tools import supervised_spawn, tool_supervisor
from runtime.tools.tool_supervisor import (
    MARK_VARIABLE,
    NO_SUBREAPER_OPTION,
    DescendantTracker,
    ProcessEntry,
    parse_arguments,
    parse_bsdinfo,
    procargs_environment,
)

ROOT = 100


class FakeSystem:
    """A process table and environments the test edits between polls."""

    def __init__(self) -> None:
        self.table: dict[int, ProcessEntry] = {}
        self.environments: dict[int, bytes | None] = {}
        self.reads: list[int] = []

    def run(self, pid: int, parent: int, start: int, environment: bytes | None = b"A=1\0") -> None:
        self.table[pid] = ProcessEntry(parent, start, True)
        self.environments[pid] = environment

    def tracker(self, *, enabled: bool = True) -> DescendantTracker:
        return DescendantTracker(
            ROOT, enabled=enabled, table=lambda: dict(self.table), environment=self.environment
        )

    def environment(self, pid: int) -> bytes | None:
        self.reads.append(pid)
        return self.environments.get(pid)


def test_a_descendant_that_is_re_parented_to_init_stays_known() -> None:
    system = FakeSystem()
    tracker = system.tracker()
    system.run(101, ROOT, 5)  # the command
    system.run(102, 101, 6)  # the subshell of a double fork
    system.run(103, 102, 7)  # what it started, which calls setsid
    tracker.poll()
    del system.table[101], system.table[102]
    system.table[103] = ProcessEntry(1, 7, True)  # re-parented to init
    assert tracker.living() == {103}


def test_a_recycled_pid_is_never_signalled() -> None:
    system = FakeSystem()
    tracker = system.tracker()
    system.run(101, ROOT, 5)
    system.run(103, 101, 7)
    tracker.poll()
    del system.table[101]
    system.run(103, 1, 9)  # 103 ended; an unrelated process got its pid later
    assert tracker.living() == set()
    system.table[103] = ProcessEntry(1, 7, True)  # (the old identity does not come back)
    assert tracker.living() == set()


def test_a_process_whose_parent_exited_unseen_is_known_by_its_mark() -> None:
    system = FakeSystem()
    tracker = system.tracker()
    mark = f"{MARK_VARIABLE}={tracker.mark}".encode()
    assert tracker.environment() == {**os.environ, MARK_VARIABLE: tracker.mark}
    system.run(50, 1, 1)  # an unrelated process
    tracker.poll()
    # a double fork between two polls: only the grandchild is left, under init
    system.run(104, 1, 8, environment=b"A=1\0" + mark + b"\0B=2\0")
    system.run(105, 1, 8, environment=b"A=1\0" + mark + b"X\0")  # another call's mark
    system.run(106, 1, 8, environment=None)  # another user's: unreadable
    assert tracker.living() == {104}
    reads = len(system.reads)
    tracker.poll()
    assert len(system.reads) == reads, "an environment is read once per process"


def test_an_environment_not_readable_yet_is_read_again() -> None:
    system = FakeSystem()
    tracker = system.tracker()
    mark = f"{MARK_VARIABLE}={tracker.mark}".encode()
    system.run(104, 1, 8, environment=b"")  # in the middle of exec
    assert tracker.living() == set()
    system.environments[104] = mark + b"\0"
    assert tracker.living() == {104}


def test_what_a_remembered_process_starts_later_is_remembered() -> None:
    system = FakeSystem()
    tracker = system.tracker()
    system.run(101, ROOT, 5)
    system.run(103, 101, 7)
    tracker.poll()
    del system.table[101]
    system.table[103] = ProcessEntry(1, 7, True)
    tracker.poll()
    system.run(110, 103, 20, environment=b"")  # a daemon's worker, environment cleared
    system.run(111, 110, 21, environment=b"")
    assert tracker.living() == {103, 110, 111}


def test_a_zombie_is_remembered_but_not_living() -> None:
    system = FakeSystem()
    tracker = system.tracker()
    system.run(101, ROOT, 5)
    tracker.poll()
    system.table[101] = ProcessEntry(ROOT, 5, False)
    assert tracker.living() == set()


def test_a_disabled_tracker_does_nothing() -> None:
    system = FakeSystem()
    tracker = system.tracker(enabled=False)
    system.run(101, ROOT, 5)
    tracker.start()
    assert tracker.environment() is None
    assert tracker.living() == set()
    assert system.reads == []


def test_the_host_passes_the_switch_as_an_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAKA_FAILPOINT", raising=False)
    assert supervised_spawn._test_options() == []
    monkeypatch.setenv("MAKA_FAILPOINT", CrashPoint.TOOL_SUPERVISOR_NO_SUBREAPER.value)
    assert supervised_spawn._test_options() == [NO_SUBREAPER_OPTION]
    assert tool_supervisor._become_subreaper(False) is False


def test_the_arguments_are_parsed() -> None:
    assert parse_arguments(["3", "4", "foreground", "--", "sh", "--", "x"]) == (
        3,
        4,
        "foreground",
        True,
        ["sh", "--", "x"],
    )
    assert parse_arguments(["3", "4", "background", "--no-subreaper", "--", "sh"]) == (
        3,
        4,
        "background",
        False,
        ["sh"],
    )
    for wrong in (
        ["3", "4", "foreground", "--"],
        ["3", "4", "foreground", "sh"],
        ["3", "4", "foreground", "--other", "--", "sh"],
        ["x", "4", "foreground", "--", "sh"],
        ["3", "--", "sh"],
    ):
        assert parse_arguments(wrong) is None, wrong


def _bsdinfo(pid: int, parent: int, status: int, seconds: int, microseconds: int) -> bytes:
    data = bytearray(136)
    for at, value in ((4, status), (12, pid), (16, parent)):
        data[at : at + 4] = value.to_bytes(4, sys.byteorder)
    data[120:128] = seconds.to_bytes(8, sys.byteorder)
    data[128:136] = microseconds.to_bytes(8, sys.byteorder)
    return bytes(data)


def test_a_macos_proc_bsdinfo_is_read() -> None:
    assert parse_bsdinfo(_bsdinfo(321, 1, 2, 1_700_000_000, 42)) == (
        321,
        ProcessEntry(1, 1_700_000_000_000_042, True),
    )
    assert parse_bsdinfo(_bsdinfo(321, 1, 5, 1, 0)) == (321, ProcessEntry(1, 1_000_000, False))
    assert parse_bsdinfo(b"\0" * 135) is None


def test_a_macos_procargs2_environment_is_read() -> None:
    data = (
        (2).to_bytes(4, sys.byteorder)
        + b"/bin/sh\0\0\0\0"
        + b"sh\0-c\0"
        + b"A=1\0MAKA_TOOL_CALL_MARK=7-ab\0\0\0\0garbage"
    )
    assert procargs_environment(data) == b"A=1\0MAKA_TOOL_CALL_MARK=7-ab\0"
    assert procargs_environment(b"\0\0") == b""
    assert procargs_environment((0).to_bytes(4, sys.byteorder) + b"/bin/sh") == b""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_real_double_fork_with_setsid_is_found(tmp_path: Path) -> None:
    """The real table and environments: the grandchild of a double fork that called setsid,
    re-parented away from this process before any poll saw it, is found by its mark."""
    tracker = DescendantTracker(os.getpid())
    pid_file = tmp_path / "escaped.pid"
    command = f"( setsid sh -c 'echo $$ > {pid_file}; exec sleep 30' < /dev/null & )"
    subprocess.run(["sh", "-c", command], env=tracker.environment(), check=True, timeout=30)
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    escaped = psutil.Process(int(pid_file.read_text()))
    try:
        assert escaped.ppid() != os.getpid()
        assert escaped.pid in tracker.living()
        other = subprocess.Popen(["sleep", "30"], start_new_session=True)  # below us, unmarked
        try:
            assert {escaped.pid, other.pid} <= tracker.living()
        finally:
            other.kill()
            other.wait()
    finally:
        escaped.kill()
        escaped.wait(10)
    assert escaped.pid not in tracker.living()
