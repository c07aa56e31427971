"""A host on a shared ledger sends its lease's runway deadline to every tool supervisor; a command
ends at that deadline by its supervisor's hand, even while the host itself is stopped (SIGSTOP)
and cannot act (docs/design/hosts.md section 2, "fencing the world"). Real processes: a child
host starts ``sleep``, sends a deadline, is stopped; the command is gone by the deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from runtime.tools import supervised_spawn
from runtime.tools.supervised_spawn import SupervisedCommand, set_stop_deadline

pytestmark = [
    pytest.mark.crash,
    pytest.mark.skipif(sys.platform == "win32", reason="the POSIX tool supervisor"),
]

CHILD = """
import sys, time
from pathlib import Path
from runtime.tools.supervised_spawn import SupervisedCommand, set_stop_deadline
command = SupervisedCommand(["sleep", "60"], cwd=Path("."), stdout=sys.stderr.fileno())
set_stop_deadline(time.monotonic() + float(sys.argv[1]))
print(command.pid, flush=True)
time.sleep(120)
"""


def _gone(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def test_a_stopped_hosts_command_ends_at_the_deadline(tmp_path: Path) -> None:
    host = subprocess.Popen(
        [sys.executable, "-c", CHILD, "1.5"], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
    )
    try:
        assert host.stdout is not None
        pid = int(host.stdout.readline())
        os.kill(host.pid, signal.SIGSTOP)  # the host can do nothing from now on
        sent = time.monotonic()
        assert not _gone(pid)
        while not _gone(pid) and time.monotonic() < sent + 10:
            time.sleep(0.05)
        ended = time.monotonic() - sent
        assert _gone(pid), "the command outlived its deadline"
        assert ended < 1.5 + 1.5, ended  # the deadline, plus the supervisor's grace
    finally:
        host.kill()
        host.wait(10)
        if host.stdout is not None:
            host.stdout.close()


def test_a_deadline_moved_on_keeps_the_command_running(tmp_path: Path) -> None:
    command = SupervisedCommand(["sleep", "60"], cwd=tmp_path, stdout=subprocess.DEVNULL)
    try:
        for _ in range(6):  # renewals every 0.25 s, each half a second ahead
            set_stop_deadline(time.monotonic() + 0.5)
            time.sleep(0.25)
        assert not _gone(command.pid)
        assert not command.stopped_at_deadline
        started = time.monotonic()
        assert command.wait(5) < 0  # no renewal any more: stopped by a signal at the deadline
        assert time.monotonic() - started < 3
        # Said so: the command's result says Maka ended it (``stoppedByHost``), not that it
        # failed by itself with a signal.
        assert command.stopped_at_deadline
    finally:
        command.kill()
        command.release()
        with supervised_spawn._DEADLINE_LOCK:
            supervised_spawn._DEADLINE.clear()
