"""Permission prompts: a tool asks before it acts; the user allows or denies.

Why inline rather than a modal dialog: a dialog would block the window (and the reading of
the transcript that explains the request). Requests queue per session; the prompt shows the
oldest one for the session on screen. A new request takes the keyboard focus on the text being
approved (never on a button, so a stray Enter decides nothing); Alt+A allows, Alt+D denies.

What is approved is shown whole: the command sits in a read-only view that wraps and scrolls
(up to ``COMMAND_VIEW_LINES`` lines tall, fewer in a short window, so the whole question
stays readable above the composer), control characters made visible (``visible_text``), and
a command asks under one line saying that commands can change files anywhere the user can.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QCoreApplication, Qt, QTimer, Signal
from PySide6.QtGui import QResizeEvent, QTextOption
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.bridge_contract import PermissionClosedPush, PermissionRequestedPush
from app.visible_text import AUTO_MODE_WARNING, visible
from renderer import theme
from renderer.bridge_port import BridgePort
from renderer.park_text import Severity
from renderer.tinted_panel import TintedPanel

COMMAND_VIEW_LINES = 8
"""The command view grows with its text up to this many lines, then scrolls."""
COMMAND_VIEW_MIN_LINES = 2
"""In a short window the command scrolls sooner, but never shows fewer lines than this."""

_ANSWERED_KEPT = 256
CLOSED_NOTE_MS = 10_000
"""How long a question answered elsewhere (a terminal) stays shown, saying where it was
answered, before the prompt closes (a new question replaces it at once)."""


def _tr(text: str) -> str:
    return QCoreApplication.translate("PermissionPrompt", text)


class CommandView(QPlainTextEdit):
    """The text being approved: read-only, selectable, wrapping anywhere, as tall as its text
    up to ``COMMAND_VIEW_LINES`` lines and scrollable beyond."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setUndoRedoEnabled(False)
        self.setFont(theme.monospace_font())
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setTabChangesFocus(True)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setTextInteractionFlags(  # the keyboard moves through (and scrolls) the text
            Qt.TextInteractionFlag.TextSelectableByMouse
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setAccessibleName(_tr("What is asked"))
        self._max_lines = COMMAND_VIEW_LINES

    @property
    def max_lines(self) -> int:
        return self._max_lines

    def set_max_lines(self, lines: int) -> None:
        """How many lines the view grows to before it scrolls (the window lowers it when it is
        short, so the question's warning and the composer below stay in view)."""
        lines = max(COMMAND_VIEW_MIN_LINES, min(lines, COMMAND_VIEW_LINES))
        if lines != self._max_lines:
            self._max_lines = lines
            self._fit()

    def set_text(self, text: str) -> None:
        if self.toPlainText() != text:
            self.setPlainText(text)
        self._fit()

    def visual_lines(self) -> int:
        """Lines the text takes at the current width (wrapped lines count)."""
        return max(1, math.ceil(self.document().documentLayout().documentSize().height()))

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._fit()

    def line_height(self) -> int:
        """One laid-out line (a little more than the font's line spacing)."""
        layout = self.document().firstBlock().layout()
        laid_out = layout.lineAt(0).height() if layout is not None and layout.lineCount() else 0
        return max(self.fontMetrics().lineSpacing(), math.ceil(laid_out))

    def _fit(self) -> None:
        # Text that fits sits on the prompt like a label; a framed box appears only when there
        # is more to scroll to (a white box around one line reads as an input field).
        scrolls = self.visual_lines() > self._max_lines
        self.setFrameShape(QFrame.Shape.StyledPanel if scrolls else QFrame.Shape.NoFrame)
        self.viewport().setAutoFillBackground(scrolls)
        lines = min(self.visual_lines(), self._max_lines)
        margin = 2 * math.ceil(self.document().documentMargin())
        # + 1: QPlainTextEdit counts a line as visible only with a pixel to spare.
        height = lines * self.line_height() + margin + 1 + 2 * self.frameWidth()
        if self.height() != height:
            self.setFixedHeight(height)


class PermissionPrompt(TintedPanel):
    waiting_changed = Signal(str, bool)
    """(session id, whether it has an unanswered request): the session list shows who waits."""

    def __init__(self, bridge: BridgePort, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName(_tr("Permission request"))
        self._bridge = bridge
        self._session_id: str | None = None
        self._pending: dict[str, list[PermissionRequestedPush]] = {}
        # Requests this window answered: the main process sends open requests again on every
        # connect and session open, and such a copy may cross the answer on the wire.
        self._answered: dict[str, None] = {}
        self._shown_request: str | None = None
        # A question another client answered first: shown a moment, saying where (per session).
        self._closed: dict[str, tuple[PermissionRequestedPush, PermissionClosedPush]] = {}
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 10, 12, 10)
        layout.setSpacing(4)
        row = QHBoxLayout()
        row.setSpacing(10)
        text_column = QVBoxLayout()
        self.title_label = QLabel()
        self.title_label.setTextFormat(Qt.TextFormat.PlainText)
        font = self.title_label.font()
        font.setBold(True)
        self.title_label.setFont(font)
        self.summary_view = CommandView()
        self.warning_label = QLabel(_tr(AUTO_MODE_WARNING))
        self.warning_label.setTextFormat(Qt.TextFormat.PlainText)
        self.warning_label.setWordWrap(True)
        text_column.addWidget(self.title_label)
        text_column.addWidget(self.summary_view)
        text_column.addWidget(self.warning_label)
        self.answered_label = QLabel()
        self.answered_label.setTextFormat(Qt.TextFormat.PlainText)
        self.answered_label.setWordWrap(True)
        self.answered_label.setAccessibleName(_tr("Where it was answered"))
        text_column.addWidget(self.answered_label)
        self.allow_button = QPushButton(_tr("&Allow"))
        self.deny_button = QPushButton(_tr("&Deny"))
        self.allow_button.clicked.connect(lambda: self._answer(allow=True))
        self.deny_button.clicked.connect(lambda: self._answer(allow=False))
        row.addLayout(text_column, 1)
        row.addWidget(self.deny_button, 0, Qt.AlignmentFlag.AlignVCenter)
        row.addWidget(self.allow_button, 0, Qt.AlignmentFlag.AlignVCenter)
        layout.addLayout(row)
        bridge.permission_requested.connect(self._on_requested)
        bridge.permission_closed.connect(self._on_closed)
        self.refresh_colours()
        self._render()

    @property
    def current(self) -> PermissionRequestedPush | None:
        if self._session_id is None:
            return None
        queue = self._pending.get(self._session_id)
        return queue[0] if queue else None

    def set_session(self, session_id: str | None) -> None:
        self._session_id = session_id
        self._render()

    def drop_session_requests(self, session_id: str) -> None:
        """A run ended: its unanswered requests can no longer be answered."""
        if self._pending.pop(session_id, None):
            self.waiting_changed.emit(session_id, False)
        self._render()

    def drop_all(self) -> None:
        """The main process is gone: no request can be answered any more."""
        self._closed.clear()
        for session_id in list(self._pending):
            self.drop_session_requests(session_id)

    def _on_closed(self, push: PermissionClosedPush) -> None:
        """Another client (a terminal) answered first: the question closes here, saying where
        it was answered, for ``CLOSED_NOTE_MS``."""
        self._answered[push.request_id] = None
        queue = self._pending.get(push.session_id, [])
        asked = next((p for p in queue if p.request_id == push.request_id), None)
        if asked is None:
            return
        queue.remove(asked)
        if not queue:
            del self._pending[push.session_id]
            self.waiting_changed.emit(push.session_id, False)
        self._closed[push.session_id] = (asked, push)
        QTimer.singleShot(CLOSED_NOTE_MS, self, lambda: self._forget_closed(push.request_id))
        self._render()

    def _forget_closed(self, request_id: str) -> None:
        for session_id, (asked, _) in list(self._closed.items()):
            if asked.request_id == request_id:
                del self._closed[session_id]
        self._render()

    def _on_requested(self, push: PermissionRequestedPush) -> None:
        if push.request_id in self._answered:
            return
        self._closed.pop(push.session_id, None)
        queue = self._pending.setdefault(push.session_id, [])
        if all(p.request_id != push.request_id for p in queue):
            queue.append(push)
            if len(queue) == 1:
                self.waiting_changed.emit(push.session_id, True)
        self._render()

    def _answer(self, *, allow: bool) -> None:
        request = self.current
        if request is None:
            return
        if self._bridge.answer_permission(request.session_id, request.request_id, allow):
            self._answered[request.request_id] = None
            while len(self._answered) > _ANSWERED_KEPT:
                del self._answered[next(iter(self._answered))]
            queue = self._pending[request.session_id]
            queue.pop(0)
            if not queue:
                del self._pending[request.session_id]
                self.waiting_changed.emit(request.session_id, False)
        self._render()

    def _render(self) -> None:
        request = self.current
        closed = self._closed.get(self._session_id or "") if request is None else None
        self.setVisible(request is not None or closed is not None)
        self.answered_label.setVisible(closed is not None)
        self.allow_button.setVisible(closed is None)
        self.deny_button.setVisible(closed is None)
        if closed is not None:
            asked, answer = closed
            self._shown_request = None
            self.title_label.setText(
                _tr("{tool} asked for permission").replace("{tool}", visible(asked.tool_name))
            )
            self.summary_view.set_text(visible(asked.summary, strict=True))
            self.warning_label.setVisible(False)
            said = _tr("Allowed") if answer.decision.value == "allow" else _tr("Denied")
            self.answered_label.setText(
                _tr("{answer}: answered in {where}.")
                .replace("{answer}", said)
                .replace("{where}", visible(answer.answered_in))
            )
            return
        if request is None:
            self._shown_request = None
            return
        if request.request_id != self._shown_request:
            # A new question takes the keyboard: on the text being approved (reading it is
            # the point), never on a button, so a stray Enter still decides nothing.
            self._shown_request = request.request_id
            if self.window().isActiveWindow():
                self.summary_view.setFocus(Qt.FocusReason.OtherFocusReason)
        self.title_label.setText(
            _tr("{tool} asks for permission").replace("{tool}", visible(request.tool_name))
        )
        self.summary_view.set_text(visible(request.summary, strict=True))
        self.warning_label.setVisible(request.tool_name == "bash")

    def refresh_colours(self) -> None:
        palette = self.palette()
        accent = theme.accent(Severity.WARN, palette)
        self.set_colours(
            theme.tinted_background(accent, palette), theme.subtle_border(palette), accent
        )
