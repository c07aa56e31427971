"""Cards fit the window whatever the text, tool output can be read, and states are worded
honestly (waiting for permission, stopped, denied)."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QGuiApplication, QTextCursor, QWheelEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.transcript_items import (
    OUTPUT_VIEW_LINES,
    MessageWidget,
    NoticeWidget,
    ThinkingWidget,
    ToolCardWidget,
    WrappingText,
)
from renderer.transcript_view import TranscriptView

pytestmark = pytest.mark.gui

LONG_WORD = "x" * 300
LONG_URL = "https://example.com/" + "a1b2c3d4e5f6" * 30


def _view(qtbot: QtBot, width: int = 700) -> TranscriptView:
    view = TranscriptView()
    qtbot.addWidget(view)
    view.resize(width, 500)
    with qtbot.waitExposed(view):
        view.show()
    return view


def _settle() -> None:
    for _ in range(3):
        QApplication.processEvents()


def _bash(
    item_id: str, summary: str, status: bc.ToolCardStatus = bc.ToolCardStatus.SUCCEEDED
) -> bc.ToolCardItem:
    return bc.ToolCardItem(
        item_id=item_id,
        tool_call_id=f"call_{item_id}",
        tool_name="bash",
        args_summary="seq 1 500",
        status=status,
        result_summary=summary,
    )


def _tool(view: TranscriptView, item_id: str) -> ToolCardWidget:
    widget = view.item_widget(item_id)
    assert isinstance(widget, ToolCardWidget)
    return widget


def _page_width(view: TranscriptView) -> int:
    page = view.widget()
    assert page is not None
    return page.width()


def _right_edge_in_viewport(widget: QWidget, view: TranscriptView) -> int:
    return widget.mapTo(view.viewport(), QPoint(widget.width(), 0)).x()


# ---- 1. long words ----------------------------------------------------------------------------


def _long_word_items() -> list[bc.TranscriptItem]:
    return [
        bc.UserMessageItem(item_id="u", text=f"look at {LONG_WORD} please"),
        bc.ThinkingItem(item_id="t", text=f"thinking about {LONG_URL}"),
        bc.ToolCardItem(
            item_id="c",
            tool_call_id="call_c",
            tool_name="read_file",
            args_summary=f"/tmp/{LONG_WORD}/notes.txt",
            status=bc.ToolCardStatus.FAILED,
            result_summary=f"no such file: /tmp/{LONG_WORD}/notes.txt",
        ),
        bc.AssistantMessageItem(item_id="a", text=f"See {LONG_URL} for more."),
        bc.NoticeItem(item_id="n", level=bc.NoticeLevel.ERROR, text=f"failed: {LONG_WORD}"),
    ]


@pytest.mark.parametrize("streamed", [False, True])
def test_a_long_unbroken_word_wraps_and_every_card_fits_the_viewport(
    qtbot: QtBot, streamed: bool
) -> None:
    view = _view(qtbot)
    items = _long_word_items()
    if streamed:
        view.set_items([])
        for item in items:
            view.apply_item(item)
        view.flush()
    else:
        view.set_items(items)
    thinking = view.item_widget("t")
    assert isinstance(thinking, ThinkingWidget)
    thinking.toggle.setChecked(True)
    _settle()
    viewport_width = view.viewport().width()
    assert _page_width(view) <= viewport_width
    assert view.horizontalScrollBar().maximum() == 0
    for item_id in view.item_ids():
        widget = view.item_widget(item_id)
        assert widget is not None
        assert _right_edge_in_viewport(widget, view) <= viewport_width, item_id
    card = _tool(view, "c")
    assert _right_edge_in_viewport(card.chip, view) <= viewport_width
    assert card.chip.isVisible() and card.chip.width() >= card.chip.sizeHint().width()
    line = card.result_label.fontMetrics().lineSpacing()
    user = view.item_widget("u")
    assert isinstance(user, MessageWidget)
    for text in (user.text_label, card.args_label, card.result_label, thinking.body_label):
        assert text.width() <= viewport_width
        assert text.height() >= 2 * line, "the long word wraps onto more lines"
    notice = view.item_widget("n")
    assert isinstance(notice, NoticeWidget)
    assert notice.text_label.height() >= 2 * line


def test_the_column_shrinks_back_when_the_window_narrows(qtbot: QtBot) -> None:
    view = _view(qtbot, width=900)
    view.set_items(_long_word_items())
    _settle()
    view.resize(420, 500)
    _settle()
    assert _page_width(view) <= view.viewport().width()
    for item_id in view.item_ids():
        widget = view.item_widget(item_id)
        assert widget is not None
        assert _right_edge_in_viewport(widget, view) <= view.viewport().width()


def test_copying_wrapped_text_gives_the_original_text(qtbot: QtBot) -> None:
    view = _view(qtbot)
    text = f"before {LONG_WORD} {LONG_URL} after"
    view.set_items([bc.UserMessageItem(item_id="u", text=text)])
    _settle()
    user = view.item_widget("u")
    assert isinstance(user, MessageWidget)
    label = user.text_label
    assert isinstance(label, WrappingText)
    assert label.text() == text == label.toPlainText()
    label.selectAll()
    assert label.textCursor().selectedText() == text
    label.copy()
    clipboard = QGuiApplication.clipboard()
    assert clipboard is not None
    assert clipboard.text() == text


def test_streamed_text_grows_in_place(qtbot: QtBot) -> None:
    view = _view(qtbot)
    view.set_items([])
    for n in range(1, 20):
        view.apply_item(bc.AssistantMessageItem(item_id="a", text=LONG_WORD[: n * 15]))
        view.flush()
    view.apply_item(bc.AssistantMessageItem(item_id="a", text="replaced"))
    assistant = view.item_widget("a")
    assert isinstance(assistant, MessageWidget)
    assert assistant.text_label.toPlainText() == "replaced"


def test_wheel_over_a_message_is_left_to_the_transcript(qtbot: QtBot) -> None:
    """An ignored wheel event goes on to the parent widgets, so the transcript scrolls."""
    view = _view(qtbot)
    view.set_items([bc.UserMessageItem(item_id="u", text="message " * 20)])
    user = view.item_widget("u")
    assert isinstance(user, MessageWidget)
    event = QWheelEvent(
        QPointF(5, 5),
        QPointF(5, 5),
        QPoint(0, 0),
        QPoint(0, -120),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    event.accept()
    user.text_label.wheelEvent(event)
    assert not event.isAccepted()


# ---- 2. tool output ---------------------------------------------------------------------------


def _numbers(count: int) -> str:
    return "\n".join(str(n) for n in range(1, count + 1))


def test_a_bash_card_shows_the_first_lines_and_the_exit_code_apart(qtbot: QtBot) -> None:
    view = _view(qtbot)
    view.set_items([_bash("c", "exit code 0\n" + _numbers(500))])
    _settle()
    card = _tool(view, "c")
    assert card.status_line.isVisible() and card.status_line.text() == "exit code 0"
    assert card.result_label.text() == "1\n2\n3\n4\n5\n6"
    assert card.more_button.isVisible()
    assert card.more_button.text() == "Show 494 more lines"
    assert card.output_view is None, "the full view is only built when asked for"


def test_the_bash_card_expands_to_the_full_output_and_back(qtbot: QtBot) -> None:
    view = _view(qtbot)
    output = _numbers(500)
    view.set_items([_bash("c", "exit code 0\n" + output)])
    _settle()
    card = _tool(view, "c")
    row = card.parentWidget()
    assert row is not None
    collapsed = row.height()
    QTest.mouseClick(card.more_button, Qt.MouseButton.LeftButton)
    _settle()
    assert card.expanded
    shown = card.output_view
    assert shown is not None and shown.isVisible()
    assert shown.toPlainText() == output
    assert shown.isReadOnly()
    assert not card.result_label.isVisible()
    assert card.status_line.text() == "exit code 0"
    line = shown.fontMetrics().lineSpacing()
    assert shown.height() <= (OUTPUT_VIEW_LINES + 2) * line, "the view is capped"
    assert shown.verticalScrollBar().maximum() > 0, "and scrolls by itself"
    qtbot.waitUntil(lambda: row.height() > collapsed)
    assert card.more_button.text() == "Show fewer lines"
    QTest.mouseClick(card.more_button, Qt.MouseButton.LeftButton)
    _settle()
    assert not card.expanded and not shown.isVisible() and card.result_label.isVisible()
    qtbot.waitUntil(lambda: row.height() == collapsed)


@pytest.mark.parametrize(
    ("count", "words"),
    [
        (1, "1 background process it left running was stopped when it ended"),
        (3, "3 background processes it left running were stopped when it ended"),
    ],
)
def test_a_bash_card_says_when_background_processes_were_stopped(
    qtbot: QtBot, count: int, words: str
) -> None:
    view = _view(qtbot)
    noun = "process" if count == 1 else "processes"
    view.set_items([_bash("c", f"exit code 0 · {count} background {noun} stopped\nspawned")])
    _settle()
    card = _tool(view, "c")
    assert card.status_line.text() == f"exit code 0 · {words}"
    assert card.result_label.text() == "spawned"


def test_a_summary_with_only_the_last_line_says_so(qtbot: QtBot) -> None:
    view = _view(qtbot)
    view.set_items([_bash("c", "exit code 0: 3000")])
    _settle()
    card = _tool(view, "c")
    assert card.status_line.text() == "exit code 0 · last line of output:"
    assert card.result_label.text() == "3000"
    assert not card.more_button.isVisible()


@pytest.mark.parametrize(
    ("summary", "status_line", "result"),
    [
        ("exit code 2", "exit code 2", ""),
        ("wrote 3 bytes to hello.txt", "", "wrote 3 bytes to hello.txt"),
        ("exit code 1\nboom", "exit code 1", "boom"),
        ("one\ntwo\nthree", "", "one\ntwo\nthree"),
    ],
)
def test_short_results_are_shown_whole(
    qtbot: QtBot, summary: str, status_line: str, result: str
) -> None:
    view = _view(qtbot)
    view.set_items([_bash("c", summary)])
    _settle()
    card = _tool(view, "c")
    assert card.status_line.isVisible() == bool(status_line)
    assert card.status_line.text() == status_line
    assert card.result_label.isVisible() == bool(result)
    assert card.result_label.text() == result
    assert not card.more_button.isVisible()


def test_a_100_kb_output_stays_responsive(qtbot: QtBot) -> None:
    view = _view(qtbot)
    output = "\n".join(f"line {n} " + "y" * 90 for n in range(1000))  # ~100 KB
    item = bc.ToolCardItem.model_construct(  # past the contract's cap, to test the widget
        type="tool_card",
        item_id="c",
        run_id=None,
        tool_call_id="call_c",
        tool_name="bash",
        args_summary="cat big.log",
        status=bc.ToolCardStatus.SUCCEEDED,
        result_summary="exit code 0\n" + output,
        park_reason=None,
    )
    started = time.monotonic()
    view.set_items([item])
    card = _tool(view, "c")
    _settle()
    card.set_expanded(True)
    _settle()
    elapsed = time.monotonic() - started
    assert card.output_view is not None and card.output_view.toPlainText() == output
    assert elapsed < 2.0
    assert _page_width(view) <= view.viewport().width()


def test_an_updated_card_keeps_its_expanded_view_current(qtbot: QtBot) -> None:
    view = _view(qtbot)
    view.set_items([_bash("c", "exit code 0\n" + _numbers(50))])
    card = _tool(view, "c")
    card.set_expanded(True)
    view.apply_item(_bash("c", "exit code 0\n" + _numbers(60)))
    view.flush()
    assert card.output_view is not None
    assert card.output_view.toPlainText() == _numbers(60)
    assert card.more_button.text() == "Show fewer lines"
    view.apply_item(_bash("c", "exit code 0\nshort"))
    view.flush()
    assert not card.expanded and not card.more_button.isVisible()
    cursor = card.result_label.textCursor()
    cursor.movePosition(QTextCursor.MoveOperation.End)
    assert card.result_label.text() == "short"


# ---- 3. wording -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code", "chip", "accented"),
    [
        (bc.ToolCardStatus.RUNNING, None, "Running…", False),
        (bc.ToolCardStatus.RUNNING, "awaiting_permission", "Waiting for permission", False),
        (bc.ToolCardStatus.SUCCEEDED, None, "Done", False),
        (bc.ToolCardStatus.FAILED, None, "Failed", True),
        (bc.ToolCardStatus.FAILED, "cancelled", "Stopped", False),
        (bc.ToolCardStatus.FAILED, "permission_denied", "Denied", False),
        (bc.ToolCardStatus.NOT_DISPATCHED, None, "Not run", False),
    ],
)
def test_each_state_is_worded_honestly(
    qtbot: QtBot, status: bc.ToolCardStatus, code: str | None, chip: str, accented: bool
) -> None:
    view = _view(qtbot)
    view.set_items(
        [
            bc.ToolCardItem(
                item_id="c",
                tool_call_id="call_c",
                tool_name="bash",
                args_summary="sleep 30",
                status=status,
                result_summary="the command was cancelled" if code == "cancelled" else "",
                park_reason=code,
            )
        ]
    )
    card = _tool(view, "c")
    assert card.chip.text() == chip
    assert (card.accent is not None) is accented
    if code is not None:
        assert not card.explanation_label.text(), "a qualifying code is not a park reason"
