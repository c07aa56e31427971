"""Canary for the PySide6 6.12.0 reference-count bug (pyside6-notes.md section 6).

On 6.12.0 with Python 3.11 every void Qt call drops a reference to ``None`` and the interpreter
aborts after a few thousand calls. The project pins ``<6.12``; this test fails if that pin is
ever lifted onto a broken release.
"""

from __future__ import annotations

import sys

import pytest
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="None is immortal on 3.12+")
def test_void_calls_do_not_leak_none_refs(qtbot: QtBot) -> None:
    label = QLabel()
    qtbot.addWidget(label)
    before = sys.getrefcount(None)
    for _ in range(2000):
        label.setText("x")
    assert abs(sys.getrefcount(None) - before) < 100
