"""Why a continuation would park, pinned onto the timeline's rows, and the timeline's JSON.

The reasons come from the planner Safe resume itself runs (the caller plans and hands the
diagnostics over as ``TimelineReason``s): nothing here decides whether a run may continue. A
diagnostic that names an event (``eventId``) is pinned to the row holding that event; one that
names only a tool call (``toolCallId``) to that call's row, the latest run's first; a stale or
failed snapshot to the latest snapshot's row. What names nothing in the ledger shown (the
folder, the tool catalog, a background process, the files) sits in its own lane, ``outside``,
as does a park reason of those families no diagnostic carries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from runtime.ledger.timeline_lazy import LazyRows
from runtime.ledger.timeline_model import (
    TimelineEntry,
    TimelineKind,
    TimelineRow,
    TimelineRun,
    TimelineStatus,
)

OUTSIDE_REASONS = frozenset(
    {
        "resume_feature_disabled",
        "session_busy",
        "background_operation_pending",
        "workspace_identity_mismatch",
        "workspace_identity_missing",
        "tool_catalog_mismatch",
        "safety_observation_unavailable",
        "workspace_folder_missing",
        "workspace_drift",
        "workspace_checkpoint_missing",
    }
)
"""Park reasons about the world beside the ledger: folder, files, catalog, processes, flag."""

SNAPSHOT_REASONS = frozenset({"workspace_checkpoint_stale", "workspace_checkpoint_failed"})
"""Park reasons about the record's latest snapshot: pinned to that snapshot's row (or outside
when the record has none)."""


@dataclass(frozen=True, slots=True)
class TimelineReason:
    """One reason from the planner: a diagnostic, or a park reason standing alone."""

    code: str
    message: str
    event_id: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None


@dataclass(frozen=True, slots=True)
class PinnedReason:
    """A reason and where it belongs: a row (``run_id`` and the row's first ``seq``) or the
    outside lane (both None)."""

    reason: TimelineReason
    run_id: str | None = None
    seq: int | None = None

    @property
    def lane(self) -> str:
        return "ledger" if self.run_id is not None else "outside"


@dataclass(frozen=True, slots=True)
class ResumeMarks:
    """What a continuation would start from: the run, its high-water (the boundary) and the
    events it would replay."""

    run_id: str
    high_water: int
    replay_event_ids: frozenset[str] = frozenset()
    replay_count: int = 0
    """How many events the plan replays, as the plan counts them (an event stored twice is
    replayed twice: the plan is blocked then, but ``maka ledger plan`` says the same count)."""


@dataclass(frozen=True, slots=True)
class ParkHeader:
    """The planner's verdict as the timeline shows it."""

    disposition: str
    rejection_reasons: tuple[str, ...]
    pins: tuple[PinnedReason, ...]
    marks: ResumeMarks | None = None


@dataclass(frozen=True, slots=True)
class SessionTimeline:
    """A stored session's timeline as a host reads it: its runs and, for an interrupted
    session, the plan header."""

    session_id: str
    runs: tuple[TimelineRun, ...]
    header: ParkHeader | None


def pin_reasons(
    runs: Sequence[TimelineRun],
    diagnostics: Iterable[TimelineReason],
    rejection_reasons: Sequence[str] = (),
) -> tuple[PinnedReason, ...]:
    """Each diagnostic pinned to its row (or the outside lane), then each outside-family park
    reason no diagnostic stands for."""
    place_event, place_call = _placers(runs)
    snapshot = _last_checkpoint(runs)
    pinned: list[PinnedReason] = []
    for reason in diagnostics:
        place = None
        if reason.event_id is not None:
            place = place_event(reason.event_id)
        if place is None and reason.tool_call_id is not None:
            place = place_call(reason.tool_call_id)
        if place is None and reason.code in SNAPSHOT_REASONS:
            place = snapshot
        pinned.append(PinnedReason(reason, *place) if place else PinnedReason(reason))
    codes = {pin.reason.code for pin in pinned}
    for code in rejection_reasons:
        if code in codes:
            continue
        if code in SNAPSHOT_REASONS and snapshot is not None:
            pinned.append(PinnedReason(TimelineReason(code, ""), *snapshot))
        elif code in OUTSIDE_REASONS or code in SNAPSHOT_REASONS:
            pinned.append(PinnedReason(TimelineReason(code, "")))
    return tuple(pinned)


Place = tuple[str, int]


def _placers(
    runs: Sequence[TimelineRun],
) -> tuple[Callable[[str], Place | None], Callable[[str], Place | None]]:
    """Where an event id and a tool call id are: the row holding the event in the first run
    (lineage order) that has it, the call's row in the last (the latest run is planned). A run
    read lazily answers from the store's index, without making its rows."""
    by_event: dict[str, Place] = {}
    by_call: dict[str, Place] = {}
    lazy = [run for run in runs if isinstance(run.rows, LazyRows)]
    for run in runs:
        if isinstance(run.rows, LazyRows):
            continue
        for row in run.rows:
            for entry in row.entries:
                by_event.setdefault(entry.event_id, (run.run_id, row.seq))
            if row.tool_call_id is not None:
                by_call[row.tool_call_id] = (run.run_id, row.seq)
    if not lazy:
        return by_event.get, by_call.get
    order = {run.run_id: number for number, run in enumerate(runs)}

    def place_event(event_id: str) -> Place | None:
        found = [by_event[event_id]] if event_id in by_event else []
        for run in lazy:
            seq = cast("LazyRows", run.rows).row_of_event(event_id)
            if seq is not None:
                found.append((run.run_id, seq))
        return min(found, key=lambda place: order[place[0]], default=None)

    def place_call(call_id: str) -> Place | None:
        found = [by_call[call_id]] if call_id in by_call else []
        for run in lazy:
            seq = cast("LazyRows", run.rows).row_of_call(call_id)
            if seq is not None:
                found.append((run.run_id, seq))
        return max(found, key=lambda place: order[place[0]], default=None)

    return place_event, place_call


def _last_checkpoint(runs: Sequence[TimelineRun]) -> Place | None:
    """The latest workspace snapshot row (a stale or failed snapshot is about it)."""
    for run in reversed(runs):
        if isinstance(run.rows, LazyRows):
            seq = run.rows.last_snapshot()
            if seq is not None:
                return run.run_id, seq
            continue
        for row in reversed(run.rows):
            if row.kind is TimelineKind.CHECKPOINT:
                return run.run_id, row.seq
    return None


def row_problem(row: TimelineRow, pinned: bool) -> bool:
    """A row "only problems" keeps: a problem status, or a reason pinned to it."""
    return pinned or row.problem


def only_problems(
    runs: Sequence[TimelineRun],
    pins: Sequence[PinnedReason],
    abandoned: frozenset[str] = frozenset(),
) -> tuple[TimelineRun, ...]:
    """The same runs keeping only their problem rows (every run stays, so the lineage reads);
    ``abandoned``: runs still marked running whose process is gone (not yet repaired), where a
    call with no result yet is a problem too."""
    marked = {(pin.run_id, pin.seq) for pin in pins if pin.run_id is not None}
    kept = []
    for run in runs:
        rows = tuple(
            row
            for row in run.rows
            if row_problem(row, (run.run_id, row.seq) in marked)
            or (run.run_id in abandoned and row.status is TimelineStatus.RUNNING)
        )
        kept.append(_with_rows(run, rows))
    return tuple(kept)


def _with_rows(run: TimelineRun, rows: tuple[TimelineRow, ...]) -> TimelineRun:
    return replace(run, rows=rows)


# ---- JSON (``maka timeline --json``, ``maka ledger timeline --json``: a contract) --------------


def reason_json(reason: TimelineReason) -> dict[str, Any]:
    body: dict[str, Any] = {"code": reason.code}
    if reason.message:
        body["message"] = reason.message
    for key, value in (
        ("eventId", reason.event_id),
        ("toolCallId", reason.tool_call_id),
        ("toolName", reason.tool_name),
    ):
        if value is not None:
            body[key] = value
    return body


def entry_json(entry: TimelineEntry, marks: ResumeMarks | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "seq": entry.seq,
        "eventId": entry.event_id,
        "kind": entry.kind.value,
        "lane": entry.lane,
        "status": entry.status.value,
        "ts": entry.event["ts"],
        "summary": entry.summary,
    }
    if marks is not None and entry.event_id in marks.replay_event_ids:
        body["replayed"] = True
    return body


def timeline_json(
    runs: Sequence[TimelineRun],
    header: ParkHeader | None,
) -> dict[str, Any]:
    """The whole timeline as one JSON document: runs, rows, entries, pinned reasons."""
    pins = header.pins if header is not None else ()
    by_row: dict[tuple[str, int], list[str]] = {}
    for pin in pins:
        if pin.run_id is not None and pin.seq is not None:
            by_row.setdefault((pin.run_id, pin.seq), []).append(pin.reason.code)
    marks = header.marks if header is not None else None
    document: dict[str, Any] = {"runs": [_run_json(run, by_row, marks) for run in runs]}
    if header is not None:
        document["plan"] = {
            "disposition": header.disposition,
            "rejectionReasons": list(header.rejection_reasons),
            "pinned": [
                {**reason_json(pin.reason), "runId": pin.run_id, "seq": pin.seq}
                for pin in pins
                if pin.run_id is not None
            ],
            "outside": [reason_json(pin.reason) for pin in pins if pin.run_id is None],
        }
        if marks is not None:
            document["plan"]["boundary"] = {"runId": marks.run_id, "highWater": marks.high_water}
    return document


def _run_json(
    run: TimelineRun, by_row: dict[tuple[str, int], list[str]], marks: ResumeMarks | None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "runId": run.run_id,
        "depth": run.depth,
        "status": run.status,
        "eventCount": run.event_count,
    }
    if run.failure_class is not None:
        body["failureClass"] = run.failure_class
    if run.parent_run_id is not None:
        body["continues"] = {"runId": run.parent_run_id, "highWater": run.source_high_water}
    rows = []
    for row in run.rows:
        item: dict[str, Any] = {
            "seq": row.seq,
            "kind": row.kind.value,
            "status": row.status.value,
            "summary": row.summary,
        }
        if row.kind is TimelineKind.TOOL:
            item["toolName"] = row.tool_name
            item["toolCallId"] = row.tool_call_id
        item["events"] = [entry_json(entry, marks) for entry in row.entries]
        reasons = by_row.get((run.run_id, row.seq))
        if reasons:
            item["reasons"] = reasons
        rows.append(item)
    body["rows"] = rows
    return body
