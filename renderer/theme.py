"""Colours and fonts that follow the OS palette.

Why computed rather than fixed: the window follows the system's light or dark palette, so a
severity colour is an accent (border, dot, chip) and every background is that accent blended
into the current window colour. Text keeps the palette's own text colour, which stays readable
in both schemes.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QFont, QFontDatabase, QPalette
from PySide6.QtWidgets import QApplication

from renderer.park_text import Severity

_ACCENTS_LIGHT = {
    Severity.INFO: "#2563c9",
    Severity.WARN: "#b26a00",
    Severity.ERROR: "#c42b2b",
}
_ACCENTS_DARK = {
    Severity.INFO: "#6ea8ff",
    Severity.WARN: "#f0b03c",
    Severity.ERROR: "#ff7b72",
}
SUCCESS_LIGHT = "#1f7a3a"
SUCCESS_DARK = "#56d364"
MIN_POINT_SIZE = 10


def is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def accent(severity: Severity, palette: QPalette) -> QColor:
    table = _ACCENTS_DARK if is_dark(palette) else _ACCENTS_LIGHT
    return QColor(table[severity])


def success(palette: QPalette) -> QColor:
    return QColor(SUCCESS_DARK if is_dark(palette) else SUCCESS_LIGHT)


def blend(top: QColor, base: QColor, amount: float) -> QColor:
    """``amount`` of ``top`` over ``base`` (0 = base, 1 = top)."""
    return QColor(
        round(base.red() + (top.red() - base.red()) * amount),
        round(base.green() + (top.green() - base.green()) * amount),
        round(base.blue() + (top.blue() - base.blue()) * amount),
    )


def tinted_background(color: QColor, palette: QPalette) -> QColor:
    base = palette.color(QPalette.ColorRole.Window)
    return blend(color, base, 0.20 if is_dark(palette) else 0.10)


def subtle_border(palette: QPalette) -> QColor:
    return blend(
        palette.color(QPalette.ColorRole.WindowText),
        palette.color(QPalette.ColorRole.Window),
        0.18,
    )


def muted_text(palette: QPalette) -> QColor:
    return blend(
        palette.color(QPalette.ColorRole.WindowText),
        palette.color(QPalette.ColorRole.Window),
        0.68,
    )


def monospace_font() -> QFont:
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    font.setPointSizeF(max(font.pointSizeF(), MIN_POINT_SIZE - 0.5))
    return font


def apply_readable_font(app: QApplication) -> None:
    """Never smaller than 10 pt: the offscreen/Xvfb default is 9 pt, which reads small."""
    font = app.font()
    if font.pointSizeF() < MIN_POINT_SIZE:
        font.setPointSizeF(MIN_POINT_SIZE)
        app.setFont(font)
