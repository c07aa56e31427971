"""The ledger timeline: every committed event of a session, grouped the way a reader thinks.

A pure reading of runs and their events (no Qt, no SQLite) shared by ``maka timeline``, ``maka
ledger timeline`` and the desktop's Timeline view, so all three show one picture:

- runs in lineage order: a continuation directly under its source, one level deeper, its
  boundary (the source's high-water it continues after) on the run;
- inside a run, rows on the ``event_seq`` axis (timestamps are shown, never used for order);
- the facts of one tool operation (call, T1 dispatch, T2 response or recovery outcome, the
  user's attestation) grouped as one row placed at its first fact, each fact a child entry;
- recovery facts, run endings, workspace checkpoints, baselines and restores as kinds of their
  own; failures, unknown outcomes, parked and damaged records carry a problem status that no
  filter hides (``TimelineRow.problem``).

Why a continuation would park is pinned onto these rows by ``timeline_pins``.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from runtime.ledger.codes import Lane
from runtime.ledger.collector_pause import collector_paused
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.timeline_events import (
    NOT_STARTED_BY_HOST_WORDS,
    NOT_STARTED_WORDS,
    PROBLEM_STATUSES,
    STOPPED_WORDS,
    TOOL_KINDS,
    TimelineEntry,
    TimelineKind,
    TimelineStatus,
    entry_of,
    tool_call_id,
    tool_name_of,
)

__all__ = [
    "PROBLEM_STATUSES",
    "RowFilter",
    "RunSource",
    "TimelineEntry",
    "TimelineKind",
    "TimelineRow",
    "TimelineRun",
    "TimelineStatus",
    "build_run",
    "build_timeline",
    "lineage_order",
    "matching_rows",
    "single_row",
    "tool_row",
]


class TimelineRow(NamedTuple):
    """A top-level row of a run: one event, or a tool operation's facts (``kind`` tool)."""

    kind: TimelineKind
    status: TimelineStatus
    summary: str
    entries: tuple[TimelineEntry, ...]
    tool_name: str | None = None
    tool_call_id: str | None = None

    @property
    def seq(self) -> int:
        return self.entries[0].seq

    @property
    def problem(self) -> bool:
        return self.status in PROBLEM_STATUSES


@dataclass(frozen=True, slots=True)
class RunSource:
    """A run and its committed events as a reader found them (store rows or file lines)."""

    run_id: str
    events: Sequence[tuple[int, RuntimeEvent]]
    status: str
    parent_run_id: str | None = None
    failure_class: str | None = None
    source_high_water: int | None = None
    lanes_checked: bool = False
    """The events were committed by the store's writers, which refuse an event without exactly
    one lane (docs/design/ledger.md section 3): a lane is then read from its signal alone,
    without checking the envelope again (a file's events are checked in full)."""


@dataclass(frozen=True, slots=True)
class TimelineRun:
    """One run in lineage order: ``depth`` 0 for a first run, +1 per continuation."""

    run_id: str
    depth: int
    status: str
    rows: Sequence[TimelineRow]
    """A tuple, or rows made when asked for (``timeline_lazy.LazyRows``: the desktop)."""
    event_count: int
    parent_run_id: str | None = None
    failure_class: str | None = None
    source_high_water: int | None = None


def build_run(source: RunSource, depth: int = 0) -> TimelineRun:
    """The rows of one run, tool facts grouped per call id, in ``event_seq`` order."""
    ordered = sorted(source.events, key=_by_seq)
    ended = False
    slots: list[TimelineRow | list[TimelineEntry]] = []
    groups: dict[str, list[TimelineEntry]] = {}
    for seq, event in ordered:
        entry = entry_of(seq, event, source.lanes_checked)
        call_id = tool_call_id(event) if entry.kind in TOOL_KINDS else None
        if call_id is None:
            ended = ended or entry.kind is TimelineKind.RUN_END
            slots.append(single_row(entry))
            continue
        group = groups.get(call_id)
        if group is None:
            group = groups[call_id] = []
            slots.append(group)
        group.append(entry)
    rows = tuple(
        slot if isinstance(slot, TimelineRow) else tool_row(tuple(slot), ended) for slot in slots
    )
    return TimelineRun(
        run_id=source.run_id,
        depth=depth,
        status=source.status,
        rows=rows,
        event_count=len(ordered),
        parent_run_id=source.parent_run_id,
        failure_class=source.failure_class,
        source_high_water=source.source_high_water,
    )


def _by_seq(pair: tuple[int, RuntimeEvent]) -> int:
    return pair[0]


def lineage_order(sources: Sequence[RunSource]) -> list[tuple[RunSource, int]]:
    """Runs with their depth: each first run in the given order, its continuations right under
    it. A parent that is not among ``sources`` (or a cycle) makes a run a first run."""
    known = {source.run_id for source in sources}
    children: dict[str, list[RunSource]] = {}
    roots: list[RunSource] = []
    for source in sources:
        parent = source.parent_run_id
        if parent is not None and parent in known and parent != source.run_id:
            children.setdefault(parent, []).append(source)
        else:
            roots.append(source)
    ordered: list[tuple[RunSource, int]] = []
    seen: set[str] = set()
    stack = [(root, 0) for root in reversed(roots)]
    while stack:
        source, depth = stack.pop()
        if source.run_id in seen:
            continue
        seen.add(source.run_id)
        ordered.append((source, depth))
        stack.extend((child, depth + 1) for child in reversed(children.get(source.run_id, [])))
    # Runs caught in a parent cycle have no root: show them at the top level all the same.
    ordered.extend((source, 0) for source in sources if source.run_id not in seen)
    return ordered


def build_timeline(sources: Sequence[RunSource]) -> tuple[TimelineRun, ...]:
    """Every run's rows, in lineage order. Builds an object or two per event, none of them
    cyclic: the cyclic collector is paused meanwhile (its passes would cost more than the
    building)."""
    with collector_paused():
        return tuple(build_run(source, depth) for source, depth in lineage_order(sources))


# ---- filters ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RowFilter:
    """Which rows of a run to show: by kind (the row's or one of its facts'), tool name (part
    of it, any case), status, text (part of a summary or an event id, any case) and only
    problems (a problem status or a pinned reason). The desktop's filters are answered with
    it where the rows are kept, so a view never needs every row to filter them."""

    kind: str = ""
    tool: str = ""
    status: str = ""
    text: str = ""
    only_problems: bool = False

    @property
    def active(self) -> bool:
        return bool(self.kind or self.tool or self.status or self.text or self.only_problems)

    def matches(self, row: TimelineRow, pinned: bool = False) -> bool:
        if self.only_problems and not (pinned or row.problem):
            return False
        if self.kind and row.kind != self.kind and all(e.kind != self.kind for e in row.entries):
            return False
        if self.tool and self.tool.casefold() not in (row.tool_name or "").casefold():
            return False
        if self.status and row.status != self.status:
            return False
        if self.text:
            text = self.text.casefold()
            words = [row.summary, *(e.summary for e in row.entries)]
            words += [e.event_id for e in row.entries]
            words += [full_text(e) for e in row.entries if e.kind in TEXT_KINDS]
            return any(text in word.casefold() for word in words)
        return True


TEXT_KINDS = frozenset({TimelineKind.MESSAGE, TimelineKind.THINKING})
"""The entries whose whole text a text filter searches (``full_text``)."""


def full_text(entry: TimelineEntry) -> str:
    """A message's (or thinking's) whole text, which its summary cuts: what a text filter
    searches ("" for any other entry)."""
    content = entry.event.get("content")
    text = content.get("text") if isinstance(content, Mapping) else None
    return text if isinstance(text, str) else ""


def matching_rows(
    run: TimelineRun, where: RowFilter, pinned_seqs: frozenset[int] = frozenset()
) -> list[int]:
    """The positions in ``run.rows`` of the rows ``where`` shows (``pinned_seqs``: the seqs of
    the run's rows a reason is pinned to, problems whatever their status)."""
    return [n for n, row in enumerate(run.rows) if where.matches(row, row.seq in pinned_seqs)]


# ---- rows -------------------------------------------------------------------------------------


def single_row(entry: TimelineEntry) -> TimelineRow:
    return TimelineRow(entry.kind, entry.status, entry.summary, (entry,))


def tool_row(
    entries: tuple[TimelineEntry, ...],
    ended: bool,
    *,
    name: str | None = None,
    call_id: str | None = None,
) -> TimelineRow:
    """A tool operation's row: its status is what its facts prove, in this order: a damaged
    or parked fact, a recovery decision or attestation, the response, else unknown (a
    dispatch with nothing after it in an ended run), not run (a call never dispatched).
    ``name`` and ``call_id``: the tool's name and the call id as the facts' events give them
    (``tool_name_of``, ``tool_call_id``), when the entries no longer hold their events."""
    name = _tool_name(entries) if name is None else name
    call_id = tool_call_id(entries[0].event) if call_id is None else call_id
    status, words = tool_verdict(entries, ended)
    return TimelineRow(
        TimelineKind.TOOL,
        status,
        f"{name}: {words}",
        entries,
        tool_name=name,
        tool_call_id=call_id,
    )


def tool_verdict(entries: Sequence[TimelineEntry], ended: bool) -> tuple[TimelineStatus, str]:
    """A tool row's status and the words its summary gives it, from its facts' kinds, lanes
    and statuses (in order), an attestation's summary (what the user said), a stopped result's
    summary (who stopped it) and whether the run ended: nothing else of them."""
    kinds = {entry.kind for entry in entries}
    status = _tool_status(entries, kinds, ended)
    words = {
        TimelineStatus.OK: "done",
        TimelineStatus.FAILED: "failed",
        TimelineStatus.UNKNOWN: "outcome unknown",
        TimelineStatus.PARKED: "parked",
        TimelineStatus.DAMAGED: "damaged record",
        TimelineStatus.NOT_RUN: "not run",
        TimelineStatus.RUNNING: "no result yet",
        TimelineStatus.CANCELLED: "cancelled",
    }[status]
    if TimelineKind.ATTESTATION in kinds:
        words = _attested_words(entries) or f"{words}, settled by you"
    elif status is TimelineStatus.CANCELLED:
        stopped = [e for e in entries if e.kind is TimelineKind.TOOL_RESPONSE]
        if TimelineKind.TOOL_DISPATCH not in kinds:
            # (Maka stopped the turn, at a question nobody could answer: not the user's cancel)
            by_host = bool(stopped) and STOPPED_WORDS.get(stopped[-1].summary) == "stopped by Maka"
            words = NOT_STARTED_BY_HOST_WORDS if by_host else NOT_STARTED_WORDS
        elif stopped:  # not "cancelled": it may have done part of its work before it stopped
            words = STOPPED_WORDS.get(stopped[-1].summary, words)
    return status, words


def _attested_words(entries: Sequence[TimelineEntry]) -> str | None:
    """What the user said of the call, from their attestation's summary (the entries may no
    longer hold their events): "done" alone would read as "it ran" for a call the user
    confirmed never ran."""
    for entry in reversed(entries):
        if entry.kind is not TimelineKind.ATTESTATION:
            continue
        if "user_attested_not_run" in entry.summary:
            return "did not run, settled by you"
        if "user_attested_ran" in entry.summary:
            return "ran, settled by you"
    return None


def _tool_status(
    entries: Sequence[TimelineEntry], kinds: set[TimelineKind], ended: bool
) -> TimelineStatus:
    statuses = {entry.status for entry in entries}
    for worst in (TimelineStatus.DAMAGED, TimelineStatus.PARKED):
        if worst in statuses:
            return worst
    decided = [e for e in entries if e.lane == Lane.RECOVERY_DECISION.value]
    if decided:  # a recovery or the user settled it (an attested "did not run" is no failure)
        return decided[-1].status
    response = [e for e in entries if e.kind is TimelineKind.TOOL_RESPONSE]
    if response:
        return response[-1].status
    if TimelineKind.TOOL_DISPATCH in kinds:
        return TimelineStatus.UNKNOWN if ended else TimelineStatus.RUNNING
    return TimelineStatus.NOT_RUN if ended else TimelineStatus.RUNNING


def _tool_name(entries: tuple[TimelineEntry, ...]) -> str:
    for entry in entries:
        name = tool_name_of(entry.event)
        if name is not None:
            return name
    return "tool"
