"""SIGTERM / SIGINT / SIGHUP -> an orderly shutdown request on the Qt event loop.

Why this is needed: Python runs signal handlers only between bytecodes of the main thread. While
Qt sits in ``app.exec()`` no Python code runs, so a plain ``signal.signal`` handler would wait until
some unrelated event arrives (measured: SIGTERM did nothing). ``signal.set_wakeup_fd`` makes the
interpreter write the signal number into a socket the moment the signal arrives; a
``QSocketNotifier`` on the other end wakes the event loop, and the slot (Python code) emits
``termination_requested``. The host answers with its normal shutdown sequence, so a SIGTERM ends
exactly like closing the window: turns cancelled and drained, store closed, lock released, exit 0.

A second signal while shutdown is already running is reported again; the host ignores it
(``close()`` is idempotent).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
from types import FrameType
from typing import Any

from PySide6.QtCore import QObject, QSocketNotifier, Signal

_log = logging.getLogger("maka.main.signals")

_HANDLED = tuple(
    sig
    for sig in (
        getattr(signal, "SIGTERM", None),
        getattr(signal, "SIGINT", None),
        getattr(signal, "SIGHUP", None),  # the OS logging the user out / terminal closed
    )
    if sig is not None
)


def _record(signum: int, frame: FrameType | None) -> None:
    """Python-level handler: does nothing itself; the wakeup fd carries the signal number."""
    del signum, frame


class SignalBridge(QObject):
    """Installs the handlers on ``install()``; ``uninstall()`` restores the previous ones."""

    termination_requested = Signal(int)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._reader: socket.socket | None = None
        self._writer: socket.socket | None = None
        self._notifier: QSocketNotifier | None = None
        self._previous: dict[int, Any] = {}
        self._previous_wakeup_fd = -1

    @property
    def installed(self) -> bool:
        return self._notifier is not None

    def install(self) -> None:
        if self._notifier is not None:
            return
        reader, writer = socket.socketpair()
        reader.setblocking(False)
        writer.setblocking(False)
        self._reader, self._writer = reader, writer
        self._previous_wakeup_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        for sig in _HANDLED:
            self._previous[sig] = signal.signal(sig, _record)
        notifier = QSocketNotifier(reader.fileno(), QSocketNotifier.Type.Read, self)
        notifier.activated.connect(self._drain)
        self._notifier = notifier

    def uninstall(self) -> None:
        if self._notifier is None:
            return
        self._notifier.setEnabled(False)
        self._notifier.deleteLater()
        self._notifier = None
        for sig, previous in self._previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()
        with contextlib.suppress(ValueError):
            signal.set_wakeup_fd(self._previous_wakeup_fd)
        for sock in (self._reader, self._writer):
            if sock is not None:
                sock.close()
        self._reader = self._writer = None

    def _drain(self) -> None:
        if self._reader is None:
            return
        try:
            data = self._reader.recv(64)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:  # pragma: no cover - the pair is private to this object
            _log.warning("signal bridge read failed: %s", error)
            return
        for signum in data:
            if signum in _HANDLED:
                self.termination_requested.emit(int(signum))
