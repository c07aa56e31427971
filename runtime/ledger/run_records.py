"""Sessions, run headers and their statuses, and the store's refusal: part of
``runtime/ledger/store_ports.py`` (import them from there), in a module of their own so that the
ports and the writers' records (``ledger_ports``) can use them without an import cycle.
"""

# No ``from __future__ import annotations`` here: the named tuples read real types. A type's name
# would be compiled into a forward reference, and the first ``compile`` of a process costs ~2.5 ms
# (Python builds every AST node type).

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any, NamedTuple

from runtime.ledger.ledger_errors import LedgerError


class RunStatus(StrEnum):
    CREATED = "created"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_RUN_STATUSES = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})

RunFact = tuple[str, str, RunStatus, str | None, int, int]
"""What a list of sessions reads of a run instead of its whole header: session id, run id,
status, failure class, creation and last update (ms)."""

EVENT_STATUS_TO_RUN: Mapping[str, RunStatus] = MappingProxyType(
    {
        "completed": RunStatus.COMPLETED,
        "failed": RunStatus.FAILED,
        "aborted": RunStatus.CANCELLED,
        "cancelled": RunStatus.CANCELLED,
    }
)
"""The run status a terminal event's ``status`` ends its run with (docs/design/recovery.md section
1, item 7): the one map the run-ending writer, the header repair, the store doctor and the
continuation planner read."""

RUN_STATUS_TO_EVENT: Mapping[RunStatus, str] = MappingProxyType(
    {run: event for event, run in EVENT_STATUS_TO_RUN.items() if event != "aborted"}
)
"""The terminal event status a run ending writes for each terminal run status: the inverse of
``EVENT_STATUS_TO_RUN`` (``aborted`` is read, never written)."""


class StoreRefusal(LedgerError):
    """A write the store refused; nothing was written. ``code`` is a ``WriterRejectionCode``,
    a ``ScanIssueCode`` or a ``StoreCode``; ``event_id`` names the offending candidate."""

    def __init__(self, code: StrEnum, message: str, event_id: str | None = None) -> None:
        super().__init__(code, message)
        self.event_id = event_id


class SessionRecord(NamedTuple):
    session_id: str
    cwd: str
    title: str
    created_at: int


class RunHeader(NamedTuple):
    run_id: str
    session_id: str
    invocation_id: str
    turn_id: str
    status: RunStatus
    cwd: str
    owner_epoch: int
    created_at: int
    updated_at: int
    failure_class: str | None = None
    workspace_identity: str | None = None
    parent_run_id: str | None = None
    # {sessionId, invocationId, runId, turnId, highWater, prefixDigest, claimId, automatic}
    continuation_source: Mapping[str, Any] | None = None
    completed_at: int | None = None
