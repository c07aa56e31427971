"""The CLI's composition of the runtime: ownership, store, startup recovery, session service.

``maka run`` and ``maka tui`` execute agent work, so they must own the data directory (the same
single-instance lock the desktop takes) and run startup recovery before touching sessions
(RECOVERY.md section 3). If the desktop or another command owns the directory, they stop with
``store_locked`` and name the owner.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli_errors import EXIT_ERROR, EXIT_USAGE, CliError
from app.data_paths import ensure_data_dir
from runtime.agent.run_loop import RunSettings
from runtime.agent.session_service import SessionService
from runtime.ledger.ledger_errors import LedgerError
from runtime.providers.provider_port import Provider, ProviderError
from runtime.providers.provider_registry import build_provider
from runtime.tools.process_tree import BackgroundShellRegistry

if TYPE_CHECKING:
    from runtime.recovery.startup_recovery import Reconciler
    from storage.instance_lock import InstanceLock
    from storage.ledger_store import SqliteLedgerStore


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class CliHost:
    service: SessionService
    provider_label: str
    repaired_runs: int
    store: SqliteLedgerStore
    data_dir: Path
    provider_factory: Callable[[], Provider]
    shells: BackgroundShellRegistry
    settings: RunSettings | None = None


def provider_factory(data_dir: Path, name: str | None) -> Callable[[], Provider]:
    """Validate the provider configuration now (a usage error, exit 2) and return a factory."""
    from app.host.desktop_settings import DesktopSettings

    config = DesktopSettings(data_dir).provider_config(os.environ)
    try:
        build_provider(name, config)
    except ProviderError as error:
        raise CliError(error.code, error.message, EXIT_USAGE) from None
    return lambda: build_provider(name, config)


def _workspace_identity(folder: Path) -> str:
    from storage.workspace_identity import resolve_workspace_identity

    return resolve_workspace_identity(folder).identity


def startup_reconciler(store: SqliteLedgerStore) -> Reconciler:
    """The file-write reconciler of startup recovery: the store writes the bundles; the marker
    is only *read* (a missing marker means the identity changed, never a reason to create one)."""
    from runtime.recovery.file_reconciler import FileReconciler
    from storage.workspace_identity import read_workspace_identity

    return FileReconciler(store, read_workspace_identity, _now_ms)


def own_data_dir(data_dir: Path) -> InstanceLock:
    """Create the data directory if needed and take its instance lock (the caller releases it);
    ``store_locked`` naming the owner when another Maka process holds it."""
    from storage.instance_lock import InstanceLock, LockOutcome
    from storage.store_creation import os_refusal

    try:
        ensure_data_dir(data_dir)
    except OSError as error:
        refusal = os_refusal(error, f"creating the data folder {data_dir}")
        raise CliError(str(refusal.code), refusal.message) from None
    lock = InstanceLock(data_dir)
    outcome = lock.acquire()
    if outcome.outcome is LockOutcome.HELD_ELSEWHERE:
        raise CliError(
            "store_locked",
            f"another Maka process (pid {outcome.holder_pid}) owns {data_dir}; close it or use "
            "another --data-dir",
        )
    if outcome.outcome is not LockOutcome.ACQUIRED:
        if outcome.error is not None:  # a full disk, a read-only lock file or folder
            refusal = os_refusal(outcome.error, f"opening the lock file {lock.path}")
            raise CliError(str(refusal.code), refusal.message)
        raise CliError("data_dir_unavailable", outcome.detail)
    return lock


@contextmanager
def owned_session_host(
    data_dir: Path, provider_name: str | None, settings: RunSettings | None = None
) -> Iterator[CliHost]:
    """The host of a command that runs turns; ``settings`` (``--max-steps``) apply to every
    turn it runs, continuations included."""
    from runtime.recovery.startup_recovery import run_startup_recovery
    from storage.checkpoint_store import GitCheckpointStore
    from storage.ledger_store import open_store

    factory = provider_factory(data_dir, provider_name)
    lock = own_data_dir(data_dir)
    try:
        try:
            store = open_store(data_dir)
        except LedgerError as error:
            raise CliError(str(error.code), error.message, EXIT_ERROR) from None
        try:
            report = run_startup_recovery(store, _now_ms, startup_reconciler(store))
            shells = BackgroundShellRegistry.in_data_dir(data_dir)
            from runtime.tools.process_identity import forget_ended

            service = SessionService(
                store=store,
                provider_factory=factory,
                owner_epoch=report.owner_epoch,
                workspace_identity=_workspace_identity,
                shell_registry=shells,
                settings=settings,
                process_table=store,
                checkpoints=GitCheckpointStore.from_environment(data_dir),
            )
            forget_ended(store, before_epoch=report.owner_epoch)
            yield CliHost(
                service,
                factory().label,
                len(report.repaired),
                store,
                data_dir,
                factory,
                shells,
                settings,
            )
        finally:
            store.close()
    finally:
        lock.release()
