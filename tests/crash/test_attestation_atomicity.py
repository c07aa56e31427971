"""Recording the user's attestation is all or nothing: a real child process is SIGKILLed at each
crash point of the bundle transaction it goes through; a fresh connection then sees the store as
before (points inside the transaction) or as after (points after ``COMMIT``), doctor is clean,
and the attestation can then be recorded (or is already there, and an identical retry is a
no-op)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from storage.ledger.ledger_store import open_store
from storage.ledger.sqlite_connection import DATABASE_NAME
from tests.crash import attestation_child
from tests.helpers.store_workloads import db_state

pytestmark = pytest.mark.crash

REPO = Path(__file__).resolve().parents[2]
INSIDE = [
    "bundle_after_reconcile_insert",
    "bundle_after_outcome_insert",
    "bundle_after_decision_insert",
]
AFTER = ["bundle_after_commit", "attestation_after_commit", "P10"]


def _child(command: str, data_dir: Path, failpoint: str | None = None) -> subprocess.Popen[str]:
    env = {key: value for key, value in os.environ.items() if key != "MAKA_FAILPOINT"}
    if failpoint is not None:
        env["MAKA_FAILPOINT"] = failpoint
    return subprocess.Popen(
        [sys.executable, "-m", "tests.crash.attestation_child", command, str(data_dir)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(child: subprocess.Popen[str]) -> tuple[int, str, str]:
    stdout, stderr = child.communicate(timeout=60)
    return child.returncode, stdout, stderr


@pytest.mark.parametrize("point", INSIDE + AFTER)
def test_sigkill_inside_the_attestation_leaves_before_or_after(tmp_path: Path, point: str) -> None:
    before_dir, after_dir, crash_dir = tmp_path / "before", tmp_path / "after", tmp_path / "crash"
    assert _finish(_child("setup", before_dir))[0] == 0
    assert _finish(_child("attest", after_dir))[0] == 0
    assert _finish(_child("setup", crash_dir))[0] == 0
    before = db_state(before_dir / DATABASE_NAME)
    after = db_state(after_dir / DATABASE_NAME)
    assert before != after and db_state(crash_dir / DATABASE_NAME) == before

    code, stdout, stderr = _finish(_child("attest", crash_dir, point))
    assert code == -signal.SIGKILL, (stdout, stderr)
    assert "DONE" not in stdout

    crashed = db_state(crash_dir / DATABASE_NAME)  # a new connection, as after a restart
    assert crashed == (before if point in INSIDE else after)
    with open_store(crash_dir) as reopened:
        report = reopened.diagnose()
        assert report.ok, report.problems
        assert reopened.derive_projections() == reopened.read_projections()
    # The user tries again: recorded now, or the same record stands (an identical retry).
    assert _finish(_child("attest", crash_dir))[0] == 0
    assert db_state(crash_dir / DATABASE_NAME) == after
    with open_store(crash_dir, read_only=True) as reopened:
        record = reopened.read_tool_operation(attestation_child.OPERATION)
        assert record is not None and record.current_state == "recovery_completed"
