"""Running one agent turn from a terminal command so that Ctrl+C cancels it cleanly.

The turn runs on a worker thread; the main thread only waits, so a SIGINT arrives there and
cancels the turn through its token (the run then ends ``cancelled`` with its terminal event and
header, and running shells are killed) instead of tearing the process down mid-turn.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import TypeVar

from runtime.base.cancel_token import CancelToken

T = TypeVar("T")


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
    if failures:
        raise failures[0]
    return results[0]
