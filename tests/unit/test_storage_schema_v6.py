"""Schema 6: a tool call's ``prepared`` and outcome journal rows live on its operation row, so
T1 and T2 write no page of ``tool_journal_events``; readers get the same journal records, and an
upgrade moves the rows with every record kept (``storage/ledger/schema_v6.py``)."""

from __future__ import annotations

import sqlite3
import struct
from contextlib import closing
from pathlib import Path

from storage.ledger.ledger_schema import SCHEMA_VERSION
from storage.ledger.ledger_store import open_store
from storage.ledger.sqlite_connection import DATABASE_NAME
from storage.ledger.tool_projection import read_journal
from tests.helpers.ledger_builders import RunIds, bound_response, call_event, dispatch_event
from tests.helpers.schema_v3 import (
    current_store_with_ledgers,
    logical_journal,
    rewind_to_schema_5,
)
from tests.helpers.store_workloads import add_run

IDS = RunIds("sess-w", "inv-w", "run-w", "turn-w")
# The B-trees of the journal table (its rowid table, its two indexes) and AUTOINCREMENT's table.
JOURNAL_TREES = {
    "tool_journal_events",
    "sqlite_autoindex_tool_journal_events_1",
    "tool_journal_events_by_invocation",
    "sqlite_sequence",
}


def _written_trees(database: Path, monitor: sqlite3.Connection) -> set[str]:
    """The B-trees owning the pages in the WAL (one commit's, after a truncating checkpoint)."""
    data = (database.parent / f"{database.name}-wal").read_bytes()
    page_size = int(monitor.execute("PRAGMA page_size").fetchone()[0])
    pages = {
        struct.unpack(">I", data[offset : offset + 4])[0]
        for offset in range(32, len(data) - 23, page_size + 24)
    }
    owners = dict(monitor.execute("SELECT pageno, name FROM dbstat").fetchall())
    return {str(owners.get(page, "")) for page in pages}


def test_a_tool_call_writes_no_page_of_the_journal_table(data_dir: Path) -> None:
    database = data_dir / DATABASE_NAME
    with open_store(data_dir) as store:
        add_run(store, IDS)
        monitor = sqlite3.connect(database)
        try:
            written: dict[str, set[str]] = {"T1": set(), "T2": set()}
            for index in range(40):  # enough for leaves to fill and split
                call = call_event(f"c{index}", "Write", {"path": f"f{index}"}, ids=IDS, ts=index)
                monitor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                store.commit_tool_prepared(call, dispatch_event(call))
                written["T1"] |= _written_trees(database, monitor)
                monitor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                store.commit_tool_outcome(bound_response(call, {"ok": True}))
                written["T2"] |= _written_trees(database, monitor)
        finally:
            monitor.close()
        assert "tool_operations" in written["T1"] and "tool_operations" in written["T2"]
        assert written["T1"] & JOURNAL_TREES == set()
        assert written["T2"] & JOURNAL_TREES == set()
        operation = store.read_projections()[0][0]
        journal = store.read_tool_journal(operation.operation_id)
        assert [(row.journal_event_id, row.state) for row in journal] == [
            (f"{operation.operation_id}_prepared", "prepared"),
            (f"{operation.operation_id}_outcome", "outcome_committed"),
        ]
        assert [row.runtime_event_id for row in journal] == [
            operation.dispatch_event_id,
            operation.result_event_id,
        ]
        assert store.derive_projections() == store.read_projections()


def test_the_upgrade_keeps_every_journal_record_and_moves_two_per_call(tmp_path: Path) -> None:
    database = current_store_with_ledgers(tmp_path / "data")
    rewind_to_schema_5(database)
    with closing(sqlite3.connect(database)) as conn:
        before = logical_journal(conn)
        raw_before = conn.execute("SELECT count(*) FROM tool_journal_events").fetchone()[0]
        recovery_rows = [row for row in before if row.journal_event_id.endswith("_journal")]
    assert raw_before == len(before) and recovery_rows  # the ledgers hold recovery facts too
    with open_store(database.parent) as store:
        assert store.schema_version() == SCHEMA_VERSION == 6
        report = store.diagnose()
        assert report.ok, report.to_json()
        online = store.read_projections()
        assert store.derive_projections() == online
    with closing(sqlite3.connect(database)) as conn:
        assert logical_journal(conn) == before
        assert online[1] == before
        kept = conn.execute("SELECT journal_event_id FROM tool_journal_events").fetchall()
        assert sorted(str(row[0]) for row in kept) == sorted(
            row.journal_event_id for row in recovery_rows
        )
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


def test_a_row_missing_before_the_upgrade_is_still_missing_and_reported(tmp_path: Path) -> None:
    database = current_store_with_ledgers(tmp_path / "data")
    rewind_to_schema_5(database)
    with closing(sqlite3.connect(database)) as conn:
        victim = str(
            conn.execute(
                "SELECT operation_id FROM tool_journal_events WHERE state = 'outcome_committed'"
                " ORDER BY journal_seq LIMIT 1"
            ).fetchone()[0]
        )
        conn.execute(
            "DELETE FROM tool_journal_events WHERE journal_event_id = ?", (f"{victim}_outcome",)
        )
        conn.commit()
    with open_store(database.parent) as store:
        states = [row.state for row in store.read_tool_journal(victim)]
        assert "outcome_committed" not in states and states[0] == "prepared"
        assert not store.diagnose().ok  # the doctor compares with the derived rows
        store.rebuild_projections()
        assert "outcome_committed" in [row.state for row in store.read_tool_journal(victim)]
        assert store.diagnose().ok


def test_a_journal_asked_by_operation_id_alone_reads_its_operation_row_once(
    data_dir: Path,
) -> None:
    with open_store(data_dir) as store:
        add_run(store, IDS)
        call = call_event("c1", "Write", {"path": "f1"}, ids=IDS, ts=1)
        store.commit_tool_prepared(call, dispatch_event(call))
        store.commit_tool_outcome(bound_response(call, {"ok": True}))
        operation = store.read_projections()[0][0]
        expected = store.read_tool_journal(operation.operation_id)
    statements: list[str] = []
    with closing(sqlite3.connect(data_dir / DATABASE_NAME)) as conn:
        conn.set_trace_callback(statements.append)
        journal = read_journal(conn, operation.operation_id)
        assert read_journal(conn, "no such operation") == []
    assert journal == expected and len(journal) == 2
    on_operations = [sql for sql in statements if "FROM tool_operations" in sql]
    assert len(on_operations) == 2, on_operations  # one per call above, not two
