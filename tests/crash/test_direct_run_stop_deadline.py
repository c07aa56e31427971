"""``maka run`` without a host, on PostgreSQL, holds its session's lease like a host does, so it
sends the lease's runway deadline to its tool supervisors too (docs/postgres.md): stopped
(SIGSTOP) while its command runs, it can renew nothing, and the command ends at the deadline it
last sent, by its supervisor, before another host could take the session over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import psycopg
import pytest

from tests.helpers.maka_process import maka_env, maka_executable
from tests.helpers.maka_run import write_script

pytestmark = [
    pytest.mark.crash,
    pytest.mark.skipif(sys.platform == "win32", reason="SIGSTOP and the POSIX tool supervisor"),
]

TTL_S, RUNWAY_S = 3.0, 1.0
COMMAND = "echo one >> side.txt; sleep 30; echo late >> side.txt"


def _gone(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def _command_pid(url: str, deadline: float) -> int:
    while time.monotonic() < deadline:
        with psycopg.connect(url) as conn:
            try:
                row = conn.execute("SELECT pid FROM tool_processes").fetchone()
            except psycopg.errors.UndefinedTable:
                row = None
        if row is not None:
            return int(row[0])
        time.sleep(0.05)
    raise AssertionError("the command never started")


def test_a_stopped_direct_runs_command_ends_at_its_runway_deadline(
    tmp_path: Path, postgres_url: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    script = tmp_path / "script.json"
    write_script(
        script,
        [
            [
                {
                    "text": "Run.",
                    "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": COMMAND}}],
                },
                {"text": "Done."},
            ]
        ],
    )
    env = maka_env(
        tmp_path / "data",
        {
            "MAKA_PROVIDER": "scripted",
            "MAKA_SCRIPT_FILE": str(script),
            "MAKA_DATABASE_URL": postgres_url,
            "MAKA_SESSION_LEASE_TTL_MS": str(int(TTL_S * 1000)),
            "MAKA_SESSION_LEASE_RUNWAY_MS": str(int(RUNWAY_S * 1000)),
        },
    )
    run = subprocess.Popen(
        [*maka_executable(), "run", "--cwd", str(work), "--permission-mode", "auto", "go"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        pid = _command_pid(postgres_url, time.monotonic() + 60)
        os.kill(run.pid, signal.SIGSTOP)  # renews nothing, sends no deadline from now on
        stopped = time.monotonic()
        while not _gone(pid) and time.monotonic() < stopped + 15:
            time.sleep(0.05)
        ended = time.monotonic() - stopped
        assert _gone(pid), "the stopped command outlived its lease's runway"
        # At most ttl - runway after the last renewal, plus the supervisor's grace: before any
        # other host could take over (ttl + grace).
        assert ended < TTL_S - RUNWAY_S + 1.5, ended
    finally:
        run.kill()
        run.wait(10)
    assert (work / "side.txt").read_text() == "one\n"
