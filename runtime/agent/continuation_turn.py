"""Driving an admitted continuation: the model loop with the replayed history, no new user text.

The admission transaction has already created the target run and committed its first event (the
``continuationStart`` fact). The provider then sees the session's earlier turns, the lineage's
replayed history (each generation trimmed to its last stable boundary) and nothing else: the
original request is not repeated and no completed tool runs again.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from runtime.agent.event_builders import EventBuilder, RunIdentity
from runtime.agent.outcome_notices import committed_context
from runtime.agent.permission_policy import PermissionAsker, PermissionPolicy
from runtime.agent.run_loop import RunLoop, RunObserver, RunOutcome, RunSettings, RunStore
from runtime.agent.workspace_checkpointer import WorkspaceCheckpointer
from runtime.base.cancel_token import CancelToken
from runtime.continuation.continuation_planner import ContinuationDetails
from runtime.ledger.checkpoint_ports import CheckpointCarrier, CheckpointMode, ModeDecision
from runtime.ledger.crash_points import CrashPoint, failpoint
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import LedgerReader, RunHeader, RunStatus
from runtime.ledger.workspace_facts import declared_mode, uncaptured_decision
from runtime.providers.history_projection import history_from_events, omitted_event_ids
from runtime.providers.provider_port import HistoryItem, Provider
from runtime.tools.tool_catalog import ToolCatalog
from runtime.tools.tool_contract import ProcessRecorder, ToolContext


class ContinuationStore(RunStore, LedgerReader, Protocol):
    """What a continuation turn reads and writes (the ledger store)."""


def history_before_lineage(
    reader: LedgerReader,
    session_id: str,
    lineage_run_ids: Sequence[str],
    also_omit: frozenset[str] = frozenset(),
) -> tuple[HistoryItem, ...]:
    """The session's committed turns that precede the lineage's first generation (less what a
    notice of the lineage, ``also_omit``, leaves out)."""
    runs = sorted(reader.list_session_runs(session_id), key=lambda r: (r.created_at, r.run_id))
    lineage = set(lineage_run_ids)
    root = next((run for run in runs if run.run_id in lineage), None)
    earlier = [
        run
        for run in runs
        if run.run_id not in lineage
        and (root is None or (run.created_at, run.run_id) < (root.created_at, root.run_id))
    ]
    return committed_context(reader, earlier, also_omit)[0]


class ContinuationTurn:
    """A ``ContinuationRunner`` for one resume: provider, tools and observers of this host."""

    def __init__(
        self,
        *,
        store: ContinuationStore,
        provider_factory: Callable[[], Provider],
        catalog: ToolCatalog,
        policy: PermissionPolicy,
        asker: PermissionAsker,
        observer: RunObserver,
        clock: Callable[[], int],
        cwd: str,
        shell_registry: object | None = None,
        process_recorder: ProcessRecorder | None = None,
        cancel: CancelToken | None = None,
        settings: RunSettings | None = None,
        checkpoints: CheckpointCarrier | None = None,
    ) -> None:
        self._checkpoints = checkpoints
        self._store = store
        self._provider_factory = provider_factory
        self._catalog = catalog
        self._policy = policy
        self._asker = asker
        self._observer = observer
        self._clock = clock
        self._cwd = cwd
        self._shells = shell_registry
        self._process_recorder = process_recorder
        self.cancel = cancel or CancelToken()
        self._settings = settings
        self.outcome: RunOutcome | None = None

    def run_continuation(
        self, target: RunHeader, details: ContinuationDetails, start_event: RuntimeEvent
    ) -> RunStatus:
        history = (
            *history_before_lineage(
                self._store,
                target.session_id,
                details.lineage_run_ids,
                frozenset(omitted_event_ids(details.runtime_context)),
            ),
            *history_from_events(details.runtime_context),
        )
        # the start event (driven below) adds a rebaseline's notice (docs/design/workspace.md 4),
        # or the failed capture the admission committed after it does (files that could not
        # be snapshotted: a nested repository)
        admitted = [start_event, *self._admitted_facts(target, start_event)]
        for event in admitted:
            self._observer.committed(event)
        self._store.mark_run_running(target.run_id)
        self._observer.run_status(target.run_id, RunStatus.RUNNING, None)
        loop = RunLoop(
            store=self._store,
            provider=self._provider_factory(),
            catalog=self._catalog,
            policy=self._policy,
            asker=self._asker,
            observer=self._observer,
            clock=self._clock,
            settings=self._settings,
            checkpointer=self._checkpointer(target, details, start_event),
        )
        builder = EventBuilder(
            RunIdentity(target.session_id, target.invocation_id, target.run_id, target.turn_id)
        )
        context = ToolContext(
            cwd=Path(os.path.realpath(target.cwd or self._cwd)),
            cancel=self.cancel,
            workspace_identity=target.workspace_identity or details.workspace_identity,
            session_id=target.session_id,
            run_id=target.run_id,
            shell_registry=self._shells,
            process_recorder=self._process_recorder,
        )
        self.outcome = loop.drive(builder, history, admitted, context)
        failpoint(CrashPoint.AFTER_CONTINUATION_TERMINAL_COMMITTED)
        return self.outcome.status

    def _admitted_facts(self, target: RunHeader, start_event: RuntimeEvent) -> list[RuntimeEvent]:
        """The workspace facts the admission committed after the start event (a rebaseline's
        failed capture carrying the decision); none for most continuations."""
        rows = self._store.read_run_events(target.run_id)
        if not rows or rows[0].event["id"] != start_event["id"]:
            return []
        return [row.event for row in rows[1:] if uncaptured_decision(row.event.get("actions"))]

    def _checkpointer(
        self, target: RunHeader, details: ContinuationDetails, start_event: RuntimeEvent
    ) -> WorkspaceCheckpointer | None:
        """Captures for the continuation in the mode its first event declared."""
        declared = declared_mode([start_event])
        if self._checkpoints is None or declared is None or declared.get("mode") != "git_v1":
            return None
        return WorkspaceCheckpointer(
            carrier=self._checkpoints,
            store=self._store,
            identity=RunIdentity(
                target.session_id, target.invocation_id, target.run_id, target.turn_id
            ),
            folder=Path(os.path.realpath(target.cwd or self._cwd)),
            workspace_identity=target.workspace_identity or details.workspace_identity,
            mode=ModeDecision(CheckpointMode.GIT_V1),
            clock=self._clock,
            epoch=details.workspace_epoch,
        )
