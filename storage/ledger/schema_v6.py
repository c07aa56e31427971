"""Schema version 6: a tool call's ``prepared`` and outcome journal rows live on its operation row.

Up to version 5 a T1 inserted an operation row *and* its ``prepared`` journal row, and a T2
inserted the ``outcome_committed`` journal row *and* updated the operation row. Each journal row
repeats its operation's ids, arguments hash and recovery mode; only its ``committed_at`` and
``metadata_json`` are its own. Writing it cost a page of each of the journal's three B-trees
(the rowid table, ``UNIQUE (invocation_id, journal_event_id)``, the index by operation) plus
``sqlite_sequence`` (``AUTOINCREMENT``), in both transactions: read out of the WAL frames each
commit appended, about 4 of T1's 13 pages and 4 of T2's 10.

Version 6 adds those values to ``tool_operations`` (``prepared_committed_at``,
``prepared_metadata``, ``outcome_committed_at``, ``outcome_metadata``, and ``outcome_after``: how
many of the operation's other journal rows precede its outcome) and keeps in
``tool_journal_events`` only the rows of reconcile and decision facts, which recovery writes
rarely. The readers rebuild the same journal records as before
(``storage/ledger/tool_projection.py``); their ids stay derived (``<operationId>_prepared``,
``<operationId>_outcome``), so the uniqueness the journal's UNIQUE constraint protected is the
operation row's own (one row per ``(invocation_id, operation_id)``, one outcome per row by the
compare-and-set that writes it). Every UNIQUE constraint and foreign key is kept.

The upgrade moves the existing rows in its transaction: an operation whose journal lacked one of
the two rows (a damaged projection) keeps it absent, so the doctor still reports it.
"""

from __future__ import annotations

# Shared with the PostgreSQL schema's version 3 (``storage/ledger/postgres_schema.py``): the
# statements are plain SQL both engines run, apart from the column types.


def row_journal_migration(integer: str, blob: str) -> tuple[str, ...]:
    """The upgrade's statements, with the engine's names for an integer and a byte string."""
    return (
        f"ALTER TABLE tool_operations ADD COLUMN prepared_committed_at {integer}",
        f"ALTER TABLE tool_operations ADD COLUMN prepared_metadata {blob}",
        f"ALTER TABLE tool_operations ADD COLUMN outcome_committed_at {integer}",
        f"ALTER TABLE tool_operations ADD COLUMN outcome_metadata {blob}",
        f"ALTER TABLE tool_operations ADD COLUMN outcome_after {integer}"
        " CHECK (outcome_after >= 0)",
        """UPDATE tool_operations SET (prepared_committed_at, prepared_metadata) = (
            SELECT j.committed_at, j.metadata_json FROM tool_journal_events j
            WHERE j.invocation_id = tool_operations.invocation_id
            AND j.journal_event_id = tool_operations.operation_id || '_prepared')""",
        """UPDATE tool_operations SET (outcome_committed_at, outcome_metadata, outcome_after) = (
            SELECT o.committed_at, o.metadata_json, (
                SELECT count(*) FROM tool_journal_events r
                WHERE r.invocation_id = o.invocation_id AND r.operation_id = o.operation_id
                AND r.journal_seq < o.journal_seq
                AND r.journal_event_id <> o.operation_id || '_prepared')
            FROM tool_journal_events o
            WHERE o.invocation_id = tool_operations.invocation_id
            AND o.journal_event_id = tool_operations.operation_id || '_outcome')""",
        """DELETE FROM tool_journal_events
            WHERE journal_event_id = operation_id || '_prepared'
            OR journal_event_id = operation_id || '_outcome'""",
    )


MIGRATION_V6 = row_journal_migration("INTEGER", "BLOB")
