"""The transcript: a scrolling column of item widgets, updated in place by ``itemId``.

Why it is built this way:

* Keyed by ``itemId``: the main process re-sends an item when it changes (a tool card moving
  from running to done, an assistant message growing while it streams); replacing in place keeps
  the reader's place and avoids rebuilding the column.
* Updates are coalesced: pushes are queued and applied at most once per frame (~16 ms), so a
  fast stream of deltas costs one relayout per frame, not one per delta. Reading the view
  (``item_ids``, ``item_widget``) applies what is queued first.
* Only the newest ``MAX_LIVE_ITEMS`` items are widgets: a column relayout costs time in
  proportion to its widgets, so a long session would make every streamed delta slower. Older
  items stay as data behind a "Show earlier items" button, and the oldest widgets are retired
  while the reader follows the newest item.
* Every item sits in a fixed-height row that measures itself (height for its width) when its
  content or width changes. A box layout of word-wrapped labels otherwise re-measures every
  label on every change, which made each streamed delta cost time in proportion to the
  transcript's length; with measured rows a delta costs about the same at 10 items or 1,000.
* The view follows new items only while the reader is at the bottom.
* The page grows in the same pass as its rows: a row's new height reaches the scroll area
  only through a posted event, so the column placed its rows for a ~10,000 px message one pass
  before the page was made tall enough, and a paint in between showed the next cards over the
  message's text. The page now has the scroll area resize it as soon as its column is laid out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QCoreApplication, QEvent, QObject, QRect, Qt, QTimer, Signal
from PySide6.QtGui import QContextMenuEvent, QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QLabel,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from app.bridge_contract import (
    AssistantMessageItem,
    BranchMarkerItem,
    ContinuationMarkerItem,
    NoticeItem,
    ThinkingItem,
    ToolCardItem,
    ToolCardStatus,
    TranscriptItem,
    UserMessageItem,
)
from renderer.measured_row import MeasuredRow
from renderer.transcript_items import (
    AWAITING_PERMISSION,
    WINDOW_LOST,
    BranchMarkerWidget,
    ContinuationMarkerWidget,
    ItemWidget,
    ToolCardWidget,
    widget_for,
)

FOLLOW_SLACK_PX = 48
MAX_LIVE_ITEMS = 150
PAGE_ITEMS = 150
TRIM_SLACK = 50
FLUSH_INTERVAL_MS = 16
PLACE_MS = 500
"""How long a transcript built again (``refresh_items``) keeps going back to the reader's place
while its rows are laid out."""

MAX_AUTOMATIC_RUNS = 1000
"""Runs remembered as started by automatic resume (a few at each start; bounded anyway)."""


def _tr(text: str) -> str:
    return QCoreApplication.translate("Transcript", text)


_ITEM_PROPERTY = "makaItemId"


_NO_RESULT = frozenset(
    {ToolCardStatus.INDETERMINATE, ToolCardStatus.PARKED, ToolCardStatus.RUNNING}
)
"""A card in one of these has no result event: no branch point after its call."""


def _branchable(item: TranscriptItem) -> bool:
    return item.type in ("user_message", "tool_card")


def _item_widget(row: MeasuredRow) -> ItemWidget:
    return row.content  # type: ignore[return-value]  # rows are built from widget_for()


FIT_PASSES = 4
"""At most this many resizes of the page per layout pass (a scroll bar appearing narrows the
rows, which may make them taller once more)."""


class _Column(QVBoxLayout):
    """The scrolled column: tells the view each time it has placed its rows."""

    def __init__(self, page: QWidget, placed: Callable[[], None]) -> None:
        super().__init__(page)
        self._placed = placed

    def setGeometry(self, rect: QRect) -> None:  # noqa: N802 (Qt override)
        super().setGeometry(rect)
        self._placed()


class TranscriptView(QScrollArea):
    settle_requested = Signal(str, bool, str)
    """A card's "It ran" / "It did not run": (tool call id, ran, note or "")."""
    branch_requested = Signal(object)
    """"Continue from here…" on a message you sent or a tool card: the item (issue #36)."""
    branch_open_requested = Signal(str)
    """A "Branched here" marker's link: the branch's session id."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("TranscriptView")
        # A keyboard user must see when the transcript has the focus (arrow keys scroll it).
        self.setStyleSheet(
            "QScrollArea#TranscriptView { border: 2px solid transparent; }"
            "QScrollArea#TranscriptView:focus { border: 2px solid palette(highlight); }"
        )
        self.setAccessibleName(_tr("Transcript"))
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._page = QWidget()
        self._fitting = False
        self._column = _Column(self._page, self._fit_page)
        self._column.setContentsMargins(20, 16, 20, 16)
        self._column.setSpacing(10)
        self.earlier_button = QPushButton()
        self.earlier_button.setFlat(True)
        self.earlier_button.clicked.connect(self.show_earlier)
        self.omitted_label = QLabel()
        self.omitted_label.setTextFormat(Qt.TextFormat.PlainText)
        self.omitted_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.omitted_label.setEnabled(False)
        self.placeholder = QLabel(
            _tr(
                "No messages yet. With the built-in offline demo, try “write hello.txt saying "
                "hi”, “read hello.txt”, “run ls” or “list files”."
            )
        )
        self.placeholder.setWordWrap(True)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setEnabled(False)
        self._column.addWidget(self.omitted_label)
        self._column.addWidget(self.earlier_button, 0, Qt.AlignmentFlag.AlignHCenter)
        self._column.addWidget(self.placeholder)
        self._column.addStretch(1)
        self.setWidget(self._page)
        self._items: dict[str, TranscriptItem] = {}
        self._order: list[str] = []
        self._live_from = 0
        self._rows: dict[str, MeasuredRow] = {}
        self._omitted_earlier = 0
        self._pending: dict[str, TranscriptItem] = {}
        self._flush_timer = QTimer(self)
        self._flush_timer.setSingleShot(True)
        self._flush_timer.setInterval(FLUSH_INTERVAL_MS)
        self._flush_timer.timeout.connect(self.flush)
        self._follow = True
        # Where the reader was when the column was built again (``refresh_items``): kept until
        # the rows are laid out that far, for a moment at most.
        self._place: int | None = None
        self._place_timer = QTimer(self)
        self._place_timer.setSingleShot(True)
        self._place_timer.setInterval(PLACE_MS)
        self._place_timer.timeout.connect(self._forget_place)
        self._session_open = True
        self._automatic_runs: set[str] = set()
        bar = self.verticalScrollBar()
        bar.rangeChanged.connect(self._on_range_changed)
        bar.valueChanged.connect(self._on_scrolled)
        self._update_chrome()

    # ----------------------------------------------------------------- public

    def clear(self) -> None:
        self._place = None
        self._pending.clear()
        self._flush_timer.stop()
        for row in self._rows.values():
            self._column.removeWidget(row)
            row.deleteLater()
        self._rows.clear()
        self._items.clear()
        self._order.clear()
        self._live_from = 0
        self._omitted_earlier = 0
        self._update_chrome()

    def set_items(self, items: Sequence[TranscriptItem], omitted_earlier: int = 0) -> None:
        """Show a freshly opened session's items and scroll to the newest."""
        self.setUpdatesEnabled(False)
        try:
            self.clear()
            self._omitted_earlier = omitted_earlier
            for item in items:
                if item.item_id not in self._items:
                    self._order.append(item.item_id)
                self._items[item.item_id] = item
            self._live_from = max(0, len(self._order) - MAX_LIVE_ITEMS)
            for item_id in self._order[self._live_from :]:
                self._insert_widget(self._items[item_id], self._column.count() - 1)
            self._update_chrome()
        finally:
            self.setUpdatesEnabled(True)
        self._follow = True
        self.scroll_to_bottom()

    def refresh_items(self, items: Sequence[TranscriptItem], omitted_earlier: int = 0) -> None:
        """The open session read again (another process added to it): changed items are
        replaced in place and new ones added at the end, as pushes would be, and the reader
        stays where they are (at the newest item if they were following it). Items read that
        do not continue those shown (a note put between them, say) are shown afresh at the
        same scroll position."""
        self.flush()
        order = list(dict.fromkeys(item.item_id for item in items))
        if self._continues(order, omitted_earlier):
            for item in items:
                if self._items.get(item.item_id) != item:
                    self.apply_item(item)
            self.flush()
            self._update_chrome()
            return
        bar = self.verticalScrollBar()
        following, value = self._follow, bar.value()
        self.set_items(items, omitted_earlier)
        if not following:
            self._follow = False
            self._place = value  # once the rows are laid out (_on_range_changed)
            self._place_timer.start()
            bar.setValue(min(value, bar.maximum()))

    def _continues(self, order: list[str], omitted_earlier: int) -> bool:
        """Whether ``order`` (a session read again) is the items shown and then more, the
        oldest maybe left out now (the answer holds the newest ``MAX_ITEMS_PER_OPEN``): if so,
        those left out (data only, never a row on screen) are dropped and True is returned."""
        dropped = omitted_earlier - self._omitted_earlier
        if not 0 <= dropped <= self._live_from:
            return False
        kept = self._order[dropped:]
        if order[: len(kept)] != kept:
            return False
        for item_id in self._order[:dropped]:
            self._items.pop(item_id, None)
        del self._order[:dropped]
        self._live_from -= dropped
        self._omitted_earlier = omitted_earlier
        return True

    def apply_item(self, item: TranscriptItem) -> None:
        """Queue ``item``: added at the end, or replacing the item with the same ``itemId``."""
        self._pending.pop(item.item_id, None)
        self._pending[item.item_id] = item
        if not self._flush_timer.isActive():
            self._flush_timer.start()

    def _running_cards(self) -> list[ToolCardItem]:
        """The cards of calls still shown as running (each waits for an outcome)."""
        self.flush()
        return [
            item
            for item in self._items.values()
            if isinstance(item, ToolCardItem) and item.status is ToolCardStatus.RUNNING
        ]

    def shows_running_calls(self) -> bool:
        return bool(self._running_cards())

    def awaiting_model(self) -> str | None:
        """What a running turn waits for, from the transcript's last item: ``"answer"`` (a
        message sent, a call's result or a continuation's start went to the model, and nothing
        came back yet), ``"more"`` (its reply or thinking is being written), None (a call runs
        or waits for permission, or nothing runs from here)."""
        self.flush()
        for item_id in reversed(self._order):
            item = self._items.get(item_id)
            if isinstance(item, NoticeItem | BranchMarkerItem):
                continue  # (a note beside the turn, not a step of it)
            if isinstance(item, UserMessageItem | ContinuationMarkerItem):
                return "answer"
            if isinstance(item, ToolCardItem):
                return None if item.status is ToolCardStatus.RUNNING else "answer"
            if isinstance(item, AssistantMessageItem | ThinkingItem):
                return "more"
            return None
        return None

    def mark_running_interrupted(self) -> int:
        """The main process is gone: every call still shown as running was interrupted, as far
        as this window knows (its result may have been recorded a moment before), except one
        that was only waiting for permission: it never started, and reads "Not run" (what the
        next start finds too). Returns how many cards changed."""
        running = self._running_cards()
        for item in running:
            waiting = item.park_reason == AWAITING_PERMISSION
            update = (
                {"status": ToolCardStatus.NOT_DISPATCHED, "park_reason": None}
                if waiting
                else {"status": ToolCardStatus.INDETERMINATE, "park_reason": WINDOW_LOST}
            )
            self._apply(item.model_copy(update=update))
        return len(running)

    def flush(self) -> None:
        """Apply queued items now (also done on the next frame by itself)."""
        self._flush_timer.stop()
        if not self._pending:
            return
        pending, self._pending = list(self._pending.values()), {}
        for item in pending:
            self._apply(item)
        if self._follow and len(self._order) - self._live_from > MAX_LIVE_ITEMS + TRIM_SLACK:
            self._retire(len(self._order) - self._live_from - MAX_LIVE_ITEMS)
        self._update_chrome()
        self._column.activate()  # place the rows (and grow the page) before the next paint

    def show_earlier(self) -> None:
        """Turn up to ``PAGE_ITEMS`` older items back into widgets, above the shown ones."""
        self.flush()
        start = max(0, self._live_from - PAGE_ITEMS)
        anchor = self._column.indexOf(self.placeholder) + 1
        for offset, item_id in enumerate(self._order[start : self._live_from]):
            self._insert_widget(self._items[item_id], anchor + offset)
        self._live_from = start
        self._update_chrome()

    def item_widget(self, item_id: str) -> ItemWidget | None:
        self.flush()
        row = self._rows.get(item_id)
        return None if row is None else _item_widget(row)

    def tool_card(self, tool_call_id: str) -> ToolCardWidget | None:
        """The shown card of that call (the newest, should a call id repeat)."""
        for item_id in reversed(self._order):
            item = self._items.get(item_id)
            row = self._rows.get(item_id)
            if (
                row is not None
                and item is not None
                and item.type == "tool_card"
                and item.tool_call_id == tool_call_id
            ):
                widget = _item_widget(row)
                return widget if isinstance(widget, ToolCardWidget) else None
        return None

    def item_ids(self) -> list[str]:
        self.flush()
        return list(self._order)

    def live_item_ids(self) -> list[str]:
        self.flush()
        return list(self._order[self._live_from :])

    def in_continuation(self, item_id: str) -> bool:
        """Whether ``item_id`` comes after a continuation marker (belongs to a resumed run)."""
        self.flush()
        seen_marker = False
        for shown in self._order:
            kind = self._items[shown].type
            if shown == item_id:
                return seen_marker and kind != "continuation_marker"
            seen_marker = seen_marker or kind == "continuation_marker"
        return False

    @property
    def following(self) -> bool:
        return self._follow

    def scroll_to_bottom(self) -> None:
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    def follow_newest(self) -> None:
        """The user acted (sent a message): show the newest items and follow what comes."""
        self._place = None
        self._follow = True
        self.scroll_to_bottom()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        following = self._follow
        super().resizeEvent(event)
        if following:
            # The view got shorter (a permission prompt opened below it): keep the newest item
            # in sight once the layout has settled.
            self._follow = True
            QTimer.singleShot(0, self._settle_at_bottom)

    def _forget_place(self) -> None:
        self._place = None

    def _settle_at_bottom(self) -> None:
        if self._follow:
            self.scroll_to_bottom()

    # ----------------------------------------------------------------- internals

    def _on_range_changed(self, _minimum: int, maximum: int) -> None:
        if self._place is not None:  # the column was built again: back to the reader's place
            place = self._place
            if maximum >= place:
                self._place = None
            self.verticalScrollBar().setValue(min(place, maximum))
            return
        if self._follow:
            self.verticalScrollBar().setValue(maximum)

    def _on_scrolled(self, value: int) -> None:
        self._follow = value >= self.verticalScrollBar().maximum() - FOLLOW_SLACK_PX

    def _apply(self, item: TranscriptItem) -> None:
        known = item.item_id in self._items
        previous = self._items.get(item.item_id)
        self._items[item.item_id] = item
        if not known:
            self._order.append(item.item_id)
            self._insert_widget(item, self._column.count() - 1)  # before the closing stretch
            return
        existing = self._rows.get(item.item_id)
        if existing is None:
            return  # an earlier item that is not a widget now; its data is updated
        if previous is not None and previous.type == item.type:
            widget = _item_widget(existing)
            widget.update_item(item)
            widget.updateGeometry()  # measure the new content now, not one posted event later
            existing.fit(existing.width())
            return
        index = self._column.indexOf(existing)
        self._column.removeWidget(existing)
        existing.deleteLater()
        self._insert_widget(item, index)

    def _fit_page(self) -> None:
        """Size the page to its rows now (taller or shorter), not one posted event later."""
        if self._fitting:
            return
        self._fitting = True
        try:
            for _ in range(FIT_PASSES):
                viewport = self.viewport().size()
                height = max(self._column.totalMinimumSize().height(), viewport.height())
                if self._page.height() == height and self._page.width() == viewport.width():
                    return
                # QScrollArea answers a layout request by sizing its widget and scroll bars.
                QCoreApplication.sendEvent(self, QEvent(QEvent.Type.LayoutRequest))
                self._column.activate()
        finally:
            self._fitting = False

    def _row_width(self) -> int:
        margins = self._column.contentsMargins()
        return self.viewport().width() - margins.left() - margins.right()

    def note_automatic_run(self, run_id: str) -> None:
        """Automatic resume started run ``run_id``: its continuation marker says so (the
        marker shown now, or one that arrives later)."""
        if len(self._automatic_runs) >= MAX_AUTOMATIC_RUNS:
            self._automatic_runs.clear()
        self._automatic_runs.add(run_id)
        for item_id, row in self._rows.items():
            item = self._items.get(item_id)
            widget = _item_widget(row)
            if (
                isinstance(item, ContinuationMarkerItem)
                and item.run_id == run_id
                and isinstance(widget, ContinuationMarkerWidget)
            ):
                widget.set_automatic(True)
                row.fit(row.width())

    def _insert_widget(self, item: TranscriptItem, index: int) -> None:
        widget = widget_for(item)
        if isinstance(widget, ContinuationMarkerWidget):
            assert isinstance(item, ContinuationMarkerItem)
            widget.set_automatic(item.run_id in self._automatic_runs)
        if isinstance(widget, ToolCardWidget):
            widget.settle_requested.connect(self.settle_requested)
        if isinstance(widget, BranchMarkerWidget):
            widget.open_requested.connect(self.branch_open_requested)
        row = MeasuredRow(widget, self._row_width())
        if _branchable(item):
            # Its context menu (on the card or its text) offers "Continue from here…".
            row.setProperty(_ITEM_PROPERTY, item.item_id)
            for watched in (row, *row.findChildren(QWidget)):
                watched.installEventFilter(self)
        # A row never asks for more width than the viewport has: the column, and so every
        # card, stays as wide as the visible area whatever the row's content.
        row.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self._column.insertWidget(index, row)
        self._rows[item.item_id] = row

    def _retire(self, count: int) -> None:
        for item_id in self._order[self._live_from : self._live_from + count]:
            row = self._rows.pop(item_id)
            self._column.removeWidget(row)
            row.deleteLater()
        self._live_from += count

    # ----------------------------------------------------------------- continue from here

    def branchable_item(self, item_id: str) -> TranscriptItem | None:
        """The item if "Continue from here…" applies to it (a message you sent, a tool card)."""
        item = self._items.get(item_id)
        return item if item is not None and _branchable(item) else None

    def continue_from(self, item_id: str) -> bool:
        item = self.branchable_item(item_id)
        if item is None:
            return False
        self.branch_requested.emit(item)
        return True

    def context_menu_for(self, item_id: str, watched: QWidget | None = None) -> QMenu:
        """The menu of an item: the text's own actions (copy, select all) when ``watched`` is
        a text view's viewport, then "Continue from here…"."""
        menu: QMenu | None = None
        owner = watched.parentWidget() if watched is not None else None
        if isinstance(owner, QTextEdit | QPlainTextEdit) and watched is owner.viewport():
            menu = owner.createStandardContextMenu()
        if menu is None:
            menu = QMenu(self)
        else:
            menu.addSeparator()
        action = menu.addAction(_tr("Continue from here…"))
        action.setToolTip(_tr("Continue from this point in a new session, in a copy of the folder"))
        why = self.no_branch_reason(item_id)
        if why:
            # A call with no result yet: there is no point after it to continue from.
            action.setEnabled(False)
            action.setToolTip(why)
            menu.setToolTipsVisible(True)
        action.triggered.connect(lambda: self.continue_from(item_id))
        return menu

    def no_branch_reason(self, item_id: str) -> str:
        """Why "Continue from here…" cannot work on this item ("" when it may): a tool card
        whose call has no result (its outcome unknown, parked, or still running) has no point
        after it; the branch service answers for every other item."""
        item = self._items.get(item_id)
        if (
            not isinstance(item, ToolCardItem)
            or item.status not in _NO_RESULT
            or item.attestation is not None  # settled: its outcome is on the record
        ):
            return ""
        if item.status == ToolCardStatus.RUNNING:
            return _tr("This call has no result yet: continue from here once it has one.")
        return _tr(
            "This call's outcome is unknown, so there is no point after it to continue from. "
            "Settle it first (say whether it ran, on this card), or continue from an earlier "
            "point."
        )

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.ContextMenu and isinstance(watched, QWidget):
            item_id = self._item_of(watched)
            if item_id is not None and isinstance(event, QContextMenuEvent):
                menu = self.context_menu_for(item_id, watched)
                menu.exec(event.globalPos())
                menu.deleteLater()
                return True
        return super().eventFilter(watched, event)

    def _item_of(self, widget: QWidget) -> str | None:
        current: QWidget | None = widget
        while current is not None and current is not self:
            value = current.property(_ITEM_PROPERTY)
            if isinstance(value, str) and value in self._items:
                return value
            current = current.parentWidget()
        return None

    def set_session_open(self, is_open: bool) -> None:
        """The demo hint is for an open, empty session; with no session open it stays hidden
        (the header says how to open or start one)."""
        self._session_open = is_open
        self._update_chrome()

    def _update_chrome(self) -> None:
        self.placeholder.setVisible(not self._order and self._session_open)
        self.earlier_button.setVisible(self._live_from > 0)
        self.earlier_button.setText(
            _tr("Show {count} earlier items").replace(
                "{count}", str(min(PAGE_ITEMS, self._live_from))
            )
        )
        self.omitted_label.setVisible(self._omitted_earlier > 0 and self._live_from == 0)
        self.omitted_label.setText(
            _tr("{count} earlier items are not shown.").replace(
                "{count}", str(self._omitted_earlier)
            )
        )
