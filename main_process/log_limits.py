"""Logging what peers cause without letting them write the log.

Why: a renderer connection (or anything that can reach the socket) chooses session ids, field
names and how often it misbehaves. Logged as they come, a newline in an id forges a log line and a
flood of refusals rotates every earlier record out of ``main.log`` within seconds, the history a
user report needs. So expected refusals are logged by code, on one line, with every peer-chosen
value escaped and shortened (``escape``), and each kind of record is rate-limited
(``RateLimitedLog``): a burst is logged, the rest of the window is only counted, and the count is
logged when the next window opens.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

MAX_ESCAPED_CHARS = 80
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:/@+=,'() ")


def escape(value: object, limit: int = MAX_ESCAPED_CHARS) -> str:
    """``value`` as short, printable ASCII on one line: letters, digits, spaces and
    ``_-.:/@+=,'()`` stay, everything else (newlines, brackets, non-ASCII) becomes ``\\xNN`` /
    ``\\uNNNN``; longer text ends with ``...(+N)``."""
    text = str(value)
    shown = text[:limit]
    out = []
    for char in shown:
        if char in _PLAIN:
            out.append(char)
        elif ord(char) < 0x100:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    if len(text) > limit:
        out.append(f"...(+{len(text) - limit})")
    return "".join(out)


class RateLimitedLog:
    """At most ``burst`` records per key and ``window_s``; the rest are counted and reported
    once, with the first record of a later window. Thread-safe; the key set is bounded (keys are
    codes chosen by the program, never by a peer, but an overflow only merges counts)."""

    _MAX_KEYS = 256

    def __init__(
        self,
        logger: logging.Logger,
        *,
        burst: int = 10,
        window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._burst = burst
        self._window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        # key -> [window start, records logged in it, records suppressed]
        self._state: dict[str, list[float]] = {}

    def log(
        self,
        level: int,
        key: str,
        message: str,
        *args: object,
        exc_info: BaseException | None = None,
    ) -> bool:
        """Log ``message % args`` unless ``key`` used its burst in this window; True if logged.
        ``exc_info`` adds a traceback (for unexpected failures only)."""
        now = self._clock()
        with self._lock:
            if key not in self._state and len(self._state) >= self._MAX_KEYS:
                key = "(other)"
            state = self._state.setdefault(key, [now, 0.0, 0.0])
            suppressed = 0
            if now - state[0] >= self._window_s:
                suppressed = int(state[2])
                state[:] = [now, 0.0, 0.0]
            if state[1] >= self._burst:
                state[2] += 1
                return False
            state[1] += 1
        if suppressed:
            self._logger.log(level, "[%s] %d similar record(s) were not logged", key, suppressed)
        self._logger.log(level, message, *args, exc_info=exc_info)
        return True
