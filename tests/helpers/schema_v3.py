"""A schema-3 database holding real ledgers, for the schema-4 upgrade tests.

The rows are written by the real writers into a current store, then copied into a database
built with migrations 1 to 3 exactly as an older Maka left it (``user_version`` 3, the
projection rows without ``operation_id_derived``, every journal row in ``tool_journal_events``).
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from runtime.ledger.canonical_codec import canonical_json_bytes
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import ToolJournalRecord
from storage.ledger import ledger_schema
from storage.ledger.ledger_store import open_store
from storage.ledger.sqlite_connection import DATABASE_NAME
from storage.ledger.tool_projection import (
    JOURNAL_COLUMNS,
    ROW_JOURNAL_COLUMNS,
    read_all_projection_rows,
)
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    clean_ledger,
    dispatch_event,
    user_text,
    with_changes,
)
from tests.helpers.store_workloads import add_run, commit_ledger, fixed_clock, without_fsync

RUNS = (RunIds("sess-a", "inv-a", "run-a", "turn-a"), RunIds("sess-a", "inv-b", "run-b", "turn-b"))
CHOSEN = RunIds("sess-c", "inv-c", "run-c", "turn-c")
# Ids a producer chose in the shape of derived ones (the store accepts them).
CHOSEN_EVENT_ID = "toolop_" + "0" * 32 + "_note"
CHOSEN_OPERATION_ID = "toolop_" + "1" * 32

_COPIED = (
    ("sessions", "rowid"),
    ("runs", "rowid"),
    ("meta", "key"),
    ("runtime_events", "rowid"),
    ("tool_operations", "rowid"),
)
_V3_OPERATION_COLUMNS = (
    "operation_id, session_id, invocation_id, run_id, turn_id, provider_tool_call_id,"
    " tool_name, canonical_args_hash, recovery_mode, current_state, call_event_id,"
    " dispatch_event_id, result_event_id, version"
)


def _tagged(events: list[RuntimeEvent], tag: str) -> list[RuntimeEvent]:
    """Chosen ids made unique per run (derived ones already are)."""
    return [
        event if event["id"].startswith("toolop_") else {**event, "id": f"{event['id']}-{tag}"}
        for event in events
    ]


def chosen_ledger() -> list[RuntimeEvent]:
    """A run whose producer chose an event id and an operation id shaped like derived ones."""
    call = call_event("call-c", "Write", {"path": "c.txt", "content": "c"}, ids=CHOSEN, ts=10)
    forged = {"operationId": CHOSEN_OPERATION_ID}
    dispatch = with_changes(dispatch_event(call), actions={"toolDispatch": forged}, refs=forged)
    response = with_changes(bound_response(call, ts=12), refs=forged)
    return [
        user_text(ids=CHOSEN, marker=True, event_id="u-c"),
        user_text(ids=CHOSEN, event_id=CHOSEN_EVENT_ID, ts=5),
        call,
        dispatch,
        response,
    ]


def current_store_with_ledgers(data_dir: Path) -> Path:
    """Real ledgers through the real writers (every ending, a chosen-id run)."""
    with open_store(data_dir, clock=fixed_clock()) as store:
        for index, ids in enumerate(RUNS):
            add_run(store, ids)
            endings = ["response", "synthetic", "parked", "completed", "attested_ran"]
            commit_ledger(store, _tagged(clean_ledger(ids=ids, endings=endings), f"r{index}"))
        add_run(store, CHOSEN)
        commit_ledger(store, chosen_ledger())
    return data_dir / DATABASE_NAME


def current_store_with_history(data_dir: Path, runs: int) -> Path:
    """``current_store_with_ledgers`` and ``runs`` more runs of every ending: a history of a few
    MB, larger than SQLite's page cache (the rows are what matter here, not their durability,
    so the writes skip the fsyncs)."""
    database = current_store_with_ledgers(data_dir)
    with open_store(data_dir, clock=fixed_clock()) as store:
        without_fsync(store)
        endings = ["response", "synthetic", "parked", "completed", "attested_ran"]
        for index in range(runs):
            ids = RunIds("sess-h", f"inv-h{index}", f"run-h{index}", f"turn-h{index}")
            add_run(store, ids)
            commit_ledger(store, _tagged(clean_ledger(ids=ids, endings=endings), f"h{index}"))
    return database


def write_schema_3(source: Path, target_dir: Path) -> Path:
    """A schema-3 database at ``target_dir`` holding ``source``'s rows (same rowids)."""
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / DATABASE_NAME
    conn = sqlite3.connect(target, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN")
    for step in (1, 2, 3):
        for statement in ledger_schema.MIGRATIONS[step]:
            conn.execute(statement)
    conn.execute("DELETE FROM meta")
    conn.execute("ATTACH DATABASE ? AS source", (str(source),))
    for table, order in _COPIED:
        columns = _column_list(conn, table)  # schema 3's columns, read from the new file
        rowid = "rowid, " if order == "rowid" else ""
        conn.execute(
            f"INSERT INTO main.{table} ({rowid}{columns}) SELECT {rowid}{columns}"
            f" FROM source.{table} ORDER BY {order}"
        )
    # The journal as schema 3 kept it: every row in the table (schema 6 keeps a call's prepared
    # and outcome rows on its operation row), numbered in order.
    with closing(conn_to(source)) as reader:
        _, journal = read_all_projection_rows(reader)
    conn.executemany(
        f"INSERT INTO main.tool_journal_events (journal_seq, {JOURNAL_COLUMNS})"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ((seq, *_journal_tuple(row)) for seq, row in enumerate(journal, start=1)),
    )
    conn.execute("DELETE FROM main.sqlite_sequence")
    conn.execute(
        "INSERT INTO main.sqlite_sequence (name, seq) VALUES ('tool_journal_events', ?)",
        (len(journal),),
    )
    conn.execute("PRAGMA user_version = 3")
    conn.execute("COMMIT")
    conn.execute("DETACH DATABASE source")
    conn.close()
    return target


def conn_to(database: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{database}?mode=ro", uri=True)


def _journal_tuple(row: ToolJournalRecord) -> tuple[Any, ...]:
    metadata = canonical_json_bytes(dict(row.metadata)) if row.metadata is not None else None
    return (*row[:9], metadata, row.committed_at)


def logical_journal(conn: sqlite3.Connection) -> list[ToolJournalRecord]:
    """Every journal record, each operation's in order, whichever schema keeps them."""
    if int(conn.execute("PRAGMA user_version").fetchone()[0]) >= 6:
        return read_all_projection_rows(conn)[1]
    rows = conn.execute(
        f"SELECT {JOURNAL_COLUMNS} FROM tool_journal_events ORDER BY operation_id, journal_seq"
    ).fetchall()
    records: list[ToolJournalRecord] = []
    for row in rows:
        values = list(row)
        values[9] = json.loads(values[9]) if values[9] is not None else None
        records.append(ToolJournalRecord(*values))
    return records


def _column_list(conn: sqlite3.Connection, table: str) -> str:
    return ", ".join(str(row[1]) for row in conn.execute(f"PRAGMA main.table_info({table})"))


def table_rows(database: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the ledger's tables, in a fixed order, with the rowids that matter."""
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        rows = {
            "sessions": conn.execute("SELECT * FROM sessions ORDER BY session_id").fetchall(),
            "runs": conn.execute("SELECT * FROM runs ORDER BY run_id").fetchall(),
            "meta": conn.execute("SELECT * FROM meta ORDER BY key").fetchall(),
            "runtime_events": conn.execute(
                "SELECT rowid, * FROM runtime_events ORDER BY rowid"
            ).fetchall(),
            "tool_operations": conn.execute(
                f"SELECT rowid, {_V3_OPERATION_COLUMNS} FROM tool_operations ORDER BY rowid"
            ).fetchall(),
            "tool_journal_events": [tuple(row) for row in logical_journal(conn)],
            "continuation_claims": conn.execute(
                "SELECT * FROM continuation_claims ORDER BY claim_id"
            ).fetchall(),
            "sqlite_sequence": conn.execute(
                "SELECT * FROM sqlite_sequence ORDER BY name"
            ).fetchall(),
        }
    finally:
        conn.close()
    return rows


def rewind_to_schema_5(database: Path) -> None:
    """Turn a current database into the layout schema 5 left: every journal row back in
    ``tool_journal_events`` (numbered in order), the operation row's journal columns gone."""
    conn = sqlite3.connect(database, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        journal = logical_journal(conn)
        conn.execute("DELETE FROM tool_journal_events")
        conn.executemany(
            f"INSERT INTO tool_journal_events (journal_seq, {JOURNAL_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ((seq, *_journal_tuple(row)) for seq, row in enumerate(journal, start=1)),
        )
        for column in ROW_JOURNAL_COLUMNS.split(","):
            conn.execute(f"ALTER TABLE tool_operations DROP COLUMN {column.strip()}")
        conn.execute("PRAGMA user_version = 5")
        conn.execute("COMMIT")
    finally:
        conn.close()
