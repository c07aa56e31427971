"""The sessions a window read the transcript of, with the ledger's mark at that read.

On a shared ledger (docs/design/hosts.md) another process may add to a session a window shows:
a ``maka run`` through another host starts a turn in it, commits its messages and tool calls,
and ends it. The takeover sweep already reads what other processes changed in the sessions it
follows (``DesktopServices.elsewhere_changes``); with these marks it also tells the window of a
session read here whose ledger moved since (a new run, new events, a run's status), so the
window reads that transcript again. A mark costs two small reads (the session's run headers and
its latest run's last event number): nothing is re-read while nothing changed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

from runtime.ledger.store_ports import RunHeader

MAX_FOLLOWED = 32
"""Sessions followed at most (the most recently read): a window shows one at a time."""

LedgerMark = tuple[tuple[tuple[str, str, int], ...], int]
"""Every run's id, status and update time, and the latest run's last event number."""


class MarkReader(Protocol):
    def list_session_runs(self, session_id: str) -> Sequence[RunHeader]: ...

    def run_high_water(self, run_id: str) -> int: ...


def ledger_mark(store: MarkReader, session_id: str) -> LedgerMark:
    """What the ledger holds for ``session_id`` now, in a form that changes with every commit
    the transcript shows (``LedgerError`` for a session gone)."""
    runs = sorted(
        store.list_session_runs(session_id), key=lambda header: (header.created_at, header.run_id)
    )
    headers = tuple((run.run_id, run.status.value, run.updated_at) for run in runs)
    return headers, store.run_high_water(runs[-1].run_id) if runs else 0


class OpenedTranscripts:
    """The marks of the sessions read last (thread-safe: reads run on worker threads)."""

    def __init__(self, limit: int = MAX_FOLLOWED) -> None:
        self._limit = limit
        self._marks: OrderedDict[str, LedgerMark] = OrderedDict()
        self._lock = threading.Lock()

    def read(self, session_id: str, mark: LedgerMark) -> None:
        """A window was given the transcript as of ``mark`` (taken before it was read)."""
        with self._lock:
            self._marks[session_id] = mark
            self._marks.move_to_end(session_id)
            while len(self._marks) > self._limit:
                self._marks.popitem(last=False)

    def followed(self) -> list[str]:
        with self._lock:
            return list(self._marks)

    def moved(self, session_id: str, mark: LedgerMark) -> bool:
        """Whether the ledger moved since the window was last given (or told of) the session;
        remembers ``mark``, so each move is told once."""
        with self._lock:
            if session_id not in self._marks:
                return False
            before = self._marks[session_id]
            self._marks[session_id] = mark
            return before != mark

    def forget(self, session_id: str) -> None:
        with self._lock:
            self._marks.pop(session_id, None)
