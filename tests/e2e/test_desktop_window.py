"""The real two-process desktop app (offscreen): the main process starts its renderer from the
same program, the renderer authenticates with its one-time token, a crashed renderer is started
again with a new token, and SIGTERM ends both processes in order."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from tests.helpers.maka_process import main_log, maka_env, maka_executable

pytestmark = pytest.mark.e2e


def _wait_for(predicate: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def _renderers(main: subprocess.Popen[bytes]) -> list[psutil.Process]:
    """The main process's renderer children (not the Git commands its start-up maintenance may
    be running at that moment)."""
    try:
        children: list[psutil.Process] = psutil.Process(main.pid).children(recursive=False)
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        try:
            if "--role renderer" in " ".join(child.cmdline()):
                found.append(child)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue  # (a short-lived child that has ended)
    return found


def test_the_window_process_starts_reconnects_after_a_crash_and_stops_with_the_main(
    data_dir: Path,
) -> None:
    env = maka_env(data_dir)
    env.pop("MAKA_NO_RENDERER")
    main = subprocess.Popen(maka_executable(), env=env)
    try:
        _wait_for(lambda: "renderer connection 1 authenticated" in main_log(data_dir))
        (renderer,) = _renderers(main)
        command = " ".join(renderer.cmdline())
        token = renderer.environ()["MAKA_RENDERER_TOKEN"]  # readable by this user only
        assert len(token) >= 32
        assert token not in command, "the token never appears on the command line"

        os.kill(renderer.pid, signal.SIGKILL)  # a renderer crash loses nothing
        _wait_for(lambda: "renderer connection 2 authenticated" in main_log(data_dir))
        assert "the renderer crashed; starting it again" in main_log(data_dir)
        (second,) = _renderers(main)
        assert second.pid != renderer.pid
        assert second.environ()["MAKA_RENDERER_TOKEN"] != token, "one token per launch"

        main.send_signal(signal.SIGTERM)
        assert main.wait(30) == 0
        _wait_for(lambda: not second.is_running() or second.status() == psutil.STATUS_ZOMBIE)
        assert "main process closed (exit 0)" in main_log(data_dir)
    finally:
        if main.poll() is None:
            main.kill()
            main.wait(10)
