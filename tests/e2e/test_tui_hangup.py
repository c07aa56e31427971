"""The terminal closes (SIGHUP) while ``maka tui``'s turn runs a slow command: the TUI cancels
the turn as Ctrl+C does, so the run ends ``cancelled`` (not left running until the next start),
then leaves; alone and beside a running ``maka host``."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from runtime.ledger.store_ports import RunStatus
from tests.e2e.test_run_through_host import Streaming
from tests.helpers.maka_process import start_main
from tests.helpers.maka_run import committed_runs, scripted_env, write_script

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform == "win32", reason="no SIGHUP"),
]

SLEEP = {"id": "b1", "name": "bash", "args": {"command": "sleep 60"}}


def _statuses(data: Path, timeout_s: float = 30) -> list[RunStatus]:
    deadline = time.monotonic() + timeout_s
    while True:
        statuses = [header.status for header, _ in committed_runs(data)]
        if (statuses and RunStatus.RUNNING not in statuses) or time.monotonic() > deadline:
            return statuses
        time.sleep(0.1)


@pytest.mark.parametrize("beside_a_host", [False, True])
def test_sighup_during_a_turn_cancels_it_and_the_tui_leaves(
    tmp_path: Path, beside_a_host: bool
) -> None:
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    data.mkdir()
    env = scripted_env(write_script(tmp_path / "s.json", [[{"toolCalls": [SLEEP]}, {"text": "x"}]]))
    host = start_main(data, env, "host").wait_ready() if beside_a_host else None
    chat = Streaming(["tui", "--cwd", str(work), "--permission-mode", "auto"], data, env)
    try:
        assert chat.process.stdin is not None
        chat.process.stdin.write("sleep a minute\n")
        chat.process.stdin.flush()
        chat.wait_for(lambda: any("[tool] bash" in line for line in chat.out))
        time.sleep(0.5)  # the command runs
        os.kill(chat.process.pid, signal.SIGHUP)
        chat.process.wait(30)  # it leaves, though its input is still open
        assert chat.process.returncode == 0, chat.text()
        assert _statuses(data) == [RunStatus.CANCELLED], chat.text()
    finally:
        chat.kill()
        if host is not None:
            host.stop()


def test_sighup_during_maka_run_cancels_its_turn(tmp_path: Path) -> None:
    """``maka run`` (no host) died of the SIGHUP mid-command: the call was left with no
    outcome, so ``maka plan`` parked and the user had a call to settle. It now ends the turn
    ``cancelled``, as ``maka tui`` does."""
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    data.mkdir()
    env = scripted_env(write_script(tmp_path / "s.json", [[{"toolCalls": [SLEEP]}, {"text": "x"}]]))
    run = Streaming(["run", "--cwd", str(work), "--permission-mode", "auto", "sleep"], data, env)
    try:
        run.wait_for(lambda: any("[tool] bash" in line for line in run.out))
        time.sleep(0.5)  # the command runs
        os.kill(run.process.pid, signal.SIGHUP)
        run.process.wait(30)
        assert run.process.returncode != -signal.SIGHUP, run.text()
        assert _statuses(data) == [RunStatus.CANCELLED], run.text()
    finally:
        run.kill()
