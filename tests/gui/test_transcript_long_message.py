"""A very long message stays inside its card: the items below it never sit over its text.

A message just short of being collapsed is a few thousand px tall (a 90,000-character one was
~10,000 px before long messages were collapsed). The column used to place its rows for the new
height one pass of the event loop before the scrolled page grew to hold them, so a paint in
between showed the next cards on top of the message's text (and the text running past them).
"""

from __future__ import annotations

import itertools

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtGui import QTextOption
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.transcript_items import COLLAPSE_CHARS, MessageWidget
from renderer.transcript_view import TranscriptView

pytestmark = pytest.mark.gui

LONG_TEXT = " ".join(f"word{i:05d}" for i in range(20_000))[: COLLAPSE_CHARS - 10]


def _items() -> list[bc.TranscriptItem]:
    return [
        bc.UserMessageItem(item_id="u0", text="hello"),
        bc.AssistantMessageItem(item_id="a0", text="Hi."),
        bc.UserMessageItem(item_id="u", text=LONG_TEXT),
        bc.AssistantMessageItem(item_id="a", text="After the long message."),
        bc.NoticeItem(item_id="n", level=bc.NoticeLevel.INFO, text="A notice below."),
    ]


def _rows(view: TranscriptView) -> list[tuple[str, QWidget]]:
    rows: list[tuple[str, QWidget]] = []
    for item_id in view.item_ids():
        widget = view.item_widget(item_id)
        assert widget is not None
        row = widget.parentWidget()
        assert row is not None
        rows.append((item_id, row))
    return rows


def _assert_nothing_overlaps(view: TranscriptView) -> None:
    page = view.widget()
    assert page is not None
    rows = _rows(view)
    for (above_id, above), (below_id, below) in itertools.pairwise(rows):
        assert above.geometry().bottom() < below.geometry().top(), (
            f"{below_id} (top {below.geometry().top()}) sits over {above_id} "
            f"(bottom {above.geometry().bottom()})"
        )
    for item_id, row in rows:
        assert row.geometry().bottom() < page.height(), f"{item_id} runs past the page"
        assert row.width() <= view.viewport().width(), item_id
    last_bottom = rows[-1][1].geometry().bottom()
    assert page.height() <= max(view.viewport().height(), last_bottom + 40), (
        f"the page ({page.height()} px) runs far past its last item ({last_bottom}): blank space"
    )
    message = view.item_widget("u")
    assert isinstance(message, MessageWidget)
    text = message.text_label
    bottom = text.mapTo(message, QPoint(0, text.height())).y()
    assert bottom <= message.height(), "the message's text runs past its card"
    assert text.height() >= text.heightForWidth(text.width()), "the text is cut"


@pytest.mark.parametrize("arrival", ["opened", "streamed"])
def test_a_message_short_of_collapsing_stays_inside_its_card(qtbot: QtBot, arrival: str) -> None:
    view = TranscriptView()
    qtbot.addWidget(view)
    view.resize(700, 500)
    with qtbot.waitExposed(view):
        view.show()
    if arrival == "opened":
        view.set_items(_items())
    else:
        view.set_items(_items()[:2])
        QApplication.processEvents()
        for item in _items()[2:]:
            view.apply_item(item)
        view.flush()
    QApplication.processEvents()  # one pass: what the next paint shows
    _assert_nothing_overlaps(view)
    message = view.item_widget("u")
    assert isinstance(message, MessageWidget) and not message.collapsed
    assert view.verticalScrollBar().maximum() > 1_000
    # and it stays so once everything has settled, at the bottom as at the top
    qtbot.wait(50)
    _assert_nothing_overlaps(view)
    view.verticalScrollBar().setValue(0)
    QApplication.processEvents()
    _assert_nothing_overlaps(view)


def test_the_page_follows_a_message_that_grows_past_the_window(qtbot: QtBot) -> None:
    view = TranscriptView()
    qtbot.addWidget(view)
    view.resize(700, 500)
    with qtbot.waitExposed(view):
        view.show()
    items = _items()
    view.set_items([items[0], items[1], bc.UserMessageItem(item_id="u", text="short"), *items[3:]])
    QApplication.processEvents()
    _assert_nothing_overlaps(view)
    view.apply_item(items[2])  # the same item, now thousands of characters long
    view.flush()
    QApplication.processEvents()
    _assert_nothing_overlaps(view)


@pytest.mark.timeout(60)
def test_a_90000_character_unbroken_run_is_laid_out_without_freezing(qtbot: QtBot) -> None:
    """Breaking at a word boundary "or anywhere" costs Qt time in the square of the longest
    word (20,000 characters: over a second per measurement, 90,000: minutes of a frozen
    window). A text holding a run that long is broken anywhere: the same lines for the run,
    and copying still gives the exact text."""
    view = TranscriptView()
    qtbot.addWidget(view)
    view.resize(700, 500)
    with qtbot.waitExposed(view):
        view.show()
    blob = "x" * 90_000
    view.set_items([bc.UserMessageItem(item_id="u", text=f"here it is: {blob} thanks")])
    QApplication.processEvents()
    message = view.item_widget("u")
    assert isinstance(message, MessageWidget)
    assert message.collapsed
    text = message.text_label
    assert len(text.text()) <= 2_010, "collapsed: only the beginning is laid out"
    assert message.full_text == f"here it is: {blob} thanks"
    message.set_expanded(True)
    QApplication.processEvents()
    assert message.full_view is not None
    assert message.full_view.wordWrapMode() == QTextOption.WrapMode.WrapAnywhere
    assert message.full_view.toPlainText() == f"here it is: {blob} thanks"
    view.apply_item(bc.UserMessageItem(item_id="u", text="short again"))
    view.flush()
    assert not message.collapsed and not message.full_view.isVisible()
    assert text.wordWrapMode() == QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere
    assert text.text() == "short again"
