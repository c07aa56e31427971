"""Child process of the resume race: for each prepared data directory, plan, meet the other
racer at a barrier, then execute. The "provider" appends one line per call to a shared file.

Usage: python -m tests.crash.resume_race_child ROOT NAME COUNT
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from runtime.continuation.continuation_planner import ContinuationDetails
from runtime.continuation.resume_service import ResumeRefused, ResumeService
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import RunHeader, RunStatus
from storage.ledger.ledger_store import open_store
from tests.helpers.resume_fixtures import FakeInspector, now_ms, observation

SESSION = "sess-race"


class CountingRunner:
    def __init__(self, calls: Path, name: str) -> None:
        self._calls = calls
        self._name = name

    def run_continuation(
        self, target: RunHeader, details: ContinuationDetails, start_event: RuntimeEvent
    ) -> RunStatus:
        fd = os.open(self._calls, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, f"{self._name} {target.run_id}\n".encode())
        finally:
            os.close(fd)
        return RunStatus.COMPLETED


def _wait_for(path: Path, deadline: float) -> None:
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(str(path))
        time.sleep(0.001)


def main() -> int:
    root, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    for index in range(count):
        folder = root / f"round-{index}"
        store = open_store(folder / "data")
        try:
            cwd = str(folder / "work")
            service = ResumeService(
                store,
                FakeInspector(observation(cwd)),
                CountingRunner(folder / "provider-calls", name),
                enabled=True,
                now_ms=now_ms,
            )
            plan = service.plan_latest(SESSION)
            (folder / f"ready-{name}").touch()
            _wait_for(folder / "go", time.monotonic() + 30)
            try:
                outcome = f"started {service.execute(plan).target_run_id}"
            except ResumeRefused as refused:
                outcome = f"refused {refused.code}"
            if not plan.continues:
                outcome = f"parked {','.join(plan.rejection_reasons)}"
            (folder / f"result-{name}").write_text(outcome)
        finally:
            store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
