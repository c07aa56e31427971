"""Which interrupted sessions the desktop resumes automatically at startup (pure policy).

docs/design/recovery.md section 3, step 5: only with ``MAKA_RUNTIME_SAFE_BOUNDARY_RESUME=1``; only
sessions whose latest top-level run was interrupted in *this* repair pass; newest first; at most
three. The crash-loop guard: a run that is itself an automatic continuation and was interrupted
again is never auto-resumed, otherwise a continuation that crashes the process would restart (and
crash) on every launch. The user can still press Safe resume in the banner for such a session.

The selection is a pure function so the guard is testable without processes; the host executes
the selected sessions one after another through the same ``resume_latest`` seam as the banner.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from app.host.host_services import InterruptedRun

AUTO_RESUME_LIMIT = 3


@dataclass(frozen=True, slots=True)
class AutoResumeSelection:
    """``resume`` in execution order; ``skipped_crash_loop``: sessions the guard held back."""

    resume: tuple[InterruptedRun, ...]
    skipped_crash_loop: tuple[InterruptedRun, ...] = ()
    skipped_over_limit: tuple[InterruptedRun, ...] = ()


def select_auto_resume(
    interrupted: Iterable[InterruptedRun], *, enabled: bool, limit: int = AUTO_RESUME_LIMIT
) -> AutoResumeSelection:
    if not enabled or limit <= 0:
        return AutoResumeSelection(resume=())
    latest: dict[str, InterruptedRun] = {}
    for run in interrupted:
        known = latest.get(run.session_id)
        if known is None or (run.created_at, run.run_id) > (known.created_at, known.run_id):
            latest[run.session_id] = run
    ordered = sorted(latest.values(), key=lambda run: (run.created_at, run.run_id), reverse=True)
    guarded = tuple(run for run in ordered if run.automatic_continuation)
    eligible = [run for run in ordered if not run.automatic_continuation]
    return AutoResumeSelection(
        resume=tuple(eligible[:limit]),
        skipped_crash_loop=guarded,
        skipped_over_limit=tuple(eligible[limit:]),
    )
