"""The composer: a multi-line editor, Send (Ctrl+Enter) and Stop.

Why Ctrl+Enter: Enter alone inserts a newline, so multi-line requests are easy to write and a
stray Enter never sends half a message.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from app.bridge_contract import MAX_TEXT_CHARS


def _tr(text: str) -> str:
    return QCoreApplication.translate("Composer", text)


class Composer(QWidget):
    send_requested = Signal(str)
    cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(20, 8, 20, 14)
        layout.setSpacing(10)
        self.editor = QPlainTextEdit()
        self.editor.setAccessibleName(_tr("Message"))
        self.editor.setPlaceholderText(_tr("Message Maka…   (Ctrl+Enter to send)"))
        self.editor.setTabChangesFocus(True)
        line = self.editor.fontMetrics().lineSpacing()
        frame = self.editor.frameWidth() * 2 + int(self.editor.document().documentMargin() * 2)
        self.editor.setFixedHeight(line * 4 + frame + 4)
        buttons = QVBoxLayout()
        buttons.setSpacing(6)
        self.send_button = QPushButton(_tr("Send"))
        self.send_button.setToolTip(_tr("Send (Ctrl+Enter)"))
        self.send_button.setDefault(False)
        self.send_button.clicked.connect(self.submit)
        self.stop_button = QPushButton(_tr("Stop"))
        self.stop_button.setToolTip(_tr("Stop the running turn (Esc)"))
        self.stop_button.clicked.connect(self.cancel_requested)
        self.stop_button.setVisible(False)
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        buttons.addStretch(1)
        layout.addWidget(self.editor, 1)
        layout.addLayout(buttons)
        for keys in ("Ctrl+Return", "Ctrl+Enter"):
            shortcut = QShortcut(QKeySequence(keys), self.editor)
            shortcut.setContext(Qt.ShortcutContext.WidgetShortcut)
            shortcut.activated.connect(self.submit)
        self.editor.textChanged.connect(self._update_enabled)
        self._running = False
        self._available = True
        self._update_enabled()

    def set_running(self, running: bool) -> None:
        """While a turn runs, Stop replaces nothing but appears beside Send, which waits."""
        self._running = running
        self.stop_button.setVisible(running)
        self._update_enabled()

    def set_available(self, available: bool) -> None:
        """False without a session or a connection: nothing could be sent."""
        self._available = available
        self.editor.setEnabled(available)
        self._update_enabled()

    def submit(self) -> None:
        text = self.editor.toPlainText().strip()
        if not self.send_button.isEnabled() or not text:
            return
        self.send_requested.emit(text)
        self.editor.clear()

    def _update_enabled(self) -> None:
        text = self.editor.toPlainText().strip()
        self.send_button.setEnabled(
            self._available and not self._running and 0 < len(text) <= MAX_TEXT_CHARS
        )
