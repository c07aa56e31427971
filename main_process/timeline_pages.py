"""The desktop's Timeline view, served from the main process a page at a time.

``timeline.open`` reads the session's timeline once (on the query pool: the store read and the
planner run off the event loop) and keeps it; the desktop's services read each run's index
only, its rows made from their events when a page asks for them (``timeline_lazy.LazyRows``).
``timeline.page`` then answers any slice of one run's rows, and ``timeline.event`` one event's
canonical JSON, so the renderer only ever holds what it has scrolled to and never opens SQLite.
Filters are applied here: a filtered page counts only the rows the filter shows (the positions
are worked out once per run and filter, and kept: the first filter of a lazily read run makes
every row once), and ``timeline.locate`` answers where a pinned reason's row is, so the
renderer loads that row's page instead of every row before it. A few sessions are kept (the
latest opened); a page for one no longer kept rebuilds it.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace

from app.bridge_contract import (
    MAX_EVENT_JSON_CHARS,
    MAX_TIMELINE_ROW_EVENTS,
    TimelineEntryItem,
    TimelineEventShownPush,
    TimelineLocatedPush,
    TimelineOpenedPush,
    TimelinePagePush,
    TimelinePin,
    TimelinePlan,
    TimelineRowFilter,
    TimelineRowItem,
    TimelineRunHead,
)
from app.host.host_services import HostServiceError
from runtime.ledger.canonical_codec import canonical_bytes
from runtime.ledger.codes import StoreCode
from runtime.ledger.timeline_lazy import row_position, run_event, searchable_rows
from runtime.ledger.timeline_model import RowFilter, TimelineRow, TimelineRun, matching_rows
from runtime.ledger.timeline_pins import ParkHeader, ResumeMarks, SessionTimeline

KEPT_SESSIONS = 4
KEPT_FILTERS = 16
"""Filtered row positions kept (per session, run and filter), the latest used."""
SUMMARY_CHARS = 500


class TimelinePages:
    def __init__(self, read: Callable[[str], SessionTimeline]) -> None:
        self._read = read
        self._kept: OrderedDict[str, SessionTimeline] = OrderedDict()
        self._shown: OrderedDict[tuple[str, str, RowFilter], list[int]] = OrderedDict()
        self._lock = threading.Lock()

    def open(self, session_id: str) -> TimelineOpenedPush:
        """Read the session's timeline afresh (a new run may have committed) and describe it."""
        timeline = self._read(session_id)
        with self._lock:
            self._kept[session_id] = timeline
            self._kept.move_to_end(session_id)
            self._forget(session_id)  # the positions were worked out on the previous reading
            while len(self._kept) > KEPT_SESSIONS:
                self._forget(self._kept.popitem(last=False)[0])
        return TimelineOpenedPush(
            session_id=session_id,
            runs=tuple(_head(run) for run in timeline.runs),
            plan=_plan(timeline.header),
        )

    def _timeline(self, session_id: str) -> SessionTimeline:
        with self._lock:
            kept = self._kept.get(session_id)
        return kept if kept is not None else self._read(session_id)

    def _run(self, session_id: str, run_id: str) -> tuple[TimelineRun, ResumeMarks | None]:
        return _find(self._timeline(session_id), session_id, run_id)

    def _forget(self, session_id: str) -> None:
        for key in [key for key in self._shown if key[0] == session_id]:
            del self._shown[key]

    def _positions(
        self, session_id: str, timeline: SessionTimeline, run: TimelineRun, where: RowFilter
    ) -> list[int]:
        """The positions in ``run.rows`` of the rows ``where`` shows, worked out once per
        kept reading of the session (a session no longer kept is read, and worked out, anew)."""
        key = (session_id, run.run_id, where)
        with self._lock:
            kept = self._kept.get(session_id) is timeline
            found = self._shown.get(key) if kept else None
            if found is not None:
                self._shown.move_to_end(key)
                return found
        pins = timeline.header.pins if timeline.header is not None else ()
        pinned = frozenset(
            pin.seq for pin in pins if pin.run_id == run.run_id and pin.seq is not None
        )
        found = matching_rows(replace(run, rows=searchable_rows(run.rows)), where, pinned)
        with self._lock:
            if self._kept.get(session_id) is timeline:
                self._shown[key] = found
                while len(self._shown) > KEPT_FILTERS:
                    self._shown.popitem(last=False)
        return found

    def page(
        self,
        session_id: str,
        run_id: str,
        start: int,
        count: int,
        filters: TimelineRowFilter | None = None,
    ) -> TimelinePagePush:
        timeline = self._timeline(session_id)
        run, marks = _find(timeline, session_id, run_id)
        where = _where(filters)
        if where is None:
            rows = run.rows[start : start + count]
            total = len(run.rows)
        else:
            positions = self._positions(session_id, timeline, run, where)
            rows = tuple(run.rows[n] for n in positions[start : start + count])
            total = len(positions)
        return TimelinePagePush(
            session_id=session_id,
            run_id=run_id,
            start=start,
            total=total,
            rows=tuple(_row(row, marks) for row in rows),
            filters=filters if where is not None else None,
        )

    def locate(
        self, session_id: str, run_id: str, seq: int, filters: TimelineRowFilter | None = None
    ) -> TimelineLocatedPush:
        """Where the row of ``run_id`` starting at ``seq`` is among the rows shown."""
        timeline = self._timeline(session_id)
        run, _ = _find(timeline, session_id, run_id)
        where = _where(filters)
        found = row_position(run.rows, seq)
        if found is not None and where is not None:
            positions = self._positions(session_id, timeline, run, where)
            found = _index(positions, found)
        return TimelineLocatedPush(
            session_id=session_id,
            run_id=run_id,
            seq=seq,
            position=found,
            filters=filters if where is not None else None,
        )

    def event(self, session_id: str, run_id: str, event_id: str) -> TimelineEventShownPush:
        run, _ = self._run(session_id, run_id)
        event = run_event(run.rows, event_id)
        if event is None:
            raise HostServiceError(
                StoreCode.EVENT_NOT_FOUND, f"run {run_id} has no event {event_id}"
            )
        text = canonical_bytes(event).decode("utf-8")
        return TimelineEventShownPush(
            session_id=session_id,
            run_id=run_id,
            event_id=event_id,
            canonical_json=text[:MAX_EVENT_JSON_CHARS],
            truncated=len(text) > MAX_EVENT_JSON_CHARS,
        )


def _find(
    timeline: SessionTimeline, session_id: str, run_id: str
) -> tuple[TimelineRun, ResumeMarks | None]:
    for run in timeline.runs:
        if run.run_id == run_id:
            marks = timeline.header.marks if timeline.header is not None else None
            return run, marks
    raise HostServiceError(StoreCode.RUN_NOT_FOUND, f"session {session_id} has no run {run_id}")


def _where(filters: TimelineRowFilter | None) -> RowFilter | None:
    """The filter as the model applies it; None when it shows every row."""
    if filters is None:
        return None
    where = RowFilter(
        filters.kind, filters.tool, filters.status, filters.text, filters.only_problems
    )
    return where if where.active else None


def _index(positions: list[int], position: int) -> int | None:
    """Where ``position`` is in the sorted ``positions`` (None: not there)."""
    found = bisect.bisect_left(positions, position)
    return found if found < len(positions) and positions[found] == position else None


def _head(run: TimelineRun) -> TimelineRunHead:
    return TimelineRunHead(
        run_id=run.run_id,
        depth=run.depth,
        status=run.status,
        failure_class=run.failure_class,
        parent_run_id=run.parent_run_id,
        source_high_water=run.source_high_water,
        row_count=len(run.rows),
        event_count=run.event_count,
    )


def _plan(header: ParkHeader | None) -> TimelinePlan | None:
    if header is None:
        return None
    marks = header.marks
    return TimelinePlan(
        disposition=header.disposition,
        rejection_reasons=header.rejection_reasons,
        pins=tuple(
            TimelinePin(
                code=pin.reason.code,
                message=pin.reason.message[:4000],
                event_id=pin.reason.event_id,
                tool_call_id=pin.reason.tool_call_id,
                tool_name=pin.reason.tool_name,
                run_id=pin.run_id,
                seq=pin.seq,
            )
            for pin in header.pins[:500]
        ),
        boundary_run_id=marks.run_id if marks is not None else None,
        boundary_high_water=marks.high_water if marks is not None else None,
    )


def _row(row: TimelineRow, marks: ResumeMarks | None) -> TimelineRowItem:
    replayed = marks.replay_event_ids if marks is not None else frozenset()
    entries = row.entries[:MAX_TIMELINE_ROW_EVENTS]
    return TimelineRowItem(
        seq=row.seq,
        kind=row.kind.value,
        status=row.status.value,
        summary=row.summary[:SUMMARY_CHARS],
        tool_name=row.tool_name,
        tool_call_id=row.tool_call_id,
        entries=tuple(
            TimelineEntryItem(
                seq=entry.seq,
                event_id=entry.event_id,
                kind=entry.kind.value,
                lane=str(entry.lane),
                status=entry.status.value,
                ts=entry.event["ts"],
                summary=entry.summary[:SUMMARY_CHARS],
                replayed=entry.event_id in replayed,
            )
            for entry in entries
        ),
        more_entries=len(row.entries) - len(entries),
    )
