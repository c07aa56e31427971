"""Which run Safe resume takes up: the one decision every surface shares.

The candidate is the session's newest run (creation time, then run id) when it ended ``failed``
or ``cancelled`` (docs/design/recovery.md section 6, the reference's "latest" candidate), whatever
ended it: a restart (``app_restarted``), a model server that failed or could not be reached
(``provider_error``), a ledger write that could not commit, or the user's stop. What the
continuation may replay, and whether it parks, is the planner's business; this only says
whether there is an interruption to plan for.

Used by the seam's ``latest_interrupted`` gate (``maka plan``, ``maka resume``, ``/resume``, the
desktop's Safe resume request) and by the session overview ``maka sessions`` reads
(``resumable``), so that what the CLI offers and what the seam accepts cannot differ.

The desktop's banner offers Safe resume for a narrower set (docs/design/desktop.md): only when the
latest run is the candidate *and* a restart failed it (``restart_interrupted``). A turn whose model
server failed, or that the user stopped, is shown as ended; ``maka resume`` can still carry it
on. Every run the banner offers is one the seam accepts.
"""

from __future__ import annotations

from collections.abc import Iterable

from runtime.ledger.codes import FailureClass
from runtime.ledger.store_ports import RunHeader, RunStatus

RESUMABLE_STATUSES = frozenset({RunStatus.FAILED, RunStatus.CANCELLED})
"""Run endings a continuation may carry on from (a completed run has nothing left to do)."""


def newest_run(runs: Iterable[RunHeader]) -> RunHeader | None:
    """The session's latest run: newest creation time, then the greatest run id."""
    return max(runs, key=lambda header: (header.created_at, header.run_id), default=None)


def ended_resumably(header: RunHeader) -> bool:
    """The run ended before its turn was done, so Safe resume may carry it on."""
    return header.status in RESUMABLE_STATUSES


def restart_interrupted(header: RunHeader) -> bool:
    """The run was live when Maka stopped: startup recovery failed it with ``app_restarted``
    (the only ending the desktop's banner offers Safe resume for)."""
    return interrupted_by_restart(header.status, header.failure_class)


def interrupted_by_restart(status: RunStatus, failure_class: str | None) -> bool:
    """``restart_interrupted`` of a run's status and failure class."""
    return status is RunStatus.FAILED and failure_class == FailureClass.APP_RESTARTED.value


def continued_after(source: RunHeader | None) -> str:
    """What a continuation of ``source`` follows, as its marker says it: ``restart`` (Maka
    stopped while the turn ran: a crash, a restart, a host taken over), ``stop`` (the user
    stopped it) or ``failure`` (it failed: the model server, say)."""
    if source is None or restart_interrupted(source):
        return "restart"
    if source.status is RunStatus.CANCELLED:
        return "stop"
    return "failure"


def resume_candidate(runs: Iterable[RunHeader]) -> RunHeader | None:
    """The run Safe resume would plan for, or None when the latest run is not an interruption
    (no runs, still running, or completed)."""
    latest = newest_run(runs)
    return latest if latest is not None and ended_resumably(latest) else None
