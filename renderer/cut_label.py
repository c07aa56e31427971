"""A word-wrapped label whose last line ends with "…" when its height cuts the text short.

Why: the banner shows at most two lines of its running text until the reader asks for More; a
plain QLabel held to that height just stops drawing, mid-sentence and with nothing to say that
more follows. This label draws the lines that fit, its last one shortened with "…". Its text
stays whole (``text()``), for More and for anything that reads it.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import (
    QFontMetrics,
    QFontMetricsF,
    QPainter,
    QPaintEvent,
    QTextLayout,
    QTextOption,
)
from PySide6.QtWidgets import QLabel

ELLIPSIS = "…"
_LINE_SEPARATOR = "\u2028"  # how Qt lays out a line break inside a paragraph


class CutLabel(QLabel):
    def shown_text(self) -> str:
        """The text as drawn at the current size: whole, or the lines that fit with "…"."""
        text = self.text()
        rect = self.contentsRect()
        if not text or not self.wordWrap() or rect.width() <= 0 or rect.height() <= 0:
            return text
        starts, fitting = self._lines(text, rect.width(), rect.height())
        if fitting >= len(starts):
            return text
        start = starts[max(fitting, 1) - 1]
        rest = text[start:].replace("\n", " ")
        last = QFontMetrics(self.font()).elidedText(rest, Qt.TextElideMode.ElideRight, rect.width())
        if last == rest:  # (the rest fits on the line once its breaks are spaces)
            return text
        return text[:start] + last

    def _lines(self, text: str, width: int, height: int) -> tuple[list[int], int]:
        """Where each wrapped line starts, and how many lines fit in ``height``: laid out as
        Qt lays out a label's plain text (word wrap, the font's leading between lines)."""
        layout = QTextLayout(text.replace("\n", _LINE_SEPARATOR), self.font())
        option = QTextOption()
        option.setWrapMode(QTextOption.WrapMode.WordWrap)
        layout.setTextOption(option)
        leading = QFontMetricsF(self.font()).leading()
        starts: list[int] = []
        fitting = 0
        bottom = -leading
        layout.beginLayout()
        while True:
            line = layout.createLine()
            if not line.isValid():
                break
            line.setLineWidth(width)
            bottom += leading
            line.setPosition(QPointF(0, bottom))
            bottom += line.height()
            starts.append(line.textStart())
            if bottom <= height + 0.5:
                fitting += 1
        layout.endLayout()
        return starts, fitting

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        shown = self.shown_text()
        if shown == self.text():
            super().paintEvent(event)
            return
        painter = QPainter(self)
        flags = self.alignment().value | Qt.TextFlag.TextWordWrap.value
        self.style().drawItemText(
            painter,
            self.contentsRect(),
            flags,
            self.palette(),
            self.isEnabled(),
            shown,
            self.foregroundRole(),
        )
