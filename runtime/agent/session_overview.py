"""A session's row in a list: its last run's status, whether a crash interrupted it, and
whether Safe resume would take its latest run up (``resumable``: the seam's own decision).

Kept apart from ``session_service`` so that listing sessions (``maka sessions``) imports neither
the run loop nor the tools nor the providers.
"""

# No ``from __future__ import annotations`` here: the named tuples below must read real types
# (see ``runtime/ledger/run_records.py``; ``maka sessions`` start-up).

from collections.abc import Sequence
from typing import NamedTuple, Protocol, runtime_checkable

from runtime.continuation.resume_candidate import (
    RESUMABLE_STATUSES,
    interrupted_by_restart,
    restart_interrupted,
    resume_candidate,
)
from runtime.ledger.branch_facts import BranchListing, BranchRecord
from runtime.ledger.store_ports import RunFact, RunHeader, RunStatus, SessionRecord


class SessionLister(Protocol):
    """What listing needs of a store (the ledger store, or ``storage.sessions.session_listing``)."""

    def list_sessions(self) -> Sequence[SessionRecord]: ...

    def list_session_runs(self, session_id: str) -> Sequence[RunHeader]: ...


@runtime_checkable
class RunFactListing(Protocol):
    """A reader that gives every run's list columns in one query
    (``storage.sessions.session_listing``): a list of sessions needs no whole headers."""

    def list_run_facts(self) -> Sequence[RunFact]: ...


class SessionOverview(NamedTuple):
    session: SessionRecord
    last_run_status: RunStatus | None
    failure_class: str | None
    interrupted: bool
    """The latest run was closed by startup recovery (``app_restarted``)."""
    run_count: int
    last_activity_at: int = 0
    """The latest of the session's creation and its runs' last updates (ms)."""
    resumable: bool = False
    """The latest run ended failed or cancelled, so Safe resume takes it up
    (``runtime.continuation.resume_candidate``: the decision the seam's gate makes)."""
    branched_from: BranchRecord | None = None
    """The session's ``branchStart`` fact when it was branched from another (issue #36)."""
    branches: tuple[tuple[str, str], ...] = ()
    """The sessions branched from this one: ``(session id, boundary event id)``, oldest first."""
    interrupted_automatic: bool = False
    """The interrupted latest run was itself an automatic Safe resume: the crash-loop guard
    never continues it by itself again (the user may)."""


def ordered_runs(runs: Sequence[RunHeader]) -> list[RunHeader]:
    """Runs oldest first (creation time, then id)."""
    return sorted(runs, key=lambda header: (header.created_at, header.run_id))


def session_overview(
    reader: SessionLister,
    record: SessionRecord,
    branches: Sequence[BranchRecord] | None = None,
) -> SessionOverview:
    """A session's list row: last run status, whether a crash interrupted it and whether Safe
    resume would carry its latest run on."""
    runs = ordered_runs(reader.list_session_runs(record.session_id))
    last = runs[-1] if runs else None
    interrupted = last is not None and restart_interrupted(last)
    if branches is None:  # one session's row: its own reader knows the branches
        branches = reader.list_branches() if isinstance(reader, BranchListing) else ()
    return SessionOverview(
        session=record,
        last_run_status=last.status if last else None,
        failure_class=last.failure_class if last else None,
        interrupted=interrupted,
        interrupted_automatic=interrupted
        and last is not None
        and bool((last.continuation_source or {}).get("automatic")),
        run_count=len(runs),
        last_activity_at=max([record.created_at, *(run.updated_at for run in runs)]),
        resumable=resume_candidate(runs) is not None,
        branched_from=next((b for b in branches if b.session_id == record.session_id), None),
        branches=tuple(
            (b.session_id, b.boundary_event_id)
            for b in branches
            if b.source_session_id == record.session_id
        ),
    )


def list_session_overviews(reader: SessionLister) -> list[SessionOverview]:
    """Every session, oldest first (works on a read-only store)."""
    sessions = sorted(reader.list_sessions(), key=lambda s: (s.created_at, s.session_id))
    branches = reader.list_branches() if isinstance(reader, BranchListing) else ()
    if isinstance(reader, RunFactListing):
        return _overviews_of_facts(sessions, branches, reader.list_run_facts())
    return [session_overview(reader, record, branches) for record in sessions]


def _overviews_of_facts(
    sessions: Sequence[SessionRecord], branches: Sequence[BranchRecord], facts: Sequence[RunFact]
) -> list[SessionOverview]:
    """``session_overview`` of every session at once, from every run's list columns: the same
    rows, without a header per run or a pass over the runs and branches per session."""
    # Per session: the newest run (creation time, then the greatest run id) as
    # (created_at, run_id, status, failure_class), the number of runs and the last update.
    latest: dict[str, tuple[int, str, RunStatus, str | None]] = {}
    counts: dict[str, int] = {}
    updated: dict[str, int] = {}
    for session_id, run_id, status, failure_class, created_at, updated_at in facts:
        known = latest.get(session_id)
        if known is None:
            latest[session_id] = (created_at, run_id, status, failure_class)
            counts[session_id] = 1
            updated[session_id] = updated_at
            continue
        if created_at > known[0] or (created_at == known[0] and run_id > known[1]):
            latest[session_id] = (created_at, run_id, status, failure_class)
        counts[session_id] += 1
        updated[session_id] = max(updated[session_id], updated_at)
    branched_from: dict[str, BranchRecord] = {}
    made: dict[str, list[tuple[str, str]]] = {}
    for branch in branches:
        branched_from.setdefault(branch.session_id, branch)
        made.setdefault(branch.source_session_id, []).append(
            (branch.session_id, branch.boundary_event_id)
        )
    overviews: list[SessionOverview] = []
    append = overviews.append
    for record in sessions:
        session_id = record.session_id
        last = latest.get(session_id)
        if last is None:
            append(
                SessionOverview(
                    record,
                    None,
                    None,
                    False,
                    0,
                    record.created_at,
                    False,
                    branched_from.get(session_id),
                    tuple(made.get(session_id, ())),
                )
            )
            continue
        _, _, status, failure_class = last
        last_update = updated[session_id]
        append(
            SessionOverview(
                record,  # session
                status,  # last_run_status
                failure_class,
                interrupted_by_restart(status, failure_class),  # interrupted
                counts[session_id],  # run_count
                max(record.created_at, last_update),  # last_activity_at
                status in RESUMABLE_STATUSES,  # resumable
                branched_from.get(session_id),
                tuple(made.get(session_id, ())),  # branches
            )
        )
    return overviews
