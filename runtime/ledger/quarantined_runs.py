"""One rule for a run whose stored record no longer decodes.

Startup recovery cannot repair such a run (an event of it fails to decode: ``store_corrupt``),
so it quarantines it and the session's other runs go on (docs/design/recovery.md). Every reader
of a whole session (the history a new message shows the model, the timeline, the desktop's
transcript, ``maka plan``'s list of calls, the snapshot audit and retention) reads a run through
``read_unless_quarantined``: such a run is said to be unreadable and stepped over, and any other
failure is raised as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from runtime.ledger.codes import StoreCode
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.ledger_ports import StoredEvent


class RunEventsReader(Protocol):
    def read_run_events(self, run_id: str) -> Sequence[StoredEvent]: ...


@dataclass(frozen=True, slots=True)
class Quarantined:
    """A run whose stored record no longer decodes; ``error`` names the event that fails."""

    run_id: str
    error: LedgerError


def read_unless_quarantined(
    reader: RunEventsReader, run_id: str
) -> Sequence[StoredEvent] | Quarantined:
    """The run's stored events, or ``Quarantined`` when its record no longer decodes."""
    try:
        return reader.read_run_events(run_id)
    except LedgerError as error:
        if str(error.code) != StoreCode.STORE_CORRUPT:
            raise
        return Quarantined(run_id, error)
