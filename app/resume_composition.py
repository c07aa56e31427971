"""Composition of Safe resume for the CLI hosts (``maka plan``, ``maka resume``, ``/resume``).

The seam is wired in ``app/host/resume_seam.py`` (shared with the desktop); this module adds
the CLI's pieces: the terminal observer and asker and the flag (``app/host/resume_switch.py``).
The text and JSON the commands print are ``app/host/plan_report.py`` (the desktop's host answers
a terminal's ``maka plan`` with them too).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from app.host.host_bootstrap import now_ms
from app.host.resume_seam import continuation_resume_service, resume_service
from app.host.resume_switch import resume_enabled
from runtime.continuation.lifecycle_log import LifecycleLog
from runtime.continuation.resume_service import ResumeService, ResumeStore
from runtime.ledger.process_records import ToolProcessTable
from runtime.tools.process_tree import BackgroundShellRegistry

if TYPE_CHECKING:
    from app.commands.cli_session_host import CliHost
    from runtime.agent.permission_policy import PermissionAsker, PermissionPolicy
    from runtime.agent.run_loop import RunObserver
    from runtime.base.cancel_token import CancelToken


def build_resume_service(
    store: ResumeStore,
    data_dir: Path,
    tool_names: Callable[[], tuple[str, ...]],
    shells: BackgroundShellRegistry | None,
    processes: ToolProcessTable | None = None,
    *,
    look_only: bool = False,
) -> ResumeService:
    """The seam for planning only (``maka plan``). ``look_only``: its checkpoint store writes
    nothing in the data folder (``GitCheckpointStore.from_environment``)."""
    from storage.checkpoints.checkpoint_store import GitCheckpointStore

    return resume_service(
        store,
        tool_names,
        shells,
        enabled=resume_enabled(data_dir),
        clock=now_ms,
        lifecycle=LifecycleLog.in_data_dir(data_dir, now_ms),
        processes=processes,
        checkpoints=GitCheckpointStore.from_environment(data_dir, look_only=look_only),
    )


def host_resume_service(
    host: CliHost,
    session_cwd: str,
    policy: PermissionPolicy,
    asker: PermissionAsker,
    observer: RunObserver,
) -> tuple[ResumeService, CancelToken]:
    """The seam wired to a CLI host's provider, tools and terminal observer, and the token that
    cancels the continuation turn."""
    service, turn = continuation_resume_service(
        host.store,
        catalog=host.service.catalog,
        provider_factory=host.provider_factory,
        shells=host.shells,
        processes=host.store,
        process_recorder=host.service.process_recorder,
        policy=policy,
        asker=asker,
        observer=observer,
        cwd=session_cwd,
        enabled=resume_enabled(host.data_dir),
        clock=now_ms,
        lifecycle=LifecycleLog.in_data_dir(host.data_dir, now_ms),
        settings=host.settings,
        checkpoints=host.service.checkpoints,
    )
    return service, turn.cancel
