"""The store ports: what the runtime may ask of durable storage (implemented by ``storage/``).

One writer per kind of fact (docs/design/architecture.md principle 3): the generic append accepts
ordinary events, function_calls and unbound function_responses only; T1, T2, the recovery bundle,
the run ending and the continuation admission each have their own method, and the store refuses any
other shape with a coded ``StoreRefusal``.

Import every name of the ports from this module. They are defined in two modules beside it:
``run_records.py`` (sessions, run headers, their statuses and ``StoreRefusal``) and
``ledger_ports.py`` (the ports themselves, ``LedgerReader``, ``LedgerWriter``, ``LedgerStore`` and
``SessionLeaseStore``, and the records only they return), which is loaded the first time one of
its names is asked for: a command that only lists sessions (``maka sessions``) needs the
sessions, the run headers and their statuses, not the writers' records.
"""

import importlib
from typing import TYPE_CHECKING, Any

from runtime.ledger.run_records import (
    EVENT_STATUS_TO_RUN,
    RUN_STATUS_TO_EVENT,
    TERMINAL_RUN_STATUSES,
    RunFact,
    RunHeader,
    RunStatus,
    SessionRecord,
    StoreRefusal,
)

if TYPE_CHECKING:
    from runtime.ledger.ledger_ports import (
        AttestationCommit,
        CommitResult,
        LedgerReader,
        LedgerStore,
        LedgerWriter,
        ProjectionCounts,
        SessionLease,
        SessionLeaseStore,
        StoredEvent,
        ToolJournalRecord,
        ToolOperationRecord,
    )


__all__ = [
    "EVENT_STATUS_TO_RUN",
    "RUN_STATUS_TO_EVENT",
    "TERMINAL_RUN_STATUSES",
    "AttestationCommit",
    "CommitResult",
    "LedgerReader",
    "LedgerStore",
    "LedgerWriter",
    "ProjectionCounts",
    "RunFact",
    "RunHeader",
    "RunStatus",
    "SessionLease",
    "SessionLeaseStore",
    "SessionRecord",
    "StoreRefusal",
    "StoredEvent",
    "ToolJournalRecord",
    "ToolOperationRecord",
]

_LATER = frozenset(
    {
        "StoredEvent",
        "CommitResult",
        "AttestationCommit",
        "ToolOperationRecord",
        "ToolJournalRecord",
        "ProjectionCounts",
        "SessionLease",
        "SessionLeaseStore",
        "LedgerReader",
        "LedgerWriter",
        "LedgerStore",
    }
)
"""What ``runtime/ledger/ledger_ports.py`` defines, loaded from there when first asked for."""

if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """Load the ports and the writers' records the first time one is asked for (PEP 562)."""
        if name not in _LATER:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module("runtime.ledger.ledger_ports"), name)
        globals()[name] = value
        return value
