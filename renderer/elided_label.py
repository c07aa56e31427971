"""A one-line label that shortens its text with "…" to the width it gets, never the reverse.

Why: a plain QLabel asks for the width of its whole text, so one long session title or folder
path widens the header, squeezes the session list and pushes text out of view. This label asks
for no width at all, draws as much of the text as fits with an ellipsis, and shows the whole
text as its tooltip when it had to shorten it; its context menu copies the whole text.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QSize, Qt
from PySide6.QtGui import QAction, QGuiApplication, QPainter, QPaintEvent, QResizeEvent
from PySide6.QtWidgets import QSizePolicy, QWidget

from renderer.plain_tip import plain_tip


class ElidedLabel(QWidget):
    def __init__(
        self, mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self._text = ""
        self._mode = mode
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        copy = QAction(QCoreApplication.translate("ElidedLabel", "Copy"), self)
        copy.triggered.connect(lambda: QGuiApplication.clipboard().setText(self._text))
        self.addAction(copy)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)

    def text(self) -> str:
        return self._text

    def setText(self, text: str) -> None:  # noqa: N802 (the QLabel name)
        self._text = text
        self.setAccessibleName(text)
        self.updateGeometry()
        self._update_tooltip()
        self.update()

    def shown_text(self) -> str:
        """The text as drawn at the current width."""
        return self.fontMetrics().elidedText(self._text, self._mode, max(self.width(), 0))

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        metrics = self.fontMetrics()
        return QSize(metrics.horizontalAdvance(self._text), metrics.height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(0, self.fontMetrics().height())

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._update_tooltip()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self.updateGeometry()

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        painter = QPainter(self)
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(
            self.rect(),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            self.shown_text(),
        )

    def _update_tooltip(self) -> None:
        self.setToolTip(plain_tip(self._text) if self.shown_text() != self._text else "")
