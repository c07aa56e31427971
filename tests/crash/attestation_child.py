"""Child process for the attestation crash test: build (or reuse) a store with a bash call
interrupted between T1 and T2 in a run an earlier owner started and recovery closed, then record
the user's attestation. With ``MAKA_FAILPOINT`` set the store SIGKILLs this process at that point.

Usage: ``python -m tests.crash.attestation_child setup DATA_DIR`` (prepare only) or
``python -m tests.crash.attestation_child attest DATA_DIR`` (prepare if needed, then attest;
prints DONE when it returns).
"""

from __future__ import annotations

import sys
from pathlib import Path

from runtime.ledger.event_model import RuntimeEvent
from runtime.recovery.settle_verdict import judge_settlement
from storage.ledger.ledger_store import open_store
from tests.helpers.ledger_builders import (
    RunIds,
    call_event,
    dispatch_event,
    operation_of,
    terminal,
    user_text,
)
from tests.helpers.store_workloads import add_run, commit_ledger, fixed_clock

IDS = RunIds("sess-c", "inv-c", "run-c", "turn-c")
CALL: RuntimeEvent = call_event("c1", "bash", {"command": "make migrate"}, ids=IDS)
OPERATION = operation_of(CALL)


def setup(data_dir: Path) -> None:
    with open_store(data_dir, clock=fixed_clock()) as store:
        if store.read_run_header(IDS.run_id) is not None:
            return
        store.bump_owner_epoch()
        add_run(store, IDS, epoch=store.read_owner_epoch())
        dispatch = dispatch_event(CALL, recovery_mode="never_auto_retry")
        commit_ledger(store, [user_text(ids=IDS, marker=True), CALL, dispatch])
        store.bump_owner_epoch()
        crashed = terminal(IDS, status="failed", state_delta={"failureClass": "app_restarted"})
        commit_ledger(store, [crashed])


def attest(data_dir: Path) -> None:
    setup(data_dir)
    with open_store(data_dir, clock=lambda: 1_767_300_000_000) as store:
        store.commit_attestation(OPERATION, True, "checked", lambda _op: None, judge_settlement)


def main() -> None:
    command, data_dir = sys.argv[1], Path(sys.argv[2])
    if command == "setup":
        setup(data_dir)
    else:
        attest(data_dir)
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
