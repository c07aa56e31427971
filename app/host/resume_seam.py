"""Wiring of the Safe resume seam, shared by the desktop main process and the CLI hosts.

One place builds ``ResumeService`` with the real safety inspector, and the continuation turn
that drives an admitted continuation with the host's provider, tools, permission asker and
observer; the desktop and ``maka plan`` / ``maka resume`` / ``/resume`` differ only in those.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from app.host.safety_inspector import SafetyInspector
from runtime.agent.continuation_turn import ContinuationStore, ContinuationTurn
from runtime.agent.permission_policy import PermissionAsker, PermissionPolicy
from runtime.agent.run_loop import RunObserver, RunSettings
from runtime.continuation.lifecycle_log import LifecycleLog
from runtime.continuation.resume_service import ContinuationRunner, ResumeService, ResumeStore
from runtime.ledger.checkpoint_ports import CheckpointCarrier
from runtime.ledger.process_records import ToolProcessTable
from runtime.providers.provider_port import Provider
from runtime.tools.process_tree import BackgroundShellRegistry
from runtime.tools.tool_catalog import ToolCatalog
from runtime.tools.tool_contract import ProcessRecorder


def resume_service(
    store: ResumeStore,
    tool_names: Callable[[], Sequence[str]],
    shells: BackgroundShellRegistry | None,
    *,
    enabled: bool,
    clock: Callable[[], int],
    lifecycle: LifecycleLog | None,
    runner: ContinuationRunner | None = None,
    processes: ToolProcessTable | None = None,
    checkpoints: CheckpointCarrier | None = None,
) -> ResumeService:
    """The seam for planning (``runner`` None) or planning and executing. ``checkpoints``: the
    workspace checkpoint carrier the inspector captures the folder with
    (docs/design/workspace.md)."""
    return ResumeService(
        store,
        SafetyInspector(tool_names, shells, processes=processes, checkpoints=checkpoints),
        runner,
        enabled=enabled,
        now_ms=clock,
        lifecycle=lifecycle,
        checkpoints=checkpoints,
    )


class ResumeStoreWithRuns(ResumeStore, ContinuationStore, Protocol):
    """The store both the seam and the continuation turn use (the SQLite ledger store)."""


def continuation_resume_service(
    store: ResumeStoreWithRuns,
    *,
    catalog: ToolCatalog,
    provider_factory: Callable[[], Provider],
    shells: BackgroundShellRegistry | None,
    policy: PermissionPolicy,
    asker: PermissionAsker,
    observer: RunObserver,
    cwd: str,
    enabled: bool,
    clock: Callable[[], int],
    lifecycle: LifecycleLog | None,
    settings: RunSettings | None = None,
    processes: ToolProcessTable | None = None,
    process_recorder: ProcessRecorder | None = None,
    checkpoints: CheckpointCarrier | None = None,
) -> tuple[ResumeService, ContinuationTurn]:
    """The seam wired to a host's provider, tools and observer; the turn holds the cancel token."""
    turn = ContinuationTurn(
        store=store,
        provider_factory=provider_factory,
        catalog=catalog,
        policy=policy,
        asker=asker,
        observer=observer,
        clock=clock,
        cwd=cwd,
        shell_registry=shells,
        settings=settings,
        process_recorder=process_recorder,
        checkpoints=checkpoints,
    )
    service = resume_service(
        store,
        catalog.names,
        shells,
        enabled=enabled,
        clock=clock,
        lifecycle=lifecycle,
        runner=turn,
        processes=processes,
        checkpoints=checkpoints,
    )
    return service, turn
