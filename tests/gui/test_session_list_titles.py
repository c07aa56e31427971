"""Session-list titles beside their badges: a title was cut to a letter or two ("c…") beside
"Auto-resume on hold", and in a narrow list the row was wider than the view, its badge out of
sight. The title now has the row's whole first line (the badge sits on the folder's line), ends
in "…" only when it does not fit there, and shows whole in the tooltip; the badge never
overlaps the title and stays in view."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtWidgets import QApplication, QStyleOptionViewItem
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.session_list import Announcement, SessionDelegate, SessionListPanel

if TYPE_CHECKING:
    from renderer.session_list import RowLayout

LONG = "count the lines once and write the total to count.txt for the weekly report"


def _panel(qtbot: QtBot, width: int) -> SessionListPanel:
    panel = SessionListPanel()
    qtbot.addWidget(panel)
    panel.resize(width, 300)
    panel.show()
    panel.model.set_sessions(
        [
            bc.SessionSummary(
                session_id="long",
                cwd="/w/project",
                title=LONG,
                last_run_status=bc.RunStatusValue.FAILED,
                interrupted=True,
            ),
            bc.SessionSummary(
                session_id="short",
                cwd="/w/project",
                title="fix the parser",
                last_run_status=bc.RunStatusValue.RUNNING,
            ),
        ]
    )
    panel.model.announce("long", Announcement.ON_HOLD)
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


def test_a_long_title_gets_the_whole_row_and_ends_in_an_ellipsis(qtbot: QtBot) -> None:
    for width in (204, 290):  # the list in a 760-wide window, and in a 1280-wide one
        panel = _panel(qtbot, width)
        layout, index = _layout(panel, 0)
        viewport = panel.view.viewport().rect()
        assert layout.title.endswith("…")
        assert len(layout.title) > 12, layout.title  # not "c…" beside the badge
        # the room there is: the row's width, less its padding
        assert layout.title_rect.width() >= viewport.width() - 3 * SessionDelegate.PADDING - 4
        assert layout.badge == "Auto-resume on hold"
        assert layout.badge_rect is not None
        assert not layout.badge_rect.intersects(layout.title_rect)
        assert not layout.badge_rect.intersects(layout.folder_rect)
        assert viewport.contains(layout.badge_rect)  # in view, whole
        assert index.data(Qt.ItemDataRole.ToolTipRole).startswith(LONG)


def test_a_title_that_fits_is_shown_whole_beside_nothing(qtbot: QtBot) -> None:
    panel = _panel(qtbot, 204)
    layout, _index = _layout(panel, 1)
    assert layout.title == "fix the parser"
    assert layout.badge == "Running"
    assert layout.badge_rect is not None and not layout.badge_rect.intersects(layout.title_rect)


def test_a_narrow_list_keeps_its_rows_and_badges_in_view(qtbot: QtBot) -> None:
    """A list narrower than the delegate's old 200-pixel rows: rows as wide as the view."""
    panel = _panel(qtbot, 150)
    viewport = panel.view.viewport().rect()
    for row in (0, 1):
        assert panel.view.visualRect(panel.model.index(row)).width() <= viewport.width()
    for row in (0, 1):
        layout, _index = _layout(panel, row)
        assert layout.badge_rect is not None and viewport.contains(layout.badge_rect)
        assert not layout.badge_rect.intersects(layout.title_rect)
