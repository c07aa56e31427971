"""Schema version 5: ``session_branches``, the ``branchStart`` fact of a branched session.

A branched session (``maka branch``) refers to a prefix of another session's history by
reference: one row, written in the same transaction as the new session's row, holding the
canonical bytes of its ``branchStart`` fact (``runtime/ledger/branch_facts.py``) and the columns
the readers look it up by. No event of the source is copied: the source run, the high-water mark
and the prefix digest name the prefix, and every reader verifies the digest before it uses it.

The row is a fact: a trigger refuses every update. Removing the branched session removes its row
(``storage/sessions/session_admin.py``); a session that other sessions branched from is not
removed while they exist (their history is a prefix of its).
"""

from __future__ import annotations

MIGRATION_V5 = (
    """CREATE TABLE session_branches (
        session_id TEXT PRIMARY KEY REFERENCES sessions (session_id),
        source_session_id TEXT NOT NULL REFERENCES sessions (session_id),
        source_run_id TEXT NOT NULL REFERENCES runs (run_id),
        source_high_water INTEGER NOT NULL CHECK (source_high_water > 0),
        boundary_event_id TEXT NOT NULL,
        source_prefix_digest TEXT NOT NULL,
        fact BLOB NOT NULL,
        fact_digest TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        CHECK (session_id <> source_session_id)
    ) WITHOUT ROWID""",
    """CREATE INDEX session_branches_by_source
        ON session_branches (source_session_id, source_run_id, source_high_water)""",
    """CREATE TRIGGER session_branches_fixed BEFORE UPDATE ON session_branches
        BEGIN SELECT RAISE(ABORT, 'a branchStart fact never changes'); END""",
)
