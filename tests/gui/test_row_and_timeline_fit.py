"""Layout a tester found cut at small window sizes: a session row with the "Auto-resume on hold"
badge showed no folder name at 800x600 (the folder line is what tells apart sessions with the
same title), and the Timeline's # column showed a continuation of a continuation as "↳ R…"."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtGui import QFont, QFontMetricsF
from PySide6.QtWidgets import QApplication, QStyle, QStyleOptionViewItem
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.main_window import MainWindow
from renderer.session_list import Announcement, RowLayout, SessionDelegate, SessionListPanel
from renderer.timeline_panel import TimelinePanel
from tests.helpers.fake_bridge import FakeBridge

pytestmark = pytest.mark.gui

TWINS = tuple(
    bc.SessionSummary(
        session_id=f"s{n}",
        cwd=f"/home/me/projects/{folder}",
        title="count the lines",
        last_run_status=bc.RunStatusValue.FAILED,
        interrupted=True,
        failure_class="app_restarted",
    )
    for n, folder in enumerate(("parser-rewrite", "release-notes"), start=1)
)


def _layout(panel: SessionListPanel, session_id: str) -> RowLayout:
    row = panel.model.row_of(session_id)
    assert row is not None
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
    return layout


def _shows_folder(layout: RowLayout, folder: str, letters: int = 4) -> bool:
    """At least a few of the folder name's letters show (elided, with "…" in its middle)."""
    shown = layout.folder.replace("…", "")
    return len(shown) >= letters and all(part in folder for part in layout.folder.split("…"))


@pytest.mark.parametrize("size", [(720, 480), (800, 600)])
def test_the_folder_line_stays_beside_an_auto_resume_badge(
    qtbot: QtBot, size: tuple[int, int]
) -> None:
    bridge = FakeBridge(safe_resume_enabled=True)
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.resize(*size)
    window.show()
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=TWINS))
    model = window.sessions.model
    model.announce("s1", Announcement.ON_HOLD)
    model.announce("s2", Announcement.CONTINUED)
    qtbot.waitExposed(window)
    QApplication.processEvents()
    viewport = window.sessions.view.viewport().rect()
    for summary in TWINS:
        layout = _layout(window.sessions, summary.session_id)
        folder = summary.cwd.rsplit("/", 1)[1]
        assert _shows_folder(layout, folder), (size, layout.folder)
        assert layout.badge_rect is not None and viewport.contains(layout.badge_rect)
        assert not layout.badge_rect.intersects(layout.folder_rect)
        assert not layout.badge_rect.intersects(layout.title_rect)
    # The two rows with the same title read differently.
    assert _layout(window.sessions, "s1").folder != _layout(window.sessions, "s2").folder


def test_a_narrow_list_elides_the_badge_before_the_folder(qtbot: QtBot) -> None:
    panel = SessionListPanel()
    qtbot.addWidget(panel)
    panel.resize(170, 300)  # (narrower than the window ever makes it)
    panel.show()
    panel.model.set_sessions(list(TWINS))
    panel.model.announce("s1", Announcement.ON_HOLD)
    qtbot.waitExposed(panel)
    layout = _layout(panel, "s1")
    assert _shows_folder(layout, "parser-rewrite", letters=2), layout.folder
    assert layout.badge.endswith("…")
    assert layout.badge_rect is not None
    assert panel.view.viewport().rect().contains(layout.badge_rect)


def _run(run_id: str, depth: int, parent: str | None) -> bc.TimelineRunHead:
    return bc.TimelineRunHead(
        run_id=run_id,
        depth=depth,
        status="failed" if depth < 2 else "completed",
        failure_class="app_restarted" if depth < 2 else None,
        parent_run_id=parent,
        source_high_water=4 if parent else None,
        row_count=0,
        event_count=5,
    )


@pytest.mark.parametrize("width", [720, 1000])
def test_a_continuation_of_a_continuation_shows_whole_in_the_number_column(
    qtbot: QtBot, width: int
) -> None:
    panel = TimelinePanel(FakeBridge())
    qtbot.addWidget(panel)
    panel.resize(width, 500)
    panel.show()
    qtbot.waitExposed(panel)
    panel.model.open("s1")
    runs = (_run("r1", 0, None), _run("r2", 1, "r1"), _run("r3", 2, "r2"))
    panel.model.on_opened(bc.TimelineOpenedPush(session_id="s1", runs=runs))
    QApplication.processEvents()
    tree = panel.tree
    bold_font = QFont(tree.font())
    bold_font.setBold(True)
    bold = QFontMetricsF(bold_font)
    style = tree.style()
    margin = style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, tree) + 1
    marks = []
    for row in range(panel.model.rowCount(QModelIndex())):
        index = panel.model.index(row, 0)
        text = str(index.data(Qt.ItemDataRole.DisplayRole))
        if not text.strip().endswith("Run"):
            continue
        marks.append(text.strip())
        # Where the item view draws the text (less the style's margins): "…" when it is wider.
        option = QStyleOptionViewItem()
        option.initFrom(tree)
        option.rect = tree.visualRect(index)
        option.text = text
        option.font = bold_font
        option.features = QStyleOptionViewItem.ViewItemFeature.HasDisplay
        place = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, option, tree)
        room = place.width() - 2 * margin
        assert bold.horizontalAdvance(text) <= room, (text, room)
    assert marks == ["Run", "↳ Run", "↳ Run"]
    # "What" keeps the spare width.
    assert tree.columnWidth(2) >= 18 * tree.fontMetrics().averageCharWidth()
