"""Startup recovery (docs/design/recovery.md section 3), shared by the desktop main process
and the CLI.

Runs in the process that owns the data directory, before anything else touches sessions:

1. owner epoch: increment the durable epoch; a non-terminal run from an older epoch is orphaned
   (its process is gone), one from the live epoch is running now;
2. open permission requests of orphaned runs get a ``permissionClosure {host_restarted}``;
3. the reconciler hook observes interrupted reconcilable writes and commits recovery bundles
   (before the ending: a terminal event seals the run);
4. run endings: a recovered ``failed`` terminal event with ``failureClass: app_restarted`` and the
   matching header in one transaction; a header behind an existing terminal event is aligned to
   it; a run whose ledger cannot be read is quarantined (reported, never written).

Every step is idempotent: a crash during recovery is recovered by the next start.

On PostgreSQL a host does not own every session: ``run_takeover_recovery`` runs steps 2-4 for the
sessions whose expired leases it just claimed (docs/design/hosts.md section 2), with the same
repair code.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from runtime.ledger.attestation import attestation_suffix_ok
from runtime.ledger.codes import FailureClass, ParkReason
from runtime.ledger.event_model import RuntimeEvent, is_terminal
from runtime.ledger.fact_events import permission_closure_event, recovered_terminal_event
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.permission_facts import open_permission_requests
from runtime.ledger.store_ports import (
    CommitResult,
    LedgerReader,
    RunHeader,
    RunStatus,
    StoredEvent,
)


class RecoveryStore(LedgerReader, Protocol):
    def bump_owner_epoch(self) -> int: ...

    def list_runs(self, statuses: Iterable[RunStatus] | None = None) -> Sequence[RunHeader]: ...

    def append_event(self, event: RuntimeEvent) -> CommitResult: ...

    def commit_run_ending(
        self, terminal_event: RuntimeEvent, status: RunStatus, failure_class: str | None
    ) -> CommitResult: ...

    def repair_run_header(self, run_id: str) -> RunHeader:
        """Set a header to the ending its committed terminal event records."""
        ...


# Observes interrupted reconcilable operations of one orphaned run and commits bundles; returns
# the operation ids it settled. Filled by the reconciler.
Reconciler = Callable[[RunHeader, Sequence[StoredEvent]], Sequence[str]]


@dataclass(frozen=True, slots=True)
class RepairedRun:
    run_id: str
    session_id: str
    recovery_reason: str
    automatic_continuation: bool


@dataclass(frozen=True, slots=True)
class QuarantinedRun:
    run_id: str
    session_id: str
    message: str


@dataclass(frozen=True, slots=True)
class StartupRecoveryReport:
    owner_epoch: int
    repaired: tuple[RepairedRun, ...] = ()
    aligned: tuple[str, ...] = ()
    closed_permission_requests: tuple[str, ...] = ()
    reconciled_operations: tuple[str, ...] = ()
    quarantined: tuple[QuarantinedRun, ...] = ()
    running: tuple[str, ...] = ()
    taken_over: tuple[str, ...] = ()
    """PostgreSQL: the sessions whose expired leases this pass claimed (and recovered)."""

    @property
    def interrupted_session_ids(self) -> tuple[str, ...]:
        """Sessions whose run was interrupted and repaired in this pass, newest repair first."""
        seen: list[str] = []
        for repaired in reversed(self.repaired):
            if repaired.session_id not in seen:
                seen.append(repaired.session_id)
        return tuple(seen)


def _recovery_reason(events: Sequence[RuntimeEvent], had_open_request: bool) -> str:
    if had_open_request:
        return "stale_user_wait"
    if not events:
        return "run_interrupted"
    last = events[-1]
    content = last.get("content")
    actions = last.get("actions") or {}
    if "toolDispatch" in actions or (content is not None and content["kind"] == "function_call"):
        return "tool_interrupted"
    return "run_interrupted"


def run_startup_recovery(
    store: RecoveryStore,
    now_ms: Callable[[], int],
    reconciler: Reconciler | None = None,
) -> StartupRecoveryReport:
    """Repair every orphaned run. The caller holds the data-directory lock."""
    epoch = store.bump_owner_epoch()
    headers = store.list_runs([RunStatus.CREATED, RunStatus.RUNNING])
    return _repair(
        store, epoch, headers, now_ms, reconciler, orphaned=lambda h: h.owner_epoch < epoch
    )


def run_takeover_recovery(
    store: RecoveryStore,
    session_ids: Iterable[str],
    owner_epoch: int,
    now_ms: Callable[[], int],
    reconciler: Reconciler | None = None,
    *,
    only_runs: Collection[str] | None = None,
) -> StartupRecoveryReport:
    """Startup recovery for the sessions whose leases this host just took over
    (docs/design/hosts.md section 2, "takeover = startup recovery per session"): steps 2-4 above
    for those sessions only. Every unfinished run of a taken-over session is orphaned, whatever
    its owner epoch: the lease's epoch went up, so no further fact of the old owner can commit.
    ``owner_epoch`` is the epoch this host serves under (reported, never bumped here).
    ``only_runs``: repair only these runs (a host recovering runs its own turns left behind,
    never one a turn started since)."""
    wanted = frozenset(session_ids)
    headers = [
        header
        for header in store.list_runs([RunStatus.CREATED, RunStatus.RUNNING])
        if header.session_id in wanted and (only_runs is None or header.run_id in only_runs)
    ]
    return _repair(store, owner_epoch, headers, now_ms, reconciler, orphaned=lambda h: True)


def _repair(
    store: RecoveryStore,
    epoch: int,
    headers: Iterable[RunHeader],
    now_ms: Callable[[], int],
    reconciler: Reconciler | None,
    *,
    orphaned: Callable[[RunHeader], bool],
) -> StartupRecoveryReport:
    repaired: list[RepairedRun] = []
    aligned: list[str] = []
    closed: list[str] = []
    reconciled: list[str] = []
    quarantined: list[QuarantinedRun] = []
    running: list[str] = []
    for header in sorted(headers, key=lambda h: (h.created_at, h.run_id)):
        if not orphaned(header):
            running.append(header.run_id)
            continue
        try:
            rows = store.read_run_events(header.run_id)
            events = [row.event for row in rows]
            terminals = [event for event in events if is_terminal(event)]
            if terminals:
                # Header behind its own terminal fact: align it, write nothing to the ledger.
                last = max(i for i, event in enumerate(events) if is_terminal(event))
                if len(terminals) != 1 or not attestation_suffix_ok(events[last + 1 :]):
                    raise LedgerError(ParkReason.TERMINAL_REPAIR_FAILED, "ambiguous terminal facts")
                store.repair_run_header(header.run_id)
                aligned.append(header.run_id)
                continue
            open_requests = [request for _, request in open_permission_requests(events)]
            reason = _recovery_reason(events, bool(open_requests))
            for request_id in open_requests:
                store.append_event(permission_closure_event(header, request_id, now_ms()))
                closed.append(request_id)
            if reconciler is not None:
                reconciled.extend(reconciler(header, store.read_run_events(header.run_id)))
            terminal = recovered_terminal_event(header, reason, now_ms())
            store.commit_run_ending(terminal, RunStatus.FAILED, FailureClass.APP_RESTARTED.value)
        except LedgerError as error:
            quarantined.append(QuarantinedRun(header.run_id, header.session_id, str(error)))
            continue
        automatic = bool(header.continuation_source and header.continuation_source.get("automatic"))
        repaired.append(RepairedRun(header.run_id, header.session_id, reason, automatic))
    return StartupRecoveryReport(
        owner_epoch=epoch,
        repaired=tuple(repaired),
        aligned=tuple(aligned),
        closed_permission_requests=tuple(closed),
        reconciled_operations=tuple(reconciled),
        quarantined=tuple(quarantined),
        running=tuple(running),
    )
