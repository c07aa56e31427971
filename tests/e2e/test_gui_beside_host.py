"""``maka gui`` beside a running ``maka host``: a window attaches to the host.

Real processes, offscreen: ``maka host`` owns a data folder; ``maka gui`` on the same folder asks
it for a window and exits 0 without taking the folder's lock; the host starts a renderer of its
own (the desktop's, with a new one-time token) and serves it as the desktop serves its window.
Closing that window leaves the host running, and the next ``maka gui`` attaches another one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.maka_process import main_log, maka_executable, run_maka, start_main

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform == "win32", reason="terminal clients attach over Unix sockets"),
]


def _wait_for(predicate: Callable[[], bool], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _renderer_pids(data: Path) -> list[int]:
    return [int(pid) for pid in re.findall(r"renderer started \(pid (\d+)\)", main_log(data))]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _served_by(data: Path) -> object:
    listed = run_maka(data, "sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout).get("servedBy")


def test_maka_gui_attaches_a_window_to_a_running_host(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    host = start_main(data, None, "host").wait_ready()
    windows: list[int] = []
    try:
        gui = run_maka(data, "gui", timeout_s=60)
        assert gui.returncode == 0, gui.stderr
        assert "opens a window on this data folder" in gui.stderr
        assert f"maka host (pid {host.pid})" in gui.stderr
        assert "MAKA_MAIN_" not in gui.stdout  # it never became a host itself
        _wait_for(lambda: "renderer connection" in main_log(data))
        _wait_for(lambda: bool(_renderer_pids(data)))
        windows = _renderer_pids(data)
        assert re.search(r"renderer connection \d+ authenticated", main_log(data))
        # The folder still belongs to the host: commands are served by it.
        assert _served_by(data) == {"host": "headless", "pid": host.pid}

        # Closing the window leaves the host running.
        os.kill(windows[0], signal.SIGTERM)
        _wait_for(lambda: "the host goes on" in main_log(data))
        assert host.process.poll() is None
        assert _served_by(data) == {"host": "headless", "pid": host.pid}

        # Asked again, the host attaches another window.
        again = run_maka(data, "gui", timeout_s=60)
        assert again.returncode == 0, again.stderr
        _wait_for(lambda: len(_renderer_pids(data)) == 2)
        windows = _renderer_pids(data)
        _wait_for(
            lambda: len(re.findall(r"renderer connection \d+ authenticated", main_log(data))) == 2
        )

        # Stopping the host closes its window too.
        assert host.terminate(signal.SIGTERM, timeout_s=60) == 0, host.stderr()
        _wait_for(lambda: not _alive(windows[1]), timeout_s=30)
    finally:
        host.stop()
        for pid in windows:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_maka_gui_beside_a_host_that_does_not_answer_says_so(tmp_path: Path) -> None:
    """A host stopped with SIGSTOP: its socket still takes the request to open a window, and
    ``maka gui`` said "already running; brought its window to front" though nothing answers."""
    data = tmp_path / "data"
    data.mkdir()
    host = start_main(data, None, "host").wait_ready()
    os.kill(host.pid, signal.SIGSTOP)
    try:
        gui = run_maka(data, "gui", timeout_s=90)
    finally:
        os.kill(host.pid, signal.SIGCONT)
        host.stop()
    assert gui.returncode == 1, gui
    assert "host_unreachable" in gui.stderr and "does not answer" in gui.stderr, gui.stderr
    assert "brought its window to front" not in gui.stderr


def _without_display(data: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")
    }
    env["MAKA_DATA_DIR"] = str(data)
    env.update(extra)
    command = [*maka_executable(), *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11 and Wayland displays")
def test_maka_gui_with_no_display_says_so_and_starts_nothing(tmp_path: Path) -> None:
    """Over SSH or on a server: one coded sentence and exit 1, no data folder made. Before, Qt's
    plugin error ("Reinstalling the application may fix this problem") three times, two restarts
    of the window's process and "the renderer keeps crashing". Beside a running host the window
    is the host's to open (on its own display), as before."""
    data = tmp_path / "data"
    for args in (("gui",), ()):
        result = _without_display(data, *args)
        assert result.returncode == 1, result.stderr
        assert result.stderr.startswith("maka: error [display_unavailable]: "), result.stderr
        assert "maka tui" in result.stderr
        assert "Reinstalling" not in result.stderr and "renderer" not in result.stderr
        assert not data.exists()
    # A DISPLAY left from an ended SSH session names a display nobody serves: the same.
    assert not Path("/tmp/.X11-unix/X4242").exists()
    stale = _without_display(data, "gui", DISPLAY=":4242")
    assert stale.returncode == 1, stale.stderr
    assert "DISPLAY=:4242 names a display that does not answer" in stale.stderr, stale.stderr
    assert "Reinstalling" not in stale.stderr and not data.exists()
    data.mkdir()
    host = start_main(data, None, "host").wait_ready()
    try:
        beside = _without_display(data, "gui")
        assert beside.returncode == 0, beside.stderr
        assert "opens a window on this data folder" in beside.stderr
        _wait_for(lambda: bool(_renderer_pids(data)))
    finally:
        host.stop()
        # The window the host opened outlives a host killed under it (it says the host is
        # gone, as a user's window does): stopped here, or it stays behind idle.
        for pid in _renderer_pids(data):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_maka_gui_beside_a_host_without_a_display_says_so(tmp_path: Path) -> None:
    """``maka host`` started where there is no display: ``maka gui`` beside it said a window
    opens (exit 0), and the window's process crashed in the host."""
    data = tmp_path / "data"
    data.mkdir()
    no_display = {"QT_QPA_PLATFORM": "", "DISPLAY": "", "WAYLAND_DISPLAY": ""}
    host = start_main(data, no_display, "host").wait_ready()
    try:
        gui = run_maka(data, "gui", extra_env=no_display, timeout_s=60)
        assert gui.returncode == 1, gui.stderr
        assert "[display_unavailable]" in gui.stderr and "no display" in gui.stderr
        assert f"maka host (pid {host.pid})" in gui.stderr
        assert "opens a window" not in gui.stderr
        time.sleep(1.0)
        assert _renderer_pids(data) == []
        assert host.process.poll() is None
    finally:
        host.stop()


def test_a_question_a_killed_terminal_left_stops_when_the_hosts_window_crashes(
    tmp_path: Path,
) -> None:
    """``maka host`` with a window ``maka gui`` opened: a terminal asking a question is
    killed, so the question waits for the window; the window then crashes. The host counted
    its window as coming until it saw the process end (after the connection closed), and the
    turn waited for ever, the session busy. It stops there, not denied."""
    from tests.helpers.maka_run import committed_runs, scripted_env, write_script

    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    write = {"id": "w1", "name": "write_file", "args": {"path": "a.txt", "content": "hi\n"}}
    script = write_script(
        tmp_path / "script.json", [[{"text": "Writing.", "toolCalls": [write]}, {"text": "ok"}]]
    )
    env = scripted_env(script)
    host = start_main(data, env, "host").wait_ready()
    windows: list[int] = []
    driver: subprocess.Popen[str] | None = None
    try:
        assert run_maka(data, "gui", extra_env=env, timeout_s=60).returncode == 0
        _wait_for(lambda: bool(re.search(r"renderer connection \d+ authenticated", main_log(data))))
        windows = _renderer_pids(data)
        driver = subprocess.Popen(
            [*maka_executable(), "run", "--cwd", str(work), "--permission-mode", "ask", "go"],
            env={**os.environ, **env, "MAKA_DATA_DIR": str(data), "QT_QPA_PLATFORM": "offscreen"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert driver.stdout is not None
        seen = ""
        while "Allow? [y/N]" not in seen:
            seen += driver.stdout.read(1) or ""
            assert driver.poll() is None, seen
        driver.kill()
        driver.wait(30)
        time.sleep(1.0)
        [(header, _)] = committed_runs(data)
        assert str(header.status) == "running"  # the window may answer it
        os.kill(windows[0], signal.SIGKILL)
        _wait_for(lambda: str(committed_runs(data)[0][0].status) in ("cancelled", "completed"))
        assert str(committed_runs(data)[0][0].status) == "cancelled"
        assert not (work / "a.txt").exists()
        assert host.process.poll() is None
    finally:
        if driver is not None:
            if driver.poll() is None:
                driver.kill()
            driver.wait(30)
            for stream in (driver.stdin, driver.stdout):
                if stream is not None:
                    stream.close()
        host.stop()
        for pid in windows:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
