"""The transcript: every item kind, in-place updates by itemId, following new items."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.park_text import describe
from renderer.transcript_items import (
    ContinuationMarkerWidget,
    MessageWidget,
    NoticeWidget,
    ThinkingWidget,
    ToolCardWidget,
)
from renderer.transcript_view import MAX_LIVE_ITEMS, TranscriptView

pytestmark = pytest.mark.gui


def _view(qtbot: QtBot) -> TranscriptView:
    view = TranscriptView()
    qtbot.addWidget(view)
    view.resize(700, 400)
    with qtbot.waitExposed(view):
        view.show()
    return view


def _shown(widget: QWidget) -> bool:
    """Visible once the event loop has run (children added to a shown parent show lazily)."""
    QApplication.processEvents()
    return widget.isVisible()


def _card(item_id: str, status: bc.ToolCardStatus, **extra: str) -> bc.ToolCardItem:
    return bc.ToolCardItem(
        item_id=item_id,
        tool_call_id=f"call_{item_id}",
        tool_name="write_file",
        args_summary='path="hello.txt"',
        status=status,
        **extra,
    )


def _tool(view: TranscriptView, item_id: str) -> ToolCardWidget:
    widget = view.item_widget(item_id)
    assert isinstance(widget, ToolCardWidget)
    return widget


def test_every_item_kind_gets_its_widget(qtbot: QtBot) -> None:
    view = _view(qtbot)
    assert _shown(view.placeholder)
    items: list[bc.TranscriptItem] = [
        bc.UserMessageItem(item_id="u", text="write hello.txt saying hi"),
        bc.ThinkingItem(item_id="t", text="I will call write_file."),
        _card("c", bc.ToolCardStatus.SUCCEEDED, result_summary="wrote 3 bytes"),
        bc.AssistantMessageItem(item_id="a", text="Done."),
        bc.NoticeItem(item_id="n", level=bc.NoticeLevel.WARN, text="Maka restarted."),
        bc.ContinuationMarkerItem(item_id="m", run_id="run-2", source_run_id="run-1"),
    ]
    view.set_items(items, omitted_earlier=5)
    assert view.item_ids() == ["u", "t", "c", "a", "n", "m"]
    assert not _shown(view.placeholder)
    assert _shown(view.omitted_label) and "5" in view.omitted_label.text()
    kinds = [type(view.item_widget(i)) for i in view.item_ids()]
    assert kinds == [
        MessageWidget,
        ThinkingWidget,
        ToolCardWidget,
        MessageWidget,
        NoticeWidget,
        ContinuationMarkerWidget,
    ]
    user = view.item_widget("u")
    assert isinstance(user, MessageWidget) and user.role_label.text() == "You"
    assistant = view.item_widget("a")
    assert isinstance(assistant, MessageWidget) and assistant.role_label.text() == "Maka"
    card = _tool(view, "c")
    assert card.name_label.text() == "write_file"
    assert card.args_label.text() == 'path="hello.txt"'
    assert card.chip.text() == "Done"
    assert card.result_label.text() == "wrote 3 bytes"
    assert not _shown(card.explanation_label)


def test_thinking_starts_collapsed_and_expands(qtbot: QtBot) -> None:
    view = _view(qtbot)
    view.set_items([bc.ThinkingItem(item_id="t", text="private reasoning")])
    thinking = view.item_widget("t")
    assert isinstance(thinking, ThinkingWidget)
    assert not _shown(thinking.body_label)
    row = thinking.parentWidget()
    assert row is not None
    collapsed = row.height()
    QTest.mouseClick(thinking.toggle, Qt.MouseButton.LeftButton)
    assert _shown(thinking.body_label)
    assert thinking.body_label.text() == "private reasoning"
    qtbot.waitUntil(lambda: row.height() > collapsed)  # the measured row grows with its content


@pytest.mark.parametrize(
    ("status", "chip", "explains"),
    [
        (bc.ToolCardStatus.RUNNING, "Running…", None),
        (bc.ToolCardStatus.FAILED, "Failed", None),
        (bc.ToolCardStatus.INDETERMINATE, "Outcome unknown", "cannot tell whether"),
        (bc.ToolCardStatus.NOT_DISPATCHED, "Not run", "never started"),
        (bc.ToolCardStatus.COMPLETED_AFTER_RECOVERY, "Completed after recovery", "restart"),
    ],
)
def test_tool_card_status_copy(
    qtbot: QtBot, status: bc.ToolCardStatus, chip: str, explains: str | None
) -> None:
    view = _view(qtbot)
    view.set_items([_card("c", status)])
    card = _tool(view, "c")
    assert card.chip.text() == chip
    if explains is None:
        assert not _shown(card.explanation_label)
    else:
        assert _shown(card.explanation_label)
        assert explains in card.explanation_label.text()


def test_unusual_cards_get_an_accent_and_normal_ones_do_not(qtbot: QtBot) -> None:
    view = _view(qtbot)
    view.set_items(
        [_card("ok", bc.ToolCardStatus.SUCCEEDED), _card("odd", bc.ToolCardStatus.INDETERMINATE)]
    )
    assert _tool(view, "ok").accent is None
    assert _tool(view, "odd").accent is not None


def test_parked_card_names_its_reason_in_words(qtbot: QtBot) -> None:
    view = _view(qtbot)
    view.set_items(
        [_card("p", bc.ToolCardStatus.PARKED, park_reason="reconcile_matches_prior_state")]
    )
    text = _tool(view, "p").explanation_label.text()
    assert describe("reconcile_matches_prior_state").sentence in text
    assert "reconcile_matches_prior_state" not in text


def test_an_item_with_a_known_id_is_updated_in_place(qtbot: QtBot) -> None:
    view = _view(qtbot)
    view.set_items([bc.UserMessageItem(item_id="u", text="go")])
    view.apply_item(_card("c", bc.ToolCardStatus.RUNNING))
    running = _tool(view, "c")
    view.apply_item(_card("c", bc.ToolCardStatus.SUCCEEDED, result_summary="ok"))
    assert view.item_widget("c") is running, "same widget, new content"
    assert running.chip.text() == "Done" and running.result_label.text() == "ok"
    view.apply_item(bc.AssistantMessageItem(item_id="a", text="Wor"))
    view.apply_item(bc.AssistantMessageItem(item_id="a", text="Working on it"))
    assistant = view.item_widget("a")
    assert isinstance(assistant, MessageWidget)
    assert assistant.text_label.text() == "Working on it"
    assert view.item_ids() == ["u", "c", "a"]
    # an id that changes kind is replaced at the same position
    view.apply_item(bc.NoticeItem(item_id="c", text="replaced"))
    assert isinstance(view.item_widget("c"), NoticeWidget)
    assert view.item_ids() == ["u", "c", "a"]


def test_continuation_marks_what_follows(qtbot: QtBot) -> None:
    view = _view(qtbot)
    view.set_items(
        [
            bc.UserMessageItem(item_id="u", text="go"),
            bc.ContinuationMarkerItem(item_id="m", run_id="run-2", source_run_id="run-1"),
            bc.AssistantMessageItem(item_id="a", run_id="run-2", text="continuing"),
        ]
    )
    marker = view.item_widget("m")
    assert isinstance(marker, ContinuationMarkerWidget)
    assert "Safe resume" in marker.label.text()
    assert "run-2" in marker.toolTip() and "run-1" in marker.toolTip()
    assert not view.in_continuation("u")
    assert not view.in_continuation("m")
    assert view.in_continuation("a")
    assert marker.label.text() == "Continued with Safe resume after Maka stopped"
    # What the continuation followed: Maka stopping, the user's stop, or a failure.
    for after, words in (
        ("stop", "Continued with Safe resume after the stop"),
        ("failure", "Continued with Safe resume after the failure"),
    ):
        view.apply_item(
            bc.ContinuationMarkerItem(
                item_id="m", run_id="run-2", source_run_id="run-1", after=after
            )
        )
        shown = view.item_widget("m")
        assert isinstance(shown, ContinuationMarkerWidget) and shown.label.text() == words
    # Automatic resume started it (the ledger's word, carried by the item, whatever this
    # window saw at its start).
    view.apply_item(
        bc.ContinuationMarkerItem(
            item_id="m", run_id="run-2", source_run_id="run-1", automatic=True
        )
    )
    shown = view.item_widget("m")
    assert isinstance(shown, ContinuationMarkerWidget)
    assert shown.label.text() == "Continued by automatic resume after Maka stopped"


def test_text_is_never_interpreted_as_markup(qtbot: QtBot) -> None:
    view = _view(qtbot)
    hostile = '<a href="file:///etc/passwd">click</a><img src=x>'
    view.set_items(
        [
            bc.AssistantMessageItem(item_id="a", text=hostile),
            _card("c", bc.ToolCardStatus.SUCCEEDED, result_summary=hostile),
        ]
    )
    assistant = view.item_widget("a")
    assert isinstance(assistant, MessageWidget)
    assert assistant.text_label.text() == hostile
    # shown literally: markup would leave only "click" in the document
    assert assistant.text_label.document().toPlainText() == hostile
    assert _tool(view, "c").result_label.document().toPlainText() == hostile


def test_follows_new_items_only_while_at_the_bottom(qtbot: QtBot) -> None:
    view = _view(qtbot)
    view.set_items([bc.UserMessageItem(item_id=f"u{i}", text=f"message {i}") for i in range(30)])
    bar = view.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum())
    view.apply_item(bc.AssistantMessageItem(item_id="new", text="fresh"))
    qtbot.waitUntil(lambda: bar.value() == bar.maximum())
    bar.setValue(0)
    assert not view.following
    before = bar.maximum()
    for i in range(5):
        view.apply_item(bc.AssistantMessageItem(item_id=f"later{i}", text="more"))
    qtbot.waitUntil(lambda: bar.maximum() > before)
    QApplication.processEvents()
    assert bar.value() == 0, "a reader who scrolled up is not yanked down"


def test_streamed_deltas_are_coalesced_and_rows_follow_their_text(qtbot: QtBot) -> None:
    view = _view(qtbot)
    view.set_items([bc.UserMessageItem(item_id="u", text="go")])
    for n in range(1, 30):
        view.apply_item(bc.AssistantMessageItem(item_id="a", text="word " * n * 10))
    assert view.item_ids() == ["u", "a"]
    assistant = view.item_widget("a")
    assert isinstance(assistant, MessageWidget)
    assert assistant.text_label.text() == "word " * 290
    row = assistant.parentWidget()
    assert row is not None
    qtbot.waitUntil(lambda: row.height() == assistant.heightForWidth(row.width()) > 60)
    tall = row.height()
    view.apply_item(bc.AssistantMessageItem(item_id="a", text="short"))
    view.flush()
    qtbot.waitUntil(lambda: row.height() < tall)


def test_long_sessions_keep_only_the_newest_items_as_widgets(qtbot: QtBot) -> None:
    view = _view(qtbot)
    items = [bc.UserMessageItem(item_id=f"u{i}", text=f"m{i}") for i in range(400)]
    view.set_items(items)
    assert len(view.item_ids()) == 400
    live = view.live_item_ids()
    assert len(live) == MAX_LIVE_ITEMS and live[-1] == "u399"
    assert view.item_widget("u0") is None
    assert _shown(view.earlier_button)
    # an update to an item that is not a widget is kept and shown once it is
    view.apply_item(bc.UserMessageItem(item_id="u0", text="edited"))
    while view.earlier_button.isVisible():
        QTest.mouseClick(view.earlier_button, Qt.MouseButton.LeftButton)
        QApplication.processEvents()
    assert view.live_item_ids() == [f"u{i}" for i in range(400)]
    first = view.item_widget("u0")
    assert isinstance(first, MessageWidget) and first.text_label.text() == "edited"


def test_following_retires_the_oldest_widgets(qtbot: QtBot) -> None:
    view = _view(qtbot)
    view.set_items([])
    for i in range(MAX_LIVE_ITEMS + 80):
        view.apply_item(bc.UserMessageItem(item_id=f"u{i}", text=f"m{i}"))
        if i % 20 == 0:
            view.flush()
    view.flush()
    assert len(view.live_item_ids()) <= MAX_LIVE_ITEMS + 50
    assert view.live_item_ids()[-1] == f"u{MAX_LIVE_ITEMS + 79}"
    assert len(view.item_ids()) == MAX_LIVE_ITEMS + 80
