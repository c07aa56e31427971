"""The Phase 0 crash contract (docs/design/recovery.md section 2, ``docs/crash-contract.md``).

For each of the twelve failpoints, in its own data directory: a real child process appends the
failpoint's committed prefix through the real SQLite writers, prints READY only after every commit
returned, and is killed with SIGKILL. The parent then proves the crash really was one (the child's
``finally`` never ran), reopens the directory with a new store instance, and checks that the
committed events are exactly the prefix, that planning twice gives equal plans, that the plan is
the decision the contract requires for that prefix, and that planning left the ledger untouched.

This proves process-crash committed-prefix semantics, not power-loss durability.
"""

from __future__ import annotations

import hashlib
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.ledger.codes import ParkReason, ResolverReason, ResolverStatus
from runtime.ledger.store_ports import RunStatus
from runtime.recovery.failpoints import RUNTIME_RESUME_FAILPOINTS, CommittedPrefix, Failpoint
from runtime.recovery.recovery_resolver import resolve_recovery
from runtime.recovery.resume_plan import plan_resume
from storage.ledger.ledger_store import open_store
from storage.ledger.sqlite_connection import DATABASE_NAME
from tests.helpers.ledger_builders import RunIds
from tests.helpers.phase0_crash_ledger import (
    PREFIX_EVENT_COUNTS,
    REQUIRED_DECISIONS,
    crash_identity,
    crash_template_events,
)
from tests.helpers.store_workloads import add_run, db_state

pytestmark = pytest.mark.crash

REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 30.0


def _run_ids(failpoint_id: str) -> RunIds:
    identity = crash_identity(failpoint_id)
    return RunIds(
        identity["sessionId"], identity["invocationId"], identity["runId"], identity["turnId"]
    )


def _create_running_header(data_dir: Path, ids: RunIds, workspace: Path) -> None:
    """The run header exists (status running) before the child appends anything."""
    store = open_store(data_dir)
    try:
        add_run(store, ids, cwd=str(workspace))
        store.mark_run_running(ids.run_id)
    finally:
        store.close()


def _wait_for_ready(child: subprocess.Popen[bytes]) -> None:
    assert child.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(child.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + READY_TIMEOUT_S
    seen = b""
    try:
        while b"READY\n" not in seen:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"the child did not say READY within {READY_TIMEOUT_S} s: {seen!r}")
            if not selector.select(remaining):
                continue
            chunk = os.read(child.stdout.fileno(), 4096)
            if not chunk:
                stderr = child.stderr.read() if child.stderr is not None else b""
                pytest.fail(f"the child exited before READY: {seen!r} {stderr.decode()[-2000:]}")
            seen += chunk
    finally:
        selector.close()


def _crash_child(data_dir: Path, point: Failpoint, count: int, marker: Path) -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.crash.phase0_crash_child",
            str(data_dir),
            point.id,
            str(count),
            str(marker),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k != "MAKA_FAILPOINT"},
    )
    try:
        _wait_for_ready(child)
        os.kill(child.pid, signal.SIGKILL)
        returncode = child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
    assert returncode == -signal.SIGKILL


def _file_digests(data_dir: Path) -> dict[str, str]:
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(data_dir.glob(f"{DATABASE_NAME}*"))
    }


@pytest.mark.parametrize("point", RUNTIME_RESUME_FAILPOINTS, ids=lambda point: point.id)
def test_a_sigkill_at_the_failpoint_leaves_its_committed_prefix_and_plan(
    tmp_path: Path, point: Failpoint
) -> None:
    data_dir, workspace = tmp_path / "data", tmp_path / "workspace"
    workspace.mkdir()
    ids = _run_ids(point.id)
    count = PREFIX_EVENT_COUNTS[point.committed_prefix]
    prefix = crash_template_events(point.id)[:count]
    _create_running_header(data_dir, ids, workspace)
    marker = tmp_path / "child-finally.marker"

    _crash_child(data_dir, point, count, marker)
    assert not marker.exists(), "the child's finally block ran: it was not killed at READY"

    store = open_store(data_dir)  # a new instance, as a restarted process would open it
    try:
        stored = store.read_run_events(ids.run_id)
        events = [row.event for row in stored]
        assert [event["id"] for event in events] == [event["id"] for event in prefix]
        assert events == prefix
        header = store.read_run_header(ids.run_id)
        assert header is not None
        ending = point.committed_prefix is CommittedPrefix.AFTER_TERMINAL_EVENT
        assert header.status is (RunStatus.FAILED if ending else RunStatus.RUNNING)

        rows_before, files_before = db_state(data_dir / DATABASE_NAME), _file_digests(data_dir)
        first, second = plan_resume(events), plan_resume(events)
        assert first == second
        assert db_state(data_dir / DATABASE_NAME) == rows_before
        assert _file_digests(data_dir) == files_before
        assert [row.payload for row in store.read_run_events(ids.run_id)] == [
            row.payload for row in stored
        ]
    finally:
        store.close()

    disposition, statuses, replay = REQUIRED_DECISIONS[point.committed_prefix]
    assert first.disposition.value == disposition
    assert tuple(operation.status.value for operation in first.operations) == statuses
    assert tuple(event["id"] for event in first.replay_runtime_events) == replay
    dangling = point.committed_prefix is CommittedPrefix.AFTER_FUNCTION_CALL
    assert first.rejection_reasons == ((ParkReason.DANGLING_TOOL_STATE,) if dangling else ())
    assert first.source_runtime_event_high_water == count
    if dangling:
        (decision,) = resolve_recovery(events).decisions
        assert (decision.status, decision.reason) == (
            ResolverStatus.INDETERMINATE,
            ResolverReason.LEGACY_DISPATCH_UNKNOWN,
        )
        assert first.directive is not None
