"""A container that sizes itself to its content's height for its current width.

Why: a box layout hands word-wrapped labels less height than they need when space is short
(lines overlap) and re-measures every label on every change (slow in long columns). A measured
row tells its parent one fixed height, recomputed only when its own content or width changes,
so wrapped text is never clipped and a change costs one measurement.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QMargins
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QVBoxLayout, QWidget


class MeasuredRow(QWidget):
    def __init__(self, content: QWidget, width: int = -1, margins: QMargins | None = None) -> None:
        super().__init__()
        self.content = content
        layout = QVBoxLayout(self)
        layout.setContentsMargins(margins or QMargins(0, 0, 0, 0))
        layout.addWidget(content)
        self._measured_width = -1
        self.fit(width)

    def hasHeightForWidth(self) -> bool:  # noqa: N802 (Qt override)
        return False  # the parent layout must not re-measure us; fit() does

    def fit(self, width: int) -> None:
        layout = self.layout()
        if width <= 0 or layout is None:
            return
        self._measured_width = width
        height = layout.totalHeightForWidth(width)
        if height < 0:
            height = layout.totalSizeHint().height()
        height = max(height, 0)
        if height != self.minimumHeight() or height != self.maximumHeight():
            self.setFixedHeight(height)

    def event(self, event: QEvent) -> bool:
        handled = super().event(event)
        if event.type() in (QEvent.Type.LayoutRequest, QEvent.Type.Show):
            self.fit(self.width() if self.width() > 0 else self._measured_width)
            self._place_content()
        return handled

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        if event.size().width() != self._measured_width:
            self.fit(event.size().width())
        self._place_content()

    def _place_content(self) -> None:
        """Lay the content out for our current size. A layout that was first activated while
        this row was hidden does not follow later resizes by itself."""
        layout = self.layout()
        if layout is not None and layout.geometry() != self.rect():
            layout.setGeometry(self.rect())
