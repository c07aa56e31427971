"""Long content never freezes the window: a message longer than a few screens shows its first
lines and "Show all"; the whole text is laid out only in a scrolling view the reader asks for,
and a text is measured once per width."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.transcript_items import (
    COLLAPSED_CHARS,
    COLLAPSED_LINES,
    MessageWidget,
    WrappingText,
)
from renderer.transcript_view import TranscriptView

pytestmark = pytest.mark.gui

LOG = "".join(
    f"2026-11-30T10:00:{i % 60:02d}Z INFO request {i} served in 3 ms\n" for i in range(4_000)
)[:190_000]
LINE = "0123456789abcdef" * 12_000  # one 192,000-character line


def _view(qtbot: QtBot, items: list[bc.TranscriptItem]) -> TranscriptView:
    view = TranscriptView()
    qtbot.addWidget(view)
    view.resize(700, 500)
    with qtbot.waitExposed(view):
        view.show()
    view.set_items(items)
    QApplication.processEvents()
    return view


@pytest.mark.timeout(120)
@pytest.mark.parametrize("text", [LOG, LINE], ids=["log lines", "one long line"])
def test_a_190_kb_message_shows_its_first_lines_and_show_all(qtbot: QtBot, text: str) -> None:
    view = _view(
        qtbot,
        [
            bc.UserMessageItem(item_id="u", text=text),
            bc.AssistantMessageItem(item_id="a", text="Looked."),
        ],
    )
    message = view.item_widget("u")
    assert isinstance(message, MessageWidget)
    assert message.collapsed
    shown = message.text_label.document().toPlainText()
    assert len(shown) <= COLLAPSED_CHARS + 2 and shown.count("\n") <= COLLAPSED_LINES
    assert text.startswith(shown.removesuffix("\n…"))
    assert message.expand_button.isVisible()
    assert message.expand_button.text().startswith("Show all (")
    assert f"{len(text):,} characters" in message.expand_button.text()
    assert message.full_view is None, "the whole text is not laid out until asked for"

    message.expand_button.click()
    QApplication.processEvents()
    assert not message.collapsed
    assert message.full_view is not None and message.full_view.isVisible()
    assert message.full_view.toPlainText() == text
    assert not message.text_label.isVisible()
    assert message.expand_button.text() == "Show less"
    lines = message.full_view.height() // message.full_view.fontMetrics().lineSpacing()
    assert lines <= 40, "the whole text scrolls inside a capped view"

    message.expand_button.click()
    QApplication.processEvents()
    assert message.collapsed and not message.full_view.isVisible()
    assert message.text_label.isVisible()


def test_a_message_of_a_few_screens_is_not_collapsed(qtbot: QtBot) -> None:
    text = "\n".join(f"line {i}" for i in range(100))
    view = _view(qtbot, [bc.UserMessageItem(item_id="u", text=text)])
    message = view.item_widget("u")
    assert isinstance(message, MessageWidget)
    assert not message.collapsed and not message.expand_button.isVisible()
    assert message.text_label.text() == text


def test_a_reply_streamed_past_the_limit_collapses_and_keeps_growing_behind_show_all(
    qtbot: QtBot,
) -> None:
    view = _view(qtbot, [bc.AssistantMessageItem(item_id="a", text="Reading.\n")])
    for size in (1_000, 3_000, 4_000):
        view.apply_item(bc.AssistantMessageItem(item_id="a", text="Reading.\n" + LOG[: size * 10]))
        view.flush()
    message = view.item_widget("a")
    assert isinstance(message, MessageWidget)
    assert message.collapsed
    head = message.text_label.text()
    message.set_expanded(True)
    view.apply_item(bc.AssistantMessageItem(item_id="a", text="Reading.\n" + LOG[:50_000]))
    view.flush()
    assert message.full_view is not None
    assert message.full_view.toPlainText() == "Reading.\n" + LOG[:50_000]
    assert message.text_label.text() == head


def test_text_is_measured_once_per_width(qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    measured: list[int] = []
    original = WrappingText._measure

    def counting(self: WrappingText, width: int) -> int:
        measured.append(width)
        return original(self, width)

    monkeypatch.setattr(WrappingText, "_measure", counting)
    text = WrappingText("a few words that wrap " * 40)
    qtbot.addWidget(text)
    first = text.heightForWidth(300)
    assert text.heightForWidth(300) == first and text.heightForWidth(600) < first
    assert text.heightForWidth(300) == first
    assert measured == [300, 600]
    text.setText("other words " * 10)
    assert text.heightForWidth(300) < first
    assert measured == [300, 600, 300], "a new text is measured again"
