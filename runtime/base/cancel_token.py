"""Cooperative cancellation shared by the run loop, providers and tools.

A turn is cancelled from another thread (the TUI's Ctrl+C, the desktop's cancel button, shutdown).
Blocking work cannot poll forever, so the token also runs callbacks the moment it is cancelled:
the provider closes its socket, the bash tool kills its process tree. Callbacks registered after
cancellation run immediately, so nobody can miss the signal.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

HOST_STOPPED_AT_QUESTION = "permission_unanswerable"
"""A ``CancelToken.reason``: the host stopped the turn at a permission question no window or
terminal could answer (automatic resume under ``maka host``), not the user."""
HOST_STOPPED = "host_stopped"
"""A ``CancelToken.reason``: the host was shut down (its window closed, SIGTERM, Ctrl+C on
``maka host``) while the turn ran; the turn was stopped by Maka, not by a cancel of the user's."""
OUTPUT_CLOSED = "output_closed"
"""A ``CancelToken.reason``: the program reading a terminal turn's output ended (``maka run ...
| head``), so the turn was stopped with nobody left to show it to."""
STOPPED_BY_HOST = frozenset({HOST_STOPPED_AT_QUESTION, HOST_STOPPED})
"""The reasons that mean Maka stopped the turn (its ending's ``abortSource`` is ``host``)."""


class CancelToken:
    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next = 0
        self.reason: str | None = None
        """Why it was cancelled when not by a cancel of the user's (``HOST_STOPPED_AT_QUESTION``,
        ``HOST_STOPPED``, ``OUTPUT_CLOSED``)."""

    def cancel(self, reason: str | None = None) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            callbacks = list(self._callbacks.values())
            self._callbacks.clear()
        for callback in callbacks:
            callback()

    def is_cancelled(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds; True as soon as the token is cancelled."""
        return self._event.wait(timeout)

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` once on cancellation; returns a function that unregisters it."""
        with self._lock:
            if not self._event.is_set():
                key = self._next
                self._next += 1
                self._callbacks[key] = callback

                def unregister() -> None:
                    with self._lock:
                        self._callbacks.pop(key, None)

                return unregister
        callback()
        return lambda: None
