"""The runway deadline a host sends its tool supervisors (``host_bootstrap.start_deadline_feed``)
after an outage: the write that dispatches a command may itself have renewed the lease a moment
ago, while the deadline last sent (up to a quarter second old) had already passed. A command
started then reads the live deadline and runs; it is not ended at a deadline the host has already
moved on. Real supervised processes."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.host.host_bootstrap import start_deadline_feed
from runtime.tools import supervised_spawn
from runtime.tools.supervised_spawn import SupervisedCommand

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the POSIX tool supervisor")


class _Lease:
    """Only what the feed reads: the runway deadline after the latest renewal."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def runway_deadline(self) -> float | None:
        return self.deadline


@pytest.fixture
def feed_stop() -> Iterator[threading.Event]:
    stop = threading.Event()
    yield stop
    stop.set()
    time.sleep(0.4)  # the feed's thread ends and forgets the live source
    with supervised_spawn._DEADLINE_LOCK:
        supervised_spawn._DEADLINE.clear()
        supervised_spawn._DEADLINE_SOURCE.clear()


def _run(tmp_path: Path) -> int:
    command = SupervisedCommand(
        ["sh", "-c", "sleep 0.5; echo one > side.txt"], cwd=tmp_path, stdout=subprocess.DEVNULL
    )
    try:
        return command.wait(10)
    finally:
        command.release()


def test_a_command_dispatched_right_after_a_renewal_runs(
    tmp_path: Path, feed_stop: threading.Event
) -> None:
    lease = _Lease(time.monotonic() - 1)  # the renewals failed: the deadline sent has passed
    start_deadline_feed(lease, feed_stop)  # type: ignore[arg-type]
    with supervised_spawn._DEADLINE_LOCK:
        assert supervised_spawn._DEADLINE[0] < time.monotonic()
    lease.deadline = time.monotonic() + 10  # the dispatching write renewed the lease just now
    assert _run(tmp_path) == 0
    assert (tmp_path / "side.txt").read_text() == "one\n"


def test_a_command_still_ends_at_a_deadline_that_has_passed(
    tmp_path: Path, feed_stop: threading.Event
) -> None:
    lease = _Lease(time.monotonic() - 1)  # no renewal since: the lease may be gone
    start_deadline_feed(lease, feed_stop)  # type: ignore[arg-type]
    assert _run(tmp_path) < 0  # stopped by a signal, by its supervisor
    assert not (tmp_path / "side.txt").exists()
