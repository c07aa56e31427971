"""The status bar's connection indicator: a coloured dot, a word, and host progress.

Why visible at all times: the renderer never writes anything itself; when the main process is
gone, every button is inert, and the user must be able to see why.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from app.bridge_contract import HostState, HostStatePush
from renderer import theme
from renderer.bridge_port import BridgePort, ConnectionState
from renderer.park_text import Severity


def _tr(text: str) -> str:
    return QCoreApplication.translate("ConnectionStatus", text)


_WORDS = {
    ConnectionState.CONNECTING: "Connecting…",
    ConnectionState.CONNECTED: "Connected",
    ConnectionState.DISCONNECTED: "Disconnected, reconnecting…",
    ConnectionState.REJECTED: "Disconnected: this window belongs to an earlier start of Maka",
    ConnectionState.HOST_LOST: "Maka stopped unexpectedly",
}
_HOST_WORDS = {
    HostState.OPENING: "Opening…",
    HostState.RECOVERING: "Checking interrupted runs…",
    HostState.READY: "",
    HostState.CLOSING: "Closing…",
    HostState.CLOSED: "Closed",
}


class ConnectionStatus(QWidget):
    def __init__(self, bridge: BridgePort, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 0, 6, 0)
        layout.setSpacing(6)
        self.dot = QLabel("●")
        self.text_label = QLabel()
        self.host_label = QLabel()
        self.host_label.setTextFormat(Qt.TextFormat.PlainText)
        layout.addWidget(self.dot)
        layout.addWidget(self.text_label)
        layout.addSpacing(12)
        layout.addWidget(self.host_label)
        self._bridge = bridge
        self._host_text = ""
        bridge.connection_state_changed.connect(lambda _state: self._render())
        bridge.host_state_changed.connect(self._on_host_state)
        self._render()

    @property
    def text(self) -> str:
        return self.text_label.text()

    def _on_host_state(self, push: HostStatePush) -> None:
        words = _tr(_HOST_WORDS[push.state]) if _HOST_WORDS[push.state] else ""
        if push.state is HostState.RECOVERING and push.detail:
            words = ""  # the detail says what opening is doing (an upgrade, then the check)
        self._host_text = f"{words} {push.detail}".strip()
        self._render()

    def _render(self) -> None:
        state = self._bridge.connection_state
        self.text_label.setText(_tr(_WORDS[state]))
        self.host_label.setText(self._host_text if state is ConnectionState.CONNECTED else "")
        self.setAccessibleName(self.text_label.text())
        self._colour()

    def _colour(self) -> None:
        palette = self.palette()
        state = self._bridge.connection_state
        colour: QColor
        if state is ConnectionState.CONNECTED:
            colour = theme.success(palette)
        elif state is ConnectionState.CONNECTING:
            colour = theme.accent(Severity.INFO, palette)
        else:
            colour = theme.accent(Severity.ERROR, palette)
        dot_palette = self.dot.palette()
        dot_palette.setColor(QPalette.ColorRole.WindowText, colour)
        self.dot.setPalette(dot_palette)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self._colour()
