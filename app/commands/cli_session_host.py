"""The CLI's host: ownership, store, then the shared bootstrap (``app/host/host_bootstrap.py``).

``maka run`` and ``maka tui`` execute agent work, so they must own the data directory (the same
single-instance lock the desktop takes) and run startup recovery before touching sessions
(docs/design/recovery.md section 3). If the desktop or another command owns the directory, they stop
with ``store_locked`` and name the owner.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli_errors import EXIT_ERROR, EXIT_USAGE, CliError
from app.data_paths import ensure_data_dir
from runtime.agent.run_loop import RunSettings
from runtime.agent.session_service import SessionService
from runtime.ledger.codes import HostCode, StoreCode
from runtime.ledger.ledger_errors import LedgerError
from runtime.providers.provider_port import Provider, ProviderError
from runtime.providers.provider_registry import build_provider
from runtime.tools.process_tree import BackgroundShellRegistry

if TYPE_CHECKING:
    from storage.instance_lock import InstanceLock
    from storage.ledger.ledger_store import SqliteLedgerStore


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
    from app.host.resume_switch import SETTINGS_FILE, read_settings

    stored = read_settings(data_dir / SETTINGS_FILE)
    if any(key == "provider" or key.startswith("openai_") for key in stored):
        # The desktop's provider settings (validated by the wire contract: loaded only here).
        from app.host.desktop_settings import DesktopSettings

        config = DesktopSettings(data_dir).provider_config(os.environ)
    else:
        config = {"MAKA_OPENAI_TOOL_CHOICE": "auto"}  # what the empty file gives, cheaply
        config.update({k: v for k, v in os.environ.items() if k.startswith("MAKA_")})
    try:
        build_provider(name, config)
    except ProviderError as error:
        raise CliError(error.code, error.message, EXIT_USAGE) from None
    return lambda: build_provider(name, config)


def own_data_dir(data_dir: Path) -> InstanceLock:
    """Create the data directory if needed and take its instance lock (the caller releases it);
    ``store_locked`` naming the owner when another Maka process holds it."""
    from storage.instance_lock import InstanceLock, LockOutcome
    from storage.ledger.store_creation import os_refusal

    try:
        ensure_data_dir(data_dir)
    except OSError as error:
        refusal = os_refusal(error, f"creating the data folder {data_dir}")
        raise CliError(refusal.code, refusal.message) from None
    lock = InstanceLock(data_dir)
    outcome = lock.acquire()
    if outcome.outcome is LockOutcome.HELD_ELSEWHERE:
        from app.host.host_client import held_elsewhere

        raise CliError(StoreCode.STORE_LOCKED, held_elsewhere(data_dir, outcome.holder_pid))
    if outcome.outcome is not LockOutcome.ACQUIRED:
        if outcome.error is not None:  # a full disk, a read-only lock file or folder
            refusal = os_refusal(outcome.error, f"opening the lock file {lock.path}")
            raise CliError(refusal.code, refusal.message)
        raise CliError(HostCode.DATA_DIR_UNAVAILABLE, outcome.detail)
    return lock


@contextmanager
def owned_store(data_dir: Path, error_exit: int = EXIT_ERROR) -> Iterator[SqliteLedgerStore]:
    """A writing command's store: the data folder owned (``own_data_dir``), the store opened
    with its refusal said as a coded error (exit ``error_exit``), both let go at the end."""
    from app.terminal_log import terminal_warnings
    from storage.ledger.ledger_store import open_store

    terminal_warnings()
    lock = own_data_dir(data_dir)
    try:
        try:
            store = open_store(data_dir)
        except LedgerError as error:
            raise CliError(error.code, error.message, error_exit) from None
        try:
            yield store
        finally:
            store.close()
    finally:
        lock.release()


@contextmanager
def owned_session_host(
    data_dir: Path, provider_name: str | None, settings: RunSettings | None = None
) -> Iterator[CliHost]:
    """The host of a command that runs turns; ``settings`` (``--max-steps``) apply to every
    turn it runs, continuations included."""
    from app.host.host_bootstrap import (
        SessionTakeover,
        recover_at_startup,
        session_service,
        start_deadline_feed,
    )

    factory = provider_factory(data_dir, provider_name)
    service: SessionService | None = None
    with owned_store(data_dir) as store:
        report = recover_at_startup(store)
        # On a shared ledger this process holds session leases like a host: its commands get the
        # runway deadline too, and end by their supervisors if it is stopped or cut off.
        feed_stop = threading.Event()
        if isinstance(store, SessionTakeover):
            start_deadline_feed(store, feed_stop)
        try:
            shells = BackgroundShellRegistry.in_data_dir(data_dir)
            service = session_service(
                store,
                data_dir,
                report.owner_epoch,
                provider_factory=factory,
                shells=shells,
                settings=settings,
            )
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
            # After a command that ended normally, while it still owns the data folder: no
            # other process captures meanwhile (a ref retention did not read would look like
            # no fact's).
            _retain_when_due(store, service.checkpoints)
        finally:
            feed_stop.set()
    # Only after a command that ended normally, with the data folder released.
    if service is not None:
        _let_absorption_finish(service.checkpoints)


# Retention (docs/design/workspace.md section 5) runs when a host starts; a user of the
# terminal commands alone never starts one, so a command that ran turns runs it too, at most
# once a day per data folder (the stamp's time), after its turn, in the foreground, while it
# owns the data folder.
RETENTION_EVERY_S = 24 * 3600.0
RETENTION_STAMP = "retention.stamp"


def _retain_when_due(store: object, carrier: object) -> None:
    import logging
    import time

    from storage.checkpoints.checkpoint_store import GitCheckpointStore
    from storage.private_files import private_opener

    if not isinstance(carrier, GitCheckpointStore) or not carrier.root.is_dir():
        return
    stamp = carrier.root / RETENTION_STAMP

    def start_the_clock() -> None:
        with open(stamp, "a", encoding="utf-8", opener=private_opener):
            pass  # made 0600, as every file of the data folder
        os.utime(stamp)

    try:
        last = stamp.stat().st_mtime
    except FileNotFoundError:
        with contextlib.suppress(OSError):
            start_the_clock()  # the first such command: a new store has nothing to trim
        return
    except OSError:
        return
    if time.time() - last < RETENTION_EVERY_S:
        return
    from storage.checkpoints.checkpoint_retention import run_retention

    print("maka: trimming workspace snapshots no longer needed (once a day)...", file=sys.stderr)
    # Its failures are said below, once: its log's warnings would reach the terminal too
    # (through the terminal's warning handler on ``maka``), so they stop at its own logger.
    quiet = logging.NullHandler()
    trimming_log = logging.getLogger("maka.storage.checkpoints")
    trimming_log.addHandler(quiet)
    trimming_log.propagate = False
    try:
        result = run_retention(store, carrier)  # type: ignore[arg-type]
    except KeyboardInterrupt:
        # The turn is done and recorded: stopping the housekeeping fails nothing (the next
        # command does it, as the clock did not move on).
        print("maka: trimming stopped; the next command does it", file=sys.stderr)
        return
    except Exception as error:  # housekeeping: never fail the command that ran the turn
        print(f"maka: workspace checkpoint retention failed: {error}", file=sys.stderr)
        result = None
    finally:
        trimming_log.removeHandler(quiet)
        trimming_log.propagate = True
    with contextlib.suppress(OSError):
        start_the_clock()
    if result is not None and result.errors:
        print("maka: workspace checkpoint retention: " + "; ".join(result.errors), file=sys.stderr)


# How long a command waits at its exit for a snapshot store to finish copying in what it
# borrows from the folder's Git repository (a repository of 50,000 files takes about 16 s).
ABSORB_WAIT_S = 60.0


def _let_absorption_finish(carrier: object) -> None:
    """A snapshot store that borrows from the folder's own Git repository copies those objects
    in on a background thread after a capture (docs/design/workspace.md section 1). A command
    that exits as soon as its turn ends would cut that copy short every time: it waits for
    it, saying so when it takes more than a moment, and saying so again when it stops waiting
    (Ctrl+C, or ``ABSORB_WAIT_S``): the next capture in the folder goes on with the copy, and
    a pack the copy finished is not copied again."""
    from storage.checkpoints.checkpoint_store import GitCheckpointStore

    if not isinstance(carrier, GitCheckpointStore) or carrier.wait_absorbing(timeout=1.0):
        return
    print(
        "maka: copying into the snapshot store what it still reads from the folder's Git "
        "repository (once per folder)...",
        file=sys.stderr,
        flush=True,
    )
    if not carrier.wait_absorbing(timeout=ABSORB_WAIT_S):
        print(
            f"maka: stopped waiting for that copy after {ABSORB_WAIT_S:.0f} s; the next session "
            "in this folder goes on with it (until it ends, a `git gc` there that prunes can "
            "leave a snapshot reading missing, never restored wrong)",
            file=sys.stderr,
            flush=True,
        )
