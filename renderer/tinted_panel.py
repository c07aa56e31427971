"""A rounded panel painted in given colours (banner, tool cards, notices).

Why painted instead of a style sheet: a style sheet that sets a widget's background also pins
that widget's palette, so later OS light/dark switches stop reaching it. Painting keeps the
palette inherited, and owners recompute the colours on every palette change.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QRectF, Signal
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPaintEvent, QPen
from PySide6.QtWidgets import QFrame, QWidget

ACCENT_WIDTH = 4.0
RADIUS = 6.0


class TintedPanel(QFrame):
    shown_changed = Signal(bool)
    """Emitted when the owner shows or hides the panel, so a margin holder can follow."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._fill = QColor()
        self._border = QColor()
        self._accent: QColor | None = None

    def set_colours(self, fill: QColor, border: QColor, accent: QColor | None = None) -> None:
        self._fill = QColor(fill)
        self._border = QColor(border)
        self._accent = QColor(accent) if accent is not None else None
        self.update()

    def setVisible(self, visible: bool) -> None:  # noqa: N802 (Qt override)
        changed = visible == self.isHidden()
        super().setVisible(visible)
        if changed:
            self.shown_changed.emit(visible)

    def refresh_colours(self) -> None:
        """Recompute colours from ``self.palette()``; called on every palette change."""

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self.refresh_colours()

    @property
    def fill(self) -> QColor:
        return QColor(self._fill)

    @property
    def accent(self) -> QColor | None:
        return QColor(self._accent) if self._accent is not None else None

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        if not self._fill.isValid():
            super().paintEvent(event)
            return
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        path = QPainterPath()
        path.addRoundedRect(rect, RADIUS, RADIUS)
        painter.fillPath(path, self._fill)
        if self._accent is not None:
            painter.save()
            painter.setClipPath(path)
            painter.fillRect(
                QRectF(rect.left(), rect.top(), ACCENT_WIDTH, rect.height()), self._accent
            )
            painter.restore()
        painter.setPen(QPen(self._border, 1.0))
        painter.drawPath(path)
        painter.end()
