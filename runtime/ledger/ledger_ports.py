"""The store's ports (``LedgerReader``, ``LedgerWriter``, ``LedgerStore``, ``SessionLeaseStore``)
and the records they return: part of ``runtime/ledger/store_ports.py``, which loads this module
the first time one of them is asked for. Import them from there.
"""

# No ``from __future__ import annotations`` here: the named tuples read real types (see
# ``runtime/ledger/run_records.py``).

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeAlias

from runtime.ledger.run_records import RunHeader, RunStatus, SessionRecord

if TYPE_CHECKING:  # the pydantic event model is not needed to name the type
    from runtime.ledger.event_model import RuntimeEvent

    _Event: TypeAlias = RuntimeEvent
else:
    _Event = object
    """``StoredEvent.event``'s annotation when running: a type, not the name of one (a name would
    be compiled into a forward reference)."""


class StoredEvent(NamedTuple):
    """One committed row: the store-assigned ``event_seq`` and the exact canonical bytes.
    Immutable; a named tuple because reads, rebuilds and imports build one per event (a frozen
    dataclass's ``__init__`` costs four times as much)."""

    seq: int
    event: _Event
    payload: bytes
    committed_at: int


class CommitResult(NamedTuple):
    """``created`` is False for an exact retry (nothing new was written). Immutable; a named
    tuple rather than a frozen dataclass because every write returns one, and a frozen
    dataclass's ``__init__`` costs four times as much (the T1/T2 hot path)."""

    created: bool
    event_seq: int


class AttestationCommit(NamedTuple):
    """The user's attestation as recorded (docs/design/recovery.md section 8). ``created`` False:
    the same attestation (choice and note) was already recorded; its bundle and time are
    returned."""

    created: bool
    event_seq: int
    reconcile_event_id: str
    outcome_event_id: str
    decision_event_id: str
    attested_at: int


class ToolOperationRecord(NamedTuple):
    """One row of the ``tool_operations`` projection: the current state of a T1 operation.

    ``current_state``: ``prepared`` (T1 committed, no outcome: the side effect may or may not have
    happened), ``outcome_committed`` (T2), ``recovery_completed`` / ``recovery_parked`` (a
    recovery bundle settled it). ``version`` counts the facts: 1 at T1, +1 per later fact.
    """

    operation_id: str
    session_id: str
    invocation_id: str
    run_id: str
    turn_id: str
    provider_tool_call_id: str
    tool_name: str
    canonical_args_hash: str
    recovery_mode: str
    current_state: str
    call_event_id: str
    dispatch_event_id: str
    result_event_id: str | None
    version: int


class ToolJournalRecord(NamedTuple):
    """One row of the ``tool_journal_events`` projection (a transition of an operation)."""

    journal_event_id: str
    operation_id: str
    invocation_id: str
    run_id: str
    turn_id: str
    state: str
    runtime_event_id: str
    canonical_args_hash: str
    recovery_mode: str
    metadata: Mapping[str, Any] | None
    committed_at: int


class ProjectionCounts(NamedTuple):
    operations: int
    journal_events: int


class SessionLease(NamedTuple):
    """A session's lease as taken (docs/postgres.md): ``epoch`` goes up by one at every take;
    ``owner`` and ``expires_at_ms`` (the database's clock) are None on SQLite, where the lease is
    the data folder's owner epoch."""

    session_id: str
    epoch: int
    owner: str | None
    expires_at_ms: int | None


class SessionLeaseStore(Protocol):
    """Sessions leased to one host: every writer's transaction checks the caller's lease and
    refuses with ``session_lease_lost``, committing nothing, once another host took it over."""

    def take_session_lease(self, session_id: str) -> SessionLease: ...

    def renew_session_leases(self) -> Sequence[str]:
        """Extend every held lease; returns the sessions whose lease was lost."""
        ...

    def held_session_leases(self) -> Mapping[str, int]: ...

    def release_session_lease(self, session_id: str) -> None: ...


class LedgerReader(Protocol):
    def read_run_events(self, run_id: str) -> Sequence[StoredEvent]: ...

    def read_run_header(self, run_id: str) -> RunHeader | None: ...

    def list_session_runs(self, session_id: str) -> Sequence[RunHeader]: ...

    def get_session(self, session_id: str) -> SessionRecord | None: ...

    def list_sessions(self) -> Sequence[SessionRecord]: ...


class LedgerWriter(Protocol):
    def create_session(self, session: SessionRecord) -> None: ...

    def name_new_session(self, session_id: str, title: str, default_title: str) -> bool:
        """Give a session its first real title: only while it has no run yet and still carries
        ``default_title``; True when it was renamed."""
        ...

    def create_run(self, header: RunHeader) -> None: ...

    def start_run(self, header: RunHeader, first_event: "RuntimeEvent") -> CommitResult:
        """A new run's header and its first event in one transaction (never a run without
        events)."""
        ...

    def mark_run_running(self, run_id: str) -> None: ...

    def append_event(self, event: "RuntimeEvent") -> CommitResult:
        """Generic append: ordinary events, function_calls, unbound function_responses."""
        ...

    def commit_tool_prepared(
        self, call_event: "RuntimeEvent | None", dispatch_event: "RuntimeEvent"
    ) -> CommitResult:
        """T1: ``[function_call, tool_dispatch]`` or ``[tool_dispatch]`` (call already stored)."""
        ...

    def commit_tool_outcome(self, response_event: "RuntimeEvent") -> CommitResult:
        """T2: exactly one bound function_response."""
        ...

    def commit_recovery_bundle(
        self,
        reconcile_event: "RuntimeEvent",
        outcome_event: "RuntimeEvent | None",
        decision_event: "RuntimeEvent",
    ) -> CommitResult: ...

    def commit_workspace_fact(self, event: "RuntimeEvent") -> CommitResult:
        """A ``workspaceCheckpoint`` / ``workspaceCheckpointFailed`` fact
        (docs/design/workspace.md)."""
        ...

    def commit_run_ending(
        self, terminal_event: "RuntimeEvent", status: RunStatus, failure_class: str | None
    ) -> CommitResult:
        """Terminal event and terminal run header in one transaction."""
        ...


class LedgerStore(LedgerReader, LedgerWriter, Protocol):
    def close(self) -> None: ...
