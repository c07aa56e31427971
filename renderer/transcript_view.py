"""The transcript: a scrolling column of item widgets, updated in place by ``itemId``.

Why keyed by ``itemId``: the main process re-sends an item when it changes (a tool card moving
from running to done, an assistant message growing while it streams); replacing in place keeps
the reader's scroll position and avoids rebuilding thousands of widgets per update. The view
follows new items only while the reader is already at the bottom.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QVBoxLayout, QWidget

from app.bridge_contract import TranscriptItem
from renderer.transcript_items import ItemWidget, widget_for

FOLLOW_SLACK_PX = 48


def _tr(text: str) -> str:
    return QCoreApplication.translate("Transcript", text)


class TranscriptView(QScrollArea):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("TranscriptView")
        self.setAccessibleName(_tr("Transcript"))
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._page = QWidget()
        self._page.setObjectName("TranscriptPage")
        self._column = QVBoxLayout(self._page)
        self._column.setContentsMargins(20, 16, 20, 16)
        self._column.setSpacing(10)
        self.placeholder = QLabel(_tr("No messages yet. Write one below to start."))
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setEnabled(False)
        self.omitted_label = QLabel()
        self.omitted_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.omitted_label.setEnabled(False)
        self.omitted_label.setVisible(False)
        self._column.addWidget(self.omitted_label)
        self._column.addWidget(self.placeholder)
        self._column.addStretch(1)
        self.setWidget(self._page)
        self._follow = True
        bar = self.verticalScrollBar()
        bar.rangeChanged.connect(self._on_range_changed)
        bar.valueChanged.connect(self._on_scrolled)
        self._widgets: dict[str, ItemWidget] = {}
        self._types: dict[str, str] = {}
        self._order: list[str] = []

    # ----------------------------------------------------------------- public

    def clear(self) -> None:
        for widget in self._widgets.values():
            self._column.removeWidget(widget)
            widget.deleteLater()
        self._widgets.clear()
        self._types.clear()
        self._order.clear()
        self.omitted_label.setVisible(False)
        self.placeholder.setVisible(True)

    def set_items(self, items: Sequence[TranscriptItem], omitted_earlier: int = 0) -> None:
        """Show a freshly opened session's items and scroll to the newest."""
        self.setUpdatesEnabled(False)
        try:
            self.clear()
            if omitted_earlier:
                self.omitted_label.setText(
                    _tr("{count} earlier items are not shown.").replace(
                        "{count}", str(omitted_earlier)
                    )
                )
                self.omitted_label.setVisible(True)
            for item in items:
                self._apply(item)
        finally:
            self.setUpdatesEnabled(True)
        self._follow = True
        self.scroll_to_bottom()

    def apply_item(self, item: TranscriptItem) -> None:
        """Add ``item``, or replace the shown item with the same ``itemId``. The view keeps
        following the newest item while the reader has not scrolled up."""
        self._apply(item)

    @property
    def following(self) -> bool:
        return self._follow

    def item_widget(self, item_id: str) -> ItemWidget | None:
        return self._widgets.get(item_id)

    def item_ids(self) -> list[str]:
        return list(self._order)

    def in_continuation(self, item_id: str) -> bool:
        """Whether ``item_id`` comes after a continuation marker (belongs to a resumed run)."""
        seen_marker = False
        for shown in self._order:
            if self._types[shown] == "continuation_marker":
                seen_marker = True
            if shown == item_id:
                return seen_marker and self._types[shown] != "continuation_marker"
        return False

    def scroll_to_bottom(self) -> None:
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    # ----------------------------------------------------------------- internals

    def _on_range_changed(self, _minimum: int, maximum: int) -> None:
        if self._follow:
            self.verticalScrollBar().setValue(maximum)

    def _on_scrolled(self, value: int) -> None:
        self._follow = value >= self.verticalScrollBar().maximum() - FOLLOW_SLACK_PX

    def _apply(self, item: TranscriptItem) -> None:
        existing = self._widgets.get(item.item_id)
        if existing is not None and self._types[item.item_id] == item.type:
            existing.update_item(item)
            return
        widget = widget_for(item)
        if existing is not None:
            index = self._column.indexOf(existing)
            self._column.removeWidget(existing)
            existing.deleteLater()
        else:
            index = self._column.count() - 1  # before the closing stretch
            self._order.append(item.item_id)
        self._column.insertWidget(index, widget)
        self._widgets[item.item_id] = widget
        self._types[item.item_id] = item.type
        self.placeholder.setVisible(False)
