"""The console's fast exit: granted only to the console entry point, it delivers everything the
command wrote and the command's exit code; called in-process, a command keeps normal teardown."""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
from pathlib import Path

from app import process_exit
from app.commands.ledger_report import run_plan
from tests.helpers.ledger_builders import to_jsonl, tool_turn, user_text


def test_in_process_a_command_gets_no_fast_exit_and_the_collector_stays_on(
    tmp_path: Path,
) -> None:
    assert process_exit.request_fast_exit(object()) is False
    assert not process_exit.fast_exit_requested()
    path = tmp_path / "run.jsonl"
    path.write_bytes(to_jsonl([user_text(marker=True), *tool_turn("c1")]))
    assert gc.isenabled()
    assert run_plan(argparse.Namespace(file=path, json=True, expected_high_water=None)) == 0
    assert gc.isenabled()
    assert not process_exit.fast_exit_requested()


def test_the_console_exit_delivers_buffered_output_and_the_exit_code() -> None:
    probe = (
        "import sys\n"
        "from app import process_exit\n"
        "process_exit.enter_console()\n"
        "assert process_exit.request_fast_exit([1, 2, 3])\n"
        "sys.stdout.write('x' * 100000)\n"
        "sys.stderr.write('done')\n"
        "process_exit.exit_now(3)\n"
        "print('never reached')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3
    assert done.stdout == "x" * 100000
    assert done.stderr == "done"
