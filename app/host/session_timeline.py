"""A stored session's timeline, with the reasons Safe resume's own planner gives pinned to it.

Shared by ``maka timeline`` and the desktop's Timeline view, so both read the same runs the
same way: ``maka timeline`` decodes every event (``read_session_timeline``), the desktop reads
each run's index and makes a page's rows when asked (``read_session_timeline_lazily``; equal
row for row, ``tests/unit/test_timeline_lazy_rows.py``). It only reads the store; the plan comes
from the caller's planner (``plan_latest``, the entry point Safe resume and ``maka plan`` use).
A session whose latest run was not interrupted (``resume_candidate``, the banner's test) has
nothing to resume: the planner is not asked, and there is no plan header.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from runtime.continuation.continuation_planner import ContinuationPlan
from runtime.continuation.resume_candidate import resume_candidate
from runtime.ledger.codes import ParkReason
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.quarantined_runs import Quarantined, read_unless_quarantined
from runtime.ledger.store_ports import RunHeader, StoredEvent
from runtime.ledger.timeline_events import ToolFact
from runtime.ledger.timeline_lazy import LazyRows, TimelineIndex, run_ended
from runtime.ledger.timeline_model import RunSource, TimelineRun, build_timeline, lineage_order
from runtime.ledger.timeline_pins import (
    ParkHeader,
    ResumeMarks,
    SessionTimeline,
    TimelineReason,
    pin_reasons,
)


class TimelineStore(Protocol):
    def list_session_runs(self, session_id: str) -> Sequence[RunHeader]: ...

    def read_run_events(self, run_id: str) -> Sequence[StoredEvent]: ...


class TimelineIndexStore(Protocol):
    def list_session_runs(self, session_id: str) -> Sequence[RunHeader]: ...

    def read_run_timeline_index(self, run_id: str) -> TimelineIndex: ...

    def read_run_events_at(self, run_id: str, seqs: Sequence[int]) -> Sequence[StoredEvent]: ...

    def read_run_event(self, run_id: str, event_id: str) -> StoredEvent | None: ...

    def read_run_tool_facts(
        self, run_id: str, high_water: int
    ) -> Mapping[int, ToolFact] | None: ...


def run_source(header: RunHeader, rows: Sequence[StoredEvent] = ()) -> RunSource:
    source = header.continuation_source or {}
    high_water = source.get("sourceRuntimeEventHighWater")
    return RunSource(
        run_id=header.run_id,
        events=[(row.seq, row.event) for row in rows],
        status=str(header.status),
        parent_run_id=header.parent_run_id,
        failure_class=header.failure_class,
        source_high_water=high_water if isinstance(high_water, int) else None,
        lanes_checked=True,
    )


UNREADABLE = ParkReason.RUNTIME_LEDGER_UNREADABLE.value
"""What a run whose record no longer decodes shows as its ending (no rows): startup recovery
quarantined it, and the session's other runs are shown as they are."""


def _readable_source(store: TimelineStore, header: RunHeader) -> RunSource:
    rows = read_unless_quarantined(store, header.run_id)
    if isinstance(rows, Quarantined):
        return replace(run_source(header), failure_class=UNREADABLE)
    return run_source(header, rows)


def read_session_timeline(
    store: TimelineStore,
    session_id: str,
    plan_latest: Callable[[str], ContinuationPlan] | None,
    *,
    run_id: str | None = None,
) -> SessionTimeline:
    """The session's runs in lineage order (only ``run_id`` when given) and the plan header."""
    headers = store.list_session_runs(session_id)
    sources = [_readable_source(store, header) for header in headers]
    runs = build_timeline(sources)
    interrupted = resume_candidate(headers) is not None  # the run Safe resume would plan for
    plan = plan_latest(session_id) if plan_latest is not None and interrupted else None
    header = park_header(runs, plan) if plan is not None else None
    if run_id is not None:
        runs = tuple(run for run in runs if run.run_id == run_id)
    return SessionTimeline(session_id, runs, header)


def read_session_timeline_lazily(
    store: TimelineIndexStore,
    session_id: str,
    plan_latest: Callable[[str], ContinuationPlan] | None,
) -> SessionTimeline:
    """``read_session_timeline``'s timeline, its rows made when asked for (``LazyRows``): the
    desktop's, which shows a page at a time. Only the store's index of each run is read here
    (no event is decoded but those that may end a run); equal row for row to the full read."""
    headers = store.list_session_runs(session_id)
    by_id = {header.run_id: header for header in headers}
    runs = tuple(
        _lazy_run(store, by_id[source.run_id], source, depth)
        for source, depth in lineage_order([run_source(header) for header in headers])
    )
    interrupted = resume_candidate(headers) is not None
    plan = plan_latest(session_id) if plan_latest is not None and interrupted else None
    header = park_header(runs, plan) if plan is not None else None
    return SessionTimeline(session_id, runs, header)


def _lazy_run(
    store: TimelineIndexStore, header: RunHeader, source: RunSource, depth: int
) -> TimelineRun:
    run_id = header.run_id
    index = store.read_run_timeline_index(run_id)

    def load(seqs: Sequence[int]) -> list[tuple[int, RuntimeEvent]]:
        return [(row.seq, row.event) for row in store.read_run_events_at(run_id, seqs)]

    def find(event_id: str) -> tuple[int, RuntimeEvent] | None:
        row = store.read_run_event(run_id, event_id)
        return (row.seq, row.event) if row is not None else None

    ended = run_ended([(row.seq, row.event) for row in index.endings])
    return TimelineRun(
        run_id=run_id,
        depth=depth,
        status=source.status,
        rows=LazyRows(
            index,
            ended,
            load,
            find,
            facts=lambda high_water: store.read_run_tool_facts(run_id, high_water),
        ),
        event_count=index.event_count,
        parent_run_id=source.parent_run_id,
        failure_class=source.failure_class,
        source_high_water=source.source_high_water,
    )


def park_header(runs: Sequence[TimelineRun], plan: ContinuationPlan) -> ParkHeader | None:
    """The plan as the timeline shows it; None when there is no interrupted run to resume."""
    if plan.rejection_reasons == (ParkReason.RESUME_CANDIDATE_MISSING,):
        return None
    diagnostics = [
        TimelineReason(d.code, d.message, d.event_id, d.tool_call_id, d.tool_name)
        for d in plan.diagnostics
    ]
    reasons = tuple(reason.value for reason in plan.rejection_reasons)
    marks = None
    if plan.continuation is not None:
        details = plan.continuation
        replay = frozenset(event["id"] for event in details.runtime_context)
        marks = ResumeMarks(
            details.source.run_id,
            details.source_high_water,
            replay,
            len(details.runtime_context),
        )
    elif plan.source_run_id is not None:
        source = next((run for run in runs if run.run_id == plan.source_run_id), None)
        if source is not None and source.event_count:  # event_seq is gap-free from 1
            marks = ResumeMarks(source.run_id, source.event_count)
    disposition = "continue" if plan.continues else "park"
    return ParkHeader(disposition, reasons, pin_reasons(runs, diagnostics, reasons), marks)
