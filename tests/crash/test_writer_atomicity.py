"""Crash safety of the writers: a real child process writes to a real database file and is
SIGKILLed at each named failpoint; a new connection must then see the database exactly as it was
before the transaction (points inside it) or exactly as after it (points after ``COMMIT``).
Two real processes writing the same file never corrupt it and never interleave a transaction.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.ledger.store_ports import RunStatus
from storage.ledger.ledger_schema import SCHEMA_VERSION
from storage.ledger.ledger_store import open_store
from storage.ledger.sqlite_connection import DATABASE_NAME
from tests.crash import store_child
from tests.helpers.store_workloads import add_run, db_state

pytestmark = pytest.mark.crash

REPO = Path(__file__).resolve().parents[2]


def _child(*args: str, failpoint: str | None = None) -> subprocess.Popen[str]:
    env = {key: value for key, value in os.environ.items() if key != "MAKA_FAILPOINT"}
    if failpoint is not None:
        env["MAKA_FAILPOINT"] = failpoint
    return subprocess.Popen(
        [sys.executable, "-m", "tests.crash.store_child", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


INSIDE = [
    "t1_after_call_insert",
    "t1_after_dispatch_insert",
    "t2_after_response_insert",
    "bundle_after_reconcile_insert",
    "bundle_after_outcome_insert",
    "bundle_after_decision_insert",
    "run_ending_after_event_insert",
]
AFTER = [
    "t1_after_commit",
    "t2_after_commit",
    "bundle_after_commit",
    "P10",
    "run_ending_after_commit",
]


@pytest.mark.parametrize("point", INSIDE + AFTER)
def test_sigkill_at_a_failpoint_leaves_before_or_after(tmp_path: Path, point: str) -> None:
    scenario = store_child.FAILPOINT_SCENARIOS[point]
    before_dir, after_dir, crash_dir = tmp_path / "before", tmp_path / "after", tmp_path / "crash"
    store_child.play(before_dir, scenario, step=False)
    store_child.play(after_dir, scenario, step=True)
    before = db_state(before_dir / DATABASE_NAME)
    after = db_state(after_dir / DATABASE_NAME)
    assert before != after

    child = _child("crash", str(crash_dir), scenario, failpoint=point)
    stdout, stderr = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL, (stdout, stderr)
    assert "DONE" not in stdout

    crashed = db_state(crash_dir / DATABASE_NAME)  # a new connection, as after a restart
    assert crashed == (before if point in INSIDE else after)
    with open_store(crash_dir) as reopened:  # recovery of the WAL by a writer, then checks
        report = reopened.diagnose()
        assert report.ok, report.problems
        assert reopened.derive_projections() == reopened.read_projections()


def test_without_a_failpoint_the_child_finishes(tmp_path: Path) -> None:
    child = _child("crash", str(tmp_path / "data"), "ending")
    stdout, _ = child.communicate(timeout=60)
    assert child.returncode == 0 and "DONE" in stdout
    with open_store(tmp_path / "data", read_only=True) as store:
        header = store.read_run_header(store_child.IDS.run_id)
        assert header is not None and header.status is RunStatus.COMPLETED


def _release(children: list[subprocess.Popen[str]], start: Path) -> None:
    for child in children:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "READY"
    start.write_text("go")


def test_two_processes_creating_a_fresh_store_at_once(tmp_path: Path) -> None:
    data_dir, start = tmp_path / "data", tmp_path / "start"
    children = [_child("fresh", str(data_dir), name, str(start)) for name in ("a", "b")]
    _release(children, start)
    for child in children:
        stdout, stderr = child.communicate(timeout=60)
        assert child.returncode == 0, stderr
        assert "DONE" in stdout
    with open_store(data_dir, read_only=True) as store:
        assert store.schema_version() == SCHEMA_VERSION
        assert store.journal_mode() == "wal"
        for name in ("a", "b"):
            assert [row.seq for row in store.read_run_events(f"run-{name}")] == list(range(1, 11))


def test_two_processes_writing_one_run_never_interleave(tmp_path: Path) -> None:
    data_dir, start = tmp_path / "data", tmp_path / "start"
    with open_store(data_dir) as store:
        add_run(store, store_child.RACE)
    count = 25
    children = [
        _child("worker", str(data_dir), name, str(count), str(start)) for name in ("p", "q")
    ]
    _release(children, start)
    for child in children:
        stdout, stderr = child.communicate(timeout=120)
        assert child.returncode == 0, stderr
        assert "DONE" in stdout
    with open_store(data_dir, read_only=True) as store:
        rows = store.read_run_events(store_child.RACE.run_id)
        assert [row.seq for row in rows] == list(range(1, len(rows) + 1))
        assert len(rows) == 2 * count * 4
        position = {row.event["id"]: row.seq for row in rows}
        for row in rows:
            actions = row.event.get("actions") or {}
            if "toolDispatch" in actions:
                # T1 is one transaction: its call and dispatch are adjacent, nothing between.
                call_id = row.event["id"].removesuffix("_dispatch") + "_call"
                assert position[call_id] == row.seq - 1
        report = store.diagnose()
        assert report.ok, report.problems
        assert report.integrity == ["ok"]
        assert len(store.list_unsettled_tool_operations()) == 0
