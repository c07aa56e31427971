"""A stored run's timeline rows built a page at a time, from an index the store answers in SQL.

Opening a 100,000-event run must not decode every event (``json.loads`` alone costs seconds):
the store answers, per event, its ``event_seq`` and, for an event on a tool lane, the tool
call id it names, and which events may end the run (``TimelineIndex``). That is enough to
count the rows and group a tool operation's facts exactly as ``build_run`` does; a row's
entries, status and summary are made only when the row is asked for (``LazyRows[n]``, a
slice, or iterating), from its events read back by ``event_seq``, with the same ``entry_of``
and row rules. Built rows are kept a few chunks at a time (the latest used), so memory is
bounded whatever is read.

No Qt, no SQLite: the events come from the caller's ``load`` (the store's read by seq).
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import cast, overload

from runtime.ledger.collector_pause import collector_paused
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import StoredEvent
from runtime.ledger.timeline_events import (
    TimelineKind,
    ToolFact,
    entry_of,
    fact_entry,
    tool_name_of,
)
from runtime.ledger.timeline_model import (
    TEXT_KINDS,
    TimelineEntry,
    TimelineRow,
    TimelineStatus,
    full_text,
    single_row,
    tool_row,
    tool_verdict,
)

Verdict = tuple[TimelineStatus, str]

CHUNK_ROWS = 100
"""Rows built (and their events read) together: the desktop's page."""
KEPT_CHUNKS = 4
"""Built chunks kept per run, the latest used (a view asks for each page once)."""

EventLoader = Callable[[Sequence[int]], Sequence[tuple[int, RuntimeEvent]]]
"""The run's committed events at these ``event_seq``s, as ``(seq, event)`` in any order."""
EventFinder = Callable[[str], "tuple[int, RuntimeEvent] | None"]
"""The run's event with this id, as ``(seq, event)`` (None: the run has none)."""
FactReader = Callable[[int], Mapping[int, ToolFact] | None]
"""The run's calls, dispatches and responses up to this ``event_seq`` as a filter reads them,
by seq (``storage/ledger/timeline_index.py``; any it leaves out is decoded in full). None: the
store has no such reading (every row is then made from its events)."""

ATTESTED = TimelineKind.ATTESTATION
STOPPED = TimelineStatus.CANCELLED


Slot = int | list[int]
"""A row as the index knows it: a single event's ``event_seq``, or a tool operation's facts'
(its first, the row's ``seq``, first). Never changed once made."""


def row_slots(facts: Sequence[tuple[int, str | None, int]]) -> tuple[list[Slot], dict[str, int]]:
    """``build_run``'s grouping from the store's index alone: ``facts`` are each event's
    ``(event_seq, call id, ...)`` in ``event_seq`` order, the call id None but for an event on
    a tool lane naming one (``tool_call_id``); such an event joins the row of its call's first
    fact, any other is a row of its own. The rows, and each call id's row (its first seq).
    One pass over 100,000 events: kept plain."""
    slots: list[Slot] = []
    groups: dict[str, list[int]] = {}
    append = slots.append
    found = groups.get
    for seq, call_id, _ in facts:
        if call_id is None:
            append(seq)
            continue
        group = found(call_id)
        if group is None:
            group = groups[call_id] = [seq]
            append(group)
        else:
            group.append(seq)
    return slots, {call_id: group[0] for call_id, group in groups.items()}


@dataclass(frozen=True, slots=True)
class TimelineIndex:
    """A run as the store indexes it for the timeline: its rows and each tool call id's row
    (``row_slots``), its event count and last ``event_seq``, its events that may end it (every
    ordinary event that is terminal or names ``endInvocation``) and the seqs of those that may
    be a workspace snapshot (every ordinary event naming ``workspaceCheckpoint``)."""

    rows: Sequence[Slot]
    calls: Mapping[str, int]
    event_count: int
    high_water: int
    endings: Sequence[StoredEvent]
    snapshots: Sequence[int] = ()


def run_ended(candidates: Sequence[tuple[int, RuntimeEvent]]) -> bool:
    """Whether any of the events that may end the run is a run ending as the timeline reads it
    (the store gives every ordinary event that is terminal or names ``endInvocation``)."""
    return any(entry_of(seq, event, True).kind is TimelineKind.RUN_END for seq, event in candidates)


class LazyRows(Sequence[TimelineRow]):
    """A run's rows, made when asked for. ``len`` and the rows' order are known from the index;
    equal, row for row, to ``build_run``'s rows of the same events."""

    def __init__(
        self,
        index: TimelineIndex,
        ended: bool,
        load: EventLoader,
        find: EventFinder,
        *,
        chunk_rows: int = CHUNK_ROWS,
        kept_chunks: int = KEPT_CHUNKS,
        facts: FactReader | None = None,
    ) -> None:
        """``index``: the store's index of the run; ``ended``: ``run_ended``'s answer;
        ``facts``: the store's reading of the run's tool facts, for ``searchable``."""
        self._slots = index.rows
        self._calls = index.calls
        self._snapshots = index.snapshots
        self._high_water = index.high_water
        self._firsts = [slot if isinstance(slot, int) else slot[0] for slot in self._slots]
        self._grouped: dict[int, int] | None = None
        self._ended = ended
        self._load = load
        self._find = find
        self._facts = facts
        self._chunk_rows = chunk_rows
        self._kept_chunks = kept_chunks
        self._chunks: OrderedDict[int, tuple[TimelineRow, ...]] = OrderedDict()
        self._searchable: tuple[TimelineRow, ...] | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._slots)

    @overload
    def __getitem__(self, index: int) -> TimelineRow: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[TimelineRow, ...]: ...

    def __getitem__(self, index: int | slice) -> TimelineRow | tuple[TimelineRow, ...]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self._slots))
            if step != 1:
                return tuple(self[n] for n in range(start, stop, step))
            return self._range(start, stop)
        position = index + len(self._slots) if index < 0 else index
        if not 0 <= position < len(self._slots):
            raise IndexError(index)
        chunk = self._chunk(position // self._chunk_rows)
        return chunk[position % self._chunk_rows]

    def __iter__(self) -> Iterator[TimelineRow]:
        for number in range((len(self._slots) + self._chunk_rows - 1) // self._chunk_rows):
            yield from self._chunk(number)

    def __reversed__(self) -> Iterator[TimelineRow]:
        for number in reversed(
            range((len(self._slots) + self._chunk_rows - 1) // self._chunk_rows)
        ):
            yield from reversed(self._chunk(number))

    @property
    def first_seqs(self) -> Sequence[int]:
        """Each row's first ``event_seq`` (its ``seq``), in row order (ascending)."""
        return self._firsts

    def position_of(self, seq: int) -> int | None:
        """The position of the row starting at ``seq`` (None: no row starts there)."""
        found = bisect.bisect_left(self._firsts, seq)
        return found if found < len(self._firsts) and self._firsts[found] == seq else None

    def event(self, event_id: str) -> RuntimeEvent | None:
        """The run's event with this id, read alone (None: the run has none)."""
        found = self._find(event_id)
        return found[1] if found is not None and self.holds(found[0]) else None

    def row_of_event(self, event_id: str) -> int | None:
        """The ``seq`` of the row holding the event with this id (None: the run has none)."""
        found = self._find(event_id)
        if found is None or not self.holds(found[0]):
            return None
        seq = found[0]
        with self._lock:
            grouped = self._grouped
        if grouped is None:  # a tool operation's later facts to its row, made once
            grouped = {
                member: slot[0]
                for slot in self._slots
                if not isinstance(slot, int)
                for member in slot
            }
            with self._lock:
                self._grouped = grouped
        return grouped.get(seq, seq)

    def row_of_call(self, call_id: str) -> int | None:
        """The ``seq`` of the tool call's row (None: the run has none)."""
        return self._calls.get(call_id)

    def last_snapshot(self) -> int | None:
        """The ``seq`` of the run's latest workspace snapshot row (None: it has none)."""
        for seq in sorted(self._snapshots, reverse=True):
            for found, event in self._load([seq]):
                if entry_of(found, event, True).kind is TimelineKind.CHECKPOINT:
                    return found
        return None

    def holds(self, seq: int) -> bool:
        """Whether the event at ``seq`` was committed when the index was read."""
        return 0 < seq <= self._high_water

    def searchable(self) -> tuple[TimelineRow, ...]:
        """Every row as a filter reads it (``RowFilter.matches``: kinds, statuses, summaries,
        the tool's name, the facts' event ids), made once and kept, each fact's event let go
        but its id: a filter's first use reads the whole run, a later one (the next letter
        typed) none of it."""
        with self._lock:
            found = self._searchable
        if found is None:
            facts = self._facts(self._high_water) if self._facts is not None else None
            if facts is None:
                found = tuple(_searchable(row) for row in self)
            else:
                found = self._searchable_from(facts)
            with self._lock:
                self._searchable = found
        return found

    def _searchable_from(self, facts: Mapping[int, ToolFact]) -> tuple[TimelineRow, ...]:
        """``searchable``'s rows with the store's reading of the calls, dispatches and
        responses (most of a run's events) in place of their events: only the others (a few
        in a hundred in a tool-heavy run) are read and decoded, a chunk of rows at a time.
        The entries, statuses and summaries are ``entry_of``'s and ``tool_row``'s (equal row
        for row, ``tests/unit/test_timeline_lazy_rows.py``)."""
        calls = {seq: call_id for call_id, seq in self._calls.items()}
        verdicts: dict[tuple[tuple[TimelineKind, str, TimelineStatus, str], ...], Verdict] = {}
        ended = self._ended
        rows: list[TimelineRow] = []
        step = self._chunk_rows * 10
        with collector_paused():
            for start in range(0, len(self._slots), step):
                slots = self._slots[start : start + step]
                wanted: list[int] = []
                for slot in slots:
                    for seq in (slot,) if isinstance(slot, int) else slot:
                        if seq not in facts:
                            wanted.append(seq)
                events = dict(self._load(wanted)) if wanted else {}
                for slot in slots:
                    if isinstance(slot, int):
                        fact = facts.get(slot)  # a tool fact naming no call: a row of its own
                        entry = (
                            fact_entry(slot, fact)
                            if fact is not None
                            else entry_of(slot, events[slot], True)
                        )
                        rows.append(_searchable(single_row(entry)))
                        continue
                    entries: list[TimelineEntry] = []
                    name: str | None = None
                    for seq in slot:
                        fact = facts.get(seq)
                        if fact is None:
                            event = events[seq]
                            own = tool_name_of(event)
                            entries.append(_stripped(entry_of(seq, event, True)))
                        else:
                            own = fact.tool_name
                            entries.append(fact_entry(seq, fact))
                        if name is None:
                            name = own
                    # a row's verdict depends on its facts' kinds, lanes and statuses and on
                    # what an attestation or a stopped result says only: worked out once per
                    # shape (a run's tool rows have a few shapes)
                    shape = tuple(
                        [
                            (
                                e.kind,
                                e.lane,
                                e.status,
                                e.summary if e.kind is ATTESTED or e.status is STOPPED else "",
                            )
                            for e in entries
                        ]
                    )
                    verdict = verdicts.get(shape)
                    if verdict is None:
                        verdict = verdicts[shape] = tool_verdict(entries, ended)
                    tool = "tool" if name is None else name
                    rows.append(
                        TimelineRow(
                            TimelineKind.TOOL,
                            verdict[0],
                            f"{tool}: {verdict[1]}",
                            tuple(entries),
                            tool_name=tool,
                            tool_call_id=calls[slot[0]],
                        )
                    )
        return tuple(rows)

    def _range(self, start: int, stop: int) -> tuple[TimelineRow, ...]:
        if start >= stop:
            return ()
        first, last = start // self._chunk_rows, (stop - 1) // self._chunk_rows
        rows: list[TimelineRow] = []
        for number in range(first, last + 1):
            rows += self._chunk(number)
        offset = first * self._chunk_rows
        return tuple(rows[start - offset : stop - offset])

    def _chunk(self, number: int) -> tuple[TimelineRow, ...]:
        with self._lock:
            kept = self._chunks.get(number)
            if kept is not None:
                self._chunks.move_to_end(number)
                return kept
        slots = self._slots[number * self._chunk_rows : (number + 1) * self._chunk_rows]
        built = self._build(slots)
        with self._lock:
            self._chunks[number] = built
            self._chunks.move_to_end(number)
            while len(self._chunks) > self._kept_chunks:
                self._chunks.popitem(last=False)
        return built

    def _build(self, slots: Sequence[Slot]) -> tuple[TimelineRow, ...]:
        seqs: list[int] = []
        for slot in slots:
            if isinstance(slot, int):
                seqs.append(slot)
            else:
                seqs += slot
        with collector_paused():
            events = dict(self._load(seqs))
            rows: list[TimelineRow] = []
            for slot in slots:
                if isinstance(slot, int):
                    rows.append(single_row(entry_of(slot, events[slot], True)))
                else:
                    entries = tuple(entry_of(seq, events[seq], True) for seq in slot)
                    rows.append(tool_row(entries, self._ended))
        return tuple(rows)


def _searchable(row: TimelineRow) -> TimelineRow:
    return row._replace(entries=tuple(_stripped(entry) for entry in row.entries))


def _stripped(entry: TimelineEntry) -> TimelineEntry:
    """The entry as a filter reads it: its event let go but its id, and a message's (or
    thinking's) whole text, which a text filter searches (``full_text``; its summary is cut)."""
    if entry.kind in TEXT_KINDS:
        text = full_text(entry)
        if text:
            kept = {"id": entry.event_id, "content": {"text": text}}
            return entry._replace(event=cast("RuntimeEvent", kept))
    if len(entry.event) == 1:
        return entry
    return entry._replace(event=cast("RuntimeEvent", {"id": entry.event_id}))


def searchable_rows(rows: Sequence[TimelineRow]) -> Sequence[TimelineRow]:
    """The rows as a filter reads them: lazy rows' ``searchable``, any other as they are."""
    return rows.searchable() if isinstance(rows, LazyRows) else rows


def row_position(rows: Sequence[TimelineRow], seq: int) -> int | None:
    """The position among ``rows`` of the row starting at ``seq`` (None: none starts there),
    without making the rows when they are made when asked for."""
    if isinstance(rows, LazyRows):
        return rows.position_of(seq)
    return next((n for n, row in enumerate(rows) if row.seq == seq), None)


def run_event(rows: Sequence[TimelineRow], event_id: str) -> RuntimeEvent | None:
    """The event with this id among the rows' entries (read alone from lazy rows)."""
    if isinstance(rows, LazyRows):
        return rows.event(event_id)
    for row in rows:
        for entry in row.entries:
            if entry.event_id == event_id:
                return entry.event
    return None
