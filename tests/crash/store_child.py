"""Child process of the store's crash and concurrency tests (``-m tests.crash.store_child``).

Crash mode: ``store_child crash DATA_DIR SCENARIO``. ``MAKA_FAILPOINT`` names the point to die
at; the child disarms it while it writes the scenario's prefix, re-arms it for the scenario's
step, prints ``DONE`` and exits 0 if the point was never reached.

Worker mode: ``store_child worker DATA_DIR NAME COUNT START_FILE``: prints ``READY``, waits for
the start file (a barrier across processes), opens the store and performs ``COUNT`` T1+T2 tool
calls and text events on the shared run ``RACE`` (ids prefixed with NAME), prints ``DONE``.

Fresh mode: ``store_child fresh DATA_DIR NAME START_FILE``: waits for the barrier, opens (and
possibly creates and migrates) the store, creates its own session and run, appends a few events.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from runtime.ledger.store_ports import RunStatus
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    decision_event,
    dispatch_event,
    model_text,
    reconcile_event,
    terminal,
    user_text,
)
from tests.helpers.store_workloads import add_run, fixed_clock

IDS = RunIds()
RACE = RunIds("sess-race", "inv-race", "run-race", "turn-race")
CALL = call_event("call-1", ids=IDS, ts=10)
DISPATCH = dispatch_event(CALL)
RESPONSE = bound_response(CALL, {"written": True})
RECONCILE = reconcile_event(CALL, "matches_expected_state")
OUTCOME = bound_response(CALL, {"written": True}, duration_ms=None)
DECISION = decision_event(CALL, DISPATCH, RECONCILE, OUTCOME)
ENDING = terminal(IDS)

Step = Callable[[SqliteLedgerStore], object]


def _start(store: SqliteLedgerStore) -> None:
    add_run(store, IDS)
    store.mark_run_running(IDS.run_id)
    store.append_event(user_text(ids=IDS, marker=True))


def _t1(store: SqliteLedgerStore) -> object:
    return store.commit_tool_prepared(CALL, DISPATCH)


def _t2(store: SqliteLedgerStore) -> object:
    return store.commit_tool_outcome(RESPONSE)


def _bundle(store: SqliteLedgerStore) -> object:
    return store.commit_recovery_bundle(RECONCILE, OUTCOME, DECISION)


def _ending(store: SqliteLedgerStore) -> object:
    return store.commit_run_ending(ENDING, RunStatus.COMPLETED, None)


# scenario -> (prefix steps, the step under test)
SCENARIOS: dict[str, tuple[tuple[Step, ...], Step]] = {
    "t1": ((), _t1),
    "t2": ((_t1,), _t2),
    "bundle": ((_t1,), _bundle),
    "ending": ((_t1, _t2), _ending),
}

FAILPOINT_SCENARIOS = {
    "t1_after_call_insert": "t1",
    "t1_after_dispatch_insert": "t1",
    "t1_after_commit": "t1",
    "t2_after_response_insert": "t2",
    "t2_after_commit": "t2",
    "bundle_after_reconcile_insert": "bundle",
    "bundle_after_outcome_insert": "bundle",
    "bundle_after_decision_insert": "bundle",
    "bundle_after_commit": "bundle",
    "P10": "bundle",
    "run_ending_after_event_insert": "ending",
    "run_ending_after_commit": "ending",
}


def play(
    data_dir: Path, scenario: str, *, step: bool, arm: Callable[[], None] = lambda: None
) -> None:
    """Write the scenario's prefix, then (``step``) arm the failpoint and take the step."""
    prefix, action = SCENARIOS[scenario]
    with open_store(data_dir, clock=fixed_clock()) as store:
        _start(store)
        for earlier in prefix:
            earlier(store)
        if step:
            arm()
            action(store)


def _crash(data_dir: Path, scenario: str) -> None:
    armed = os.environ.pop("MAKA_FAILPOINT", None)

    def arm() -> None:
        if armed is not None:
            os.environ["MAKA_FAILPOINT"] = armed

    play(data_dir, scenario, step=True, arm=arm)
    print("DONE", flush=True)


def _barrier(start_file: Path) -> None:
    print("READY", flush=True)
    deadline = time.monotonic() + 30
    while not start_file.exists():
        if time.monotonic() > deadline:
            raise SystemExit("barrier timeout")
        time.sleep(0.005)


def _worker(data_dir: Path, name: str, count: int, start_file: Path) -> None:
    _barrier(start_file)
    with open_store(data_dir) as store:
        for index in range(count):
            call = call_event(f"{name}-call-{index}", ids=RACE, ts=index)
            store.commit_tool_prepared(call, dispatch_event(call))
            store.append_event(model_text(f"{name} {index}", ids=RACE, event_id=f"{name}-t{index}"))
            store.commit_tool_outcome(bound_response(call))
    print("DONE", flush=True)


def _fresh(data_dir: Path, name: str, start_file: Path) -> None:
    _barrier(start_file)
    ids = RunIds(f"sess-{name}", f"inv-{name}", f"run-{name}", f"turn-{name}")
    with open_store(data_dir) as store:
        add_run(store, ids)
        for index in range(10):
            store.append_event(model_text(ids=ids, event_id=f"{name}-{index}"))
    print("DONE", flush=True)


def main(argv: list[str]) -> None:
    mode, data_dir = argv[0], Path(argv[1])
    if mode == "crash":
        _crash(data_dir, argv[2])
    elif mode == "worker":
        _worker(data_dir, argv[2], int(argv[3]), Path(argv[4]))
    elif mode == "fresh":
        _fresh(data_dir, argv[2], Path(argv[3]))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1:])
