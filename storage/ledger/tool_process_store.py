"""The ``tool_processes`` host table (schema version 3, ``schema_v3.py``; docs/design/recovery.md
section 9).

One row per OS process a tool call started, written right after the spawn and deleted by the T2
transaction of that call (``clear_operation``), so a row that outlives a crash names a process
whose call never got an outcome. Not a ledger fact: never exported, never part of a projection
rebuild, and safe to delete once the process is known to be gone.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from runtime.ledger.process_records import ToolProcessRecord

_COMMAND_CHARS = 4000
COLUMN_NAMES = (
    "operation_id",
    "pid",
    "session_id",
    "run_id",
    "tool_name",
    "command",
    "process_group",
    "create_time",
    "boot_id",
    "owner_epoch",
    "started_at",
)
_COLUMNS = ", ".join(COLUMN_NAMES)


def insert(conn: sqlite3.Connection, record: ToolProcessRecord) -> None:
    conn.execute(
        f"INSERT OR REPLACE INTO tool_processes ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (
            record.operation_id,
            record.pid,
            record.session_id,
            record.run_id,
            record.tool_name,
            record.command[:_COMMAND_CHARS],
            record.process_group,
            record.create_time,
            record.boot_id,
            record.owner_epoch,
            record.started_at,
        ),
    )


def _record(row: Sequence[Any]) -> ToolProcessRecord:
    return ToolProcessRecord(
        operation_id=str(row[0]),
        pid=int(row[1]),
        session_id=str(row[2]),
        run_id=str(row[3]),
        tool_name=str(row[4]),
        command=str(row[5]),
        process_group=int(row[6]),
        create_time=float(row[7]),
        boot_id=str(row[8]),
        owner_epoch=int(row[9]),
        started_at=int(row[10]),
    )


def select(
    conn: sqlite3.Connection, session_id: str | None, operation_id: str | None
) -> list[ToolProcessRecord]:
    where: list[str] = []
    params: list[str] = []
    if session_id is not None:
        where.append("session_id = ?")
        params.append(session_id)
    if operation_id is not None:
        where.append("operation_id = ?")
        params.append(operation_id)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM tool_processes{clause} ORDER BY started_at, operation_id, pid",
        params,
    ).fetchall()
    return [_record(row) for row in rows]


def delete(conn: sqlite3.Connection, operation_id: str, pid: int) -> None:
    conn.execute(
        "DELETE FROM tool_processes WHERE operation_id = ? AND pid = ?", (operation_id, pid)
    )


def clear_operation(cursor: sqlite3.Connection | sqlite3.Cursor, operation_id: str) -> None:
    """T2: the call has its outcome; its process records go with the same transaction."""
    cursor.execute("DELETE FROM tool_processes WHERE operation_id = ?", (operation_id,))
