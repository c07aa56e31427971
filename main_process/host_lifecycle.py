"""The main process's lifecycle: ``opening -> ready -> closing -> closed``.

Why a separate object: every part of the host (IPC router, turn workers, auto-resume, the signal
bridge) has to agree on one question, "may I still admit work?", and shutdown can be requested from
several places at once (window closed, SIGTERM, Ctrl+C, a failed startup). Keeping the state in one
place with legal transitions only makes ``close()`` idempotent by construction: the first caller
wins the ``closing`` transition, every later caller is told that shutdown already started.

Qt-free on purpose so it can be tested and reasoned about without an event loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from enum import StrEnum


class HostState(StrEnum):
    OPENING = "opening"
    READY = "ready"
    CLOSING = "closing"
    CLOSED = "closed"


# Legal transitions. ``opening -> closing`` covers a startup that fails (or is interrupted by
# SIGTERM) before the host ever became ready.
_ALLOWED: dict[HostState, frozenset[HostState]] = {
    HostState.OPENING: frozenset({HostState.READY, HostState.CLOSING}),
    HostState.READY: frozenset({HostState.CLOSING}),
    HostState.CLOSING: frozenset({HostState.CLOSED}),
    HostState.CLOSED: frozenset(),
}

StateListener = Callable[[HostState, HostState], None]


class IllegalTransition(RuntimeError):
    """A programming error: the host tried to move backwards (for example closed -> ready)."""


class HostLifecycle:
    """Thread-safe state holder; listeners run on the thread that made the transition."""

    def __init__(self) -> None:
        self._state = HostState.OPENING
        self._lock = threading.Lock()
        self._listeners: list[StateListener] = []

    @property
    def state(self) -> HostState:
        with self._lock:
            return self._state

    @property
    def admits_work(self) -> bool:
        """True only while ready: no turn or resume may start while opening or after close began."""
        return self.state is HostState.READY

    def subscribe(self, listener: StateListener) -> None:
        self._listeners.append(listener)

    def mark_ready(self) -> bool:
        """``opening -> ready``. Returns False (and changes nothing) if shutdown already began,
        so a startup that races a SIGTERM never flips a closing host back to ready."""
        return self._move(HostState.READY, from_states=frozenset({HostState.OPENING}))

    def begin_closing(self) -> bool:
        """``opening|ready -> closing``. True for the one caller that must run the shutdown
        sequence; False for everyone after (double close is harmless)."""
        return self._move(
            HostState.CLOSING, from_states=frozenset({HostState.OPENING, HostState.READY})
        )

    def mark_closed(self) -> bool:
        """``closing -> closed``; False if already closed."""
        return self._move(HostState.CLOSED, from_states=frozenset({HostState.CLOSING}))

    def _move(self, target: HostState, from_states: frozenset[HostState]) -> bool:
        with self._lock:
            previous = self._state
            if previous not in from_states:
                if previous is target or _is_later(previous, target):
                    return False
                raise IllegalTransition(f"cannot move from {previous} to {target}")
            if target not in _ALLOWED[previous]:  # pragma: no cover - table and callers agree
                raise IllegalTransition(f"cannot move from {previous} to {target}")
            self._state = target
        for listener in list(self._listeners):
            listener(previous, target)
        return True


_ORDER = {state: index for index, state in enumerate(HostState)}


def _is_later(current: HostState, target: HostState) -> bool:
    """True when ``current`` is already past ``target``: the request is stale, not illegal."""
    return _ORDER[current] > _ORDER[target]
