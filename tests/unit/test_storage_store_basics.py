"""The store's everyday path on a real database file: sessions, run headers, generic append,
T1, T2, the recovery bundle and the run ending, and reading back."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from runtime.ledger.codes import StoreCode, WriterRejectionCode
from runtime.ledger.store_ports import RunHeader, RunStatus, SessionRecord, StoreRefusal
from storage.ledger import tool_projection
from storage.ledger.ledger_schema import SCHEMA_VERSION
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from storage.ledger.sqlite_connection import BULK_CACHE_KIB
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    decision_event,
    dispatch_event,
    model_text,
    reconcile_event,
    terminal,
    user_text,
)

IDS = RunIds()


def _open_with_run(data_dir: Path, ids: RunIds = IDS) -> SqliteLedgerStore:
    store = open_store(data_dir)
    store.create_session(SessionRecord(ids.session_id, "/work", "a session", 1))
    store.create_run(
        RunHeader(
            ids.run_id,
            ids.session_id,
            ids.invocation_id,
            ids.turn_id,
            RunStatus.CREATED,
            "/work",
            store.bump_owner_epoch(),
            1,
            1,
        )
    )
    return store


def test_open_creates_a_wal_database_at_the_current_schema(data_dir: Path) -> None:
    with open_store(data_dir) as store:
        assert store.schema_version() == SCHEMA_VERSION
        assert store.journal_mode() == "wal"
    assert (data_dir / "runtime.sqlite").is_file()


def test_a_tool_turn_commits_in_order_and_reads_back(data_dir: Path) -> None:
    with _open_with_run(data_dir) as store:
        store.mark_run_running(IDS.run_id)
        assert store.append_event(user_text(ids=IDS, marker=True)).event_seq == 1
        call = call_event(ids=IDS)
        dispatch = dispatch_event(call)
        result = store.commit_tool_prepared(call, dispatch)
        assert (result.created, result.event_seq) == (True, 3)
        assert store.commit_tool_prepared(call, dispatch).created is False
        assert store.commit_tool_outcome(bound_response(call)).event_seq == 4
        store.append_event(model_text(ids=IDS, ts=5))
        end = store.commit_run_ending(terminal(IDS), RunStatus.COMPLETED, None)
        assert end.event_seq == 6
    with open_store(data_dir, read_only=True) as reader:
        stored = reader.read_run_events(IDS.run_id)
        assert [row.seq for row in stored] == [1, 2, 3, 4, 5, 6]
        header = reader.read_run_header(IDS.run_id)
        assert header is not None and header.status is RunStatus.COMPLETED
        operation = reader.read_tool_operation(dispatch["actions"]["toolDispatch"]["operationId"])
        assert operation is not None and operation.current_state == "outcome_committed"


def test_parked_bundle_is_final_and_a_sealed_run_accepts_nothing(data_dir: Path) -> None:
    with _open_with_run(data_dir) as store:
        store.append_event(user_text(ids=IDS, marker=True))
        call = call_event(ids=IDS)
        dispatch = dispatch_event(call)
        store.commit_tool_prepared(call, dispatch)
        reconcile = reconcile_event(call, "diverged")
        decision = decision_event(call, dispatch, reconcile)
        assert store.commit_recovery_bundle(reconcile, None, decision).created is True
        assert store.commit_recovery_bundle(reconcile, None, decision).created is False
        with pytest.raises(StoreRefusal) as refused:
            store.commit_tool_outcome(bound_response(call))
        assert refused.value.code == "outcome_for_parked"
        store.commit_run_ending(
            terminal(IDS, status="failed", state_delta={"failureClass": "app_restarted"}),
            RunStatus.FAILED,
            "app_restarted",
        )
        with pytest.raises(StoreRefusal) as sealed:
            store.append_event(model_text(ids=IDS, event_id="late"))
        assert sealed.value.code is WriterRejectionCode.RUN_SEALED


def test_read_only_store_refuses_writes(data_dir: Path) -> None:
    _open_with_run(data_dir).close()
    with open_store(data_dir, read_only=True) as reader, pytest.raises(StoreRefusal) as refused:
        reader.append_event(user_text(ids=IDS))
    assert refused.value.code is StoreCode.STORE_READ_ONLY


def test_bulk_work_raises_the_page_cache_only_for_its_duration(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Everyday writes keep SQLite's default page cache; a projection rebuild (or an import)
    raises it while it runs and gives the connection its size back, even when refused."""
    store = _open_with_run(data_dir)
    everyday = store.connection_settings().cache_size
    assert everyday == -2000
    call = call_event(ids=IDS)
    store.commit_tool_prepared(call, dispatch_event(call))
    store.commit_tool_outcome(bound_response(call))
    seen: list[int] = []
    derive = tool_projection.derive_projections

    def spy(*args: Any) -> Any:
        seen.append(store.connection_settings().cache_size)
        return derive(*args)

    monkeypatch.setattr(tool_projection, "derive_projections", spy)
    store.rebuild_projections()
    assert seen == [-BULK_CACHE_KIB]
    assert store.connection_settings().cache_size == everyday
    exported = io.BytesIO()
    store.export_session(IDS.session_id, exported)
    conflicting = exported.getvalue().replace(b'"result":"ok"', b'"result":"ko"')
    assert conflicting != exported.getvalue()
    with pytest.raises(StoreRefusal):  # refused inside the write transaction
        store.import_session(conflicting)
    assert store.connection_settings().cache_size == everyday
    store.close()
