"""Schema version 3: the ``tool_processes`` host table (``storage/ledger/tool_process_store.py``).

A module of its own so that opening the store (``storage/ledger/ledger_schema.py``) does not
import the table's reader and writer and their records (``maka sessions`` stays small).
"""

from __future__ import annotations

MIGRATION_V3 = (
    """CREATE TABLE tool_processes (
        operation_id TEXT NOT NULL,
        pid INTEGER NOT NULL CHECK (pid > 0),
        session_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        command TEXT NOT NULL,
        process_group INTEGER NOT NULL,
        create_time REAL NOT NULL,
        boot_id TEXT NOT NULL,
        owner_epoch INTEGER NOT NULL,
        started_at INTEGER NOT NULL,
        PRIMARY KEY (operation_id, pid)
    ) WITHOUT ROWID""",
    "CREATE INDEX tool_processes_by_session ON tool_processes (session_id)",
)
