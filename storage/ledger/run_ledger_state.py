"""Per-run state the writers validate against, so a write never rescans the ledger.

For every run a writer touches, the store keeps: the header's identity and status, the next
``event_seq``, the terminal event (the seal) and an incremental ``ToolLedgerScanner`` fed with the
run's committed events in ``event_seq`` order. A write probes its candidates against that scanner
(cost proportional to the candidates), and after ``COMMIT`` feeds them in. The scanner is loaded
from the run's rows only when a write first needs it (one pass over that run, never over the whole
ledger).

The cache is only as good as its knowledge of the database, so:

- it is dropped whenever ``PRAGMA data_version`` says another connection committed (checked at the
  start of every write transaction, under the write lock);
- an entry touched by a transaction that did not commit is evicted (its scanner may hold
  candidates that never became facts);
- ``full_rescan=True`` turns the cache off: every write re-reads and rescans the whole run. That
  mode exists to prove (tests) that incremental validation gives the same verdicts.
"""

from __future__ import annotations

import sqlite3
from collections import OrderedDict
from dataclasses import dataclass

from runtime.ledger.store_ports import RunStatus
from runtime.ledger.tool_ledger_scanner import ToolLedgerScanner
from storage.ledger.event_rows import read_invocation_rows
from storage.ledger.run_header_store import require_header

CACHE_CAPACITY = 64


@dataclass(slots=True)
class RunLedgerState:
    run_id: str
    session_id: str
    invocation_id: str
    turn_id: str
    status: RunStatus
    next_seq: int
    terminal_event_id: str | None
    scanner: ToolLedgerScanner | None = None

    @property
    def sealed(self) -> bool:
        return self.terminal_event_id is not None


class RunStateCache:
    """Per-connection cache of ``RunLedgerState`` (least recently used first out)."""

    def __init__(self, *, full_rescan: bool = False, capacity: int = CACHE_CAPACITY) -> None:
        self._entries: OrderedDict[str, RunLedgerState] = OrderedDict()
        self._data_version: int | None = None
        self._full_rescan = full_rescan
        self._capacity = capacity
        self._touched: set[str] = set()

    def begin(self, conn: sqlite3.Connection | sqlite3.Cursor) -> None:
        """Call right after ``BEGIN IMMEDIATE``: forget everything if another connection wrote."""
        version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        if version != self._data_version or self._full_rescan:
            self._entries.clear()
            self._data_version = version
        self._touched.clear()

    def committed(self) -> None:
        self._touched.clear()

    def abandon(self) -> None:
        """The transaction rolled back: entries it touched may describe uncommitted rows."""
        for run_id in self._touched:
            self._entries.pop(run_id, None)
        self._touched.clear()

    def forget(self, run_id: str) -> None:
        """Drop one run's state (its rows were written without going through it)."""
        self._entries.pop(run_id, None)

    def clear(self) -> None:
        self._entries.clear()
        self._touched.clear()

    def state(self, conn: sqlite3.Connection, run_id: str) -> RunLedgerState:
        """The run's state (``run_not_found`` when it has no header)."""
        self._touched.add(run_id)
        entry = self._entries.get(run_id)
        if entry is not None:
            self._entries.move_to_end(run_id)
            return entry
        header = require_header(conn, run_id)
        row = conn.execute(
            "SELECT MAX(event_seq) FROM runtime_events WHERE invocation_id = ?",
            (header.invocation_id,),
        ).fetchone()
        terminal = conn.execute(
            "SELECT event_id FROM runtime_events WHERE invocation_id = ? AND terminal = 1"
            " ORDER BY event_seq LIMIT 1",
            (header.invocation_id,),
        ).fetchone()
        entry = RunLedgerState(
            run_id=header.run_id,
            session_id=header.session_id,
            invocation_id=header.invocation_id,
            turn_id=header.turn_id,
            status=header.status,
            next_seq=(row[0] or 0) + 1,
            terminal_event_id=terminal[0] if terminal is not None else None,
        )
        self._entries[run_id] = entry
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)
        return entry

    def scanner(self, conn: sqlite3.Connection, state: RunLedgerState) -> ToolLedgerScanner:
        """The run's scanner, fed with every committed event of the run (loaded on first use)."""
        if state.scanner is None or self._full_rescan:
            scanner = ToolLedgerScanner()
            for stored in read_invocation_rows(conn, state.invocation_id):
                scanner.feed(stored.event)
            state.scanner = scanner
        return state.scanner
