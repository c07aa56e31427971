"""Schema 4: no index a tool call writes starts with a hash-derived id, ids stay unique across
the whole ledger, and a schema-3 database holding real ledgers is upgraded with every row
kept (``storage/ledger/schema_v4.py``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from runtime.ledger.store_ports import StoreRefusal
from storage.ledger.ledger_schema import SCHEMA_VERSION
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from storage.ledger.sqlite_connection import DATABASE_NAME
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    dispatch_event,
    operation_of,
    user_text,
    with_changes,
)
from tests.helpers.schema_v3 import (
    CHOSEN,
    CHOSEN_EVENT_ID,
    CHOSEN_OPERATION_ID,
    RUNS,
    current_store_with_ledgers,
    table_rows,
    write_schema_3,
)
from tests.helpers.store_workloads import add_run

# Indexes whose key starts with one of these take a random leaf per tool call.
_HASHED = {"event_id", "operation_id", "journal_event_id"}
NEW = RunIds("sess-n", "inv-n", "run-n", "turn-n")


def _refused(action: object) -> str:
    with pytest.raises(StoreRefusal) as raised:
        action()  # type: ignore[operator]
    return str(raised.value.code)


def test_no_full_index_of_a_tool_call_starts_with_a_hashed_id(data_dir: Path) -> None:
    open_store(data_dir).close()
    conn = sqlite3.connect(data_dir / DATABASE_NAME)
    try:
        leading: dict[str, str] = {}
        for table in ("runtime_events", "tool_operations", "tool_journal_events"):
            for _, name, _, _, partial in conn.execute(f"PRAGMA index_list({table})"):
                if partial:
                    continue  # holds only chosen ids, which no tool call of ours writes
                first = conn.execute(f"PRAGMA index_info({name})").fetchone()
                leading[name] = str(first[2])
    finally:
        conn.close()
    assert leading
    assert {name: column for name, column in leading.items() if column in _HASHED} == {}


def _upgraded(tmp_path: Path) -> tuple[Path, dict[str, list[tuple[object, ...]]]]:
    source = current_store_with_ledgers(tmp_path / "current")
    old = write_schema_3(source, tmp_path / "old")
    return old, table_rows(old)


def test_a_schema_3_database_is_upgraded_with_every_row_kept(tmp_path: Path) -> None:
    old, before = _upgraded(tmp_path)
    assert len(before["runtime_events"]) > 40 and len(before["tool_journal_events"]) > 20
    with open_store(old.parent) as store:
        assert store.schema_version() == SCHEMA_VERSION >= 4
    after = table_rows(old)
    assert after == before
    conn = sqlite3.connect(old)
    try:
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        chosen_ops = conn.execute(
            "SELECT operation_id FROM tool_operations WHERE operation_id_derived = 0"
        ).fetchall()
        chosen_events = conn.execute(
            "SELECT event_id, run_id FROM chosen_tool_event_ids"
        ).fetchall()
        derived = conn.execute(
            "SELECT count(*) FROM tool_operations WHERE operation_id_derived = 1"
        ).fetchone()[0]
    finally:
        conn.close()
    assert chosen_ops == [(CHOSEN_OPERATION_ID,)]
    assert (CHOSEN_EVENT_ID, CHOSEN.run_id) in chosen_events
    assert derived == len(before["tool_operations"]) - 1
    with open_store(old.parent) as store:
        report = store.diagnose()
        assert report.ok, report.to_json()
        assert report.integrity == ["ok"]
        journal = store.read_tool_journal(CHOSEN_OPERATION_ID)
        assert [row.state for row in journal] == ["prepared", "outcome_committed"]
        store.rebuild_projections()  # derives the same rows (the doctor compared them too)
        assert store.read_tool_journal(CHOSEN_OPERATION_ID) == journal


def test_after_the_upgrade_ids_are_still_unique_across_runs(tmp_path: Path) -> None:
    old, _ = _upgraded(tmp_path)
    with open_store(old.parent) as store:
        _ids_stay_unique(store)


def test_a_new_database_keeps_ids_unique_across_runs(data_dir: Path) -> None:
    current_store_with_ledgers(data_dir)
    with open_store(data_dir) as store:
        _ids_stay_unique(store)


def _ids_stay_unique(store: SqliteLedgerStore) -> None:
    add_run(store, NEW)
    store.append_event(user_text(ids=NEW, marker=True, event_id="u-new"))
    # A chosen id of another run, an ordinary one and one shaped like a derived id.
    other_user = user_text(ids=NEW, event_id="evt-user-r0", ts=3)
    assert _refused(lambda: store.append_event(other_user)) == "identity_conflict"
    shaped = user_text(ids=NEW, event_id=CHOSEN_EVENT_ID, ts=3)
    assert _refused(lambda: store.append_event(shaped)) == "identity_conflict"
    # A derived event id of another run, reused here as a chosen one.
    first_call = call_event("call-0", ids=RUNS[0])
    copied = user_text(ids=NEW, event_id=first_call["id"], ts=4)
    assert _refused(lambda: store.append_event(copied)) == "identity_conflict"
    # An operation id another run holds, derived there or chosen there.
    call = call_event("call-n", ids=NEW, ts=20)
    for taken_id in (operation_of(first_call), CHOSEN_OPERATION_ID):
        forged = {"operationId": taken_id}
        dispatch = with_changes(dispatch_event(call), actions={"toolDispatch": forged}, refs=forged)
        assert _refused(lambda d=dispatch: store.commit_tool_prepared(call, d)) == (
            "duplicate_operation"
        )
    assert store.commit_tool_prepared(call, dispatch_event(call)).created
    assert store.commit_tool_outcome(bound_response(call, ts=30)).created
    assert store.read_tool_operation(operation_of(call)) is not None


def test_a_fact_not_written_yet_of_a_known_operation_is_looked_up_without_a_scan(
    data_dir: Path,
) -> None:
    from storage.ledger.event_rows import read_event

    current_store_with_ledgers(data_dir)
    with open_store(data_dir) as store:
        add_run(store, NEW)
        store.append_event(user_text(ids=NEW, marker=True, event_id="u-new"))
        call = call_event("call-n", ids=NEW, ts=20)
        assert store.commit_tool_prepared(call, dispatch_event(call)).created
    operation = operation_of(call)
    conn = sqlite3.connect(data_dir / DATABASE_NAME)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        # An attestation asks whether the operation's reconcile fact exists before writing it.
        assert read_event(conn, f"{operation}_reconcile", NEW.run_id) is None
        scans = [sql for sql in statements if "FROM runtime_events WHERE event_id =" in sql]
        assert scans == [], "a lookup by id alone reads every event of the ledger"
        # The call itself is still found, in its run and from another run's point of view.
        assert read_event(conn, call["id"], NEW.run_id) is not None
        assert read_event(conn, call["id"], RUNS[0].run_id) is not None
        # A chosen id shaped like a derived one, held by another run, is still found.
        assert read_event(conn, CHOSEN_EVENT_ID, NEW.run_id) is not None
    finally:
        conn.close()
