"""The Timeline view (View › Timeline): a session's record beside its transcript.

From top to bottom: the verdict Safe resume's planner gives (for an interrupted session) with
its reasons, those pinned to a row first (activating one, by click or Enter, scrolls to the row,
loading pages until it is there) and those from outside the record in their own labelled list;
a filter bar (kind, tool, status, text, only problems); the rows (uniform heights, loaded as
the view scrolls); and the detail of the selected row or fact: its kind, lane, status, the
tool operation it belongs to, its digest and its canonical JSON (read-only, selectable, with a
Copy button). Everything is reachable from the keyboard.
"""

from __future__ import annotations

import hashlib
import html
from typing import Literal

from PySide6.QtCore import (
    QEvent,
    QItemSelectionModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QPoint,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QFont, QFontMetrics, QGuiApplication, QHelpEvent, QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QBoxLayout,
    QCheckBox,
    QComboBox,
    QGridLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QToolTip,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from app.bridge_contract import (
    BranchOptionItem,
    BranchOptionsListedPush,
    BranchOrigin,
    ProcessesStoppedPush,
    ResumeFailedPush,
    ResumeParkedPush,
    ResumeStartedPush,
    RunStatusPush,
    SessionUpdatedPush,
    TimelineEventShownPush,
    TimelineLocatedPush,
    TimelineOpenedPush,
    TimelinePin,
    TimelineRowFilter,
    ToolSettledPush,
)
from app.code_text import describe
from app.visible_text import visible
from renderer import theme
from renderer.bridge_port import BridgePort, ConnectionState
from renderer.plain_tip import plain_tip
from renderer.timeline_model import (
    NODE_ROLE,
    EntryNode,
    RowNode,
    RunNode,
    TimelineModel,
    run_mark,
)

KINDS = (
    "message",
    "thinking",
    "tool",
    "tool_call",
    "tool_dispatch",
    "tool_response",
    "recovery",
    "attestation",
    "permission",
    "continuation",
    "checkpoint",
    "baseline",
    "restore",
    "run_end",
    "error",
    "event",
)
STATUSES = ("ok", "running", "not_run", "cancelled", "failed", "unknown", "parked", "damaged")
PIN_ROLE = 0x0100 + 10
MIN_TREE_ROWS = 5
"""Rows (under the header) the view keeps in the shortest window, before anything else."""
ROOMY_TREE_ROWS = 8
"""Rows the view gets before the lanes of reasons grow past one row each."""
DETAIL_MIN_LINES = 4
"""Lines of the selected event the detail keeps at every size but the very shortest."""
DETAIL_LEAST_LINES = 2
"""Lines the detail keeps in the shortest panel (the minimum window under a tall banner),
once everything else has given way."""
ROOMY_DETAIL_LINES = 5
"""Lines the detail gets, like the rows their ``ROOMY_TREE_ROWS``, before the lanes grow."""
SEARCH_WORDS = "Search text or event id"
WHAT_MIN_CHARS = 28
"""Below this many characters for "What", the Time column shows the time without the date."""
REREAD_DELAY_MS = 250
"""A burst of pushes about the open session (a turn's statuses, a settle and its card) reads
its record again once, this long after the last of them."""
TurnRunning = Literal["here", "elsewhere"]
"""Where the session's turn runs now: in this Maka, or in another process (a shared ledger)."""


def _tr(text: str) -> str:
    return text


class TimeDelegate(QStyledItemDelegate):
    """The Time column: "2026-12-06 05:31:27", or only "05:31:27" when the view is narrow
    (the whole date and time is the tooltip then)."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.short = False

    def initStyleOption(  # noqa: N802 (Qt override)
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        super().initStyleOption(option, index)
        if self.short:
            option.text = option.text.rpartition(" ")[2]

    def helpEvent(  # noqa: N802 (Qt override)
        self,
        event: QHelpEvent,
        view: QAbstractItemView,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
    ) -> bool:
        text = str(index.data() or "")
        if self.short and text and event.type() == QEvent.Type.ToolTip:
            QToolTip.showText(event.globalPos(), text, view)
            return True
        return super().helpEvent(event, view, option, index)


class TimelinePanel(QWidget):
    row_shown = Signal(str, int)
    """(run id, seq): a pinned reason's row was scrolled to and selected."""
    branch_requested = Signal(str, str)
    """"Continue from here…" on a boundary row: (session id, the boundary's event id)."""
    said = Signal(str)
    """A short note for the window's status bar (Copy JSON done)."""
    source_open_requested = Signal(str)
    """A branched session's "Open that session" link: the source's session id."""

    def __init__(self, bridge: BridgePort, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._bridge = bridge
        self.model = TimelineModel(bridge, self)
        self._target: tuple[str, int] | None = None
        self._target_quiet = False  # the row selected before a reread: no focus, no scroll-to
        self._boundaries: dict[str, BranchOptionItem] = {}
        self._origins: dict[str, BranchOrigin | None] = {}
        self._turn: tuple[str, TurnRunning | None] = ("", None)
        # Whether this window offers Safe resume for the open session (its banner: a turn a
        # crash or restart interrupted); a turn that was stopped or failed is continued from a
        # terminal (``maka resume``), and the verdict says so.
        self._resume_offered = True
        self._opens_out = 0  # record readings asked for and not answered
        self._reread_timer = QTimer(self)
        self._reread_timer.setSingleShot(True)
        self._reread_timer.setInterval(REREAD_DELAY_MS)
        self._reread_timer.timeout.connect(self._reread)
        self._build()
        bridge.timeline_opened.connect(self._on_opened)
        # What Safe resume would do changes with the session: a turn starting or ending, a
        # resume started, parked or failed, a settle recorded, commands stopped, the summary
        # changed (by this window or another process). The verdict stops saying what it said
        # at once, and the record is read again.
        for signal in (
            bridge.run_status,
            bridge.resume_started,
            bridge.resume_parked,
            bridge.resume_failed,
            bridge.tool_settled,
            bridge.processes_stopped,
            bridge.session_updated,
        ):
            signal.connect(self._on_session_push)
        bridge.connection_state_changed.connect(self._on_connection)
        bridge.timeline_page.connect(lambda _push: self._after_page())
        bridge.timeline_event_shown.connect(self._on_event_shown)
        bridge.timeline_located.connect(self._on_located)
        bridge.branch_options_listed.connect(self._on_branch_options)

    # ---- layout -----------------------------------------------------------------------------

    def _build(self) -> None:
        column = QVBoxLayout(self)
        column.setContentsMargins(20, 4, 20, 8)
        column.setSpacing(4)
        self._lanes_wanted = (False, False)
        self._fit_level = 0
        self.verdict = QLabel(_tr("Open a session to see its record."))
        self.verdict.setTextFormat(Qt.TextFormat.PlainText)
        self.verdict.setWordWrap(True)
        column.addWidget(self.verdict)
        self.origin_label = QLabel()
        self.origin_label.setTextFormat(Qt.TextFormat.RichText)  # its link; the words escaped
        self.origin_label.setWordWrap(True)
        self.origin_label.setVisible(False)
        self.origin_label.linkActivated.connect(self._on_origin_link)
        column.addWidget(self.origin_label)
        self.pinned = QListWidget()
        self.pinned.setAccessibleName(_tr("Why Safe resume parks"))
        self.pinned.itemActivated.connect(self._on_pin_activated)
        self.pinned.itemClicked.connect(self._on_pin_activated)
        column.addWidget(self.pinned)
        self.outside_label = QLabel(_tr("Outside the record (folder, tools, processes, files):"))
        self.outside = QListWidget()
        self.outside.setAccessibleName(_tr("Reasons from outside the record"))
        column.addWidget(self.outside_label)
        column.addWidget(self.outside)
        for lane in (self.pinned, self.outside):
            # One line per reason, never a horizontal scroll bar (it would hide the only row of
            # a short lane): a long reason ends in "…" and shows whole on hover.
            lane.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
            lane.setTextElideMode(Qt.TextElideMode.ElideRight)
        column.addLayout(self._filter_bar())
        self.tree = QTreeView()
        self.tree.setModel(self.model)  # filtered by the main process: the view reads it directly
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tree.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)  # read-only
        self.tree.setAccessibleName(_tr("Timeline"))
        header = self.tree.header()
        header.setStretchLastSection(False)
        # "What" takes what is left; #, Kind and Time are as wide as their content (a narrow
        # view shows the time without its date: the whole time is the tooltip).
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        header.setMinimumSectionSize(24)
        self._time_delegate = TimeDelegate(self.tree)
        self.tree.setItemDelegateForColumn(3, self._time_delegate)
        self._size_columns()
        # A continuation of a continuation is indented further: # is as wide as the deepest.
        self.model.modelReset.connect(self._size_columns)
        self.tree.viewport().installEventFilter(self)
        self.tree.selectionModel().currentChanged.connect(self._on_current)
        # A row made current before its page arrived (Ctrl+End, End, a scrollbar drag) shows
        # nothing yet: it is shown once its page fills it.
        self._current_unloaded = False
        self.model.dataChanged.connect(self._on_rows_filled)
        self.detail = QPlainTextEdit()
        self.detail.setReadOnly(True)
        self.detail.setFont(theme.monospace_font())
        self.detail.setAccessibleName(_tr("Selected event"))
        self.detail.setPlaceholderText(
            _tr("Select a row to see its saved event, its lane, digest and tool operation.")
        )
        self.copy_button = QPushButton(_tr("&Copy JSON"))
        self.copy_button.clicked.connect(self.copy_json)
        self.branch_button = QPushButton(_tr("Continue from &here…"))
        self.branch_button.setToolTip(
            _tr("Continue from this point in a new session, in a copy of the folder")
        )
        self.branch_button.clicked.connect(self.continue_from_current)
        self.branch_button.setEnabled(False)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._on_tree_menu)
        detail_box = QWidget()
        self._detail_box = detail_box
        # The buttons under the detail; in a short panel beside it, stacked (``_fit_to_height``).
        self._detail_column = QBoxLayout(QBoxLayout.Direction.TopToBottom, detail_box)
        self._detail_column.setContentsMargins(0, 0, 0, 0)
        self._detail_column.setSpacing(4)
        self._detail_column.addWidget(self.detail, 1)
        self._buttons = QBoxLayout(QBoxLayout.Direction.LeftToRight)
        self._buttons.setContentsMargins(0, 0, 0, 0)
        self._buttons.setSpacing(6)
        self._buttons.addStretch(1)
        self._buttons.addWidget(self.branch_button)
        self._buttons.addWidget(self.copy_button)
        self._detail_column.addLayout(self._buttons)
        splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter = splitter
        splitter.addWidget(self.tree)
        splitter.addWidget(detail_box)
        # The rows and the detail share the height evenly (the handle moves the split): each
        # keeps its minimum, the header and five rows, four lines of the event and its buttons
        # (two lines only in the shortest panel, ``_fit_to_height``), so neither is squeezed out.
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([1000, 1000])
        self.tree.setMinimumHeight(self._tree_height(MIN_TREE_ROWS))
        self.detail.setMinimumHeight(self._detail_height(DETAIL_MIN_LINES))
        splitter.setCollapsible(0, False)
        splitter.setCollapsible(1, False)
        column.addWidget(splitter, 1)
        self._set_lanes_visible(False)
        self._json = ""

    def _filter_bar(self) -> QGridLayout:
        """One row in a wide view; in a narrow one the two text fields take a row of their own
        (``_arrange_filters``), so neither is squeezed to a letter."""
        bar = QGridLayout()
        bar.setHorizontalSpacing(6)
        bar.setVerticalSpacing(4)
        self._filter_grid = bar
        self._filters_wrapped: bool | None = None
        self.kind_box = QComboBox()
        self.kind_box.addItem(_tr("All kinds"), "")
        for kind in KINDS:
            self.kind_box.addItem(kind.replace("_", " "), kind)
        self.kind_box.setToolTip(_tr("Show rows of one kind"))
        self.status_box = QComboBox()
        self.status_box.addItem(_tr("Any status"), "")
        for status in STATUSES:
            self.status_box.addItem(status.replace("_", " "), status)
        self.status_box.setToolTip(_tr("Show rows of one status"))
        for box in (self.kind_box, self.status_box):
            box.setSizeAdjustPolicy(
                QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
            )
            box.setMinimumContentsLength(9)
        self.tool_edit = QLineEdit()
        self.tool_edit.setPlaceholderText(_tr("Tool"))
        self.tool_edit.setToolTip(_tr("Show the calls of one tool (its name, or part of it)"))
        self.text_edit = QLineEdit()
        self.text_edit.setPlaceholderText(SEARCH_WORDS)
        self.text_edit.setToolTip(_tr("Search the rows' text, or find an event by its id"))
        for edit, words in ((self.tool_edit, "Tool"), (self.text_edit, "Search…")):
            edit.setMinimumWidth(edit.fontMetrics().horizontalAdvance(words) + 40)
            edit.setClearButtonEnabled(True)
        self.problems_box = QCheckBox(_tr("Only &problems"))
        self.matches_label = QLabel()
        self.matches_label.setAccessibleName(_tr("Rows the filters show"))
        self.matches_label.setVisible(False)
        for box in (self.kind_box, self.status_box):
            box.currentIndexChanged.connect(self.apply_filters)
        for edit in (self.tool_edit, self.text_edit):
            edit.textChanged.connect(self.apply_filters)
        self.problems_box.toggled.connect(self.apply_filters)
        self._arrange_filters(wrapped=False)
        return bar

    def _arrange_filters(self, *, wrapped: bool) -> None:
        if wrapped == self._filters_wrapped:
            return
        self._filters_wrapped = wrapped
        bar = self._filter_grid
        every: tuple[QWidget, ...] = (
            self.kind_box,
            self.status_box,
            self.tool_edit,
            self.text_edit,
            self.problems_box,
            self.matches_label,
        )
        for widget in every:
            bar.removeWidget(widget)
        for column in range(6):
            bar.setColumnStretch(column, 0)
        if wrapped:  # kind, status, only problems (and the count); then tool and search
            bar.addWidget(self.kind_box, 0, 0)
            bar.addWidget(self.status_box, 0, 1)
            bar.addWidget(self.problems_box, 0, 2)
            bar.addWidget(self.matches_label, 0, 3)
            bar.addWidget(self.tool_edit, 1, 0)
            bar.addWidget(self.text_edit, 1, 1, 1, 4)
            bar.setColumnStretch(3, 1)
        else:  # all of them on one row, in that order
            for column, widget in enumerate(every):
                bar.addWidget(widget, 0, column)
            bar.setColumnStretch(2, 1)
            bar.setColumnStretch(3, 3)

    def _shorten_filters(self, short: bool) -> None:
        """Shorter words in a narrow bar (the whole words are the tooltips)."""
        self.text_edit.setPlaceholderText(_tr("Search…") if short else SEARCH_WORDS)
        self.problems_box.setText(_tr("&Problems") if short else _tr("Only &problems"))
        self.problems_box.setToolTip(_tr("Only problems") if short else "")

    def _filters_fit_one_row(self, width: int, *, short: bool) -> bool:
        metrics = self.problems_box.fontMetrics()
        box = self.problems_box.sizeHint().width() - metrics.horizontalAdvance(
            self.problems_box.text().replace("&", "")
        )
        box += metrics.horizontalAdvance("Problems" if short else "Only problems")
        fixed = self.kind_box.sizeHint().width() + self.status_box.sizeHint().width() + box
        if self.matches_label.isVisibleTo(self):
            fixed += self.matches_label.sizeHint().width() + 6
        edit = self.text_edit.fontMetrics()
        tool = edit.horizontalAdvance("Tool") + 40
        search = edit.horizontalAdvance("Search…" if short else SEARCH_WORDS) + 40
        return fixed + tool + search + 4 * 6 <= width

    def _size_columns(self) -> None:
        """#, Kind and Time as wide as their widest content (# as its deepest continuation's
        "↳ Run"); Time drops its date when "What"
        would otherwise get less than ``WHAT_MIN_CHARS`` characters."""
        tree = self.tree
        plain = tree.fontMetrics()
        bold_font = QFont(tree.font())
        bold_font.setBold(True)
        bold = QFontMetrics(bold_font)
        pad = 2 * tree.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, tree) + 8
        indent = tree.indentation()
        number = max(
            2 * indent + plain.horizontalAdvance("0000"),
            indent + bold.horizontalAdvance(run_mark(max(self.model.deepest_run(), 1))),
        )
        kinds = [plain.horizontalAdvance(kind.replace("_", " ")) for kind in KINDS]
        kind = max(*kinds, bold.horizontalAdvance("continuation"), plain.horizontalAdvance("Kind"))
        full_time = plain.horizontalAdvance("0000-00-00 00:00:00")
        header = tree.header().fontMetrics().horizontalAdvance("Time (UTC)") + 8
        short_time = max(plain.horizontalAdvance("00:00:00"), header)
        width = tree.viewport().width()
        what = plain.averageCharWidth() * WHAT_MIN_CHARS
        fixed = number + pad + kind + pad
        short = width > 0 and width - fixed - (full_time + pad) < what
        time = (short_time if short else full_time) + pad
        self._time_delegate.short = short
        for column, size in ((0, number + pad), (1, kind + pad), (3, time)):
            if tree.columnWidth(column) != size:
                tree.setColumnWidth(column, size)

    def _tree_height(self, rows: int) -> int:
        row = max(self.tree.sizeHintForRow(0), self.tree.fontMetrics().height() + 1)
        header = self.tree.header().sizeHint().height()
        return header + rows * row + 2 * self.tree.frameWidth() + 2

    def _detail_height(self, lines: int) -> int:
        return self.detail.fontMetrics().lineSpacing() * lines + 12

    def _set_lanes_visible(self, shown: bool, outside: bool = False) -> None:
        self._lanes_wanted = (shown, outside)
        self._fit_to_height()

    def _fit_to_height(self) -> None:
        """The rows and the detail come first. As the panel gets shorter: the lanes of reasons
        give way (down to one row each; they scroll) before the rows drop below
        ``ROOMY_TREE_ROWS`` or the detail below ``ROOMY_DETAIL_LINES``; then the detail's
        buttons move beside it; then the lanes and the verdict hide (a pinned row keeps its ⚑,
        and the banner above says why Safe resume waits); last, the detail keeps two lines
        instead of four. The rows keep ``MIN_TREE_ROWS`` and the detail its buttons at every
        level: nothing is laid out in less than its minimum (it would be cut, or hidden)."""
        shown, outside = self._lanes_wanted
        layout = self.layout()
        height = self.height()
        lanes = [lane for lane, on in ((self.pinned, shown), (self.outside, outside)) if on]
        one_row = {id(lane): 1 for lane in lanes}
        most = {id(lane): max(1, min(lane.count(), 5)) for lane in lanes}
        level = 0
        if layout is not None and height > 0 and self.isVisible():
            roomy = (
                self._tree_height(ROOMY_TREE_ROWS)
                - self._tree_height(MIN_TREE_ROWS)
                + self._detail_height(ROOMY_DETAIL_LINES)
                - self._detail_height(DETAIL_MIN_LINES)
            )
            for level in range(5):
                self._apply_level(level, lanes, one_row)
                layout.invalidate()
                least = layout.minimumSize().height()
                if layout.hasHeightForWidth():  # the verdict's lines at this width
                    least = max(least, layout.minimumHeightForWidth(self.width()))
                if level == 0:
                    spare = height - least - roomy
                    if spare < 0:
                        continue
                    line = max(self.pinned.fontMetrics().height() + 2, 1)
                    extra = spare // line
                    rows = {id(lane): 1 for lane in lanes}
                    while extra > 0 and any(rows[id(lane)] < most[id(lane)] for lane in lanes):
                        for lane in lanes:
                            if extra > 0 and rows[id(lane)] < most[id(lane)]:
                                rows[id(lane)] += 1
                                extra -= 1
                    most = rows
                    break
                if least <= height:
                    break
            if level > 0:  # the lanes keep one row each: the level was measured so
                most = one_row
        self._fit_level = level
        self._apply_level(level, lanes, most)

    def _apply_level(self, level: int, lanes: list[QListWidget], rows: dict[int, int]) -> None:
        shown, outside = self._lanes_wanted
        self.pinned.setVisible(shown and level < 3)
        self.outside.setVisible(outside and level < 3)
        self.outside_label.setVisible(outside and level < 2)
        self.verdict.setVisible(level < 3)
        lines = DETAIL_LEAST_LINES if level >= 4 else DETAIL_MIN_LINES
        if self.detail.minimumHeight() != self._detail_height(lines):
            self.detail.setMinimumHeight(self._detail_height(lines))
        for lane in (self.pinned, self.outside):
            _fit_height(lane, rows.get(id(lane), 5))
        beside = level >= 2
        self._detail_column.setDirection(
            QBoxLayout.Direction.LeftToRight if beside else QBoxLayout.Direction.TopToBottom
        )
        self._buttons.setDirection(
            QBoxLayout.Direction.TopToBottom if beside else QBoxLayout.Direction.LeftToRight
        )
        # The splitter's least height as this level makes it, not as the last one left it in
        # the caches of the layouts (the panel's layout measures every level at once).
        self._detail_column.invalidate()
        self._detail_box.updateGeometry()
        self.splitter.updateGeometry()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        width = event.size().width()
        layout = self.layout()
        if layout is not None:
            margins = layout.contentsMargins()
            width -= margins.left() + margins.right()
        inner = width
        short = not self._filters_fit_one_row(inner, short=False)
        self._shorten_filters(short)
        wrapped = self._filters_wrapped
        self._arrange_filters(wrapped=short and not self._filters_fit_one_row(inner, short=True))
        # A new height, or a width that wraps the filters or the verdict anew: the levels are
        # measured again (the rows and the detail must never be laid out under their minimum).
        if (
            event.size().height() != event.oldSize().height()
            or wrapped != self._filters_wrapped
            or self.verdict.isVisible()
        ):
            self._fit_to_height()

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        self._fit_to_height()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if watched is self.tree.viewport() and event.type() == QEvent.Type.Resize:
            self._size_columns()
        return super().eventFilter(watched, event)

    # ---- behaviour --------------------------------------------------------------------------

    def open(self, session_id: str) -> None:
        if session_id != self.model.session_id:
            self._reset_filters(drop=True)  # another session's record: no filter yet
        self._reread_timer.stop()
        self._opens_out = 0
        self._target_quiet = False
        self.verdict.setText(_tr("Loading the record…"))
        self.origin_label.setVisible(False)
        self.pinned.clear()
        self.outside.clear()
        self._set_lanes_visible(False)
        self.detail.clear()
        self._json = ""
        self._target = None
        self._boundaries = {}
        self.branch_button.setEnabled(False)
        if not self.model.open(session_id):
            self.verdict.setText(
                _tr("Not connected to the main process; the record shows once it is.")
            )
            return
        self._opens_out = 1 if self.model.opened is None else 0  # (answered already: a test's)
        self._bridge.branch_options(session_id)

    # ---- continue from here (issue #36) -----------------------------------------------------

    def _on_branch_options(self, push: BranchOptionsListedPush) -> None:
        if push.session_id != self.model.session_id:
            return
        self._boundaries = {option.event_id: option for option in push.options}
        self._update_branch_button()
        self.tree.viewport().update()

    def boundary_at(self, index: QModelIndex) -> BranchOptionItem | None:
        """The boundary a row (or one of its facts) is: a message you sent, a tool's result,
        a turn's ending; None for any other row. One the branch service calls unsettled (a
        call before it has no settled outcome, ``branchable`` False) is returned too: the
        callers say so and offer nothing."""
        node = self.model.node(index)
        if node is None or isinstance(node, RunNode):
            return None
        entries = node.item.entries if isinstance(node, RowNode) else (node.item,)
        for entry in entries:
            option = self._boundaries.get(entry.event_id)
            if option is not None:
                return option
        return None

    def continue_from(self, index: QModelIndex) -> bool:
        option = self.boundary_at(index)
        session = self.model.session_id
        if option is None or not option.branchable or session is None:
            return False
        self.branch_requested.emit(session, option.event_id)
        return True

    def continue_from_current(self) -> bool:
        return self.continue_from(self.tree.currentIndex())

    def context_menu_for(self, index: QModelIndex) -> QMenu:
        menu = QMenu(self)
        action = menu.addAction(_tr("Continue from here…"))
        option = self.boundary_at(index)
        action.setEnabled(option is not None and option.branchable)
        if option is not None and not option.branchable:
            action.setText(_tr("Continue from here… (a call before it is unsettled)"))
        elif option is None and _call_without_outcome(index) == "unsettled":
            action.setText(_tr("Continue from here… (the call is unsettled)"))
        elif option is not None and not option.snapshot_kept:
            action.setText(_tr("Continue from here… (no snapshot kept)"))
        action.triggered.connect(lambda: self.continue_from(index))
        return menu

    def _on_tree_menu(self, pos: QPoint) -> None:
        index = self.tree.indexAt(pos)
        if not index.isValid():
            return
        menu = self.context_menu_for(index)
        menu.exec(self.tree.viewport().mapToGlobal(pos))
        menu.deleteLater()

    def _branch_line(self, index: QModelIndex) -> str:
        option = self.boundary_at(index)
        if option is None:
            without = _call_without_outcome(index)
            if without == "unsettled":
                return _tr(
                    "Not a branch point: this tool call has no settled outcome (it may or may "
                    "not have run), so a new session cannot continue from it. Continue from an "
                    "earlier point (before this call), or first settle the call: say on its "
                    "card in the transcript whether it ran.\n"
                )
            if without == "running":
                return _tr(
                    "Not a branch point yet: this tool call has no result yet; a new session "
                    "can continue from its result once it has one.\n"
                )
            return ""
        if not option.branchable and option.settled_at is not None:
            return _tr(
                "Not a branch point: a tool call before it had no settled outcome yet at this "
                "point; its outcome was recorded later. Branch from that later point (the "
                "call's result) instead, or from an earlier one.\n"
            )
        if not option.branchable:
            return _tr(
                "Not a branch point: a tool call before it has no settled outcome there, so "
                "a new session cannot continue from here. Continue from an earlier point "
                "(before that call), or first settle the call: say on its card in the "
                "transcript whether it ran.\n"
            )
        kept = (
            "a snapshot of the folder is kept here"
            if option.snapshot_kept
            else "no snapshot of the folder is kept here (the current files can be copied)"
        )
        if option.damaged_aside:
            kept = (
                "its snapshot of the folder was found damaged and set aside (a capture of the "
                "folder still holding those files writes it again; the current files can be "
                "copied)"
            )
        if option.trimmed:
            kept = (
                "a snapshot of the folder is kept here until the next prune (removed by "
                "retention as no longer needed; a branch made from here keeps it)"
            )
        return _tr(f"Branch point: a new session can continue {_after(index, option)}; {kept}.\n")

    def _update_branch_button(self) -> None:
        option = self.boundary_at(self.tree.currentIndex())
        without = _call_without_outcome(self.tree.currentIndex())
        self.branch_button.setEnabled(option is not None and option.branchable)
        if option is not None and not option.branchable and option.settled_at is not None:
            tip = _tr(
                "A tool call before this point had no settled outcome yet here: continue from "
                "its result, recorded later, or from an earlier point"
            )
        elif option is not None and not option.branchable:
            tip = _tr(
                "A tool call before this point has no settled outcome there: continue from an "
                "earlier point, or settle the call first"
            )
        elif option is None and without == "unsettled":
            tip = _tr(
                "This tool call has no settled outcome: continue from an earlier point, or "
                "settle the call first (say on its card in the transcript whether it ran)"
            )
        elif option is None and without == "running":
            tip = _tr("This tool call has no result yet: continue from its result once it has one")
        elif option is None:
            tip = _tr(
                "A new session can continue from a message you sent, a tool's result or the "
                "end of a run: select one of those rows"
            )
        elif option.snapshot_kept:
            tip = _tr("Continue from this point in a new session, in a copy of the folder")
        else:
            tip = _tr(
                "No snapshot of the folder is kept for this point; you can continue with "
                "a copy of the current files"
            )
        self.branch_button.setToolTip(tip)

    def filters(self) -> TimelineRowFilter:
        return TimelineRowFilter(
            kind=str(self.kind_box.currentData() or ""),
            tool=self.tool_edit.text()[:500],
            status=str(self.status_box.currentData() or ""),
            text=self.text_edit.text()[:500],
            only_problems=self.problems_box.isChecked(),
        )

    def apply_filters(self) -> None:
        """The main process filters: the model asks it again for the rows now shown."""
        self.model.set_filters(self.filters())
        self._show_matches()

    def clear_filters(self) -> None:
        self._reset_filters()
        self.apply_filters()

    def _reset_filters(self, *, drop: bool = False) -> None:
        """Every filter back to showing all rows, without asking for rows (the caller does);
        ``drop``: the model forgets its filter too (a session about to be opened)."""
        widgets = (self.kind_box, self.status_box, self.tool_edit, self.text_edit)
        for widget in (*widgets, self.problems_box):
            widget.blockSignals(True)
        self.kind_box.setCurrentIndex(0)
        self.status_box.setCurrentIndex(0)
        self.tool_edit.clear()
        self.text_edit.clear()
        self.problems_box.setChecked(False)
        for widget in (*widgets, self.problems_box):
            widget.blockSignals(False)
        if drop:
            self.model.drop_filters()
        self._show_matches()

    def _after_page(self) -> None:
        """A sought row is selected once its page is here (the model asks for that page)."""
        if self._target is not None and self._select_row(*self._target, quiet=self._target_quiet):
            self._target = None
        self._show_matches()

    def _show_matches(self) -> None:
        """Under a filter, how many rows it shows once every run has said ("no match")."""
        if self.model.filters is None:
            self.matches_label.setVisible(False)
            return
        shown = self.model.shown_rows()
        if shown is None:
            text = _tr("searching…")
        elif shown == 0:
            text = _tr("no match")
        else:
            text = _tr("1 row") if shown == 1 else _tr(f"{shown:,} rows")
        self.matches_label.setText(text)
        self.matches_label.setVisible(True)

    def _on_opened(self, push: TimelineOpenedPush) -> None:
        if push.session_id != self.model.session_id:
            return
        self._opens_out = max(0, self._opens_out - 1)
        if self._target is not None and self._target_quiet and self._opens_out == 0:
            # The row selected before the record was read again: where is it now?
            self._bridge.timeline_locate(push.session_id, *self._target, self.model.filters)
        self._show_verdict()

    def _show_verdict(self) -> None:
        """What Safe resume would do, as the latest reading of the record says; only while
        that reading still holds: while a turn runs, or while the record is read again after
        a change, the verdict says so instead (and lists no reasons)."""
        push = self.model.opened
        if push is None:
            return  # still loading (``open`` says so)
        # The record may be opened again (a refresh, the same session chosen again): its
        # reasons replace the ones listed, never add to them.
        self.pinned.clear()
        self.outside.clear()
        self._set_lanes_visible(False)
        events = sum(run.event_count for run in push.runs)
        runs = len(push.runs)
        plan = push.plan
        self._show_origin()
        origin = self._origins.get(push.session_id)
        turn = self._turn_now()
        if turn == "here":
            self.verdict.setText(
                _tr(
                    "A turn is running now: there is nothing to resume while it runs. The "
                    "record is read again when it ends."
                )
            )
            return
        if turn == "elsewhere":
            self.verdict.setText(
                _tr(
                    "Another Maka process is running a turn in this session: there is nothing "
                    "to resume from here while it runs."
                )
            )
            return
        if self._bridge.connection_state is not ConnectionState.CONNECTED:
            self.verdict.setText(
                _tr(
                    "Not connected to the main process: what Safe resume would do is not "
                    "known until it is."
                )
            )
            return
        if self._opens_out > 0 or self._reread_timer.isActive():
            self.verdict.setText(_tr("The session changed: reading its record again…"))
            return
        if origin is not None and runs == 0:
            self.verdict.setText(_tr("No run of its own yet. Nothing interrupted to resume."))
            return
        if plan is None:
            self.verdict.setText(
                _tr(f"{_runs(runs)}, {events:,} events. Nothing interrupted to resume.")
            )
            return
        verdict = "can continue" if plan.disposition == "continue" else "parks"
        text = f"{_runs(runs)}, {events:,} events. Safe resume {verdict}"
        if plan.boundary_high_water is not None:
            text += f" at event {plan.boundary_high_water} of {plan.boundary_run_id}"
        if plan.disposition == "continue" and not self._resume_offered:
            # (no banner offers it here: the turn was stopped or failed, not cut by a crash)
            text += (
                f" from a terminal (maka resume {push.session_id}); here, a new message "
                "carries the session on"
            )
        self.verdict.setText(_tr(text + "."))
        pinned = [pin for pin in plan.pins if pin.run_id is not None]
        outside = [pin for pin in plan.pins if pin.run_id is None]
        for pin in pinned:
            item = QListWidgetItem(f"⚑ {_words(pin)}  (row #{pin.seq} of {pin.run_id})")
            item.setData(PIN_ROLE, (pin.run_id, pin.seq))
            item.setToolTip(plain_tip(f"{item.text()}\n" + _tr("Show this row (Enter)")))
            self.pinned.addItem(item)
        for pin in outside:
            item = QListWidgetItem(_words(pin))
            item.setToolTip(plain_tip(item.text()))
            self.outside.addItem(item)
        self._set_lanes_visible(bool(pinned), bool(outside))

    def _on_pin_activated(self, item: QListWidgetItem) -> None:
        place = item.data(PIN_ROLE)
        if not isinstance(place, tuple):
            return
        run_id, seq = place
        session = self.model.session_id
        if self._select_row(run_id, seq) or session is None:
            return
        # Not loaded: the main process says where it is among the rows shown, and only its
        # run is loaded that far.
        self._target = (run_id, seq)
        self._target_quiet = False
        self._bridge.timeline_locate(session, run_id, seq, self.model.filters)

    def _on_located(self, push: TimelineLocatedPush) -> None:
        if (
            push.session_id != self.model.session_id
            or self._target != (push.run_id, push.seq)
            or push.filters != self.model.filters
        ):
            return
        if push.position is not None:
            self.model.want(push.run_id, push.position)
            self._after_page()
        elif self.model.filters is not None and not self._target_quiet:
            # the filter hides it: show every row again, then find it among them
            self.clear_filters()
            self._bridge.timeline_locate(push.session_id, push.run_id, push.seq, None)
        else:
            self._target = None

    def _select_row(self, run_id: str, seq: int, *, quiet: bool = False) -> bool:
        """Select and show a row; ``quiet``: the row that was selected before the record was
        read again (the focus stays where it is, and no reason's row is announced)."""
        index = self.model.index_of_row(run_id, seq)
        if not index.isValid():
            return False
        self.tree.setCurrentIndex(index)
        self.tree.selectionModel().select(
            index,
            QItemSelectionModel.SelectionFlag.ClearAndSelect
            | QItemSelectionModel.SelectionFlag.Rows,
        )
        if quiet:
            self._target_quiet = False
            self.tree.scrollTo(index, QAbstractItemView.ScrollHint.EnsureVisible)
            return True
        self.tree.expand(index)
        self.tree.scrollTo(index, QAbstractItemView.ScrollHint.PositionAtCenter)
        self.tree.setFocus()
        self.row_shown.emit(run_id, seq)
        return True

    def _on_rows_filled(self, first: QModelIndex, last: QModelIndex, *_roles: object) -> None:
        """A page arrived: the current row it filled is shown now (it was shown as nothing)."""
        current = self.tree.currentIndex()
        if (
            self._current_unloaded
            and current.isValid()
            and not current.parent().isValid()
            and first.row() <= current.row() <= last.row()
        ):
            self._on_current(current, QModelIndex())

    def _on_current(self, current: QModelIndex, _previous: QModelIndex) -> None:
        node = self.model.node(current)
        self._current_unloaded = node is None and current.isValid()
        if self._target_quiet and node is not None and self._current_place() != self._target:
            self._target, self._target_quiet = None, False  # the user chose another row
        self._json = ""
        self._update_branch_button()
        if node is None or isinstance(node, RunNode):
            self.detail.setPlainText(_run_detail(node) if node is not None else "")
            return
        self.detail.setPlainText(self._branch_line(current) + _detail(node, None))
        entry = node.item.entries[0] if isinstance(node, RowNode) else node.item
        run = node.run if isinstance(node, RowNode) else node.row.run
        session = self.model.session_id
        if session is not None:
            self._bridge.timeline_event(session, run.head.run_id, entry.event_id)

    def _on_event_shown(self, push: TimelineEventShownPush) -> None:
        node = self.model.node(self.tree.currentIndex())
        if node is None or isinstance(node, RunNode) or push.session_id != self.model.session_id:
            return
        entry = node.item.entries[0] if isinstance(node, RowNode) else node.item
        if entry.event_id != push.event_id:
            return
        self._json = push.canonical_json
        more = "\n… (shortened)" if push.truncated else ""
        branch = self._branch_line(self.tree.currentIndex())
        self.detail.setPlainText(branch + _detail(node, push.canonical_json) + more)

    def copy_json(self) -> None:
        if not self._json:
            self.said.emit(_tr("Nothing to copy yet: select a row and wait for its event."))
            return
        QGuiApplication.clipboard().setText(self._json)
        node = self.model.node(self.tree.currentIndex())
        entry = None
        if isinstance(node, RowNode):
            entry = node.item.entries[0]
        elif isinstance(node, EntryNode):
            entry = node.item
        which = f"event {entry.event_id} (#{entry.seq})" if entry is not None else "the event"
        self.said.emit(_tr(f"Copied the JSON of {which}."))

    # ---- the verdict kept true while the session changes --------------------------------------

    def set_resume_offered(self, offered: bool) -> None:
        """Whether the window offers Safe resume for the open session (its banner does only
        for a turn a crash or restart interrupted)."""
        if offered != self._resume_offered:
            self._resume_offered = offered
            self._show_verdict()

    def set_turn_running(self, session_id: str | None, where: TurnRunning | None) -> None:
        """Whether ``session_id``'s turn runs now, and where (the window tracks it from the
        pushes): while one runs there is nothing to resume, whatever the last reading said."""
        turn = (session_id or "", where)
        if turn == self._turn:
            return
        before = self._turn_now()
        self._turn = turn
        if session_id is not None and self._turn_now() != before:
            self._changed(session_id)

    def _turn_now(self) -> TurnRunning | None:
        session, where = self._turn
        return where if session and session == self.model.session_id else None

    def _on_session_push(
        self,
        push: RunStatusPush
        | ResumeStartedPush
        | ResumeParkedPush
        | ResumeFailedPush
        | ToolSettledPush
        | ProcessesStoppedPush
        | SessionUpdatedPush,
    ) -> None:
        if isinstance(push, ToolSettledPush) and not push.recorded:
            return  # a refused settle changed nothing
        if isinstance(push, SessionUpdatedPush):
            self._changed(push.session.session_id)
        else:
            self._changed(push.session_id)

    def _changed(self, session_id: str) -> None:
        """The open session changed: the verdict no longer claims what the last reading said,
        and the record is read again (once, after a burst of pushes)."""
        if session_id != self.model.session_id or self.isHidden():
            return  # (a hidden Timeline reads the record when it is shown)
        self._reread_timer.start()
        self._show_verdict()

    def _on_connection(self, state: str) -> None:
        if self.model.session_id is None or self.model.opened is None:
            return
        if state == ConnectionState.CONNECTED:
            self._changed(self.model.session_id)  # what changed while away is read
        else:
            self._show_verdict()

    def _current_place(self) -> tuple[str, int] | None:
        node = self.model.node(self.tree.currentIndex())
        if isinstance(node, RowNode):
            return node.run.head.run_id, node.item.seq
        if isinstance(node, EntryNode):
            return node.row.run.head.run_id, node.row.item.seq
        return None

    def _reread(self) -> None:
        """Read the open session's record again, keeping its filters and, when it is still
        there, the selected row (selected again without taking the focus)."""
        session = self.model.session_id
        if session is None or self.isHidden():
            return
        if self._bridge.connection_state is not ConnectionState.CONNECTED:
            self._show_verdict()
            return
        place = self._current_place()
        self._target = place
        self._target_quiet = place is not None
        if self._target is None:
            self.detail.clear()
            self._json = ""
        self._opens_out += 1
        if not self.model.open(session):
            self._opens_out -= 1
            self._show_verdict()
            return
        self._bridge.branch_options(session)  # a settle or a new run moves the branch points

    # ---- a branched session's origin --------------------------------------------------------

    def set_origin(self, session_id: str, origin: BranchOrigin | None) -> None:
        """Where ``session_id`` was branched from (None: it was not): its timeline starts with
        that session's history, which is not in its own runs."""
        self._origins[session_id] = origin
        if session_id == self.model.session_id and self.model.opened is not None:
            self._show_verdict()

    def _show_origin(self) -> None:
        session = self.model.session_id
        origin = self._origins.get(session) if session is not None else None
        if origin is None:
            self.origin_label.setVisible(False)
            return
        title = visible(origin.source_title) or origin.source_session_id
        how = (
            "a copy of the files as they were at branching"
            if origin.current_files
            else "the folder as it was there"
        )
        words = _tr(
            f"Branched from “{title}” (session {origin.source_session_id}) at event "
            f"{origin.boundary_event_id}, with {how}: the history before this session's first "
            "run is that session's up to there."
        )
        link = _tr("Open that session")
        self.origin_label.setText(
            f'{html.escape(words, quote=False)} <a href="open">{html.escape(link)}</a>'
        )
        self.origin_label.setToolTip(plain_tip(words))
        self.origin_label.setVisible(True)

    def _on_origin_link(self, _link: str) -> None:
        session = self.model.session_id
        origin = self._origins.get(session) if session is not None else None
        if origin is not None:
            self.source_open_requested.emit(origin.source_session_id)


_UNSETTLED = frozenset({"unknown", "parked"})
"""A tool row's statuses that say its call has no settled outcome (it may or may not have
run): no branch point until the user says whether it ran."""


def _call_without_outcome(index: QModelIndex) -> Literal["unsettled", "running"] | None:
    """Why a tool row (or one of its facts) is no branch point: its call has no settled
    outcome (``unsettled``), or no result yet (``running``); None for any other row."""
    node = index.data(NODE_ROLE)
    row = node if isinstance(node, RowNode) else node.row if isinstance(node, EntryNode) else None
    if row is None or row.item.kind != "tool":
        return None
    status = row.item.status
    if status in _UNSETTLED:
        return "unsettled"
    if status == "running":
        return "running"
    return None


def _after(index: QModelIndex, option: BranchOptionItem) -> str:
    """Which event a branch at ``option`` continues after, as the row shows it: a tool row's
    boundary is its result, not the call whose event the pane shows below."""
    node = index.data(NODE_ROLE)
    entries = (
        node.item.entries
        if isinstance(node, RowNode)
        else (node.item,)
        if isinstance(node, EntryNode)
        else ()
    )
    entry = next((e for e in entries if e.event_id == option.event_id), None)
    seq = entry.seq if entry is not None else option.seq
    kind = f", {entry.kind.replace('_', ' ')}" if entry is not None else ""
    words = f"after #{seq} (event {option.event_id}{kind})"
    shown = entries[0] if entries else None
    if shown is not None and shown.event_id != option.event_id:
        words += f", not after #{shown.seq} shown below"
    return words


def _fit_height(lane: QListWidget, most: int = 5) -> None:
    """As tall as its reasons (up to ``most``; it scrolls beyond), never a blank box."""
    rows = max(1, min(lane.count(), most))
    if lane.height() == lane.minimumHeight() == lane.maximumHeight() == _lane_height(lane, rows):
        return
    lane.setFixedHeight(_lane_height(lane, rows))


def _lane_height(lane: QListWidget, rows: int) -> int:
    """Whole rows only: a list that scrolls shows no slice of the row after its last one."""
    line = lane.sizeHintForRow(0) if lane.count() else lane.fontMetrics().height()
    spare = 4 if rows >= lane.count() else 0
    return rows * line + 2 * lane.frameWidth() + spare


def _words(pin: TimelinePin) -> str:
    sentence = describe(pin.code).sentence or pin.message
    return f"{pin.code}: {sentence}" if sentence else pin.code


def _runs(count: int) -> str:
    return "1 run" if count == 1 else f"{count:,} runs"


def _run_detail(node: RunNode) -> str:
    head = node.head
    lines = [f"run {head.run_id}", f"status: {head.status}"]
    if head.failure_class:
        lines.append(f"ending: {head.failure_class}")
    if head.parent_run_id:
        lines.append(f"continues {head.parent_run_id} after event {head.source_high_water}")
    lines.append(f"{head.event_count} events in {head.row_count} rows")
    return "\n".join(lines)


def _detail(node: RowNode | EntryNode, canonical: str | None) -> str:
    row = node if isinstance(node, RowNode) else node.row
    entry = node.item.entries[0] if isinstance(node, RowNode) else node.item
    lines = [
        f"event {entry.event_id}  (#{entry.seq} of run {row.run.head.run_id})",
        f"kind: {entry.kind}   lane: {entry.lane}   status: {entry.status}",
    ]
    if row.item.tool_call_id is not None:
        lines.append(
            f"tool operation: {row.item.tool_name} {row.item.tool_call_id} "
            f"({row.item.status}, {len(row.item.entries)} facts)"
        )
    if entry.replayed:
        lines.append("a continuation would replay this event")
    for pin in row.pins:  # tagged by severity, as maka plan and maka timeline tag reasons
        lines.append(f"[{describe(pin.code).severity.value}] {_words(pin)}")
    if canonical is not None:
        digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
        lines += [f"digest: sha256:{digest}", "", canonical]
    else:
        lines += ["", "(loading the saved event…)"]
    return "\n".join(lines)
