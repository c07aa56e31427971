"""A message over the limit is never silently unsendable: the composer shows the limit and the
count, and says why Send is off; back under the limit, Send works again."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from app.bridge_contract import MAX_TEXT_CHARS
from renderer.composer import Composer

pytestmark = pytest.mark.gui


def test_a_message_over_the_limit_says_why_send_is_off(qtbot: QtBot) -> None:
    composer = Composer()
    qtbot.addWidget(composer)
    composer.show()
    sent: list[str] = []
    composer.send_requested.connect(sent.append)
    composer.editor.setPlainText("x" * (MAX_TEXT_CHARS + 1_234))
    assert not composer.send_button.isEnabled()
    note = composer.limit_note
    assert composer.limit_label.isVisible()
    assert f"{MAX_TEXT_CHARS + 1_234:,} characters" in note
    assert f"at most {MAX_TEXT_CHARS:,}" in note
    assert "by 1,234" in note
    assert composer.send_button.toolTip() == note
    composer.editor.setFocus()
    QTest.keyClick(composer.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert sent == [], "Ctrl+Enter sends nothing, and the reason stays in view"
    assert composer.limit_note == note

    composer.editor.setPlainText("x" * MAX_TEXT_CHARS)
    assert composer.send_button.isEnabled()
    assert composer.limit_note == "" and not composer.limit_label.isVisible()
    assert composer.send_button.toolTip() == "Send (Ctrl+Enter)"
    composer.submit()
    assert sent == ["x" * MAX_TEXT_CHARS]


def test_the_limit_note_leaves_a_refusal_note_alone(qtbot: QtBot) -> None:
    composer = Composer()
    qtbot.addWidget(composer)
    composer.show()
    composer.give_back("hello", "Not sent: the host is busy.")
    composer.editor.setPlainText("x" * (MAX_TEXT_CHARS + 1))
    assert composer.note == "Not sent: the host is busy."
    assert composer.limit_note.startswith("Too long to send")
