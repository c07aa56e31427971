"""One real turn with workspace snapshots on, for the tests of when snapshots are taken and
looked up: the real ``SessionService``, a real SQLite store, the real ``git`` carrier (or a
subclass that watches or holds it) and a scripted provider, in a fresh folder."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runtime.agent.permission_policy import PermissionMode, PermissionPolicy
from runtime.agent.run_loop import RunOutcome, RunSettings
from runtime.agent.session_service import SessionService
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import RunStatus, StoredEvent
from runtime.providers.scripted_provider import ScriptedProvider
from storage.checkpoints.checkpoint_store import GitCheckpointStore
from storage.ledger.ledger_store import SqliteLedgerStore, open_store

Script = tuple[tuple[dict[str, Any], ...], ...]


class QuietObserver:
    """A turn observer that keeps nothing."""

    def text_delta(self, text: str) -> None:
        del text

    def thinking_delta(self, text: str) -> None:
        del text

    def committed(self, event: RuntimeEvent) -> None:
        del event

    def run_status(self, run_id: str, status: RunStatus, failure_class: str | None) -> None:
        del run_id, status, failure_class


@contextmanager
def data_store(tmp_path: Path) -> Iterator[SqliteLedgerStore]:
    """The real store of the data folder ``tmp_path / "data"``."""
    instance = open_store(tmp_path / "data")
    try:
        yield instance
    finally:
        instance.close()


def work_folder(tmp_path: Path) -> Path:
    """A new, empty project folder, by its real path (as sessions record it)."""
    work = tmp_path / "ws"
    work.mkdir()
    return Path(os.path.realpath(work))


def checkpointed_service(
    store: SqliteLedgerStore,
    carrier: GitCheckpointStore,
    script: Script,
    identity: Callable[[Path], str],
) -> SessionService:
    """A session service on ``store`` whose snapshots go to ``carrier``."""
    return SessionService(
        store=store,
        provider_factory=lambda: ScriptedProvider(script),
        owner_epoch=1,
        workspace_identity=identity,
        settings=RunSettings(max_steps=6),
        checkpoints=carrier,
    )


def run_turn(service: SessionService, folder: Path, message: str) -> tuple[str, RunOutcome]:
    """One turn of a new session in ``folder``, every tool call allowed: the session's id and
    the turn's outcome."""
    session_id = service.create_session(folder).session_id
    outcome = service.send_turn(
        session_id, message, QuietObserver(), PermissionPolicy(PermissionMode.AUTO)
    )
    return session_id, outcome


def checkpoint_facts(events: list[StoredEvent]) -> list[StoredEvent]:
    """The run's workspace snapshot facts, in order."""
    return [row for row in events if "workspaceCheckpoint" in (row.event.get("actions") or {})]
