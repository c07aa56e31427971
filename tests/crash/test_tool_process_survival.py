"""Tool processes die with their host, and a survivor is seen (docs/design/recovery.md section 9).

A real ``maka run`` (scripted provider, real bash tool, real store) starts
``echo started; sleep N; echo done >> late.txt`` and is killed with SIGKILL while the command
sleeps. With the supervisor (the product's normal path) the command's whole process group is
gone within 2 seconds and ``late.txt`` never appears. With the supervisor disabled by the
test-only failpoint the command survives on purpose: ``maka plan`` then parks with
``background_operation_pending`` naming the command and pid and how to stop it, and stopping it
clears the park.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from runtime.ledger.process_records import ToolProcessRecord
from runtime.tools.process_identity import running_process, stop_tool_process
from storage.ledger.ledger_store import open_store
from tests.helpers.maka_process import maka_executable
from tests.helpers.maka_run import maka, scripted_env, write_script

pytestmark = pytest.mark.crash

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}


def _command(seconds: int) -> str:
    return f"echo started > started.txt; sleep {seconds}; echo done >> late.txt"


def _start_run(tmp_path: Path, seconds: int, **env: str) -> tuple[subprocess.Popen[str], Path]:
    work = tmp_path / "work"
    work.mkdir()
    script = write_script(
        tmp_path / "script.json",
        [
            [
                {
                    "text": "Running it.",
                    "toolCalls": [
                        {"id": "c1", "name": "bash", "args": {"command": _command(seconds)}}
                    ],
                },
                {"text": "Done."},
            ]
        ],
    )
    environment = dict(os.environ)
    environment.pop("MAKA_FAILPOINT", None)
    environment.update(
        {"MAKA_DATA_DIR": str(tmp_path / "data"), "QT_QPA_PLATFORM": "offscreen"},
    )
    environment.update(scripted_env(script))
    environment.update(env)
    host = subprocess.Popen(
        [*maka_executable(), "run", "--cwd", str(work), "--permission-mode", "auto", "go"],
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not (work / "started.txt").exists():
        assert host.poll() is None, "maka run ended before the command started"
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.02)
    return host, work


def _recorded(data_dir: Path) -> list[ToolProcessRecord]:
    """The records once the host has written them (right after the spawn, so a moment after
    the command itself started)."""
    deadline = time.monotonic() + 10
    while not (records := _records(data_dir)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return records


def _records(data_dir: Path) -> list[ToolProcessRecord]:
    store = open_store(data_dir, read_only=True)
    try:
        return list(store.list_tool_processes())
    finally:
        store.close()


def _kill_host(host: subprocess.Popen[str]) -> None:
    host.send_signal(signal.SIGKILL)
    host.wait(10)


def test_sigkill_of_the_host_takes_the_whole_command_with_it(tmp_path: Path) -> None:
    host, work = _start_run(tmp_path, seconds=4)
    records = _recorded(tmp_path / "data")
    assert len(records) == 1, "the command's process was recorded right after the spawn"
    record = records[0]
    assert record.tool_name == "bash" and record.command == _command(4)
    shell = psutil.Process(record.pid)
    group = [shell, *shell.children(recursive=True)]
    assert any("sleep" in " ".join(p.cmdline()) for p in group)
    killed_at = time.monotonic()
    _kill_host(host)
    _, alive = psutil.wait_procs(group, timeout=2.0)
    assert time.monotonic() - killed_at < 2.5
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    assert running_process(record) is None
    time.sleep(4.5)  # past the moment the command would have written
    assert not (work / "late.txt").exists()
    plan = maka(["plan", record.session_id, "--json"], tmp_path / "data", env=FLAG)
    body = json.loads(plan.stdout)
    assert "background_operation_pending" not in body["rejectionReasons"]
    assert _records(tmp_path / "data") == [], "startup forgot the record of the ended process"


def test_a_survivor_is_reported_with_command_and_pid_until_it_is_stopped(tmp_path: Path) -> None:
    host, work = _start_run(tmp_path, seconds=60, MAKA_FAILPOINT="tool_supervisor_disabled")
    (record,) = _recorded(tmp_path / "data")
    _kill_host(host)
    try:
        time.sleep(0.5)
        assert running_process(record) is not None, "without the supervisor it survives"
        data = tmp_path / "data"
        text = maka(["plan", record.session_id], data, env=FLAG)
        assert text.returncode == 3, text.stderr
        assert "background_operation_pending" in text.stdout
        assert f"pid {record.pid}" in text.stdout and "sleep 60" in text.stdout
        assert f"kill -TERM -- -{record.process_group}" in text.stdout
        assert "Once it has ended you can say on the record" in text.stdout
        body = json.loads(maka(["plan", record.session_id, "--json"], data, env=FLAG).stdout)
        assert "background_operation_pending" in body["rejectionReasons"]
        assert _records(data) == [record], "a live record is kept"
        assert stop_tool_process(record)
        assert running_process(record) is None
        body = json.loads(maka(["plan", record.session_id, "--json"], data, env=FLAG).stdout)
        assert "background_operation_pending" not in body["rejectionReasons"]
        assert not (work / "late.txt").exists()
    finally:
        stop_tool_process(record, grace_seconds=0.5)
