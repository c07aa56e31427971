"""Tooltips that show their text as it is.

Qt reads a tooltip as rich text when it looks like markup (``Qt.mightBeRichText``: a tag before
the first line break). A tooltip repeating a park's note, a reason or a folder names commands
and files the user did not write: ``echo "<h1>hi</h1>" > index.html`` would show as a heading
without its tags, and a file named ``a<b>c.txt`` as ``a`` and a bold ``c.txt``. ``plain_tip``
leaves ordinary text as it is and turns text that Qt would misread into escaped rich text whose
lines and spaces are kept, so what the tooltip shows is the text.
"""

from __future__ import annotations

import html

from PySide6.QtGui import Qt


def plain_tip(text: str) -> str:
    if not text or not Qt.mightBeRichText(text):
        return text
    # Line breaks as ``<br>``: a paragraph drops its first and last newline, even pre-wrap.
    escaped = html.escape(text, quote=False).replace("\n", "<br>")
    return f'<qt><p style="white-space:pre-wrap">{escaped}</p></qt>'
