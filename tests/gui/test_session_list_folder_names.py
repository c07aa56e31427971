"""Session rows whose folder name holds control characters: a folder made with ``maka branch
--to "esc<ESC>]0;T<BEL>x"``, or named with a newline, showed its name raw on the row's folder
line (boxes for the escape, a row broken in two by the newline). The folder's name is not the
user's writing: the row shows its control characters by name (``app/visible_text.py``), on one
line, and so do its tooltip and the title a folder's name can become (``distinct_title``)."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtWidgets import QApplication, QStyleOptionViewItem
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.session_list import Announcement, RowLayout, SessionDelegate, SessionListPanel

ESCAPED = "/home/u/x/esc\x1b]0;T\x07x"
TWO_LINES = "/home/u/x/first\nsecond"


def _panel(qtbot: QtBot) -> SessionListPanel:
    panel = SessionListPanel()
    qtbot.addWidget(panel)
    panel.resize(420, 400)
    panel.show()
    panel.model.set_sessions(
        [
            bc.SessionSummary(
                session_id="esc",
                cwd=ESCAPED,
                title="count the lines",
                last_run_status=bc.RunStatusValue.COMPLETED,
            ),
            bc.SessionSummary(
                session_id="newline",
                cwd=TWO_LINES,
                # the title two sessions with one message get: the folder's name added
                title="count the lines — first\nsecond",
                last_run_status=bc.RunStatusValue.FAILED,
            ),
        ]
    )
    panel.model.announce("newline", Announcement.ON_HOLD)  # a badge beside the folder
    qtbot.waitExposed(panel)
    QApplication.processEvents()
    return panel


def _layout(panel: SessionListPanel, row: int) -> tuple[RowLayout, QModelIndex]:
    index = panel.model.index(row)
    delegate = panel.view.itemDelegate()
    assert isinstance(delegate, SessionDelegate)
    option = QStyleOptionViewItem()
    delegate.initStyleOption(option, index)
    option.rect = panel.view.visualRect(index)
    option.widget = panel.view
    option.font = panel.view.font()
    layout = delegate.row_layout(option, index)
    assert layout is not None
    return layout, index


def _plain(text: str) -> bool:
    """No character a row would paint as a box or a line break."""
    return text.isprintable()


def test_a_folder_name_with_an_escape_is_shown_by_name(qtbot: QtBot) -> None:
    panel = _panel(qtbot)
    layout, index = _layout(panel, 0)
    assert layout.folder == "esc<ESC>]0;T<BEL>x", layout.folder
    tip = str(index.data(Qt.ItemDataRole.ToolTipRole))
    assert "\x1b" not in tip and "\x07" not in tip
    assert tip.endswith("/home/u/x/esc<ESC>]0;T<BEL>x"), tip
    assert layout.title == "count the lines"  # the user's title as it is


def test_a_folder_name_with_a_newline_stays_on_its_line(qtbot: QtBot) -> None:
    panel = _panel(qtbot)
    layout, index = _layout(panel, 1)
    assert layout.badge == "Auto-resume on hold"
    assert _plain(layout.folder), repr(layout.folder)
    # (the folder line beside a badge keeps only a few characters, the middle elided)
    assert layout.folder.startswith("fi") and layout.folder.endswith("nd"), layout.folder
    assert _plain(layout.title), repr(layout.title)
    assert "first<LF>second" in str(index.data(Qt.ItemDataRole.DisplayRole))
    accessible = str(index.data(Qt.ItemDataRole.AccessibleTextRole))
    assert _plain(accessible) and "first<LF>second" in accessible
    # The tooltip: the title on its line, the folder on the next, each whole.
    tip = str(index.data(Qt.ItemDataRole.ToolTipRole))
    assert tip.split("\n") == ["count the lines — first<LF>second", "/home/u/x/first<LF>second"]


def test_the_whole_folder_name_shows_when_there_is_room(qtbot: QtBot) -> None:
    panel = _panel(qtbot)
    panel.model.set_sessions(
        [
            bc.SessionSummary(
                session_id="newline",
                cwd=TWO_LINES,
                title="count the lines",
                last_run_status=bc.RunStatusValue.COMPLETED,
            )
        ]
    )
    QApplication.processEvents()
    layout, _ = _layout(panel, 0)
    assert layout.folder == "first<LF>second", layout.folder
    panel.view.viewport().grab()  # paints the row (no raw control character reaches Qt)
