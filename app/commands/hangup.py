"""The terminal closed (SIGHUP) while a terminal command runs a turn or a chat."""

from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import Any


class Hangup:
    """SIGHUP (the terminal was closed) while the chat is open: as Ctrl+C, a turn running is
    cancelled (it ends ``cancelled``, not left running until the next start) and the chat then
    leaves (``hung``); at the prompt it leaves at once. Output goes nowhere from then on: the
    terminal is gone, and a write to it would fail."""

    def __init__(self) -> None:
        self.hung = False
        self._previous: Any = None

    def __enter__(self) -> Hangup:
        if hasattr(signal, "SIGHUP"):
            self._previous = signal.signal(signal.SIGHUP, self._hung)
        return self

    def __exit__(self, *exc: object) -> None:
        if hasattr(signal, "SIGHUP"):
            signal.signal(signal.SIGHUP, self._previous or signal.SIG_DFL)

    def _hung(self, signum: int, frame: FrameType | None) -> None:
        del signum
        from app.visible_text import silence

        self.hung = True
        for stream in (sys.stdout, sys.stderr):
            silence(stream)
        interrupt = signal.getsignal(signal.SIGINT)
        if callable(interrupt):  # a turn's Ctrl+C (it cancels the turn), or KeyboardInterrupt
            interrupt(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt
