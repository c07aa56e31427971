"""The window's own notice when its main process is gone (docs/design/desktop.md "Around a crash").

Two cases, both decided by the bridge's connection state:

- ``host_lost``: the connection closed and the main process no longer exists. Maka stopped
  unexpectedly: whatever was running was interrupted (the window marks it so), nothing in this
  window can act any more, and **Restart Maka** starts the program again (the new start repairs
  what was interrupted and opens its own window; this one then closes).
- ``rejected`` after having been connected: a newer start of Maka owns the data directory and
  refused this window. The window says so and closes itself after a few seconds.

The restart command comes from the main process (``MAKA_RESTART_ARGV``, a JSON list): the
renderer never guesses which ``maka`` to run.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence

from PySide6.QtCore import QCoreApplication, QProcess, Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from renderer import theme
from renderer.park_text import Severity
from renderer.tinted_panel import TintedPanel

RESTART_ARGV_ENV = "MAKA_RESTART_ARGV"
SUPERSEDED_CLOSE_MS = 5000

log = logging.getLogger("maka.renderer.host_lost")


def _tr(text: str) -> str:
    return QCoreApplication.translate("HostLostPanel", text)


def restart_argv_from_env() -> tuple[str, ...]:
    """The command that starts Maka again, as the main process handed it over (or empty)."""
    raw = os.environ.get(RESTART_ARGV_ENV, "")
    try:
        value = json.loads(raw) if raw else []
    except json.JSONDecodeError:
        return ()
    if isinstance(value, list) and value and all(isinstance(part, str) for part in value):
        return tuple(value)
    return ()


class HostLostPanel(TintedPanel):
    restarted = Signal()
    """Restart Maka started the program again; the window may close."""

    def __init__(self, restart_argv: Sequence[str] = (), parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("HostLostPanel")
        self.setAccessibleName(_tr("Maka stopped"))
        self._restart_argv = tuple(restart_argv)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 12, 12, 12)
        row = QHBoxLayout()
        row.setSpacing(12)
        column = QVBoxLayout()
        column.setSpacing(4)
        self.title_label = QLabel()
        font = self.title_label.font()
        font.setBold(True)
        self.title_label.setFont(font)
        self.title_label.setWordWrap(True)
        self.body_label = QLabel()
        self.body_label.setWordWrap(True)
        self.body_label.setTextFormat(Qt.TextFormat.PlainText)
        column.addWidget(self.title_label)
        column.addWidget(self.body_label)
        self.restart_button = QPushButton(_tr("Restart Maka"))
        self.restart_button.clicked.connect(self.restart)
        row.addLayout(column, 1)
        row.addWidget(self.restart_button, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(row)
        self.refresh_colours()
        self.setVisible(False)

    def show_lost(self) -> None:
        self.title_label.setText(_tr("Maka stopped unexpectedly."))
        self.body_label.setText(
            _tr(
                "Whatever was running was interrupted and nothing more happens in this window. "
                "Restart Maka to see what was saved, check your files, and carry on."
            )
        )
        self.restart_button.setVisible(True)
        self.restart_button.setEnabled(bool(self._restart_argv))
        if not self._restart_argv:
            self.restart_button.setToolTip(_tr("Start Maka again from your applications menu."))
        self.setVisible(True)

    def show_superseded(self) -> None:
        self.title_label.setText(_tr("Maka was started again."))
        self.body_label.setText(
            _tr("This window belongs to the earlier start and closes now; use the new window.")
        )
        self.restart_button.setVisible(False)
        self.setVisible(True)

    def restart(self) -> bool:
        """Start Maka again, detached from this window; True when it started."""
        if not self._restart_argv:
            return False
        program, *arguments = self._restart_argv
        started, _pid = QProcess.startDetached(program, arguments)
        if not started:
            log.warning("could not start %s again", program)
            self.body_label.setText(
                _tr("Maka could not be started from here. Start it from your applications menu.")
            )
            return False
        self.restart_button.setEnabled(False)
        self.body_label.setText(_tr("Starting Maka again… this window closes when it is up."))
        self.restarted.emit()
        return True

    def refresh_colours(self) -> None:
        palette = self.palette()
        accent = theme.accent(Severity.ERROR, palette)
        self.set_colours(
            theme.tinted_background(accent, palette), theme.subtle_border(palette), accent
        )
