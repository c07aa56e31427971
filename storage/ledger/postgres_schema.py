"""The ledger's schema on PostgreSQL: numbered migrations of their own, version in ``meta``.

The tables, columns, CHECKs and every UNIQUE constraint are those of the SQLite schema at its
version 6 (``storage/ledger/ledger_schema.py``, ``schema_v4.py``, ``schema_v5.py``,
``schema_v6.py``; version 2 here adds ``session_branches``, version 3 keeps a tool call's
``prepared`` and outcome journal rows on its operation row), so the shared writers run
unchanged on both engines and the constraints stay the backstop. What differs:

- types: ``BIGINT`` for SQLite's integers (times are milliseconds), ``BYTEA`` for its blobs,
  ``TEXT COLLATE "C"`` everywhere, so ids sort by their bytes as in SQLite;
- ids unique across the whole ledger are plain UNIQUE constraints (``runtime_events.event_id``,
  ``tool_operations.operation_id``, ``tool_journal_events.journal_event_id``) where SQLite keeps
  them unique through partial indexes and triggers (its version 4 keeps its B-trees keyed by the
  run; PostgreSQL's are not the hot path's problem the same way), and ``chosen_tool_event_ids``
  is kept, as the writers record into it;
- ``runs.next_seq``: the run's next ``event_seq``, read under the run's row lock
  (``SELECT ... FOR UPDATE``) and written in the same transaction, so ``event_seq`` stays
  gap-free (a sequence would leave a gap at every rollback);
- ``session_leases``: the lease that fences every write (``storage/ledger/postgres_store.py``).

Rules as on SQLite: a released migration is never edited; all pending steps run in one
transaction, serialised between processes by an advisory lock; a database whose version is newer
than the program is refused (``schema_newer_than_program``) and left untouched.
"""

from __future__ import annotations

from runtime.ledger.codes import StoreCode
from runtime.ledger.store_ports import StoreRefusal
from storage.ledger.postgres_connection import MIGRATION_CALL_TIMEOUT_MS, PostgresConnection
from storage.ledger.schema_v6 import row_journal_migration

_T = 'TEXT COLLATE "C"'

_V1 = (
    f"""CREATE TABLE meta (
        key {_T} PRIMARY KEY,
        value BIGINT NOT NULL
    )""",
    "INSERT INTO meta (key, value) VALUES ('owner_epoch', 0)",
    f"""CREATE TABLE sessions (
        session_id {_T} PRIMARY KEY,
        cwd {_T} NOT NULL,
        title {_T} NOT NULL,
        created_at BIGINT NOT NULL
    )""",
    f"""CREATE TABLE runs (
        run_id {_T} PRIMARY KEY,
        session_id {_T} NOT NULL REFERENCES sessions (session_id),
        invocation_id {_T} NOT NULL UNIQUE,
        turn_id {_T} NOT NULL,
        status {_T} NOT NULL
            CHECK (status IN ('created', 'running', 'completed', 'failed', 'cancelled')),
        failure_class {_T},
        cwd {_T} NOT NULL,
        workspace_identity {_T},
        owner_epoch BIGINT NOT NULL CHECK (owner_epoch >= 0),
        parent_run_id {_T},
        continuation_source BYTEA,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        completed_at BIGINT,
        next_seq BIGINT NOT NULL DEFAULT 1 CHECK (next_seq > 0)
    )""",
    "CREATE INDEX runs_by_session ON runs (session_id, created_at, run_id)",
    "CREATE INDEX runs_unfinished ON runs (status) WHERE status IN ('created', 'running')",
    f"""CREATE TABLE runtime_events (
        event_id {_T} NOT NULL UNIQUE,
        session_id {_T} NOT NULL,
        invocation_id {_T} NOT NULL,
        run_id {_T} NOT NULL REFERENCES runs (run_id),
        turn_id {_T} NOT NULL,
        event_seq BIGINT NOT NULL CHECK (event_seq > 0),
        lane {_T} NOT NULL,
        terminal INTEGER NOT NULL CHECK (terminal IN (0, 1)),
        payload BYTEA NOT NULL,
        committed_at BIGINT NOT NULL,
        PRIMARY KEY (invocation_id, event_seq),
        UNIQUE (run_id, event_id)
    )""",
    "CREATE INDEX runtime_events_terminal ON runtime_events (invocation_id) WHERE terminal = 1",
    f"""CREATE TABLE chosen_tool_event_ids (
        event_id {_T} PRIMARY KEY,
        run_id {_T} NOT NULL,
        FOREIGN KEY (run_id, event_id) REFERENCES runtime_events (run_id, event_id)
    )""",
    f"""CREATE TABLE tool_operations (
        operation_id {_T} NOT NULL UNIQUE,
        session_id {_T} NOT NULL,
        invocation_id {_T} NOT NULL,
        run_id {_T} NOT NULL,
        turn_id {_T} NOT NULL,
        provider_tool_call_id {_T} NOT NULL,
        tool_name {_T} NOT NULL,
        canonical_args_hash {_T} NOT NULL,
        recovery_mode {_T} NOT NULL,
        current_state {_T} NOT NULL CHECK (current_state IN
            ('prepared', 'outcome_committed', 'recovery_completed', 'recovery_parked')),
        call_event_id {_T} NOT NULL,
        dispatch_event_id {_T} NOT NULL,
        result_event_id {_T},
        version BIGINT NOT NULL CHECK (version > 0),
        operation_id_derived INTEGER NOT NULL CHECK (operation_id_derived IN (0, 1)),
        UNIQUE (invocation_id, provider_tool_call_id),
        UNIQUE (invocation_id, operation_id),
        FOREIGN KEY (run_id, call_event_id) REFERENCES runtime_events (run_id, event_id),
        FOREIGN KEY (run_id, dispatch_event_id) REFERENCES runtime_events (run_id, event_id),
        FOREIGN KEY (run_id, result_event_id) REFERENCES runtime_events (run_id, event_id)
    )""",
    """CREATE INDEX tool_operations_unsettled ON tool_operations (session_id, invocation_id)
        WHERE current_state = 'prepared'""",
    f"""CREATE TABLE tool_journal_events (
        journal_seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        journal_event_id {_T} NOT NULL UNIQUE,
        operation_id {_T} NOT NULL,
        invocation_id {_T} NOT NULL,
        run_id {_T} NOT NULL,
        turn_id {_T} NOT NULL,
        state {_T} NOT NULL CHECK (state IN ('prepared', 'reconcile_observed',
            'outcome_committed', 'recovery_completed', 'recovery_parked')),
        runtime_event_id {_T} NOT NULL,
        canonical_args_hash {_T} NOT NULL,
        recovery_mode {_T} NOT NULL,
        metadata_json BYTEA,
        committed_at BIGINT NOT NULL,
        UNIQUE (invocation_id, journal_event_id),
        FOREIGN KEY (invocation_id, operation_id)
            REFERENCES tool_operations (invocation_id, operation_id),
        FOREIGN KEY (run_id, runtime_event_id) REFERENCES runtime_events (run_id, event_id)
    )""",
    """CREATE INDEX tool_journal_events_by_invocation
        ON tool_journal_events (invocation_id, operation_id, journal_seq)""",
    f"""CREATE TABLE continuation_claims (
        claim_id {_T} PRIMARY KEY,
        session_id {_T} NOT NULL REFERENCES sessions (session_id),
        boundary_digest {_T} NOT NULL UNIQUE,
        source_run_id {_T} NOT NULL REFERENCES runs (run_id),
        source_high_water BIGINT NOT NULL CHECK (source_high_water > 0),
        source_prefix_digest {_T} NOT NULL,
        source_terminal_event_id {_T} NOT NULL,
        target_run_id {_T} NOT NULL UNIQUE REFERENCES runs (run_id),
        start_event_id {_T} NOT NULL UNIQUE,
        provider_replay_digest {_T} NOT NULL,
        automatic INTEGER NOT NULL CHECK (automatic IN (0, 1)),
        created_at BIGINT NOT NULL,
        UNIQUE (source_run_id, source_high_water),
        FOREIGN KEY (target_run_id, start_event_id) REFERENCES runtime_events (run_id, event_id)
    )""",
    f"""CREATE TABLE tool_processes (
        operation_id {_T} NOT NULL,
        pid BIGINT NOT NULL CHECK (pid > 0),
        session_id {_T} NOT NULL,
        run_id {_T} NOT NULL,
        tool_name {_T} NOT NULL,
        command {_T} NOT NULL,
        process_group BIGINT NOT NULL,
        create_time DOUBLE PRECISION NOT NULL,
        boot_id {_T} NOT NULL,
        owner_epoch BIGINT NOT NULL,
        started_at BIGINT NOT NULL,
        PRIMARY KEY (operation_id, pid)
    )""",
    "CREATE INDEX tool_processes_by_session ON tool_processes (session_id)",
    f"""CREATE TABLE session_leases (
        session_id {_T} PRIMARY KEY REFERENCES sessions (session_id),
        epoch BIGINT NOT NULL CHECK (epoch > 0),
        owner {_T},
        expires_at TIMESTAMPTZ NOT NULL,
        acquired_at TIMESTAMPTZ NOT NULL
    )""",
    "INSERT INTO meta (key, value) VALUES ('schema_version', 1)",
)

_V2 = (
    # The ``branchStart`` fact of a branched session (SQLite's version 5, ``schema_v5.py``).
    f"""CREATE TABLE session_branches (
        session_id {_T} PRIMARY KEY REFERENCES sessions (session_id),
        source_session_id {_T} NOT NULL REFERENCES sessions (session_id),
        source_run_id {_T} NOT NULL REFERENCES runs (run_id),
        source_high_water BIGINT NOT NULL CHECK (source_high_water > 0),
        boundary_event_id {_T} NOT NULL,
        source_prefix_digest {_T} NOT NULL,
        fact BYTEA NOT NULL,
        fact_digest {_T} NOT NULL,
        created_at BIGINT NOT NULL,
        CHECK (session_id <> source_session_id)
    )""",
    """CREATE INDEX session_branches_by_source
        ON session_branches (source_session_id, source_run_id, source_high_water)""",
    """CREATE FUNCTION session_branches_fixed() RETURNS trigger LANGUAGE plpgsql AS
        'BEGIN RAISE EXCEPTION ''a branchStart fact never changes''; END'""",
    """CREATE TRIGGER session_branches_fixed BEFORE UPDATE ON session_branches
        FOR EACH ROW EXECUTE FUNCTION session_branches_fixed()""",
)

# A tool call's ``prepared`` and outcome journal rows on its operation row (SQLite's version 6).
_V3 = row_journal_migration("BIGINT", "BYTEA")

# MIGRATIONS[n] brings a database from version n-1 to n. Append only. Version 1 records itself
# (the ``meta`` table it creates is where the version lives).
MIGRATIONS: dict[int, tuple[str, ...]] = {1: _V1, 2: _V2, 3: _V3}
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
        "session_leases",
        "session_branches",
    }
)

_MIGRATION_LOCK = 0x6D616B61  # pg_advisory_xact_lock key: one migrating process at a time


def _tables(conn: PostgresConnection) -> set[str]:
    """Every table of the current schema, from the catalog: ``information_schema`` lists only
    the tables this database user has rights on, so another application's tables (or Maka's
    own ledger) it may not read would be taken for an empty database."""
    rows = conn.execute(
        "SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = current_schema()"
    ).fetchall()
    return {str(row[0]) for row in rows}


def refuse_without_rights(conn: PostgresConnection) -> None:
    """A Maka ledger this database user may not read (its tables belong to another user who
    granted nothing): refused as that (``database_access_denied``), never read as no ledger."""
    denied = [
        str(row[0])
        for row in conn.execute(
            "SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = current_schema() "
            "AND NOT has_table_privilege(quote_ident(schemaname) || '.' || quote_ident(tablename),"
            " 'SELECT')"
        ).fetchall()
        if str(row[0]) in REQUIRED_TABLES
    ]
    if denied:
        user = conn.execute("SELECT current_user").fetchone()
        named = ", ".join(sorted(denied)[:5]) + (" and more" if len(denied) > 5 else "")
        raise StoreRefusal(
            StoreCode.DATABASE_ACCESS_DENIED,
            f"the database holds a Maka ledger, but its user {user[0] if user else '?'} may not "
            f"read its tables ({named}); nothing was changed. Connect as the user that created "
            "the ledger, or have that user grant this one SELECT, INSERT, UPDATE and DELETE on "
            "them",
        )


def refuse_foreign(conn: PostgresConnection) -> None:
    """A database (its current schema) without Maka's ledger that holds tables all the same is
    another application's: Maka neither puts its tables beside them nor reads it as an empty
    ledger (``store_corrupt``, nothing changed). Called where the schema version read 0."""
    tables = sorted(_tables(conn))
    if tables:
        named = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        raise StoreRefusal(
            StoreCode.STORE_CORRUPT,
            f"the database holds tables Maka did not create ({named}) and no Maka ledger: it "
            "was not modified. Maka keeps its ledger in a database (or schema) of its own: "
            "point MAKA_DATABASE_URL, or Settings › Database, at a new, empty one",
        )


def read_version(conn: PostgresConnection) -> int:
    """The database's schema version (0: no Maka schema yet)."""
    if "meta" not in _tables(conn):
        return 0
    foreign = StoreRefusal(
        StoreCode.STORE_CORRUPT,
        "the database holds a meta table Maka did not create (no ledger schema version in it); "
        "nothing was changed: point MAKA_DATABASE_URL at a database (or schema) of Maka's own",
    )
    columns = {
        str(row[0])
        for row in conn.execute(
            "SELECT a.attname FROM pg_catalog.pg_attribute a "
            "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relname = 'meta' "
            "AND a.attnum > 0 AND NOT a.attisdropped"
        ).fetchall()
    }
    if not {"key", "value"} <= columns:
        raise foreign
    refuse_without_rights(conn)
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        raise StoreRefusal(StoreCode.STORE_CORRUPT, "the database's meta table has no version")
    try:
        version = int(str(row[0]).strip())
    except ValueError:
        raise foreign from None
    if version < 1:
        raise foreign
    return version


def refuse_if_newer(version: int) -> None:
    if version > SCHEMA_VERSION:
        raise StoreRefusal(
            StoreCode.SCHEMA_NEWER_THAN_PROGRAM,
            f"the PostgreSQL database has ledger schema version {version}, newer than this "
            f"program's {SCHEMA_VERSION}; it was not modified. Upgrade Maka to open it.",
        )


def check_tables(conn: PostgresConnection) -> None:
    missing = REQUIRED_TABLES - _tables(conn)
    if missing:
        raise StoreRefusal(
            StoreCode.STORE_CORRUPT, f"the database lacks tables: {', '.join(sorted(missing))}"
        )


def migrate(conn: PostgresConnection) -> int:
    """Bring the database to ``SCHEMA_VERSION``; return the version it had before."""
    version = read_version(conn)
    refuse_if_newer(version)
    if version == SCHEMA_VERSION:
        check_tables(conn)
        return version
    # A migration may rewrite a large table, or wait for another host's: its statements are not
    # held to one call's deadline, nor to the server's statement timeout (this transaction only).
    with conn.longer_calls(MIGRATION_CALL_TIMEOUT_MS):
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("SET LOCAL statement_timeout = 0")
            conn.execute("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))
            version = read_version(conn)  # re-read under the lock
            refuse_if_newer(version)
            if version == 0:
                refuse_foreign(conn)
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[step]:
                    conn.execute(statement)
                conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (step,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    check_tables(conn)
    return version
