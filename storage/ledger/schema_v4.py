"""Schema version 4: no index on the hot path is keyed by a SHA-256-based id alone.

Up to version 3, four B-tree indexes were keyed by such an id: ``runtime_events``' primary key
on ``event_id``, ``tool_operations``' primary key on ``operation_id``,
``tool_journal_events.journal_event_id`` (UNIQUE) and ``tool_journal_events_by_operation
(operation_id, journal_seq)``. Operation ids are ``toolop_`` + 32 hex digits of SHA-256, and the
ids of a call's events and journal rows start with it, so every T1 and T2 inserted into a random
leaf of each: in a ledger larger than the page cache, each call read (and each WAL checkpoint
wrote back) pages no earlier call of the run had touched, and a call's cost grew with the
history. Version 4 keys them by the run first, so a long run appends to its own few leaves,
and keeps every id unique across the whole ledger (``storage/ledger/derived_ids.py``):

- ``runtime_events``: ``UNIQUE (run_id, event_id)`` in place of the primary key (a run has one
  invocation). An event id chosen by its producer is kept unique by
  ``runtime_events_chosen_ids``, a unique index on the ids not shaped like a derived one
  (``event_id NOT GLOB 'toolop_*'``). An id of that shape is either derived (it names its own
  invocation through SHA-256, so no other run can hold it) or, rarely (another producer, a
  test), chosen: the writers then search every run for it (a scan) and record it in
  ``chosen_tool_event_ids``, which every id of that shape is checked against (the trigger
  ``runtime_events_tool_id_unique``). The foreign keys that named an event by ``event_id``
  name it by ``(run_id, event_id)``.
- ``tool_operations``: ``UNIQUE (invocation_id, operation_id)`` in place of the primary key.
  ``operation_id_derived`` is 1 when the id is the derivation of ``(invocation_id,
  provider_tool_call_id)``, a pair that is unique; any other id is kept unique by
  ``tool_operations_chosen_ids`` and two triggers (a derived id is refused when a chosen row
  holds it, a chosen id when any row does: a scan only such ids pay).
- ``tool_journal_events``: ``UNIQUE (invocation_id, journal_event_id)`` (a journal id is
  derived from an operation id or an event id, both unique across the ledger) and
  ``tool_journal_events_by_invocation (invocation_id, operation_id, journal_seq)``.
- ``continuation_claims``: rebuilt only to name its start event by ``(target_run_id,
  start_event_id)``.

SQLite cannot drop a table constraint in place, so the tables are rebuilt (rows, rowids,
``journal_seq`` values and the AUTOINCREMENT high-water mark kept) inside the migration's
transaction. The migration computes ``operation_id_derived`` and ``chosen_tool_event_ids`` with
two functions registered on its connection (``ledger_schema.migrate``); nothing in the schema
needs them afterwards, so the file stays readable and writable by any SQLite.
"""

from __future__ import annotations

TOOL_ID_PREFIX = "toolop_"
# The SQL spelling of "an event id not shaped like a derived one": the partial index
# ``runtime_events_chosen_ids`` covers these, and a query that may use it repeats the term.
NOT_TOOL_SHAPED = "event_id NOT GLOB 'toolop_*'"
# Functions the migration registers on its connection (``storage/ledger/derived_ids.py``).
OPERATION_FUNCTION = "maka_operation_id_derived"
EVENT_FUNCTION = "maka_tool_event_id_derived"

_EVENTS = (
    """CREATE TABLE runtime_events_v4 (
        event_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        invocation_id TEXT NOT NULL,
        run_id TEXT NOT NULL REFERENCES runs (run_id),
        turn_id TEXT NOT NULL,
        event_seq INTEGER NOT NULL CHECK (event_seq > 0),
        lane TEXT NOT NULL,
        terminal INTEGER NOT NULL CHECK (terminal IN (0, 1)),
        payload BLOB NOT NULL,
        committed_at INTEGER NOT NULL,
        UNIQUE (invocation_id, event_seq),
        UNIQUE (run_id, event_id)
    )""",
    """INSERT INTO runtime_events_v4 (rowid, event_id, session_id, invocation_id, run_id,
        turn_id, event_seq, lane, terminal, payload, committed_at)
        SELECT rowid, event_id, session_id, invocation_id, run_id, turn_id, event_seq, lane,
        terminal, payload, committed_at FROM runtime_events ORDER BY rowid""",
)

_OPERATIONS = (
    """CREATE TABLE tool_operations_v4 (
        operation_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        invocation_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        turn_id TEXT NOT NULL,
        provider_tool_call_id TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        canonical_args_hash TEXT NOT NULL,
        recovery_mode TEXT NOT NULL,
        current_state TEXT NOT NULL CHECK (current_state IN
            ('prepared', 'outcome_committed', 'recovery_completed', 'recovery_parked')),
        call_event_id TEXT NOT NULL,
        dispatch_event_id TEXT NOT NULL,
        result_event_id TEXT,
        version INTEGER NOT NULL CHECK (version > 0),
        operation_id_derived INTEGER NOT NULL CHECK (operation_id_derived IN (0, 1)),
        UNIQUE (invocation_id, provider_tool_call_id),
        UNIQUE (invocation_id, operation_id),
        FOREIGN KEY (run_id, call_event_id) REFERENCES runtime_events_v4 (run_id, event_id),
        FOREIGN KEY (run_id, dispatch_event_id) REFERENCES runtime_events_v4 (run_id, event_id),
        FOREIGN KEY (run_id, result_event_id) REFERENCES runtime_events_v4 (run_id, event_id)
    )""",
    f"""INSERT INTO tool_operations_v4 (rowid, operation_id, session_id, invocation_id, run_id,
        turn_id, provider_tool_call_id, tool_name, canonical_args_hash, recovery_mode,
        current_state, call_event_id, dispatch_event_id, result_event_id, version,
        operation_id_derived)
        SELECT rowid, operation_id, session_id, invocation_id, run_id, turn_id,
        provider_tool_call_id, tool_name, canonical_args_hash, recovery_mode, current_state,
        call_event_id, dispatch_event_id, result_event_id, version,
        {OPERATION_FUNCTION}(operation_id, invocation_id, provider_tool_call_id)
        FROM tool_operations ORDER BY rowid""",
)

_JOURNAL = (
    """CREATE TABLE tool_journal_events_v4 (
        journal_seq INTEGER PRIMARY KEY AUTOINCREMENT,
        journal_event_id TEXT NOT NULL,
        operation_id TEXT NOT NULL,
        invocation_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        turn_id TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('prepared', 'reconcile_observed',
            'outcome_committed', 'recovery_completed', 'recovery_parked')),
        runtime_event_id TEXT NOT NULL,
        canonical_args_hash TEXT NOT NULL,
        recovery_mode TEXT NOT NULL,
        metadata_json BLOB,
        committed_at INTEGER NOT NULL,
        UNIQUE (invocation_id, journal_event_id),
        FOREIGN KEY (invocation_id, operation_id)
            REFERENCES tool_operations_v4 (invocation_id, operation_id),
        FOREIGN KEY (run_id, runtime_event_id) REFERENCES runtime_events_v4 (run_id, event_id)
    )""",
    "INSERT INTO tool_journal_events_v4 SELECT * FROM tool_journal_events ORDER BY journal_seq",
    """UPDATE sqlite_sequence SET seq = max(seq, (SELECT seq FROM sqlite_sequence
        WHERE name = 'tool_journal_events')) WHERE name = 'tool_journal_events_v4'""",
)

_CLAIMS = (
    """CREATE TABLE continuation_claims_v4 (
        claim_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions (session_id),
        boundary_digest TEXT NOT NULL UNIQUE,
        source_run_id TEXT NOT NULL REFERENCES runs (run_id),
        source_high_water INTEGER NOT NULL CHECK (source_high_water > 0),
        source_prefix_digest TEXT NOT NULL,
        source_terminal_event_id TEXT NOT NULL,
        target_run_id TEXT NOT NULL UNIQUE REFERENCES runs (run_id),
        start_event_id TEXT NOT NULL UNIQUE,
        provider_replay_digest TEXT NOT NULL,
        automatic INTEGER NOT NULL CHECK (automatic IN (0, 1)),
        created_at INTEGER NOT NULL,
        UNIQUE (source_run_id, source_high_water),
        FOREIGN KEY (target_run_id, start_event_id)
            REFERENCES runtime_events_v4 (run_id, event_id)
    )""",
    "INSERT INTO continuation_claims_v4 SELECT * FROM continuation_claims ORDER BY rowid",
)

_SWAP = (
    "DROP TABLE continuation_claims",
    "DROP TABLE tool_journal_events",
    "DROP TABLE tool_operations",
    "DROP TABLE runtime_events",
    "ALTER TABLE runtime_events_v4 RENAME TO runtime_events",
    "ALTER TABLE tool_operations_v4 RENAME TO tool_operations",
    "ALTER TABLE tool_journal_events_v4 RENAME TO tool_journal_events",
    "ALTER TABLE continuation_claims_v4 RENAME TO continuation_claims",
)

_INDEXES = (
    "CREATE INDEX runtime_events_terminal ON runtime_events (invocation_id) WHERE terminal = 1",
    f"""CREATE UNIQUE INDEX runtime_events_chosen_ids ON runtime_events (event_id)
        WHERE {NOT_TOOL_SHAPED}""",
    """CREATE TABLE chosen_tool_event_ids (
        event_id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        FOREIGN KEY (run_id, event_id) REFERENCES runtime_events (run_id, event_id)
    ) WITHOUT ROWID""",
    """CREATE TRIGGER runtime_events_tool_id_unique BEFORE INSERT ON runtime_events
        WHEN NEW.event_id GLOB 'toolop_*' AND EXISTS (SELECT 1 FROM chosen_tool_event_ids
            WHERE event_id = NEW.event_id AND run_id <> NEW.run_id)
        BEGIN SELECT RAISE(ABORT, 'UNIQUE constraint failed: the event id is stored'); END""",
    f"""INSERT INTO chosen_tool_event_ids (event_id, run_id)
        SELECT event_id, run_id FROM runtime_events WHERE event_id GLOB 'toolop_*'
        AND NOT {EVENT_FUNCTION}(event_id, invocation_id, payload) ORDER BY rowid""",
    """CREATE INDEX tool_operations_unsettled ON tool_operations (session_id, invocation_id)
        WHERE current_state = 'prepared'""",
    """CREATE UNIQUE INDEX tool_operations_chosen_ids ON tool_operations (operation_id)
        WHERE operation_id_derived = 0""",
    """CREATE TRIGGER tool_operations_derived_id_unique BEFORE INSERT ON tool_operations
        WHEN NEW.operation_id_derived = 1 AND EXISTS (SELECT 1 FROM tool_operations
            WHERE operation_id_derived = 0 AND operation_id = NEW.operation_id)
        BEGIN SELECT RAISE(ABORT, 'the operation id is already stored'); END""",
    """CREATE TRIGGER tool_operations_chosen_id_unique BEFORE INSERT ON tool_operations
        WHEN NEW.operation_id_derived = 0 AND EXISTS (SELECT 1 FROM tool_operations
            WHERE operation_id = NEW.operation_id)
        BEGIN SELECT RAISE(ABORT, 'the operation id is already stored'); END""",
    """CREATE TRIGGER tool_operations_id_fixed BEFORE UPDATE OF operation_id,
        invocation_id, provider_tool_call_id, operation_id_derived ON tool_operations
        BEGIN SELECT RAISE(ABORT, 'an operation''s identity never changes'); END""",
    """CREATE INDEX tool_journal_events_by_invocation
        ON tool_journal_events (invocation_id, operation_id, journal_seq)""",
)

MIGRATION_V4 = _EVENTS + _OPERATIONS + _JOURNAL + _CLAIMS + _SWAP + _INDEXES
