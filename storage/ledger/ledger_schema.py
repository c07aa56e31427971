"""The database schema: append-only numbered migrations, version in ``PRAGMA user_version``.

Rules:

- A migration, once released, is never edited; a change is a new, higher-numbered step.
- All pending steps run in one ``BEGIN IMMEDIATE`` transaction, after re-reading
  ``user_version`` under the write lock (two processes opening a fresh directory at once must not
  both migrate). A failure rolls the whole upgrade back.
- A database whose version is newer than this program is refused with
  ``schema_newer_than_program`` and never modified: the version is read from the file header
  before any connection exists (``storage/ledger/ledger_store.py``), and re-checked here under the
  lock.

Tables (version 1):

- ``runtime_events``: the only canonical facts. One row per RuntimeEvent: its ids, the gap-free
  ``event_seq`` per invocation (1, 2, 3...), the semantic lane, whether it is terminal, the exact
  canonical bytes and the store's commit time (ms). Never updated, never deleted.
- ``sessions`` and ``runs`` (run headers). A run has exactly one invocation, so
  ``runs.invocation_id`` is unique and the event spine is checked against the header.
- ``tool_operations`` / ``tool_journal_events``: projections of the tool facts, recreated by
  ``rebuild_projections()``.
- ``meta``: the durable ``owner_epoch`` (docs/design/recovery.md section 3, step 1).

Later versions: 2 adds ``continuation_claims``; 3 adds ``tool_processes``, the host table of
processes started by tool calls (not a ledger fact; cleared at T2); 4 keys the indexes a tool call
writes by the run first (``storage/ledger/schema_v4.py``); 5 adds ``session_branches``, the
``branchStart`` fact of a branched session (``storage/ledger/schema_v5.py``); 6 keeps a tool
call's ``prepared`` and outcome journal rows on its operation row (``storage/ledger/schema_v6.py``).
"""

from __future__ import annotations

import sqlite3

from runtime.ledger.codes import StoreCode
from runtime.ledger.store_ports import StoreRefusal
from storage.ledger.schema_v2 import MIGRATION_V2
from storage.ledger.schema_v3 import MIGRATION_V3
from storage.ledger.schema_v4 import EVENT_FUNCTION, MIGRATION_V4, OPERATION_FUNCTION
from storage.ledger.schema_v5 import MIGRATION_V5
from storage.ledger.schema_v6 import MIGRATION_V6
from storage.ledger.sqlite_connection import write_transaction

_V1 = (
    """CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    ) WITHOUT ROWID""",
    "INSERT INTO meta (key, value) VALUES ('owner_epoch', 0)",
    """CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY,
        cwd TEXT NOT NULL,
        title TEXT NOT NULL,
        created_at INTEGER NOT NULL
    )""",
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions (session_id),
        invocation_id TEXT NOT NULL UNIQUE,
        turn_id TEXT NOT NULL,
        status TEXT NOT NULL
            CHECK (status IN ('created', 'running', 'completed', 'failed', 'cancelled')),
        failure_class TEXT,
        cwd TEXT NOT NULL,
        workspace_identity TEXT,
        owner_epoch INTEGER NOT NULL CHECK (owner_epoch >= 0),
        parent_run_id TEXT,
        continuation_source BLOB,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        completed_at INTEGER
    )""",
    "CREATE INDEX runs_by_session ON runs (session_id, created_at, run_id)",
    "CREATE INDEX runs_unfinished ON runs (status) WHERE status IN ('created', 'running')",
    """CREATE TABLE runtime_events (
        event_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        invocation_id TEXT NOT NULL,
        run_id TEXT NOT NULL REFERENCES runs (run_id),
        turn_id TEXT NOT NULL,
        event_seq INTEGER NOT NULL CHECK (event_seq > 0),
        lane TEXT NOT NULL,
        terminal INTEGER NOT NULL CHECK (terminal IN (0, 1)),
        payload BLOB NOT NULL,
        committed_at INTEGER NOT NULL,
        UNIQUE (invocation_id, event_seq)
    )""",
    "CREATE INDEX runtime_events_terminal ON runtime_events (invocation_id) WHERE terminal = 1",
    """CREATE TABLE tool_operations (
        operation_id TEXT PRIMARY KEY,
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
        call_event_id TEXT NOT NULL REFERENCES runtime_events (event_id),
        dispatch_event_id TEXT NOT NULL REFERENCES runtime_events (event_id),
        result_event_id TEXT REFERENCES runtime_events (event_id),
        version INTEGER NOT NULL CHECK (version > 0),
        UNIQUE (invocation_id, provider_tool_call_id)
    )""",
    """CREATE INDEX tool_operations_unsettled ON tool_operations (session_id, invocation_id)
        WHERE current_state = 'prepared'""",
    """CREATE TABLE tool_journal_events (
        journal_seq INTEGER PRIMARY KEY AUTOINCREMENT,
        journal_event_id TEXT NOT NULL UNIQUE,
        operation_id TEXT NOT NULL REFERENCES tool_operations (operation_id),
        invocation_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        turn_id TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('prepared', 'reconcile_observed',
            'outcome_committed', 'recovery_completed', 'recovery_parked')),
        runtime_event_id TEXT NOT NULL REFERENCES runtime_events (event_id),
        canonical_args_hash TEXT NOT NULL,
        recovery_mode TEXT NOT NULL,
        metadata_json BLOB,
        committed_at INTEGER NOT NULL
    )""",
    """CREATE INDEX tool_journal_events_by_operation
        ON tool_journal_events (operation_id, journal_seq)""",
)

# MIGRATIONS[n] brings a database from version n-1 to n. Append only.
# Version 2: durable continuation claims (storage/ledger/schema_v2.py, continuation_claim_store.py).
# Version 3: the tool_processes host table (storage/ledger/tool_process_store.py).
# Version 4: the indexes a tool call writes keyed by the run first (storage/ledger/schema_v4.py).
# Version 5: session_branches, a branched session's branchStart fact (storage/ledger/schema_v5.py).
# Version 6: a tool call's prepared and outcome journal rows on its operation row (schema_v6.py).
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: _V1,
    2: MIGRATION_V2,
    3: MIGRATION_V3,
    4: MIGRATION_V4,
    5: MIGRATION_V5,
    6: MIGRATION_V6,
}
SCHEMA_VERSION = max(MIGRATIONS)

REQUIRED_TABLES = frozenset(
    {
        "meta",
        "sessions",
        "runs",
        "runtime_events",
        "tool_operations",
        "tool_journal_events",
        "continuation_claims",
        "tool_processes",
        "chosen_tool_event_ids",
        "session_branches",
    }
)


# An upgrade from below this version rebuilds the largest tables (schema 4), leaving about half
# the file free: the store compacts it right after (``storage/ledger/upgrade_compaction.py``).
_REBUILDS_BELOW = 4


def compacts_after(version_before: int) -> bool:
    """Whether an upgrade from ``version_before`` rebuilt tables, so leaves free pages worth
    giving back. A new database (version 0) and a current one have none."""
    return 0 < version_before < _REBUILDS_BELOW


def read_user_version(conn: sqlite3.Connection) -> int:
    value = conn.execute("PRAGMA user_version").fetchone()[0]
    if not isinstance(value, int) or value < 0:
        raise StoreRefusal(StoreCode.STORE_CORRUPT, f"invalid schema version {value!r}")
    return value


def refuse_if_newer(version: int) -> None:
    if version > SCHEMA_VERSION:
        raise StoreRefusal(
            StoreCode.SCHEMA_NEWER_THAN_PROGRAM,
            f"the database has schema version {version}, newer than this program's "
            f"{SCHEMA_VERSION}; it was not modified. Upgrade Maka to open it.",
        )


def _user_tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    return {str(row[0]) for row in rows}


def check_tables(conn: sqlite3.Connection) -> None:
    """A database at a known version must hold that version's tables."""
    missing = REQUIRED_TABLES - _user_tables(conn)
    if missing:
        raise StoreRefusal(
            StoreCode.STORE_CORRUPT, f"the database lacks tables: {', '.join(sorted(missing))}"
        )


def migrate(conn: sqlite3.Connection) -> int:
    """Bring ``conn``'s database to ``SCHEMA_VERSION``; return the version it had before."""
    version = read_user_version(conn)
    refuse_if_newer(version)
    if version == SCHEMA_VERSION:
        check_tables(conn)
        return version
    # Version 4 computes which stored ids are derived; the functions exist on this connection
    # only and no schema object refers to them (imported here: opening a current database
    # needs none of it).
    from storage.ledger.derived_ids import is_derived_event_row, is_derived_operation_id

    conn.create_function(OPERATION_FUNCTION, 3, is_derived_operation_id, deterministic=True)
    conn.create_function(EVENT_FUNCTION, 3, is_derived_event_row, deterministic=True)
    with write_transaction(conn):
        version = read_user_version(conn)  # re-read under the write lock
        refuse_if_newer(version)
        if version == 0 and _user_tables(conn):
            raise StoreRefusal(
                StoreCode.STORE_CORRUPT,
                "the file is a SQLite database that Maka did not create; it was not modified",
            )
        for step in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[step]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {step}")
        # Imported only when a migration runs: a read-only open (``maka sessions``) needs neither
        # the crash points nor ``signal``.
        from runtime.ledger.crash_points import CrashPoint, failpoint

        failpoint(CrashPoint.MIGRATION_BEFORE_COMMIT)
    check_tables(conn)
    return version
