"""The one host bootstrap the desktop main process and the CLI share (docs/design/architecture.md:
one recovery implementation, not three): the clock, startup recovery with the file-write
reconciler, and the session service over the recovered store.

Every host follows the same order once it owns the data directory (the instance lock) and has
opened the store: startup recovery (interrupted file writes are reconciled before run endings
are repaired, docs/design/recovery.md section 3), then the tool-process records of earlier owners
whose process ended are forgotten, then sessions are served under the new owner epoch.

The runtime and the store are imported inside the functions: small commands that never run
recovery must not load them (tests/e2e/test_small_command_imports.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from runtime.agent.run_loop import RunSettings
    from runtime.agent.session_service import SessionService
    from runtime.ledger.process_records import ToolProcessRecord
    from runtime.ledger.store_ports import SessionLease
    from runtime.providers.provider_port import Provider
    from runtime.recovery.startup_recovery import Reconciler, StartupRecoveryReport
    from runtime.tools.process_tree import BackgroundShellRegistry
    from storage.ledger.ledger_store import SqliteLedgerStore

TAKEOVER_BATCH = 20
"""Sessions claimed per sweep (one transaction); startup sweeps until none is left."""


@runtime_checkable
class SessionTakeover(Protocol):
    """A store whose sessions are leased to one host at a time (PostgreSQL): a host recovers
    only the sessions whose expired leases it claims (docs/design/hosts.md section 2)."""

    def claim_expired_sessions(self, limit: int = TAKEOVER_BATCH) -> list[SessionLease]: ...

    def takeover_interval_s(self) -> float: ...

    def on_runway_lost(self, callback: Callable[[], None]) -> None: ...

    def started_tool_processes(self) -> list[ToolProcessRecord]: ...

    def runway_deadline(self) -> float | None: ...


def now_ms() -> int:
    """The hosts' one clock: wall time in milliseconds."""
    return time.time_ns() // 1_000_000


def workspace_identity(folder: Path) -> str:
    """A session folder's workspace identity (the marker is created when the folder has none)."""
    from storage.sessions.workspace_identity import resolve_workspace_identity

    return resolve_workspace_identity(folder).identity


def startup_reconciler(store: SqliteLedgerStore, clock: Callable[[], int] = now_ms) -> Reconciler:
    """The file-write reconciler of startup recovery: the store writes the bundles; the marker
    is only *read* (a missing marker means the identity changed, never a reason to create one)."""
    from runtime.recovery.file_reconciler import FileReconciler
    from storage.sessions.workspace_identity import read_workspace_identity

    return FileReconciler(store, read_workspace_identity, clock)


def start_deadline_feed(store: SessionTakeover, stop: threading.Event) -> None:
    """Until ``stop`` is set, every quarter second the lease's runway deadline goes to every tool
    supervisor of this process (``set_stop_deadline``): a process stopped (SIGSTOP) or cut off
    stops feeding it, and its commands end at the last deadline it sent, by their supervisors,
    before another host may take over (docs/postgres.md). ``maka host``, the desktop, and
    ``maka run`` / ``maka resume`` without a host all start it on a shared ledger."""
    from runtime.tools.supervised_spawn import set_stop_deadline, set_stop_deadline_source

    def feed() -> None:
        while not stop.wait(0.25):
            deadline = store.runway_deadline()
            if deadline is not None:
                set_stop_deadline(deadline)
        set_stop_deadline_source(None)

    deadline = store.runway_deadline()
    if deadline is not None:
        set_stop_deadline(deadline)
    # A command started between two ticks reads the live deadline: the write that dispatched it
    # may have renewed the lease after an outage, when the deadline last sent had passed.
    set_stop_deadline_source(store.runway_deadline)
    threading.Thread(target=feed, name="maka-tool-deadline", daemon=True).start()


def recover_at_startup(
    store: SqliteLedgerStore, clock: Callable[[], int] = now_ms
) -> StartupRecoveryReport:
    """Startup recovery under a new owner epoch, then forget the tool processes of earlier
    owners that have ended. The caller owns the data directory."""
    from runtime.recovery.startup_recovery import run_startup_recovery
    from runtime.tools.process_identity import forget_ended

    if isinstance(store, SessionTakeover):
        # Shared ledger: the runs of sessions other hosts hold are theirs, running now.
        epoch = store.bump_owner_epoch()
        reports = []
        while True:
            report = take_over_expired(store, epoch, clock)
            reports.append(report)
            if len(report.taken_over) < TAKEOVER_BATCH:
                return _merged(epoch, reports)
    report = run_startup_recovery(store, clock, startup_reconciler(store, clock))
    forget_ended(store, before_epoch=report.owner_epoch)
    return report


def take_over_expired(
    store: SqliteLedgerStore,
    owner_epoch: int,
    clock: Callable[[], int] = now_ms,
    *,
    on_claimed: Callable[[tuple[str, ...]], None] | None = None,
) -> StartupRecoveryReport:
    """One takeover sweep (PostgreSQL): claim up to ``TAKEOVER_BATCH`` sessions whose lease ran
    out with a run unfinished, then run startup recovery's repair for those sessions only, and
    forget their tool-process records whose process has ended. ``taken_over`` names them.
    ``on_claimed`` hears the claimed sessions before any repair (a host remembers them even if
    the sweep fails half-way)."""
    from dataclasses import replace

    from runtime.recovery.startup_recovery import StartupRecoveryReport, run_takeover_recovery
    from runtime.tools.process_identity import running_process

    assert isinstance(store, SessionTakeover)
    leases = store.claim_expired_sessions(TAKEOVER_BATCH)
    sessions = tuple(lease.session_id for lease in leases)
    if not sessions:
        return StartupRecoveryReport(owner_epoch=owner_epoch)
    if on_claimed is not None:
        on_claimed(sessions)
    report = run_takeover_recovery(
        store, sessions, owner_epoch, clock, startup_reconciler(store, clock)
    )
    for session_id in sessions:
        for record in store.list_tool_processes(session_id=session_id):
            if running_process(record) is None:
                store.delete_tool_process(record.operation_id, record.pid)
    return replace(report, taken_over=sessions)


def _merged(owner_epoch: int, reports: Sequence[StartupRecoveryReport]) -> StartupRecoveryReport:
    from runtime.recovery.startup_recovery import StartupRecoveryReport

    return StartupRecoveryReport(
        owner_epoch=owner_epoch,
        repaired=tuple(item for report in reports for item in report.repaired),
        aligned=tuple(item for report in reports for item in report.aligned),
        closed_permission_requests=tuple(
            item for report in reports for item in report.closed_permission_requests
        ),
        reconciled_operations=tuple(
            item for report in reports for item in report.reconciled_operations
        ),
        quarantined=tuple(item for report in reports for item in report.quarantined),
        running=tuple(item for report in reports for item in report.running),
        taken_over=tuple(item for report in reports for item in report.taken_over),
    )


def session_service(
    store: SqliteLedgerStore,
    data_dir: Path,
    owner_epoch: int,
    *,
    provider_factory: Callable[[], Provider],
    shells: BackgroundShellRegistry,
    settings: RunSettings | Callable[[], RunSettings] | None,
    clock: Callable[[], int] = now_ms,
) -> SessionService:
    """The session service of a recovered store (``owner_epoch`` from its recovery report),
    with the tool-process table and the workspace checkpoint store of ``data_dir``, which
    tidies what a killed process left in it (``opened_by_owner``)."""
    from runtime.agent.session_service import SessionService
    from runtime.tools.workspace_paths import keep_out
    from storage.checkpoints.checkpoint_store import GitCheckpointStore

    keep_out(data_dir)  # no tool of its sessions reads or changes the data folder
    checkpoints = GitCheckpointStore.from_environment(data_dir)
    # What a killed process left: a store borrowing from its folder's Git repository, copied
    # in now, in the background, before a ``git gc`` there can make its snapshots read missing
    # (a command waits for the copy at its exit; a host or the desktop keeps running), and a
    # killed restore's scratch index, removed.
    checkpoints.opened_by_owner()
    return SessionService(
        store=store,
        provider_factory=provider_factory,
        owner_epoch=owner_epoch,
        workspace_identity=workspace_identity,
        shell_registry=shells,
        process_table=store,
        clock=clock,
        settings=settings,
        checkpoints=checkpoints,
    )
