"""The window's own notice when its main process is gone (docs/design/desktop.md "Around a crash").

Two cases, both decided by the bridge's connection state:

- ``host_lost``: the connection closed and the main process no longer exists. Maka stopped
  unexpectedly: whatever was running was interrupted (the window marks it so), nothing in this
  window can act any more, and **Restart Maka** starts the program again (the new start repairs
  what was interrupted and opens its own window; this one then closes).
- ``rejected`` after having been connected: a newer start of Maka owns the data directory and
  refused this window. The window says so and closes itself after a few seconds; when that
  start has no window of its own (``maka host`` in a terminal), the window says so instead and
  offers **Open a new window** (the start it makes asks that host for one, or is the desktop
  itself when that host has stopped since), closing once that start has ended, or a few seconds
  after it began.

A start made from here is watched: when it ends while this window still stands (it was refused,
another process owning the data folder, and said why in its own message), the panel says so and
**Restart Maka** can be pressed again; before, it said "Starting Maka again…" for good.

The restart command comes from the main process (``MAKA_RESTART_ARGV``, a JSON list): the
renderer never guesses which ``maka`` to run.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence

from PySide6.QtCore import QCoreApplication, QProcess, Qt, QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from renderer import theme
from renderer.park_text import Severity
from renderer.tinted_panel import TintedPanel

RESTART_ARGV_ENV = "MAKA_RESTART_ARGV"
SUPERSEDED_CLOSE_MS = 5000
STARTED_CHECK_MS = 500
OPENED_CLOSE_MS = 5000

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


def started_process_ended(pid: int) -> bool:
    """Whether the process a restart started has ended (a zombie counts as ended: what reaps
    a detached process may not). Windows has no safe signal 0: never "ended" there."""
    if os.name == "nt" or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[-1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return False


class HostLostPanel(TintedPanel):
    restarted = Signal()
    """Restart Maka started the program again; the window may close."""
    opened_elsewhere = Signal()
    """The start made to open a new window (beside a ``maka host``) has ended: this window,
    which cannot reconnect, may close."""

    def __init__(self, restart_argv: Sequence[str] = (), parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("HostLostPanel")
        self.setAccessibleName(_tr("Maka stopped"))
        self._restart_argv = tuple(restart_argv)
        self._started_pid = 0
        self._windowless = False
        self._started_check = QTimer(self)
        self._started_check.setInterval(STARTED_CHECK_MS)
        self._started_check.timeout.connect(self._check_started)
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
        self._windowless = False
        self.restart_button.setText(_tr("Restart Maka"))
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

    def show_superseded(self, *, windowless: bool = False) -> None:
        """``windowless``: the new start has no window (``maka host``): this one cannot
        reconnect, and offers to open a new one instead of pointing at none."""
        self._windowless = windowless
        self._started_check.stop()
        if not windowless:
            self.title_label.setText(_tr("Maka was started again."))
            self.body_label.setText(
                _tr("This window belongs to the earlier start and closes now; use the new window.")
            )
            self.restart_button.setVisible(False)
            self.setVisible(True)
            return
        self.title_label.setText(_tr("Maka was started again, without a window (maka host)."))
        self.body_label.setText(
            _tr(
                "This window belongs to the earlier start and cannot reconnect. Open a new window "
                "to carry on there (or run maka gui)."
            )
        )
        self.restart_button.setText(_tr("Open a new window"))
        self.restart_button.setVisible(True)
        self.restart_button.setEnabled(bool(self._restart_argv))
        self.setVisible(True)

    def restart(self) -> bool:
        """Start Maka again, detached from this window; True when it started."""
        if not self._restart_argv:
            return False
        program, *arguments = self._restart_argv
        started, pid = QProcess.startDetached(program, arguments)
        if not started:
            log.warning("could not start %s again", program)
            self.body_label.setText(
                _tr("Maka could not be started from here. Start it from your applications menu.")
            )
            return False
        self.restart_button.setEnabled(False)
        if self._windowless:
            self.body_label.setText(_tr("Opening a new window… this one closes then."))
        else:
            self.body_label.setText(_tr("Starting Maka again… this window closes when it is up."))
        self._started_pid = int(pid)
        self._started_check.start()
        if self._windowless:
            # The start opens its window (through the host, or as the desktop itself when
            # the host has stopped since, and then it never ends): this one closes anyway.
            QTimer.singleShot(OPENED_CLOSE_MS, self, self.opened_elsewhere.emit)
        self.restarted.emit()
        return True

    def _check_started(self) -> None:
        """The start made from here ended: beside a ``maka host`` it asked for a new window
        (or said why it could not); otherwise this window still stands, so the start did not
        take over, and the panel says so and can start again."""
        if not started_process_ended(self._started_pid):
            return
        self._started_check.stop()
        if self._windowless:
            self.opened_elsewhere.emit()  # (said once: the window closes)
            return
        self.show_lost()
        self.body_label.setText(
            _tr(
                "Maka was started again but ended without taking over (its own message said "
                "why: another Maka process may be using this data folder). Restart Maka to try "
                "again once that is resolved."
            )
        )

    def refresh_colours(self) -> None:
        palette = self.palette()
        accent = theme.accent(Severity.ERROR, palette)
        self.set_colours(
            theme.tinted_background(accent, palette), theme.subtle_border(palette), accent
        )
