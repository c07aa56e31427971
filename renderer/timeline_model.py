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

from dataclasses import dataclass, field

from PySide6.QtCore import (
    QAbstractItemModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    Qt,
)
from PySide6.QtGui import QGuiApplication

from app.bridge_contract import (
    TimelineEntryItem,
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

PAGE_ROWS = 500
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


@dataclass(eq=False)
class RunNode:
    head: TimelineRunHead
    loaded: int = 0
    texts: tuple[str, ...] = ()
    total: int = -1
    """Rows the main process says the run has (its heading's count until a page says)."""

    @property
    def complete(self) -> bool:
        return self.loaded >= (self.head.row_count if self.total < 0 else self.total)


@dataclass(eq=False)
class RowNode:
    run: RunNode
    item: TimelineRowItem
    pins: tuple[TimelinePin, ...] = ()
    entries: list[EntryNode] = field(default_factory=list)
    texts: tuple[str, ...] = ()

    @property
    def problem(self) -> bool:
        return self.item.status in PROBLEMS or bool(self.pins)


@dataclass(eq=False)
class EntryNode:
    row: RowNode
    item: TimelineEntryItem
    number: int
    texts: tuple[str, ...] = ()


Node = RunNode | RowNode | EntryNode


def _time(ts: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


class TimelineModel(QAbstractItemModel):
    def __init__(self, bridge: BridgePort, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._bridge = bridge
        self._session_id: str | None = None
        self._opened: TimelineOpenedPush | None = None
        self._top: list[RunNode | RowNode] = []
        self._runs: list[RunNode] = []
        self._pins: dict[tuple[str, int], list[TimelinePin]] = {}
        self._asked: tuple[str, int] | None = None  # the page asked for and not yet answered
        self._filters: TimelineRowFilter | None = None
        self._wanted: tuple[str, int] | None = None  # (run id, place): load that run that far
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

    def open(self, session_id: str) -> bool:
        self.beginResetModel()
        self._session_id = session_id
        self._opened = None
        self._top = []
        self._runs = []
        self._pins = {}
        self._asked = None
        self._wanted = None
        self.endResetModel()
        return self._bridge.open_timeline(session_id)

    def set_filters(self, filters: TimelineRowFilter | None) -> None:
        """Show only the rows ``filters`` shows (None or empty: every row), from the first page
        again: the rows held are those of the previous filter, dropped."""
        if filters == TimelineRowFilter():
            filters = None
        if filters == self._filters:
            return
        self.beginResetModel()
        self._filters = filters
        self._top = []
        self._runs = [RunNode(node.head) for node in self._runs]
        self._top = list(self._runs)
        self._asked = None
        self._wanted = None
        self.endResetModel()
        if self.canFetchMore(QModelIndex()):
            self.fetchMore(QModelIndex())

    def want(self, run_id: str, place: int) -> None:
        """Load ``run_id`` until its row at ``place`` (among those shown) is here, before any
        other run: a pinned reason's row, without the rows of the runs before it."""
        self._wanted = (run_id, place)
        if self.canFetchMore(QModelIndex()):
            self.fetchMore(QModelIndex())

    def wanting(self) -> bool:
        """Whether a row sought by ``want`` is still to come."""
        run = self._wanted_run()
        return run is not None and not run.complete

    def on_opened(self, push: TimelineOpenedPush) -> None:
        if push.session_id != self._session_id:
            return
        self.beginResetModel()
        self._opened = push
        self._runs = [RunNode(head) for head in push.runs]
        self._top = list(self._runs)
        self._pins = {}
        self._asked = None
        if push.plan is not None:
            for pin in push.plan.pins:
                if pin.run_id is not None and pin.seq is not None:
                    self._pins.setdefault((pin.run_id, pin.seq), []).append(pin)
        self.endResetModel()
        if self.canFetchMore(QModelIndex()):
            self.fetchMore(QModelIndex())

    def on_page(self, push: TimelinePagePush) -> None:
        if (
            push.session_id != self._session_id
            or self._asked != (push.run_id, push.start)
            or push.filters != self._filters
        ):
            return
        self._asked = None
        run = next((run for run in self._runs if run.head.run_id == push.run_id), None)
        if run is None or push.start != run.loaded:
            return
        run.total = min(push.total, run.head.row_count)  # never ask past what is there
        if not push.rows:
            # nothing shown in this run (a filter): no rows arrive for the view to scroll
            # to, so ask for the next run's at once
            if self.canFetchMore(QModelIndex()):
                self.fetchMore(QModelIndex())
            return
        position = self._top.index(run) + 1 + run.loaded
        nodes = [self._row_node(run, item) for item in push.rows]
        self.beginInsertRows(QModelIndex(), position, position + len(nodes) - 1)
        self._top[position:position] = nodes
        run.loaded += len(nodes)
        self.endInsertRows()

    def _row_node(self, run: RunNode, item: TimelineRowItem) -> RowNode:
        pins = tuple(self._pins.get((run.head.run_id, item.seq), ()))
        node = RowNode(run, item, pins)
        if item.kind == "tool":
            node.entries = [EntryNode(node, entry, n) for n, entry in enumerate(item.entries)]
        return node

    def canFetchMore(self, parent: Index) -> bool:  # noqa: N802 - Qt's name
        if parent.isValid() or self._session_id is None or self._asked is not None:
            return False
        return any(not run.complete for run in self._runs)

    def fetchMore(self, parent: Index) -> None:  # noqa: N802 - Qt's name
        if not self.canFetchMore(parent) or self._session_id is None:
            return
        run = self._wanted_run()
        if run is None or run.complete:
            run = next(run for run in self._runs if not run.complete)
        asked = (run.head.run_id, run.loaded)
        self._asked = asked  # before asking: an answer may come back within the call
        if not self._bridge.timeline_rows(self._session_id, *asked, PAGE_ROWS, self._filters):
            self._asked = None

    def _wanted_run(self) -> RunNode | None:
        """The run a sought row is in, while that row is not loaded yet."""
        if self._wanted is None:
            return None
        run_id, place = self._wanted
        run = next((run for run in self._runs if run.head.run_id == run_id), None)
        if run is None or run.loaded > place:
            return None
        return run

    def fully_loaded(self) -> bool:
        return all(run.complete for run in self._runs)

    def index_of_row(self, run_id: str, seq: int) -> QModelIndex:
        """The loaded row of ``run_id`` starting at ``seq`` (invalid when not loaded yet)."""
        for number, node in enumerate(self._top):
            if (
                isinstance(node, RowNode)
                and node.run.head.run_id == run_id
                and node.item.seq == seq
            ):
                return self.index(number, 0)
        return QModelIndex()

    # ---- Qt's model interface --------------------------------------------------------------

    def node(self, index: Index) -> Node | None:
        if not index.isValid():
            return None
        found = index.data(NODE_ROLE)
        return found if isinstance(found, RunNode | RowNode | EntryNode) else None

    def index(self, row: int, column: int, parent: Index = QModelIndex()) -> QModelIndex:  # noqa: B008
        # Called for every row at each layout of the view: bounds only, no node lookups.
        if not 0 <= column < _COLUMN_COUNT or row < 0:
            return QModelIndex()
        if not parent.isValid():
            return self.createIndex(row, column, 0) if row < len(self._top) else QModelIndex()
        owner_row = parent.row()
        if parent.internalId() != 0 or owner_row >= len(self._top):
            return QModelIndex()
        owner = self._top[owner_row]
        if not isinstance(owner, RowNode) or row >= len(owner.entries):
            return QModelIndex()
        # internalId: 0 for a top-level item, 1 + the owning row's number for a fact.
        return self.createIndex(row, column, owner_row + 1)

    def hasChildren(self, parent: Index = QModelIndex()) -> bool:  # noqa: N802, B008
        """Asked for every row at each layout: answered without making an index."""
        if not parent.isValid():
            return bool(self._top)
        if parent.internalId() != 0 or parent.column() != 0:
            return False
        node = self._top[parent.row()] if parent.row() < len(self._top) else None
        return isinstance(node, RowNode) and bool(node.entries)

    def parent(self, index: Index = QModelIndex()) -> QModelIndex:  # type: ignore[override]  # noqa: B008
        if not index.isValid():
            return QModelIndex()
        owner = int(index.internalId())
        return QModelIndex() if owner == 0 else self.createIndex(owner - 1, 0, 0)

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: N802, B008
        if not parent.isValid():
            return len(self._top)
        if parent.column() != 0 or int(parent.internalId()) != 0:
            return 0
        node = self._top[parent.row()]
        return len(node.entries) if isinstance(node, RowNode) else 0

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: N802, B008
        return len(COLUMNS)

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
        owner = index.internalId()
        top = self._top
        node: Node | None
        if owner == 0:
            row_number = index.row()
            node = top[row_number] if row_number < len(top) else None
        else:
            row = top[owner - 1] if owner - 1 < len(top) else None
            node = row.entries[index.row()] if isinstance(row, RowNode) else None
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


def _display(node: Node, column: int) -> str:
    if isinstance(node, RunNode):
        head = node.head
        if column == 0:
            return "  " * head.depth + ("↳ " if head.depth else "") + "Run"
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
    return _time(item.entries[0].ts if isinstance(item, TimelineRowItem) else item.ts)


def _tooltip(node: Node) -> str:
    if isinstance(node, RunNode):
        return f"run {node.head.run_id}"
    if isinstance(node, RowNode) and node.pins:
        return "\n".join(f"{pin.code}: {pin.message}" for pin in node.pins)
    return node.item.summary
