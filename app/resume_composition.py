"""Composition of Safe resume for the CLI hosts (``maka plan``, ``maka resume``, ``/resume``).

One seam (``ResumeService``) with the real store, the real safety inspector, the lifecycle log
and a continuation turn driven by this host's provider, tools and terminal. The desktop builds
the same pieces with its own observer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from main_process.safety_inspector import SafetyInspector
from runtime.continuation.continuation_planner import ContinuationPlan
from runtime.continuation.lifecycle_log import LifecycleLog
from runtime.continuation.resume_service import (
    ContinuationRunner,
    ResumeService,
    ResumeStore,
    safe_resume_enabled,
)
from runtime.tools.process_tree import BackgroundShellRegistry

if TYPE_CHECKING:
    from app.commands.cli_session_host import CliHost
    from runtime.agent.permission_policy import PermissionAsker, PermissionPolicy
    from runtime.agent.run_loop import RunObserver

LIFECYCLE_LOG = Path("logs") / "lifecycle.jsonl"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def build_resume_service(
    store: ResumeStore,
    data_dir: Path,
    tool_names: Callable[[], tuple[str, ...]],
    shells: BackgroundShellRegistry | None,
    runner: ContinuationRunner | None = None,
) -> ResumeService:
    return ResumeService(
        store,
        SafetyInspector(tool_names, shells),
        runner,
        enabled=safe_resume_enabled(),
        now_ms=now_ms,
        lifecycle=LifecycleLog(data_dir / LIFECYCLE_LOG, now_ms),
    )


def host_resume_service(
    host: CliHost,
    session_cwd: str,
    policy: PermissionPolicy,
    asker: PermissionAsker,
    observer: RunObserver,
) -> ResumeService:
    """The seam wired to a CLI host's provider, tools and terminal observer."""
    from runtime.agent.continuation_turn import ContinuationTurn

    catalog = host.service.catalog
    turn = ContinuationTurn(
        store=host.store,
        provider_factory=host.provider_factory,
        catalog=catalog,
        policy=policy,
        asker=asker,
        observer=observer,
        clock=now_ms,
        cwd=session_cwd,
        shell_registry=host.shells,
    )
    return build_resume_service(host.store, host.data_dir, catalog.names, host.shells, turn)


def park_lines(plan: ContinuationPlan) -> list[str]:
    """One sentence per reason, then the diagnostics with their codes (for a terminal)."""
    from renderer.park_text import PARK_REASONS

    lines: list[str] = []
    for reason in plan.rejection_reasons:
        severity, sentence = PARK_REASONS.get(reason.value, ("error", "Safe resume refused."))
        lines.append(f"  [{severity}] {reason.value}: {sentence}")
    for diagnostic in plan.diagnostics:
        where = ""
        if diagnostic.tool_name or diagnostic.tool_call_id:
            where = f" ({diagnostic.tool_name or 'tool'} {diagnostic.tool_call_id or ''})".rstrip()
        lines.append(f"    - {diagnostic.code}{where}: {diagnostic.message}")
    return lines


def plan_summary(plan: ContinuationPlan) -> list[str]:
    if plan.continues and plan.continuation is not None:
        details = plan.continuation
        lines = [
            f"Safe resume can continue session {plan.session_id} from run {plan.source_run_id}",
            f"  as a new run, replaying {len(details.runtime_context)} committed events "
            f"over {len(details.lineage_run_ids)} generation(s), with no new user message.",
        ]
        lines.extend(f"  note: {d.code}: {d.message}" for d in plan.diagnostics)
        return lines
    return [f"Safe resume is parked for session {plan.session_id}:", *park_lines(plan)]


def plan_json(plan: ContinuationPlan, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    body = plan.to_json()
    if extra:
        body.update(extra)
    return body
