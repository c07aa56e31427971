"""The session list: a model of session summaries and a two-line view with status badges.

Why model/view: the data directory may hold tens of thousands of sessions; a list model with
uniform rows paints only what is visible, and a summary update touches one row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import PurePath
from typing import Any

from PySide6.QtCore import (
    QAbstractListModel,
    QCoreApplication,
    QEvent,
    QModelIndex,
    QPersistentModelIndex,
    QRect,
    QRectF,
    QSize,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QFont, QFontMetrics, QPainter, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QListView,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.bridge_contract import RunStatusValue, SessionSummary
from app.visible_text import visible
from renderer import theme
from renderer.park_text import Severity
from renderer.plain_tip import plain_tip

LOOK_MS = 2500
"""How long the open session stays in view, in the active window, before what automatic resume
did to it counts as seen (the session shown at start is selected by the window, not clicked)."""
MIN_FOLDER_CHARS = 5
"""The folder line keeps room for this many characters beside a badge (or the whole name when it
is shorter): it is what tells apart sessions with the same title."""
BADGE_FONT_SCALE = 0.9
SUMMARY_ROLE = Qt.ItemDataRole.UserRole + 1
WAITING_ROLE = Qt.ItemDataRole.UserRole + 2
ANNOUNCED_ROLE = Qt.ItemDataRole.UserRole + 3
AnyIndex = QModelIndex | QPersistentModelIndex
_RUNNING_STATUSES = frozenset(
    {RunStatusValue.RUNNING, RunStatusValue.CREATED, RunStatusValue.WAITING_FOR_USER}
)


def _tr(text: str) -> str:
    return QCoreApplication.translate("SessionList", text)


def one_line(text: str) -> str:
    """``text`` as one line of a row: its control characters by name (``visible``), and the
    newlines and tabs ``visible`` keeps named too. A folder's name is not the user's writing: a
    name holding an escape sequence showed as boxes, and one holding a newline broke the row in
    two (a title may hold the folder's name: ``distinct_title``)."""
    return visible(text).replace("\n", "<LF>").replace("\t", "<TAB>")


def folder_words(summary: SessionSummary) -> str:
    """The folder line of a session's row: the folder's name (its whole path when it has no
    name, ``/``), as one line."""
    return one_line(PurePath(summary.cwd).name or summary.cwd)


def display_title(summary: SessionSummary) -> str:
    """What a session is called on screen. A session that has not had a message yet is titled
    after its folder; it reads "New session" (the folder shows under it), not "ws1 / ws1"."""
    folder = PurePath(summary.cwd).name
    if summary.last_run_status is None and (not summary.title or summary.title == folder):
        return _tr("New session")
    return summary.title or _tr("Untitled session")


class Announcement(StrEnum):
    """What automatic resume did to a session at start (shown until the user has seen it)."""

    CONTINUED = "continued"
    ON_HOLD = "on_hold"


def badge_for(
    summary: SessionSummary, waiting: bool = False, announced: Announcement | None = None
) -> tuple[str, Severity] | None:
    """The short status shown at the right of a row, or ``None`` for a quiet row. ``waiting``:
    a tool of the session's running turn waits for the user's permission; ``announced``: what
    automatic resume did, not yet seen."""
    if waiting:
        return _tr("Needs you"), Severity.WARN
    # What the session needs now comes before what automatic resume did: a missing folder is
    # what the user must act on (the banner says so), and a continuation interrupted in turn
    # (Maka stopped while it ran) is no longer "Resumed by itself". "On hold" is how a session
    # automatic resume parked is interrupted, so it names that state.
    if summary.folder_missing:
        return _tr("Folder missing"), Severity.WARN
    if announced is Announcement.ON_HOLD:
        return _tr("Auto-resume on hold"), Severity.WARN
    if announced is Announcement.CONTINUED and summary.last_run_status not in _RUNNING_STATUSES:
        # (the row still describes the run the continuation took up: its update is on the way)
        return _tr("Resumed by itself"), Severity.INFO
    if summary.interrupted:
        return _tr("Interrupted"), Severity.WARN
    if announced is Announcement.CONTINUED:
        return _tr("Resumed by itself"), Severity.INFO
    if summary.running_elsewhere:
        return _tr("Running elsewhere"), Severity.INFO
    if summary.held_elsewhere is not None:
        return _tr("Held elsewhere"), Severity.INFO
    if summary.last_run_status in (
        RunStatusValue.RUNNING,
        RunStatusValue.CREATED,
        RunStatusValue.WAITING_FOR_USER,
    ):
        return _tr("Running"), Severity.INFO
    if summary.last_run_status is RunStatusValue.FAILED:
        return _tr("Failed"), Severity.ERROR
    return None


class SessionListModel(QAbstractListModel):
    announced = Signal(str)
    """A session was given an announcement (``announce``)."""
    looked_at = Signal(str)
    """The user has had the session in view, open in the active window, for ``LOOK_MS``, while
    it had an announcement: it counts as seen (``AutoResumeNotice`` lets it go)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rows: list[SessionSummary] = []
        self._index: dict[str, int] = {}
        self._waiting: set[str] = set()
        self._host_stopped = False
        self._announced: dict[str, Announcement] = {}

    def set_host_stopped(self) -> None:
        """The main process is gone: no session runs any more (rows say Interrupted)."""
        self._host_stopped = True
        if self._rows:
            self.dataChanged.emit(self.index(0), self.index(len(self._rows) - 1))

    def rowCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: AnyIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        summary = self._rows[index.row()]
        if self._host_stopped and summary.last_run_status in _RUNNING_STATUSES:
            # The main process is gone: a turn shown as running was interrupted.
            summary = summary.model_copy(update={"interrupted": True})
        if role == Qt.ItemDataRole.DisplayRole:
            return one_line(display_title(summary))
        if role == Qt.ItemDataRole.ToolTipRole:
            # (as text: a folder named ``a<b>c`` is not markup)
            return plain_tip(f"{one_line(display_title(summary))}\n{one_line(summary.cwd)}")
        if role == Qt.ItemDataRole.AccessibleTextRole:
            badge = badge_for(
                summary,
                summary.session_id in self._waiting,
                self._announced.get(summary.session_id),
            )
            title = one_line(display_title(summary))
            return f"{title}, {badge[0]}" if badge else title
        if role == SUMMARY_ROLE:
            return summary
        if role == WAITING_ROLE:
            return summary.session_id in self._waiting
        if role == ANNOUNCED_ROLE:
            return self._announced.get(summary.session_id)
        return None

    def announce(self, session_id: str, what: Announcement) -> None:
        self._announced[session_id] = what
        self._row_changed(session_id)
        self.announced.emit(session_id)

    def note_looked_at(self, session_id: str) -> None:
        """The session has been in view long enough to be seen (see ``looked_at``)."""
        if session_id in self._announced:
            self.looked_at.emit(session_id)

    def mark_seen(self, session_id: str) -> bool:
        """The user looked at the session: its announcement goes. True if it had one."""
        if self._announced.pop(session_id, None) is None:
            return False
        self._row_changed(session_id)
        return True

    def announcements(self) -> dict[str, Announcement]:
        return dict(self._announced)

    def _row_changed(self, session_id: str) -> None:
        row = self._index.get(session_id)
        if row is not None:
            index = self.index(row)
            self.dataChanged.emit(index, index)

    def set_waiting(self, session_id: str, waiting: bool) -> None:
        """Whether the session waits for the user (a permission request is open)."""
        if waiting:
            self._waiting.add(session_id)
        else:
            self._waiting.discard(session_id)
        row = self._index.get(session_id)
        if row is not None:
            index = self.index(row)
            self.dataChanged.emit(index, index)

    def set_sessions(self, sessions: Sequence[SessionSummary]) -> None:
        self.beginResetModel()
        self._rows = list(sessions)
        self._reindex()
        self.endResetModel()

    def upsert(self, summary: SessionSummary) -> None:
        """Replace a known session's row, or put a new session at the top."""
        row = self._index.get(summary.session_id)
        if row is not None:
            self._rows[row] = summary
            index = self.index(row)
            self.dataChanged.emit(index, index)
            return
        self.beginInsertRows(QModelIndex(), 0, 0)
        self._rows.insert(0, summary)
        self._reindex()
        self.endInsertRows()

    def summary(self, session_id: str) -> SessionSummary | None:
        row = self._index.get(session_id)
        return None if row is None else self._rows[row]

    def row_of(self, session_id: str) -> int | None:
        return self._index.get(session_id)

    def _reindex(self) -> None:
        self._index = {summary.session_id: row for row, summary in enumerate(self._rows)}


@dataclass(frozen=True)
class RowLayout:
    """Where a row's parts are painted, and their text as shown (elided to fit)."""

    title_rect: QRect
    title: str
    folder_rect: QRect
    folder: str
    badge_rect: QRect | None = None
    badge: str = ""
    severity: Severity | None = None


def badge_font(font: QFont) -> QFont:
    """The badge's text: a little smaller than the row's, so the folder beside it has room."""
    small = QFont(font)
    if small.pointSizeF() > 0:
        small.setPointSizeF(max(small.pointSizeF() * BADGE_FONT_SCALE, 6.0))
    elif small.pixelSize() > 0:
        small.setPixelSize(max(round(small.pixelSize() * BADGE_FONT_SCALE), 8))
    return small


class SessionDelegate(QStyledItemDelegate):
    """The title across the whole first line; under it the folder name, with a coloured badge
    on the right. The title gets the row's full width (it ends in "…" only when it does not
    fit in it; the whole title is the tooltip), and the badge never covers it."""

    PADDING = 8
    BADGE_PADDING = 12
    GAP = 6

    def sizeHint(self, option: QStyleOptionViewItem, index: AnyIndex) -> QSize:  # noqa: N802
        metrics = QFontMetrics(option.font)
        # A narrow width: the list's rows are as wide as its viewport, never wider (a wider row
        # would put its right end, the badge, out of view: there is no horizontal scroll bar).
        return QSize(self.PADDING * 4, metrics.height() * 2 + self.PADDING * 2 + 4)

    def row_layout(self, option: QStyleOptionViewItem, index: AnyIndex) -> RowLayout | None:
        summary = index.data(SUMMARY_ROLE)
        if not isinstance(summary, SessionSummary):
            return None
        rect: QRect = option.rect.adjusted(
            self.PADDING + 4, self.PADDING, -self.PADDING, -self.PADDING
        )
        view = option.widget
        if isinstance(view, QAbstractItemView):  # only what shows (the viewport's width)
            rect.setRight(min(rect.right(), view.viewport().rect().right() - self.PADDING))
        title_font = QFont(option.font)
        title_font.setBold(True)
        metrics = QFontMetrics(title_font)
        title_rect = QRect(rect.left(), rect.top(), rect.width(), metrics.height())
        title = str(index.data(Qt.ItemDataRole.DisplayRole))
        shown = metrics.elidedText(title, Qt.TextElideMode.ElideRight, title_rect.width())
        sub = QFontMetrics(option.font)
        top = rect.top() + metrics.height() + 4
        announced = index.data(ANNOUNCED_ROLE)  # a plain str once it has crossed Qt
        badge = badge_for(
            summary,
            bool(index.data(WAITING_ROLE)),
            Announcement(announced) if announced in set(Announcement) else None,
        )
        folder = folder_words(summary)
        if badge is None:
            folder_rect = QRect(rect.left(), top, rect.width(), sub.height())
            return RowLayout(
                title_rect,
                shown,
                folder_rect,
                sub.elidedText(folder, Qt.TextElideMode.ElideMiddle, folder_rect.width()),
            )
        badge_text, severity = badge
        small = QFontMetrics(badge_font(option.font))
        # The folder keeps room for a few characters (its whole name when shorter): the badge
        # ends in "…" before the folder line is cut to nothing.
        folder_room = min(sub.horizontalAdvance(folder), sub.averageCharWidth() * MIN_FOLDER_CHARS)
        room = max(rect.width() - folder_room - self.GAP, 0)
        width = small.horizontalAdvance(badge_text) + self.BADGE_PADDING
        if width > room:  # a narrow list: the badge ends in "…"
            width = room
            badge_text = small.elidedText(
                badge_text, Qt.TextElideMode.ElideRight, max(width - self.BADGE_PADDING, 0)
            )
        badge_rect = QRect(rect.right() - width + 1, top, width, sub.height())
        folder_rect = QRect(
            rect.left(), top, max(badge_rect.left() - self.GAP - rect.left(), 0), sub.height()
        )
        return RowLayout(
            title_rect,
            shown,
            folder_rect,
            sub.elidedText(folder, Qt.TextElideMode.ElideMiddle, folder_rect.width()),
            badge_rect,
            badge_text,
            severity,
        )

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: AnyIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        layout = self.row_layout(opt, index)
        if layout is None:
            super().paint(painter, option, index)
            return
        opt.text = ""
        style = opt.widget.style() if opt.widget is not None else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        palette: QPalette = opt.palette
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        text_role = QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text
        painter.save()
        title_font = QFont(opt.font)
        title_font.setBold(True)
        painter.setFont(title_font)
        painter.setPen(palette.color(text_role))
        painter.drawText(
            layout.title_rect,
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            layout.title,
        )
        painter.setFont(opt.font)
        painter.setPen(palette.color(text_role) if selected else theme.muted_text(palette))
        painter.drawText(
            layout.folder_rect,
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            layout.folder,
        )
        if layout.badge_rect is not None and layout.severity is not None:
            colour = theme.accent(layout.severity, palette)
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            painter.setPen(colour)
            painter.setBrush(theme.tinted_background(colour, palette))
            painter.drawRoundedRect(QRectF(layout.badge_rect).adjusted(0.5, 0.5, -0.5, -0.5), 8, 8)
            painter.setFont(badge_font(opt.font))
            painter.drawText(layout.badge_rect, Qt.AlignmentFlag.AlignCenter, layout.badge)
        if opt.state & QStyle.StateFlag.State_HasFocus and (
            opt.widget is not None and opt.widget.hasFocus()
        ):
            # The keyboard focus is on this row: outline it (the style's own focus rectangle is
            # not drawn for a painted row).
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            painter.setPen(palette.color(QPalette.ColorRole.Highlight).darker(140))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(QRectF(opt.rect).adjusted(1.5, 1.5, -1.5, -1.5), 4, 4)
        painter.restore()


class SessionListPanel(QWidget):
    session_selected = Signal(str)
    new_session_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 12, 6, 10)
        layout.setSpacing(8)
        header = QHBoxLayout()
        title = QLabel(_tr("Sessions"))
        font = title.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.1)
        title.setFont(font)
        self.new_button = QToolButton()
        self.new_button.setText(_tr("New"))
        self.new_button.setToolTip(_tr("New session (Ctrl+N)"))
        self.new_button.clicked.connect(self.new_session_requested)
        header.addWidget(title)
        header.addStretch(1)
        header.addWidget(self.new_button)
        layout.addLayout(header)
        self.model = SessionListModel(self)
        self.view = QListView()
        self.view.setAccessibleName(_tr("Sessions"))
        self.view.setModel(self.model)
        self.view.setItemDelegate(SessionDelegate(self.view))
        self.view.setUniformItemSizes(True)
        self.view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.view.selectionModel().currentChanged.connect(self._on_current_changed)
        # A click (or Enter) on the row already selected opens it too: the window may have
        # selected it for the user at start, and the user's click is their look at it.
        self.view.clicked.connect(self._on_opened)
        self.view.activated.connect(self._on_opened)
        layout.addWidget(self.view, 1)
        # The open session is seen once it has been in view a moment, whoever selected it (the
        # window selects one at start): its announcement then goes (``SessionListModel.looked_at``).
        self._look = QTimer(self)
        self._look.setSingleShot(True)
        self._look.setInterval(LOOK_MS)
        self._look.timeout.connect(self._looked)
        self.model.announced.connect(self._on_announced)

    def select(self, session_id: str) -> None:
        row = self.model.row_of(session_id)
        if row is not None:
            self.view.setCurrentIndex(self.model.index(row))

    def current_session(self) -> str | None:
        summary = self.view.currentIndex().data(SUMMARY_ROLE)
        return summary.session_id if isinstance(summary, SessionSummary) else None

    def _on_current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        self._look.start()  # (again: a moment on this one)
        summary = current.data(SUMMARY_ROLE)
        if isinstance(summary, SessionSummary):
            self.session_selected.emit(summary.session_id)

    def _on_announced(self, session_id: str) -> None:
        if session_id == self.current_session():
            self._look.start()

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.WindowActivate:
            self._look.start()  # the window came to the front: a moment from now
        return super().event(event)

    def _in_view(self) -> bool:
        window = self.window()
        return self.isVisible() and window.isActiveWindow() and not window.isMinimized()

    def _looked(self) -> None:
        session_id = self.current_session()
        if session_id is not None and self._in_view():
            self.model.note_looked_at(session_id)

    def _on_opened(self, index: QModelIndex) -> None:
        if index == self.view.currentIndex():
            self._on_current_changed(index, index)
