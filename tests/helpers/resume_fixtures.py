"""Seeding real stores with interrupted runs, for the startup-recovery and Safe resume tests.

``seed_interrupted_run`` writes a run through the store's own writers (generic append, T1, T2)
under one owner epoch and leaves it non-terminal, exactly like a process that died mid-turn;
``recover`` then plays the next start (new epoch, startup recovery).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from runtime.continuation.continuation_planner import SafetyObservation
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import RunHeader, RunStatus, SessionRecord
from runtime.recovery.startup_recovery import StartupRecoveryReport, run_startup_recovery
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from tests.helpers.ledger_builders import RunIds

WORKSPACE = "workspace:v1:11111111-1111-4111-8111-111111111111"
TOOLS = ("bash", "edit_file", "glob", "list_dir", "read_file", "write_file")

_clock = itertools.count(1_000)


def now_ms() -> int:
    return next(_clock)


@dataclass
class FakeInspector:
    """A scripted safety observation (the real inspector is tested on its own)."""

    observation: SafetyObservation
    later: list[SafetyObservation] = field(default_factory=list)
    error: Exception | None = None
    calls: int = 0

    def observe(self, session_id: str, cwd: str) -> SafetyObservation:
        self.calls += 1
        if self.error is not None:
            raise self.error
        if self.later and self.calls > 1:
            return self.later.pop(0)
        return self.observation


def observation(
    cwd: str,
    *,
    identity: str = WORKSPACE,
    settled: bool = True,
    tools: Sequence[str] = TOOLS,
) -> SafetyObservation:
    return SafetyObservation(identity, cwd, settled, tuple(sorted(tools)))


def ensure_session(store: SqliteLedgerStore, session_id: str, cwd: str) -> None:
    if store.get_session(session_id) is None:
        store.create_session(SessionRecord(session_id, cwd, "test session", now_ms()))


def seed_interrupted_run(
    store: SqliteLedgerStore,
    ids: RunIds,
    events: Sequence[RuntimeEvent],
    *,
    cwd: str,
    workspace_identity: str | None = WORKSPACE,
    continuation_source: dict[str, object] | None = None,
    parent_run_id: str | None = None,
) -> RunHeader:
    """Create the run under the current epoch and commit ``events`` through the right writers."""
    ensure_session(store, ids.session_id, cwd)
    now = now_ms()
    header = RunHeader(
        run_id=ids.run_id,
        session_id=ids.session_id,
        invocation_id=ids.invocation_id,
        turn_id=ids.turn_id,
        status=RunStatus.CREATED,
        cwd=cwd,
        owner_epoch=store.read_owner_epoch(),
        created_at=now,
        updated_at=now,
        workspace_identity=workspace_identity,
        parent_run_id=parent_run_id,
        continuation_source=continuation_source,
    )
    store.create_run(header)
    store.mark_run_running(ids.run_id)
    pending_call: RuntimeEvent | None = None
    for event in events:
        actions = event.get("actions") or {}
        content = event.get("content")
        if "toolDispatch" in actions:
            store.commit_tool_prepared(pending_call, event)
            pending_call = None
        elif content is not None and content["kind"] == "function_call":
            pending_call = event
        elif (
            content is not None
            and content["kind"] == "function_response"
            and "operationId" in (event.get("refs") or {})
        ):
            store.commit_tool_outcome(event)
        else:
            if pending_call is not None:
                store.append_event(pending_call)
                pending_call = None
            store.append_event(event)
    if pending_call is not None:
        store.append_event(pending_call)
    found = store.read_run_header(ids.run_id)
    assert found is not None
    return found


def recover(data_dir: Path) -> tuple[SqliteLedgerStore, StartupRecoveryReport]:
    """The next start: a new store instance, a new owner epoch, startup recovery."""
    store = open_store(data_dir)
    return store, run_startup_recovery(store, now_ms)
