"""The one decision of which run Safe resume takes up (``resume_candidate``), and that the
seam's gate and the session overview both make it."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.agent.session_overview import session_overview
from runtime.continuation.resume_candidate import resume_candidate
from runtime.continuation.resume_gates import LatestRun, latest_interrupted, runs_listed
from runtime.ledger.store_ports import RunHeader, RunStatus, SessionRecord


def _header(run_id: str, status: RunStatus, created_at: int, **changes: Any) -> RunHeader:
    header = RunHeader(run_id, "s", "inv", "turn", status, "/w", 1, created_at, created_at)
    return header._replace(**changes)


FAILED_EARLIER = _header("run-a", RunStatus.FAILED, 1, failure_class="provider_error")

CASES = [
    ([], None),
    ([_header("run-a", RunStatus.FAILED, 1, failure_class="app_restarted")], "run-a"),
    ([FAILED_EARLIER], "run-a"),
    ([_header("run-a", RunStatus.FAILED, 1, failure_class="tool_boundary_failed")], "run-a"),
    ([_header("run-a", RunStatus.CANCELLED, 1, failure_class="cancelled_by_user")], "run-a"),
    ([_header("run-a", RunStatus.COMPLETED, 1)], None),
    ([_header("run-a", RunStatus.RUNNING, 1)], None),
    # the newest run decides: a later completed turn leaves nothing to resume
    ([FAILED_EARLIER, _header("run-b", RunStatus.COMPLETED, 2)], None),
    ([_header("run-b", RunStatus.COMPLETED, 1), FAILED_EARLIER._replace(created_at=2)], "run-a"),
    # same creation time: the greater run id is the newer
    ([_header("run-b", RunStatus.COMPLETED, 1), FAILED_EARLIER], None),
    ([_header("run-0", RunStatus.COMPLETED, 1), FAILED_EARLIER], "run-a"),
]


class _Store:
    def __init__(self, runs: list[RunHeader]) -> None:
        self.runs = runs

    def list_sessions(self) -> list[SessionRecord]:
        return []

    def list_session_runs(self, session_id: str) -> list[RunHeader]:
        return self.runs

    def read_owner_epoch(self) -> int:
        return 1

    def read_run_header(self, run_id: str) -> RunHeader | None:
        return None


@pytest.mark.parametrize(("runs", "expected"), CASES)
def test_the_gate_and_the_overview_take_up_the_same_run(
    runs: list[RunHeader], expected: str | None
) -> None:
    candidate = resume_candidate(runs)
    assert (candidate.run_id if candidate else None) == expected
    overview = session_overview(_Store(runs), SessionRecord("s", "/w", "t", 0))
    assert overview.resumable is (expected is not None)
    found = LatestRun("s", _Store(runs), None, True, lambda header: "/w")
    gates_pass = runs_listed(found) is None and latest_interrupted(found) is None
    assert gates_pass is (expected is not None)
