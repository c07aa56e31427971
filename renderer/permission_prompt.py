"""Permission prompts: a tool asks before it acts; the user allows or denies.

Why inline rather than a modal dialog: a dialog would block the window (and the reading of
the transcript that explains the request). Requests queue per session; the prompt shows the
oldest one for the session on screen. Nothing is pre-focused, so a stray Enter decides nothing.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.bridge_contract import PermissionRequestedPush
from renderer import theme
from renderer.bridge_port import BridgePort
from renderer.park_text import Severity
from renderer.tinted_panel import TintedPanel

_ANSWERED_KEPT = 256


def _tr(text: str) -> str:
    return QCoreApplication.translate("PermissionPrompt", text)


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
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 10, 12, 10)
        layout.setSpacing(4)
        row = QHBoxLayout()
        row.setSpacing(10)
        text_column = QVBoxLayout()
        self.title_label = QLabel()
        font = self.title_label.font()
        font.setBold(True)
        self.title_label.setFont(font)
        self.summary_label = QLabel()
        self.summary_label.setTextFormat(Qt.TextFormat.PlainText)
        self.summary_label.setWordWrap(True)
        self.summary_label.setFont(theme.monospace_font())
        text_column.addWidget(self.title_label)
        text_column.addWidget(self.summary_label)
        self.allow_button = QPushButton(_tr("Allow"))
        self.deny_button = QPushButton(_tr("Deny"))
        self.allow_button.clicked.connect(lambda: self._answer(allow=True))
        self.deny_button.clicked.connect(lambda: self._answer(allow=False))
        row.addLayout(text_column, 1)
        row.addWidget(self.deny_button, 0, Qt.AlignmentFlag.AlignVCenter)
        row.addWidget(self.allow_button, 0, Qt.AlignmentFlag.AlignVCenter)
        layout.addLayout(row)
        bridge.permission_requested.connect(self._on_requested)
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

    def _on_requested(self, push: PermissionRequestedPush) -> None:
        if push.request_id in self._answered:
            return
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
        self.setVisible(request is not None)
        if request is None:
            return
        self.title_label.setText(
            _tr("{tool} asks for permission").replace("{tool}", request.tool_name)
        )
        self.summary_label.setText(request.summary)

    def refresh_colours(self) -> None:
        palette = self.palette()
        accent = theme.accent(Severity.WARN, palette)
        self.set_colours(
            theme.tinted_background(accent, palette), theme.subtle_border(palette), accent
        )
