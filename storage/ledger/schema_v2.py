"""Schema version 2: durable continuation claims (``storage/ledger/continuation_claim_store.py``).

A module of its own so that opening the store (``storage/ledger/ledger_schema.py``) does not import
the
claim writer and, through it, every writer of the store.
"""

from __future__ import annotations

MIGRATION_V2 = (
    """CREATE TABLE continuation_claims (
        claim_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions (session_id),
        boundary_digest TEXT NOT NULL UNIQUE,
        source_run_id TEXT NOT NULL REFERENCES runs (run_id),
        source_high_water INTEGER NOT NULL CHECK (source_high_water > 0),
        source_prefix_digest TEXT NOT NULL,
        source_terminal_event_id TEXT NOT NULL,
        target_run_id TEXT NOT NULL UNIQUE REFERENCES runs (run_id),
        start_event_id TEXT NOT NULL UNIQUE REFERENCES runtime_events (event_id),
        provider_replay_digest TEXT NOT NULL,
        automatic INTEGER NOT NULL CHECK (automatic IN (0, 1)),
        created_at INTEGER NOT NULL,
        UNIQUE (source_run_id, source_high_water)
    )""",
)
