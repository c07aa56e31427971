"""Random write workloads for the store (hypothesis): mixes of every writer, exact retries,
conflicting retries, refusals, close/reopen and damage injected behind the store's back.

A workload is a list of ``Step`` s; ``apply_step`` plays one step against a store and returns the
comparable verdict (``("ok", CommitResult)`` or ``("refused", code)``). Events are rebuilt from
the step's parameters every time, so replaying a step is an exact retry and changing one
parameter is a conflict.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from runtime.ledger.canonical_codec import canonical_bytes
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import EVENT_STATUS_TO_RUN
from storage.ledger.ledger_store import SqliteLedgerStore
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    decision_event,
    dispatch_event,
    model_text,
    operation_of,
    reconcile_event,
    response_event,
    terminal,
    user_text,
)
from tests.helpers.store_workloads import outcome

RUNS = (RunIds(), RunIds("sess-2", "inv-2", "run-2", "turn-2"))
CALL_IDS = ("c0", "c1", "c2")
ARGS = ({"path": "a.txt", "content": "x"}, {"path": "b.txt", "content": "y"})
TOOLS = ("Write", "Read")
OBSERVATIONS = ("matches_expected_state", "matches_prior_state", "diverged", "unreadable")


@dataclass(frozen=True)
class Step:
    kind: str
    run: int = 0
    call: int = 0
    variant: int = 0  # event-id variant: 0 = the canonical id, else a fresh id
    args: int = 0
    tool: int = 0
    flag: bool = False
    choice: int = 0


_WEIGHTS = {
    "user": 4,
    "text": 4,
    "call": 3,
    "synthetic": 2,
    "t1": 6,
    "t2": 4,
    "bundle": 3,
    "turn": 5,  # T1 then T2 of the same call
    "crashed": 3,  # T1 then a recovery bundle
    "end": 1,
    "reopen": 2,
    "damage": 1,
}

# Biased towards the same run, call, arguments and ids, so that steps meet each other (a T2
# after its T1, a bundle after a dispatch, retries) rather than mostly missing.
STEPS = st.builds(
    Step,
    kind=st.sampled_from([kind for kind, weight in _WEIGHTS.items() for _ in range(weight)]),
    run=st.sampled_from([0, 0, 0, 1]),
    call=st.sampled_from([0, 0, 0, 1, 2]),
    variant=st.sampled_from([0] * 6 + [1, 2]),
    args=st.sampled_from([0] * 8 + [1]),
    tool=st.sampled_from([0] * 10 + [1]),
    flag=st.booleans(),
    choice=st.integers(0, 3),
)
WORKLOADS = st.lists(STEPS, min_size=1, max_size=30)


def _suffix(step: Step) -> str:
    return "" if step.variant == 0 else f"-v{step.variant}"


def _call(step: Step) -> RuntimeEvent:
    ids = RUNS[step.run]
    call = call_event(CALL_IDS[step.call], TOOLS[step.tool], ARGS[step.args], ids=ids, ts=10)
    if step.variant:
        call = call_event(
            CALL_IDS[step.call],
            TOOLS[step.tool],
            ARGS[step.args],
            ids=ids,
            ts=10,
            event_id=f"{operation_of(call)}_call{_suffix(step)}",
        )
    return call


def _dispatch(step: Step, call: RuntimeEvent) -> RuntimeEvent:
    mode = "reconcile" if step.choice != 3 else "never_auto_retry"
    if step.variant:
        return dispatch_event(call, recovery_mode=mode, event_id=f"dispatch{_suffix(step)}")
    return dispatch_event(call, recovery_mode=mode)


def _end(store: SqliteLedgerStore, step: Step) -> Any:
    ids = RUNS[step.run]
    status = ("completed", "failed", "cancelled", "aborted")[step.choice]
    delta = {"failureClass": "app_restarted"} if status == "failed" else {"stopReason": "x"}
    event = terminal(ids, status=status, state_delta=delta, event_id=f"end{_suffix(step)}")
    run_status = EVENT_STATUS_TO_RUN[status]
    failure = "app_restarted" if status == "failed" else None
    return store.commit_run_ending(event, run_status, failure)


def _bundle(store: SqliteLedgerStore, step: Step) -> Any:
    call = _call(step)
    dispatch = _dispatch(step, call)
    observation = OBSERVATIONS[step.choice]
    reconcile = reconcile_event(call, observation, event_id=f"reconcile{_suffix(step)}")
    if observation == "matches_expected_state":
        result = bound_response(call, duration_ms=None, event_id=f"outcome{_suffix(step)}")
        decision = decision_event(
            call, dispatch, reconcile, result, event_id=f"decision{_suffix(step)}"
        )
        return store.commit_recovery_bundle(reconcile, result, decision)
    decision = decision_event(call, dispatch, reconcile, event_id=f"decision{_suffix(step)}")
    return store.commit_recovery_bundle(reconcile, None, decision)


def _damage(store: SqliteLedgerStore, step: Step) -> None:
    """Behind the store's back (another connection, as another process would): append a second
    call for an existing provider call id."""
    ids = RUNS[step.run]
    conn = sqlite3.connect(store.path)
    try:
        row = conn.execute(
            "SELECT MAX(event_seq) FROM runtime_events WHERE invocation_id = ?",
            (ids.invocation_id,),
        ).fetchone()
        seq = int(row[0] or 0) + 1
        injected = call_event(
            CALL_IDS[step.call], ids=ids, event_id=f"injected-{ids.invocation_id}-{seq}"
        )
        conn.execute(
            "INSERT INTO runtime_events VALUES (?, ?, ?, ?, ?, ?, 'function_call', 0, ?, 1)",
            (
                injected["id"],
                ids.session_id,
                ids.invocation_id,
                ids.run_id,
                ids.turn_id,
                seq,
                canonical_bytes(injected),
            ),
        )
        conn.commit()
    finally:
        conn.close()


def apply_step(
    store: SqliteLedgerStore, step: Step, reopen: Callable[[], SqliteLedgerStore]
) -> tuple[SqliteLedgerStore, tuple[str, object]]:
    """Play ``step``; returns the (possibly reopened) store and the verdict."""
    ids = RUNS[step.run]
    if step.kind == "reopen":
        store.close()
        return reopen(), ("ok", None)
    if step.kind == "damage":
        _damage(store, step)
        return store, ("ok", None)
    actions: dict[str, Callable[[], Any]] = {
        "user": lambda: store.append_event(
            user_text(ids=ids, marker=step.flag, event_id=f"user{_suffix(step)}", ts=1)
        ),
        "text": lambda: store.append_event(
            model_text(f"t{step.choice}", ids=ids, event_id=f"text-{step.choice}{_suffix(step)}")
        ),
        "call": lambda: store.append_event(_call(step)),
        "synthetic": lambda: store.append_event(
            response_event(_call(step), "denied", is_error=True, event_id=f"syn{_suffix(step)}")
        ),
        "t1": lambda: store.commit_tool_prepared(
            _call(step) if step.flag else None, _dispatch(step, _call(step))
        ),
        "t2": lambda: store.commit_tool_outcome(
            bound_response(_call(step), f"r{step.choice}", event_id=f"resp{_suffix(step)}")
            if step.flag
            else bound_response(_call(step), f"r{step.choice}")
        ),
        "bundle": lambda: _bundle(store, step),
        "turn": lambda: (
            outcome(lambda: store.commit_tool_prepared(_call(step), _dispatch(step, _call(step)))),
            outcome(lambda: store.commit_tool_outcome(bound_response(_call(step)))),
        ),
        "crashed": lambda: (
            outcome(lambda: store.commit_tool_prepared(_call(step), _dispatch(step, _call(step)))),
            outcome(lambda: _bundle(store, step)),
        ),
        "end": lambda: _end(store, step),
    }
    return store, outcome(actions[step.kind])
