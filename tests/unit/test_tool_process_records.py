"""The ``tool_processes`` host table and process identity (docs/design/recovery.md section 9): a
record is written right after spawn, cleared by T2, survives a restart only while its process runs,
and a reused pid (or another boot) is never taken for ours."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil

from runtime.base.cancel_token import CancelToken
from runtime.ledger.process_records import ToolProcessRecord
from runtime.ledger.store_ports import RunHeader, RunStatus, SessionRecord
from runtime.tools.bash_tool import BashTool
from runtime.tools.process_identity import (
    TableProcessRecorder,
    current_boot_id,
    forget_ended,
    how_to_stop,
    identify,
    live_tool_processes,
    running_process,
    stop_tool_process,
    surviving_process,
)
from runtime.tools.tool_contract import ToolContext
from storage.ledger import ledger_schema
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from storage.ledger.sqlite_connection import DATABASE_NAME
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    dispatch_event,
    operation_of,
    user_text,
)

IDS = RunIds()


def _store(data_dir: Path) -> SqliteLedgerStore:
    store = open_store(data_dir)
    store.create_session(SessionRecord(IDS.session_id, "/work", "a session", 1))
    store.create_run(
        RunHeader(
            IDS.run_id,
            IDS.session_id,
            IDS.invocation_id,
            IDS.turn_id,
            RunStatus.CREATED,
            "/work",
            store.bump_owner_epoch(),
            1,
            1,
        )
    )
    return store


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )


def _record_of(pid: int, operation_id: str = "op-1", epoch: int = 1) -> ToolProcessRecord:
    identity = identify(pid, pid)
    return ToolProcessRecord(
        operation_id=operation_id,
        session_id=IDS.session_id,
        run_id=IDS.run_id,
        tool_name="bash",
        command="sleep 60",
        pid=pid,
        process_group=pid,
        create_time=identity.create_time,
        boot_id=identity.boot_id,
        owner_epoch=epoch,
        started_at=1,
    )


def test_t2_clears_the_calls_process_record(data_dir: Path) -> None:
    with _store(data_dir) as store:
        store.mark_run_running(IDS.run_id)
        store.append_event(user_text(ids=IDS, marker=True))
        call = call_event(ids=IDS)
        op = operation_of(call)
        store.commit_tool_prepared(call, dispatch_event(call))
        store.record_tool_process(_record_of(_pid_of_self())._replace(operation_id=op))
        store.record_tool_process(_record_of(_pid_of_self())._replace(operation_id="other"))
        assert len(store.list_tool_processes(operation_id=op)) == 1
        store.commit_tool_outcome(bound_response(call))
        assert store.list_tool_processes(operation_id=op) == []
        assert [r.operation_id for r in store.list_tool_processes()] == ["other"]


def _pid_of_self() -> int:
    return os.getpid()


def test_a_live_record_is_seen_and_an_ended_one_forgotten(data_dir: Path) -> None:
    sleeper = _sleeper()
    try:
        with _store(data_dir) as store:
            store.record_tool_process(_record_of(sleeper.pid, "op-live"))
            ended = subprocess.Popen([sys.executable, "-c", "pass"])
            ended_record = _record_of(ended.pid, "op-ended")
            ended.wait()
            store.record_tool_process(ended_record)
            live = live_tool_processes(store, session_id=IDS.session_id, before_epoch=2)
            assert [r.operation_id for r in live] == ["op-live"]
            assert live_tool_processes(store, before_epoch=1) == []  # only older starts
            assert live_tool_processes(store, operation_id="op-ended") == []
            assert forget_ended(store, before_epoch=2) == 1
            assert [r.operation_id for r in store.list_tool_processes()] == ["op-live"]
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_reused_pid_or_another_boot_is_never_ours() -> None:
    sleeper = _sleeper()
    try:
        record = _record_of(sleeper.pid)
        assert running_process(record) is not None
        # the same pid number, but a process created at another time: a reused pid
        assert running_process(record._replace(create_time=record.create_time - 30)) is None
        # the same pid and create time on another boot
        assert running_process(record._replace(boot_id="another-boot")) is None
        # stopping a record that is not ours signals nothing
        assert stop_tool_process(record._replace(create_time=record.create_time + 5))
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()
    assert current_boot_id()


def test_stop_ends_the_whole_group_and_says_how_to_stop_by_hand() -> None:
    shell = subprocess.Popen(
        ["/bin/sh", "-c", "sleep 60 & sleep 60 & wait"], start_new_session=True
    )
    try:
        deadline = time.monotonic() + 5
        parent = psutil.Process(shell.pid)
        while len(parent.children()) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        members = [parent, *parent.children(recursive=True)]
        record = _record_of(shell.pid)
        assert how_to_stop(record) == f"kill -TERM -- -{shell.pid}"
        assert stop_tool_process(record, grace_seconds=2)
        shell.wait(5)
        _, alive = psutil.wait_procs(members, timeout=2)
        assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    finally:
        if shell.poll() is None:
            shell.kill()
            shell.wait()


def test_a_version_2_database_gains_the_table(data_dir: Path) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(data_dir / DATABASE_NAME, isolation_level=None)
    for step in (1, 2):
        for statement in ledger_schema.MIGRATIONS[step]:
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 2")
    conn.close()
    with open_store(data_dir) as store:
        assert store.schema_version() == ledger_schema.SCHEMA_VERSION
        assert store.list_tool_processes() == []


def test_attestation_can_ask_for_a_surviving_process_inside_a_write(data_dir: Path) -> None:
    sleeper = _sleeper()
    try:
        with _store(data_dir) as store:
            store.record_tool_process(_record_of(sleeper.pid, "op-live"))
            check = surviving_process(store)
            with store._write():  # the attestation writer asks inside its transaction
                assert check("op-live") == f"bash `sleep 60` (pid {sleeper.pid})"
                assert check("op-other") is None
            sleeper.kill()
            sleeper.wait()
            assert check("op-live") is None
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()


def test_a_command_that_ends_before_it_is_recorded_still_runs_and_is_recorded(
    data_dir: Path, tmp_path: Path
) -> None:
    """A quick command may end (and be reaped by its supervisor) before the host records it;
    under load that is the common case. Its identity comes from its supervisor, read before the
    reap, so the call is recorded with its real start time and is not reported as stopped."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with _store(data_dir) as store:
        recorder = TableProcessRecorder(store, owner_epoch=1)
        seen: list[int] = []

        def record_after_the_command_ended(
            ctx: ToolContext,
            tool_name: str,
            command: str,
            pid: int,
            process_group: int,
            *,
            create_time: float | None = None,
        ) -> None:
            deadline = time.monotonic() + 10
            while psutil.pid_exists(pid) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not psutil.pid_exists(pid), "the command should have ended and been reaped"
            seen.append(pid)
            recorder(ctx, tool_name, command, pid, process_group, create_time=create_time)

        ctx = ToolContext(
            cwd=Path(os.path.realpath(workspace)),
            cancel=CancelToken(),
            session_id=IDS.session_id,
            run_id=IDS.run_id,
            operation_id="op-quick",
            process_recorder=record_after_the_command_ended,
        )
        before = time.time()
        tool = BashTool()
        output = tool.run(tool.prepare({"command": "echo x >> counter.txt"}, ctx), ctx)
        assert not output.is_error, output.result
        assert output.result["exitCode"] == 0
        assert (workspace / "counter.txt").read_text() == "x\n"
        [record] = store.list_tool_processes(operation_id="op-quick")
        assert record.pid == seen[0]
        assert before - 1 <= record.create_time <= time.time() + 1
        assert running_process(record) is None  # ended, so never taken for a survivor
