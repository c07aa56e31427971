"""Store test helpers: open a store with a run, route a ledger through the right writers, take a
comparable snapshot of a database file, and generate random write workloads.

``commit_ledger`` sends each event to the writer that owns its kind of fact (generic append, T1
with the preceding call, T2, recovery bundle, run ending), so a clean ledger built with
``ledger_builders`` lands in a store exactly as live code would write it.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.ledger.codes import Lane
from runtime.ledger.event_model import RuntimeEvent, is_terminal
from runtime.ledger.lane_rules import classify_lane, is_bound_response
from runtime.ledger.store_ports import (
    EVENT_STATUS_TO_RUN,
    CommitResult,
    RunHeader,
    RunStatus,
    SessionRecord,
    StoreRefusal,
)
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from storage.ledger.sqlite_connection import Synchronous
from tests.helpers.ledger_builders import RunIds

FIXED_NOW = 1_767_225_600_000


def fixed_clock() -> Callable[[], int]:
    """A deterministic commit clock (1 ms per transaction), so two databases written by the same
    workload hold identical rows."""
    counter = itertools.count(FIXED_NOW)
    return lambda: next(counter)


def add_run(store: SqliteLedgerStore, ids: RunIds, *, cwd: str = "/work", epoch: int = 1) -> None:
    if store.get_session(ids.session_id) is None:
        store.create_session(SessionRecord(ids.session_id, cwd, "a session", 1))
    store.create_run(
        RunHeader(
            run_id=ids.run_id,
            session_id=ids.session_id,
            invocation_id=ids.invocation_id,
            turn_id=ids.turn_id,
            status=RunStatus.CREATED,
            cwd=cwd,
            owner_epoch=epoch,
            created_at=2,
            updated_at=2,
        )
    )


def without_fsync(store: SqliteLedgerStore) -> SqliteLedgerStore:
    """For tests about verdicts and rows, not durability: skip the fsyncs (many more examples
    per second). Crash tests never use this."""
    store.set_synchronous(Synchronous.OFF)
    return store


def store_with_runs(
    data_dir: Path,
    *runs: RunIds,
    full_rescan: bool = False,
    clock: Callable[[], int] | None = None,
    durable: bool = True,
) -> SqliteLedgerStore:
    store = open_store(data_dir, full_rescan=full_rescan, clock=clock or fixed_clock())
    if not durable:
        without_fsync(store)
    for ids in runs or (RunIds(),):
        add_run(store, ids)
    return store


def _lane(event: RuntimeEvent) -> Lane | None:
    lane = classify_lane(event)
    return lane if isinstance(lane, Lane) else None


def commit_ledger(store: SqliteLedgerStore, events: Sequence[RuntimeEvent]) -> list[CommitResult]:
    """Commit ``events`` (one run's ledger, in order) through the writers that own them."""
    results: list[CommitResult] = []
    index = 0
    while index < len(events):
        event = events[index]
        lane = _lane(event)
        following = _lane(events[index + 1]) if index + 1 < len(events) else None
        if lane is Lane.FUNCTION_CALL and following is Lane.TOOL_DISPATCH:
            results.append(store.commit_tool_prepared(event, events[index + 1]))
            index += 2
        elif lane is Lane.TOOL_DISPATCH:
            results.append(store.commit_tool_prepared(None, event))
            index += 1
        elif lane is Lane.FUNCTION_RESPONSE and is_bound_response(event):
            results.append(store.commit_tool_outcome(event))
            index += 1
        elif lane is Lane.RECONCILE_RESULT:
            if following is Lane.RECOVERY_DECISION:
                results.append(store.commit_recovery_bundle(event, None, events[index + 1]))
                index += 2
            else:
                bundle = events[index : index + 3]
                results.append(store.commit_recovery_bundle(bundle[0], bundle[1], bundle[2]))
                index += 3
        elif is_terminal(event):
            status = EVENT_STATUS_TO_RUN[event.get("status") or ""]
            actions: dict[str, Any] = dict(event.get("actions") or {})
            delta: dict[str, Any] = actions.get("stateDelta") or {}
            results.append(store.commit_run_ending(event, status, delta.get("failureClass")))
            index += 1
        else:
            results.append(store.append_event(event))
            index += 1
    return results


# ---- snapshots --------------------------------------------------------------------------------


@dataclass(frozen=True)
class DbState:
    """Everything a write can change, in a comparable form (``journal_seq`` excluded: it is an
    internal row number, not part of the projection contract)."""

    events: tuple[tuple[Any, ...], ...]
    runs: tuple[tuple[Any, ...], ...]
    operations: tuple[tuple[Any, ...], ...]
    journal: tuple[tuple[Any, ...], ...]
    meta: tuple[tuple[Any, ...], ...]


def db_state(database: Path) -> DbState:
    """Read with a fresh connection (as a restarted process would)."""
    conn = sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)
    try:

        def rows(sql: str) -> tuple[tuple[Any, ...], ...]:
            return tuple(tuple(row) for row in conn.execute(sql).fetchall())

        return DbState(
            events=rows(
                "SELECT event_id, session_id, invocation_id, run_id, turn_id, event_seq, lane,"
                " terminal, payload, committed_at FROM runtime_events"
                " ORDER BY invocation_id, event_seq"
            ),
            runs=rows("SELECT * FROM runs ORDER BY run_id"),
            operations=rows("SELECT * FROM tool_operations ORDER BY operation_id"),
            journal=rows(
                "SELECT journal_event_id, operation_id, invocation_id, run_id, turn_id, state,"
                " runtime_event_id, canonical_args_hash, recovery_mode, metadata_json,"
                " committed_at FROM tool_journal_events ORDER BY operation_id, journal_seq"
            ),
            meta=rows("SELECT * FROM meta ORDER BY key"),
        )
    finally:
        conn.close()


def outcome(action: Callable[[], CommitResult | None]) -> tuple[str, object]:
    """``("ok", result)`` or ``("refused", code)``: a comparable verdict of one write."""
    try:
        return "ok", action()
    except StoreRefusal as refusal:
        return "refused", str(refusal.code)


def iter_runs(*names: str) -> Iterator[RunIds]:
    for name in names:
        yield RunIds(f"sess-{name}", f"inv-{name}", f"run-{name}", f"turn-{name}")
