"""Running one agent turn from a terminal command so that Ctrl+C cancels it cleanly.

The turn runs on a worker thread; the main thread only waits, so a SIGINT arrives there and
cancels the turn through its token (the run then ends ``cancelled`` with its terminal event and
header, and running shells are killed) instead of tearing the process down mid-turn.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TypeVar

from runtime.base.cancel_token import CancelToken

T = TypeVar("T")

LATE_CTRL_C_S = 1.5
"""A Ctrl+C this soon after a turn ended was meant for the turn (it came as the turn ended):
at the chat's prompt it cancels nothing, and it does not leave the chat either."""
_ended_at: list[float] = []  # (when the last turn run here ended: its monotonic time)


LATE_CTRL_C_WORDS = (
    "(the turn had already ended: Ctrl+C cancelled nothing; press it again, or type /quit, "
    "to leave)"
)
_at_prompt: list[bool] = [False]


def turn_just_ended(within_s: float = LATE_CTRL_C_S) -> bool:
    """Whether a turn run here (``run_interruptible``) ended less than ``within_s`` ago."""
    return bool(_ended_at) and time.monotonic() - _ended_at[-1] < within_s


class LateInterrupt(KeyboardInterrupt):
    """Ctrl+C at the chat's prompt just after a turn ended: meant for the turn, it is said so
    and the chat goes on (``chat_interrupts``)."""


@contextlib.contextmanager
def chat_interrupts() -> Iterator[None]:
    """Ctrl+C while a terminal chat is open: between turns it leaves the chat
    (``KeyboardInterrupt``), except just after a turn ended (``turn_just_ended``), when it was
    meant to stop that turn.
    The TUI then left without a word, from its prompt or before it was shown ("maka:
    interrupted"); now it says the turn had already ended and goes on (at the prompt,
    ``LateInterrupt`` makes it ask again). A turn's own handler (``run_interruptible``) stands
    in for this one while it runs."""

    def interrupted(signum: int, frame: FrameType | None) -> None:
        del signum, frame
        if not turn_just_ended():
            raise KeyboardInterrupt
        _ended_at.clear()  # (a second Ctrl+C leaves)
        if _at_prompt[0]:
            raise LateInterrupt
        print(f"\n{LATE_CTRL_C_WORDS}", flush=True)

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def reading_at_prompt() -> Iterator[None]:
    """The chat waits at its prompt: a late Ctrl+C there raises ``LateInterrupt``."""
    _at_prompt[0] = True
    try:
        yield
    finally:
        _at_prompt[0] = False


def run_cancellable(
    work: Callable[[], T], cancel: CancelToken, *, notice: str = "maka: cancelling the turn..."
) -> T:
    """Run ``work`` on a thread; Ctrl+C cancels ``cancel``. Re-raises what ``work`` raised."""
    return run_interruptible(work, cancel.cancel, notice=notice)


def run_interruptible(
    work: Callable[[], T],
    on_interrupt: Callable[[], None],
    *,
    notice: str = "maka: cancelling the turn...",
    name: str = "maka-turn",
) -> T:
    """Run ``work`` on a thread named ``name`` while the main thread waits; each Ctrl+C prints
    ``notice`` and calls ``on_interrupt``. Re-raises what ``work`` raised."""
    results: list[T] = []
    failures: list[BaseException] = []

    def target() -> None:
        try:
            results.append(work())
        except BaseException as error:  # handed to the caller's thread below
            failures.append(error)

    def interrupted(signum: int, frame: FrameType | None) -> None:
        del signum, frame
        if results or failures:
            return  # (pressed as the turn ended: there is nothing left to cancel, or to say)
        print(f"\n{notice}", file=sys.stderr)
        on_interrupt()

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        worker = threading.Thread(target=target, name=name, daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(0.2)
    finally:
        signal.signal(signal.SIGINT, previous)
    # (a turn that ran to its end; one refused at once, ``session_busy`` say, is not one a
    # Ctrl+C could have been meant for)
    _ended_at[:] = [time.monotonic()] if results else []
    if failures:
        raise failures[0]
    return results[0]
