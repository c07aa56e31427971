"""Ending the ``maka`` process without tearing down what a finished command built.

A read-only command over a large ledger ends holding hundreds of thousands of small objects;
freeing them one by one at exit costs about a tenth of a second and changes nothing, because the
process is about to end anyway. Such a command parks its objects here once its output is
written, and the console entry point (only it: code that calls ``app.cli.main`` in-process keeps
its normal teardown) then flushes the standard streams, waits for every child process the
command started (the ledger tools' second decoding process, which such a command does not wait
for itself), and leaves with ``os._exit``: no process of the command outlives it.
"""

from __future__ import annotations

import os
import sys


class _ExitState:
    __slots__ = ("console", "parked", "requested")

    def __init__(self) -> None:
        self.console = False
        self.requested = False
        self.parked: list[object] = []


_state = _ExitState()


def enter_console() -> None:
    """Called by the console entry point, before the command runs: the process ends when the
    command returns, so a fast exit may be granted."""
    _state.console = True


def request_fast_exit(*keep: object) -> bool:
    """Keep ``keep`` alive until the process ends and skip the interpreter's teardown at exit.
    Only for commands that hold no open files, threads or exit handlers of their own. Returns
    False (and keeps nothing) when the command was called in-process, not from the console."""
    if not _state.console:
        return False
    _state.parked.extend(keep)
    _state.requested = True
    return True


def fast_exit_requested() -> bool:
    return _state.requested


def exit_now(code: int) -> None:
    """Flush the standard streams, wait for the process's children, and end the process with
    ``code``, skipping teardown."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe: the output could not be delivered
        code = code or 1
    _wait_for_children()
    os._exit(code)


def _wait_for_children() -> None:
    """Reap every child of this process. A command granted the fast exit starts no child that
    is meant to outlive it; the one it may leave (a decoding process that already delivered its
    work and is ending) is waited for here, so the shell gets its prompt back only when no
    process of the command is left."""
    if not hasattr(os, "fork"):  # only POSIX commands fork
        return
    while True:
        try:
            os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            return
