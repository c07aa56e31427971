"""One main process per data directory, with the real ``maka`` command.

A second ``maka`` for the same data directory asks the running one to show its window and exits 0
(the running one pushes ``window.show`` to its renderer); a main process killed with SIGKILL
leaves its lock file and socket behind, and the next start takes both over.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import MessageKind, SessionsListRequest
from storage.instance_lock import LOCK_FILE_NAME
from tests.helpers.maka_process import run_maka, start_main
from tests.helpers.wire_client import WireClient

pytestmark = pytest.mark.e2e


def _renderer(qtbot: QtBot, socket_name: str, token: str) -> WireClient:
    client = WireClient(socket_name)
    client.hello(token)
    qtbot.waitUntil(lambda: client.has(MessageKind.HELLO_OK), timeout=10_000)
    return client


def test_second_launch_shows_the_running_window_and_exits_0(qtbot: QtBot, data_dir: Path) -> None:
    first = start_main(data_dir).wait_ready()
    try:
        renderer = _renderer(qtbot, first.socket_name, first.token)
        second = run_maka(data_dir, timeout_s=60)
        assert second.returncode == 0, second.stderr
        assert "already running" in second.stderr
        assert "MAKA_MAIN_" not in second.stdout  # it never became a main process
        qtbot.waitUntil(lambda: renderer.has(MessageKind.WINDOW_SHOW), timeout=10_000)
        assert first.process.poll() is None
        renderer.send(SessionsListRequest(correlation_id="after"))
        qtbot.waitUntil(lambda: renderer.has(MessageKind.SESSIONS_LISTED), timeout=10_000)
    finally:
        first.stop()


def test_a_sigkilled_holder_leaves_a_stale_lock_that_the_next_start_takes_over(
    qtbot: QtBot, data_dir: Path
) -> None:
    first = start_main(data_dir).wait_ready()
    first.process.send_signal(signal.SIGKILL)
    first.process.wait(10)
    first.stop()
    assert (data_dir / LOCK_FILE_NAME).exists(), "SIGKILL leaves the lock file behind"
    started = time.monotonic()
    second = start_main(data_dir).wait_ready()
    try:
        assert time.monotonic() - started < 30
        assert second.socket_name == first.socket_name  # the stale socket was replaced
        renderer = _renderer(qtbot, second.socket_name, second.token)
        renderer.send(SessionsListRequest(correlation_id="x"))
        qtbot.waitUntil(lambda: renderer.has(MessageKind.SESSIONS_LISTED), timeout=10_000)
        stale = WireClient(first.socket_name)
        stale.hello(first.token)  # the old launch's token means nothing to the new process
        qtbot.waitUntil(lambda: stale.disconnected, timeout=10_000)
        assert stale.first(MessageKind.HELLO_REJECTED) is not None
    finally:
        second.stop()


def test_different_data_directories_run_side_by_side(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = start_main(tmp_path / "a").wait_ready()
    second = start_main(tmp_path / "b").wait_ready()
    try:
        assert first.socket_name != second.socket_name
        assert first.process.poll() is None and second.process.poll() is None
    finally:
        first.stop()
        second.stop()


def test_a_lock_held_by_a_command_that_does_not_listen_is_store_locked(data_dir: Path) -> None:
    """``maka run`` (or any owning command) holds the same lock but serves no window: the
    desktop says who owns the directory and exits 1 instead of waiting forever."""
    from storage.instance_lock import InstanceLock, LockOutcome

    holder = InstanceLock(data_dir)
    assert holder.acquire().outcome is LockOutcome.ACQUIRED
    try:
        started = time.monotonic()
        result = run_maka(data_dir, timeout_s=60)
        assert result.returncode == 1
        assert "maka: error [store_locked]:" in result.stderr
        assert f"pid {os.getpid()}" in result.stderr
        assert time.monotonic() - started < 20
        assert not (data_dir / "runtime.sqlite").exists(), "the store was never opened"
    finally:
        holder.release()
