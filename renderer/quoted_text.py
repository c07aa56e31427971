"""Assistant text that quotes command output or a file: fenced blocks (```) are shown in the
monospace font, without the fence lines, so columns and indentation read as they were printed.

Why fences: they are how models (and the offline demo) mark quoted output; prose around them keeps
the reading font. An unclosed fence (a message still streaming) runs to the end of the text.
"""

from __future__ import annotations

from PySide6.QtGui import QTextCharFormat, QTextCursor, QTextDocument

from app.visible_text import visible
from renderer import theme

FENCE = "```"


def split_quoted(text: str) -> tuple[str, list[tuple[int, int]]]:
    """The text to show (fence lines removed, control characters made visible) and the spans
    of it that are quoted output, as (start, end) character offsets."""
    shown: list[str] = []
    spans: list[tuple[int, int]] = []
    length = 0
    quoting = False
    start = 0
    for line in text.splitlines(keepends=True):
        if line.strip().startswith(FENCE):
            if quoting:
                spans.append((start, length))
            else:
                start = length
            quoting = not quoting
            continue
        piece = visible(line)
        shown.append(piece)
        length += len(piece)
    if quoting:
        spans.append((start, length))
    display = "".join(shown)
    if display.endswith("\n") and not text.endswith("\n"):
        display = display[:-1]  # the closing fence's line break is not the message's
    return display, [(a, min(b, len(display))) for a, b in spans if a < min(b, len(display))]


def apply_quoted_format(document: QTextDocument, spans: list[tuple[int, int]]) -> None:
    """Reset the document to the reading font, then set the quoted spans in monospace."""
    whole = QTextCursor(document)
    whole.select(QTextCursor.SelectionType.Document)
    plain = QTextCharFormat()
    plain.setFontFamilies(document.defaultFont().families())
    plain.setFontFixedPitch(False)
    whole.setCharFormat(plain)
    mono = QTextCharFormat()
    mono.setFontFamilies(theme.monospace_font().families())
    mono.setFontFixedPitch(True)
    for start, end in spans:
        cursor = QTextCursor(document)
        cursor.setPosition(start)
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        cursor.mergeCharFormat(mono)
