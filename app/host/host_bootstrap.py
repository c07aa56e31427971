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

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runtime.agent.run_loop import RunSettings
    from runtime.agent.session_service import SessionService
    from runtime.providers.provider_port import Provider
    from runtime.recovery.startup_recovery import Reconciler, StartupRecoveryReport
    from runtime.tools.process_tree import BackgroundShellRegistry
    from storage.ledger.ledger_store import SqliteLedgerStore


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


def recover_at_startup(
    store: SqliteLedgerStore, clock: Callable[[], int] = now_ms
) -> StartupRecoveryReport:
    """Startup recovery under a new owner epoch, then forget the tool processes of earlier
    owners that have ended. The caller owns the data directory."""
    from runtime.recovery.startup_recovery import run_startup_recovery
    from runtime.tools.process_identity import forget_ended

    report = run_startup_recovery(store, clock, startup_reconciler(store, clock))
    forget_ended(store, before_epoch=report.owner_epoch)
    return report


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
    with the tool-process table and the workspace checkpoint store of ``data_dir``."""
    from runtime.agent.session_service import SessionService
    from storage.checkpoints.checkpoint_store import GitCheckpointStore

    return SessionService(
        store=store,
        provider_factory=provider_factory,
        owner_epoch=owner_epoch,
        workspace_identity=workspace_identity,
        shell_registry=shells,
        process_table=store,
        clock=clock,
        settings=settings,
        checkpoints=GitCheckpointStore.from_environment(data_dir),
    )
