"""The Timeline view's item model: a session's record as the main process serves it, page by page.

Top-level items are, in lineage order, each run's heading followed by that run's rows; a tool
operation's row has its facts (call, dispatch, result or recovery, attestation) as children.
Rows arrive in pages (``timeline.page``): ``canFetchMore``/``fetchMore`` on the root ask for the
next page of the first run not fully loaded, so a view scrolled to the bottom keeps loading and
a 100,000-event session costs the rows scrolled to, not all of them. The model never opens
anything itself: it asks through the bridge and is filled by the pushes.

Filters (kind, tool, status, text, only problems) are applied by the main process: with one
set, the pages hold only the rows it shows (run headings always stay, so the lineage stays
readable), and a row sought by its place (``want``) is loaded up to that place in its own run
only, so the model never holds rows it does not show.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from PySide6.QtCore import (
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    Qt,
    QTimer,
)
from PySide6.QtGui import QGuiApplication, QStandardItem, QStandardItemModel

from app.bridge_contract import (
    TimelineOpenedPush,
    TimelinePagePush,
    TimelinePin,
    TimelineRowFilter,
    TimelineRowItem,
    TimelineRunHead,
)
from renderer import theme
from renderer.bridge_port import BridgePort
from renderer.park_text import Severity

PAGE_ROWS = 100
PROBLEMS = frozenset({"failed", "unknown", "parked", "damaged"})
COLUMNS = ("#", "Kind", "What", "Time (UTC)")
_COLUMN_COUNT = len(COLUMNS)
Index = QModelIndex | QPersistentModelIndex

_SEVERITY = {
    "failed": Severity.ERROR,
    "damaged": Severity.ERROR,
    "unknown": Severity.WARN,
    "parked": Severity.WARN,
}
KIND_ROLE = Qt.ItemDataRole.UserRole + 1
STATUS_ROLE = Qt.ItemDataRole.UserRole + 2
PROBLEM_ROLE = Qt.ItemDataRole.UserRole + 3
NODE_ROLE = Qt.ItemDataRole.UserRole + 4
_DISPLAY = Qt.ItemDataRole.DisplayRole.value
_TOOLTIP = Qt.ItemDataRole.ToolTipRole.value
_FOREGROUND = Qt.ItemDataRole.ForegroundRole.value
_FONT = Qt.ItemDataRole.FontRole.value
_ANSWERED = frozenset(
    {_DISPLAY, _TOOLTIP, _FOREGROUND, _FONT, KIND_ROLE, STATUS_ROLE, PROBLEM_ROLE, NODE_ROLE}
)


class EntryItem(NamedTuple):
    """A fact of a row: ``TimelineEntryItem``'s fields as plain values."""

    seq: int
    event_id: str
    kind: str
    lane: str
    status: str
    ts: int
    summary: str
    replayed: bool = False


Fact = tuple[int, str, str, str, str, int, str, bool]
"""An ``EntryItem``'s values in a plain tuple."""


class RowItem(NamedTuple):
    """A row as the model keeps it: ``TimelineRowItem``'s fields, its facts in plain tuples.
    Why: Python's cyclic collector stops tracking a plain tuple of plain values, so the rows
    looked at do not lengthen its full passes (one costs a frame; the wire models a page
    arrives as are several tracked objects each, and an ``EntryItem`` per fact would be one)."""

    seq: int
    kind: str
    status: str
    summary: str
    tool_name: str | None
    tool_call_id: str | None
    facts: tuple[Fact, ...]
    more_entries: int = 0

    @property
    def entries(self) -> tuple[EntryItem, ...]:
        return tuple(EntryItem._make(fact) for fact in self.facts)

    @property
    def ts(self) -> int:
        """Its first fact's time."""
        return self.facts[0][5]


def _values(item: RowItem) -> RowValues:
    return (*item,)


def row_item(item: TimelineRowItem) -> RowItem:
    return RowItem(
        item.seq,
        item.kind,
        item.status,
        item.summary,
        item.tool_name,
        item.tool_call_id,
        tuple(
            (e.seq, e.event_id, e.kind, e.lane, e.status, e.ts, e.summary, e.replayed)
            for e in item.entries
        ),
        item.more_entries,
    )


@dataclass(eq=False, slots=True)
class RunNode:
    head: TimelineRunHead
    total: int = -1
    """Rows shown of the run: its heading's count, or under a filter -1 until its first page
    says how many the filter shows."""
    offset: int = 0
    """Its heading's place among the top-level items."""
    pages: set[int] = field(default_factory=set)
    """The pages (of ``PAGE_ROWS``) here."""
    texts: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return self.total >= 0 and len(self.pages) >= -(-self.total // PAGE_ROWS)


RowValues = tuple[int, str, str, str, str | None, str | None, tuple[Fact, ...], int]
"""A ``RowItem``'s values in a plain tuple."""


@dataclass(eq=False, slots=True)
class RowNode:
    run: RunNode
    values: RowValues
    """Its ``RowItem`` kept as a plain tuple (untracked by the cyclic collector)."""
    pins: tuple[TimelinePin, ...] = ()
    children: int = 0
    """Facts shown under it: a tool row's, once its page has arrived (their rows inserted)."""
    made: list[EntryNode] | None = None
    texts: tuple[str, ...] = ()

    @property
    def entries(self) -> list[EntryNode]:
        """Its facts' nodes, made when first asked for (the view asks for an expanded row's):
        the rows scrolled past hold none."""
        if self.made is None or len(self.made) != self.children:
            self.made = [
                EntryNode(self, entry, n)
                for n, entry in enumerate(self.item.entries[: self.children])
            ]
        return self.made

    @property
    def item(self) -> RowItem:
        return RowItem._make(self.values)

    @property
    def problem(self) -> bool:
        return self.values[2] in PROBLEMS or bool(self.pins)


@dataclass(eq=False, slots=True)
class EntryNode:
    row: RowNode
    item: EntryItem
    number: int
    texts: tuple[str, ...] = ()


Node = RunNode | RowNode | EntryNode


def _time(ts: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


class TimelineModel(QStandardItemModel):
    """Qt's own item model holds the shape (how many rows, which have facts under them), so
    laying out every counted row calls no Python (a ``QTreeView`` asks ``index`` and
    ``hasChildren`` of each of them when the model resets: ~300 ms for 35,000 rows answered in
    Python, ~40 ms in C++). Its rows hold no items but a tool row's, whose facts are its child
    rows; every value comes from this model's own nodes through ``data``."""

    def __init__(self, bridge: BridgePort, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.setColumnCount(_COLUMN_COUNT)
        self._bridge = bridge
        self._session_id: str | None = None
        self._opened: TimelineOpenedPush | None = None
        self._top: list[RunNode | RowNode | None] = []  # None: a row whose page is not here
        self._runs: list[RunNode] = []
        self._offsets: list[int] = []  # each run's heading's place, ascending
        self._pins: dict[tuple[str, int], list[TimelinePin]] = {}
        self._asked: set[tuple[str, int]] = set()  # (run id, page) asked and not answered
        self._needed: set[tuple[str, int]] = set()  # pages the view showed, to ask for
        self._filters: TimelineRowFilter | None = None
        self._wanted: tuple[str, int] | None = None  # (run id, place): a row sought
        self._loaded = 0
        self._ask_timer = QTimer(self)
        self._ask_timer.setSingleShot(True)
        self._ask_timer.setInterval(0)
        self._ask_timer.timeout.connect(self._ask_needed)
        bridge.timeline_opened.connect(self.on_opened)
        bridge.timeline_page.connect(self.on_page)

    # ---- filling ---------------------------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def opened(self) -> TimelineOpenedPush | None:
        return self._opened

    @property
    def filters(self) -> TimelineRowFilter | None:
        return self._filters

    def deepest_run(self) -> int:
        """How many continuations deep the deepest run shown is (0: none is a continuation)."""
        return max((run.head.depth for run in self._runs), default=0)

    @property
    def loaded_rows(self) -> int:
        """Rows held: those of the pages asked for, never the whole run unless looked at."""
        return self._loaded

    def open(self, session_id: str) -> bool:
        self.beginResetModel()
        self._session_id = session_id
        self._opened = None
        self._pins = {}
        self._set_runs([])
        self._reshape()
        self.endResetModel()
        return self._bridge.open_timeline(session_id)

    def _set_runs(self, heads: list[TimelineRunHead]) -> None:
        """Every run's heading, then as many rows as it shows (all of them not here yet);
        under a filter a run's rows count only once its first page says how many."""
        self._runs = [
            RunNode(head, -1 if self._filters is not None else head.row_count) for head in heads
        ]
        self._top = []
        for run in self._runs:
            run.offset = len(self._top)
            self._top.append(run)
            self._top.extend([None] * max(run.total, 0))
        self._offsets = [run.offset for run in self._runs]
        self._asked = set()
        self._needed = set()
        self._wanted = None
        self._loaded = 0

    def _reshape(self) -> None:
        """Qt's rows as ``_top`` holds them, none with facts under it (within a reset: the
        views lay out once, at its end, so the row changes' own signals are not sent)."""
        blocked = self.blockSignals(True)
        try:
            self.setRowCount(0)
            self.setRowCount(len(self._top))
        finally:
            self.blockSignals(blocked)

    def drop_filters(self) -> None:
        """Forget the filter without asking for rows: the next ``open`` (another session)
        shows every row."""
        self._filters = None

    def shown_rows(self) -> int | None:
        """How many rows the runs show (under a filter, once each run's first page said how
        many); None while a run has not said yet."""
        if any(run.total < 0 for run in self._runs):
            return None
        return sum(run.total for run in self._runs)

    def set_filters(self, filters: TimelineRowFilter | None) -> None:
        """Show only the rows ``filters`` shows (None or empty: every row), from the first page
        again: the rows held are those of the previous filter, dropped."""
        if filters == TimelineRowFilter():
            filters = None
        if filters == self._filters:
            return
        self.beginResetModel()
        self._filters = filters
        self._set_runs([run.head for run in self._runs])
        self._reshape()
        self.endResetModel()
        self._ask_first()

    def want(self, run_id: str, place: int) -> None:
        """Load the page of ``run_id`` holding its row at ``place`` (among those shown): a
        pinned reason's row, without the rows before it."""
        self._wanted = (run_id, place)
        self._ask_wanted()

    def wanting(self) -> bool:
        """Whether a row sought by ``want`` is still to come."""
        if self._wanted is None:
            return False
        run_id, place = self._wanted
        run = self._run(run_id)
        if run is None:
            return False
        return run.total < 0 or (place < run.total and place // PAGE_ROWS not in run.pages)

    def _ask_wanted(self) -> None:
        if not self.wanting() or self._wanted is None:
            return
        run_id, place = self._wanted
        run = self._run(run_id)
        if run is not None:
            self._ask(run, 0 if run.total < 0 else place // PAGE_ROWS)

    def _run(self, run_id: str) -> RunNode | None:
        return next((run for run in self._runs if run.head.run_id == run_id), None)

    def on_opened(self, push: TimelineOpenedPush) -> None:
        if push.session_id != self._session_id:
            return
        self.beginResetModel()
        self._opened = push
        self._pins = {}
        if push.plan is not None:
            for pin in push.plan.pins:
                if pin.run_id is not None and pin.seq is not None:
                    self._pins.setdefault((pin.run_id, pin.seq), []).append(pin)
        self._set_runs(list(push.runs))
        self._reshape()
        self.endResetModel()
        self._ask_first()

    def _ask_first(self) -> None:
        """The first page of the first run with rows, before the view asks for any: a view
        not shown yet has them at once."""
        if self._filters is not None:
            if self.canFetchMore(QModelIndex()):
                self.fetchMore(QModelIndex())
            return
        run = next((run for run in self._runs if run.total > 0), None)
        if run is not None:
            self._ask(run, 0)

    def _ask(self, run: RunNode, page: int) -> None:
        key = (run.head.run_id, page)
        if self._session_id is None or page in run.pages or key in self._asked:
            return
        self._asked.add(key)  # before asking: an answer may come back within the call
        start = page * PAGE_ROWS
        if not self._bridge.timeline_rows(
            self._session_id, run.head.run_id, start, PAGE_ROWS, self._filters
        ):
            self._asked.discard(key)

    def _need(self, row: int) -> None:
        """A row not here was shown: its page is asked for once the view is painted."""
        run = self._runs[bisect.bisect_right(self._offsets, row) - 1]
        self._needed.add((run.head.run_id, (row - run.offset - 1) // PAGE_ROWS))
        if not self._ask_timer.isActive():
            self._ask_timer.start()

    def _ask_needed(self) -> None:
        needed, self._needed = self._needed, set()
        for run_id, page in sorted(needed):
            run = self._run(run_id)
            if run is not None and 0 <= page * PAGE_ROWS < max(run.total, 0):
                self._ask(run, page)

    def on_page(self, push: TimelinePagePush) -> None:
        key = (push.run_id, push.start // PAGE_ROWS)
        if (
            push.session_id != self._session_id
            or push.filters != self._filters
            or push.start % PAGE_ROWS
            or key not in self._asked
        ):
            return
        self._asked.discard(key)
        run = self._run(push.run_id)
        if run is None:
            return
        total = min(push.total, run.head.row_count)  # never show more than the run has
        if run.total < 0 or total != run.total:
            self._resize(run, total)
        if push.start < run.total:
            run.pages.add(push.start // PAGE_ROWS)
        rows = push.rows[: max(0, run.total - push.start)]
        if rows:
            self._fill(run, push.start, rows)
        if self._filters is not None and run.total == 0 and self.canFetchMore(QModelIndex()):
            # nothing shown in this run: no rows arrive for the view to scroll to, so ask
            # for the next run's at once
            self.fetchMore(QModelIndex())
        self._ask_wanted()

    def _resize(self, run: RunNode, total: int) -> None:
        """The run shows ``total`` rows: its first page under a filter, or a fresh read of
        the record found fewer (or more) than announced."""
        first = run.offset + 1
        shown = max(run.total, 0)
        if total > shown:  # the nodes first: a view reads the new rows once inserted
            self._top[first + shown : first + shown] = [None] * (total - shown)
            self._moved(run, total, shown)
            self.insertRows(first + shown, total - shown)
        elif total < shown:  # Qt's rows first: a view may read the rows it is told go
            self.removeRows(first + total, shown - total)
            dropped = self._top[first + total : first + shown]
            self._loaded -= sum(isinstance(node, RowNode) for node in dropped)
            del self._top[first + total : first + shown]
            run.pages = {page for page in run.pages if page * PAGE_ROWS < total}
            self._moved(run, total, shown)
        run.total = total

    def _moved(self, run: RunNode, total: int, shown: int) -> None:
        for later in self._runs:
            if later.offset > run.offset:
                later.offset += total - shown
        self._offsets = [each.offset for each in self._runs]

    def _fill(self, run: RunNode, start: int, rows: Sequence[TimelineRowItem]) -> None:
        """A page arriving changes the rows it holds in place: no row is inserted at the top
        level, so the view lays nothing out again; a tool row's facts are inserted under it
        (the view only marks it as having children)."""
        first = run.offset + 1 + start
        fresh = 0
        items = [row_item(row) for row in rows]
        for number, item in enumerate(items):
            if self._top[first + number] is None:
                fresh += 1
            pins = tuple(self._pins.get((run.head.run_id, item.seq), ()))
            self._top[first + number] = RowNode(run, _values(item), pins)
        self._loaded += fresh
        last = first + len(rows) - 1
        self.dataChanged.emit(self.index(first, 0), self.index(last, _COLUMN_COUNT - 1))
        for number, item in enumerate(items):
            if item.kind != "tool" or not item.facts:
                continue
            node = self._top[first + number]
            assert isinstance(node, RowNode)
            holder = self._holder(first + number)
            node.children = len(item.facts)
            holder.setRowCount(node.children)  # the view marks the row as having children

    def _holder(self, row: int) -> QStandardItem:
        """The Qt item of a top-level row, to hold its facts as child rows: made without a
        signal (``setItem`` would have the views lay every row out again), and given its
        columns while it has no rows (no index of it appears, so no view is to be told)."""
        blocked = self.blockSignals(True)
        try:
            holder = self.itemFromIndex(self.index(row, 0))  # made on demand, unannounced
            holder.setColumnCount(_COLUMN_COUNT)
        finally:
            self.blockSignals(blocked)
        return holder

    def canFetchMore(self, parent: Index) -> bool:  # noqa: N802 - Qt's name
        """Under a filter: a run whose count of rows shown is not known yet (its first page
        is asked when the view reaches it). Without, every row is counted from the start."""
        if parent.isValid() or self._session_id is None:
            return False
        unknown = [run for run in self._runs if run.total < 0]
        return bool(unknown) and not any((run.head.run_id, 0) in self._asked for run in unknown)

    def fetchMore(self, parent: Index) -> None:  # noqa: N802 - Qt's name
        if not self.canFetchMore(parent):
            return
        run = next(run for run in self._runs if run.total < 0)
        self._ask(run, 0)

    def fully_loaded(self) -> bool:
        return all(run.complete for run in self._runs)

    def load_all(self) -> None:
        """Ask for every page not here (tests and screenshots; the view asks as it shows)."""
        for run in self._runs:
            for page in range(-(-max(run.total, 0) // PAGE_ROWS)):
                self._ask(run, page)
        if self.canFetchMore(QModelIndex()):
            self.fetchMore(QModelIndex())

    def index_of_row(self, run_id: str, seq: int) -> QModelIndex:
        """The loaded row of ``run_id`` starting at ``seq`` (invalid when not loaded yet)."""
        run = self._run(run_id)
        if run is None:
            return QModelIndex()
        first = run.offset + 1
        for number in range(first, first + max(run.total, 0)):
            node = self._top[number]
            if isinstance(node, RowNode) and node.item.seq == seq:
                return self.index(number, 0)
        return QModelIndex()

    # ---- Qt's model interface --------------------------------------------------------------

    def node(self, index: Index) -> Node | None:
        if not index.isValid():
            return None
        found = index.data(NODE_ROLE)
        return found if isinstance(found, RunNode | RowNode | EntryNode) else None

    def setData(self, index: Index, value: object, role: int = Qt.ItemDataRole.EditRole) -> bool:  # noqa: N802 - Qt's name
        """Read-only: Qt's model calls its empty cells editable (``flags`` is left to it, as
        the view asks it of every row at layout; the panel's view opens no editor)."""
        return False

    def headerData(  # noqa: N802
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> object:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None

    def data(self, index: Index, role: int = _DISPLAY) -> object:
        # Called for every role of every visible cell at each repaint: roles this model does
        # not answer leave first, and roles are compared as plain ints.
        if role not in _ANSWERED or not index.isValid():
            return None
        owner = index.parent().row()  # -1: a top-level row; else a fact of that row
        top = self._top
        node: Node | None
        if owner < 0:
            row_number = index.row()
            node = top[row_number] if row_number < len(top) else None
            if node is None and role == _DISPLAY and row_number < len(top):
                self._need(row_number)  # shown before its page is here: ask for the page
                return "…" if index.column() == 2 else ""
        else:
            row = top[owner] if owner < len(top) else None
            facts = row.entries if isinstance(row, RowNode) else ()
            node = facts[index.row()] if index.row() < len(facts) else None
        if node is None:
            return None
        if role == _DISPLAY:
            if not node.texts:  # made once, when first shown: scrolling repaints rows often
                node.texts = tuple(_display(node, column) for column in range(len(COLUMNS)))
            return node.texts[index.column()]
        if role == _FOREGROUND:
            if isinstance(node, RunNode):
                return None
            severity = _SEVERITY.get(node.item.status)
            return None if severity is None else theme.accent(severity, QGuiApplication.palette())
        if role == _FONT:
            if not isinstance(node, RunNode):
                return None
            font = QGuiApplication.font()
            font.setBold(True)
            return font
        return self._other(node, role)

    def _other(self, node: Node, role: int) -> object:
        if role == NODE_ROLE:
            return node
        if role == _TOOLTIP:
            return _tooltip(node)
        if role == KIND_ROLE:
            return "run" if isinstance(node, RunNode) else node.item.kind
        if role == STATUS_ROLE:
            return node.head.status if isinstance(node, RunNode) else node.item.status
        if role == PROBLEM_ROLE:
            return isinstance(node, RowNode) and node.problem
        return None


MAX_RUN_INDENT = 3
"""A continuation's "↳ Run" is indented by its generation, at most this many steps (its "What"
names the run it continues): the # column is as wide as the deepest one shown."""


def run_mark(depth: int) -> str:
    """A run heading's # cell: "Run", or "↳ Run" indented by how many continuations deep it is."""
    if depth <= 0:
        return "Run"
    return "  " * min(depth, MAX_RUN_INDENT) + "↳ Run"


def _display(node: Node, column: int) -> str:
    if isinstance(node, RunNode):
        head = node.head
        if column == 0:
            return run_mark(head.depth)
        if column == 1:
            return "continuation" if head.parent_run_id is not None else "run"
        if column == 2:
            ending = f" ({head.failure_class})" if head.failure_class else ""
            words = f"{head.run_id} · {head.status}{ending} · {head.event_count:,} events"
            if head.parent_run_id is not None:
                words += f" · continues {head.parent_run_id} after event {head.source_high_water}"
            return words
        return ""
    item = node.item
    if column == 0:
        return str(item.seq)
    if column == 1:
        return item.kind.replace("_", " ")
    if column == 2:
        mark = "⚑ " if isinstance(node, RowNode) and node.pins else ""
        flag = {"failed": "✗ ", "damaged": "✗ ", "unknown": "? ", "parked": "‖ "}.get(
            item.status, ""
        )
        return f"{mark}{flag}{item.summary}"
    return _time(item.ts)


def _tooltip(node: Node) -> str:
    if isinstance(node, RunNode):
        return _display(node, 2)  # the whole line: a narrow "What" cuts it
    if isinstance(node, RowNode) and node.pins:
        return "\n".join(f"{pin.code}: {pin.message}" for pin in node.pins)
    return node.item.summary
