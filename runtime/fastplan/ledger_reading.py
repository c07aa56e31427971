"""A ledger's decoded events and their tool-ledger scan, built as the pieces of a file arrive."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runtime.fastplan.tail_scan import BatchScan, adopt_tail, tail_is_independent
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.tool_ledger_scanner import ToolLedgerScan


class LedgerReading:
    """The decoded events and their tool-ledger scan, built as the pieces of a file arrive.

    The scan runs on each piece this process decoded as soon as it arrives; the pieces a child
    process decoded (``parallel_decode``) were already scanned there, and that scan is adopted
    when it provably equals scanning them here (``tail_scan.adopt_tail``); otherwise, or when
    the child's summary never came, they are scanned here, in order."""

    def __init__(self) -> None:
        self.events: list[RuntimeEvent] = []
        self._scan = BatchScan()
        self._unscanned: list[RuntimeEvent] = []
        self._summary: Any = None

    def consume(self, piece: list[RuntimeEvent]) -> None:
        self._flush()
        self.events.extend(piece)
        self._scan.feed(piece)

    def consume_tail(self, piece: list[RuntimeEvent]) -> None:
        self.events.extend(piece)
        self._unscanned.extend(piece)

    def take_summary(self, summary: Any) -> None:
        self._summary = summary

    def scan_so_far(self) -> ToolLedgerScan:
        """The scan of the pieces consumed here so far (the head, while the child works)."""
        self._flush()
        return self._scan.result_so_far()

    def tail_is_independent(self, summary: Any, tail_ids: Sequence[str]) -> bool:
        """Whether the tail a ``TailScan`` summary describes scans alone as after what was
        consumed here (``tail_scan.tail_is_independent``)."""
        return tail_is_independent(self._scan, summary, tail_ids)

    def _flush(self) -> None:
        if self._unscanned:
            self._scan.feed(self._unscanned)
            self._unscanned = []
        self._summary = None

    def finish(self) -> ToolLedgerScan:
        if self._unscanned and self._summary is not None:
            adopted = adopt_tail(self._scan, self._summary, self._unscanned)
            if adopted is not None:
                return adopted
        self._flush()
        return self._scan.finish()
