"""The desktop's Timeline view, served from the main process a page at a time.

``timeline.open`` builds the session's timeline once (on the query pool: the store read and the
planner run off the event loop) and keeps it; ``timeline.page`` then answers any slice of one
run's rows from memory, and ``timeline.event`` one event's canonical JSON, so the renderer only
ever holds what it has scrolled to and never opens SQLite. A few sessions are kept (the latest
opened); a page for one no longer kept rebuilds it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from app.bridge_contract import (
    MAX_EVENT_JSON_CHARS,
    MAX_TIMELINE_ROW_EVENTS,
    TimelineEntryItem,
    TimelineEventShownPush,
    TimelineOpenedPush,
    TimelinePagePush,
    TimelinePin,
    TimelinePlan,
    TimelineRowItem,
    TimelineRunHead,
)
from app.host.host_services import HostServiceError
from runtime.ledger.canonical_codec import canonical_bytes
from runtime.ledger.codes import StoreCode
from runtime.ledger.timeline_model import TimelineRow, TimelineRun
from runtime.ledger.timeline_pins import ParkHeader, ResumeMarks, SessionTimeline

KEPT_SESSIONS = 4
SUMMARY_CHARS = 500


class TimelinePages:
    def __init__(self, read: Callable[[str], SessionTimeline]) -> None:
        self._read = read
        self._kept: OrderedDict[str, SessionTimeline] = OrderedDict()
        self._lock = threading.Lock()

    def open(self, session_id: str) -> TimelineOpenedPush:
        """Read the session's timeline afresh (a new run may have committed) and describe it."""
        timeline = self._read(session_id)
        with self._lock:
            self._kept[session_id] = timeline
            self._kept.move_to_end(session_id)
            while len(self._kept) > KEPT_SESSIONS:
                self._kept.popitem(last=False)
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
        timeline = self._timeline(session_id)
        for run in timeline.runs:
            if run.run_id == run_id:
                marks = timeline.header.marks if timeline.header is not None else None
                return run, marks
        raise HostServiceError(StoreCode.RUN_NOT_FOUND, f"session {session_id} has no run {run_id}")

    def page(self, session_id: str, run_id: str, start: int, count: int) -> TimelinePagePush:
        run, marks = self._run(session_id, run_id)
        rows = run.rows[start : start + count]
        return TimelinePagePush(
            session_id=session_id,
            run_id=run_id,
            start=start,
            total=len(run.rows),
            rows=tuple(_row(row, marks) for row in rows),
        )

    def event(self, session_id: str, run_id: str, event_id: str) -> TimelineEventShownPush:
        run, _ = self._run(session_id, run_id)
        for row in run.rows:
            for entry in row.entries:
                if entry.event_id == event_id:
                    text = canonical_bytes(entry.event).decode("utf-8")
                    return TimelineEventShownPush(
                        session_id=session_id,
                        run_id=run_id,
                        event_id=event_id,
                        canonical_json=text[:MAX_EVENT_JSON_CHARS],
                        truncated=len(text) > MAX_EVENT_JSON_CHARS,
                    )
        raise HostServiceError(StoreCode.EVENT_NOT_FOUND, f"run {run_id} has no event {event_id}")


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
