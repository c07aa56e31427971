"""Projections are disposable: after random workloads the online ``tool_operations`` and
``tool_journal_events`` equal the rows derived from the events, survive close and reopen, and
``rebuild_projections()`` recreates them exactly; a corrupt tool ledger refuses the rebuild and
changes nothing."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from runtime.ledger.canonical_codec import canonical_bytes
from runtime.ledger.store_ports import StoreRefusal
from storage.ledger.ledger_store import open_store
from tests.helpers.ledger_builders import RunIds, call_event, clean_ledger
from tests.helpers.store_tampering import edit_behind_the_back
from tests.helpers.store_workload_strategies import RUNS, WORKLOADS, Step, apply_step
from tests.helpers.store_workloads import (
    commit_ledger,
    db_state,
    store_with_runs,
    without_fsync,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workload=WORKLOADS)
def test_online_projections_equal_rebuilt_ones(workload: list[Step]) -> None:
    with tempfile.TemporaryDirectory() as root:
        folder = Path(root) / "data"
        store = store_with_runs(folder, *RUNS, durable=False)
        try:
            for step in workload:
                store, _ = apply_step(store, step, lambda: without_fsync(open_store(folder)))
            online = store.read_projections()
        finally:
            store.close()
        with open_store(folder) as reopened:
            assert reopened.read_projections() == online
            damaged = any(step.kind == "damage" for step in workload)
            try:
                derived = reopened.derive_projections()
            except StoreRefusal:
                assert damaged, "only damage injected behind the store's back can corrupt it"
                before = db_state(reopened.path)
                with pytest.raises(StoreRefusal):
                    reopened.rebuild_projections()
                assert db_state(reopened.path) == before
                return
            assert derived == online
            counts = reopened.rebuild_projections()
            assert reopened.read_projections() == online
            assert (counts.operations, counts.journal_events) == (len(online[0]), len(online[1]))


def test_rebuild_of_every_kind_of_tool_turn(data_dir: Path) -> None:
    ids = RunIds()
    with store_with_runs(data_dir, ids) as store:
        commit_ledger(store, clean_ledger(10, ids=ids))
        online = store.read_projections()
        states = sorted(record.current_state for record in online[0])
        assert states == sorted(
            ["outcome_committed", "prepared", "recovery_parked", "recovery_completed"] * 2
        )
        edit_behind_the_back(store, "DELETE FROM tool_journal_events")
        edit_behind_the_back(store, "DELETE FROM tool_operations")
        counts = store.rebuild_projections()
        assert (counts.operations, counts.journal_events) == (8, 2 * (2 + 1 + 3 + 4))
        assert store.read_projections() == online


def test_rebuild_refuses_a_corrupt_ledger_and_keeps_the_projection(data_dir: Path) -> None:
    ids = RunIds()
    with store_with_runs(data_dir, ids) as store:
        commit_ledger(store, clean_ledger(3, ids=ids)[:-1])
        duplicate = call_event("call-0", ids=ids, event_id="injected")
        seq = store.run_high_water(ids.run_id) + 1
        edit_behind_the_back(
            store,
            "INSERT INTO runtime_events VALUES (?, ?, ?, ?, ?, ?, 'function_call', 0, ?, 1)",
            "injected", ids.session_id, ids.invocation_id, ids.run_id, ids.turn_id, seq,
            canonical_bytes(duplicate),
        )  # fmt: skip
        before = db_state(store.path)
        with pytest.raises(StoreRefusal) as refused:
            store.rebuild_projections()
        assert refused.value.code == "duplicate_call"
        assert db_state(store.path) == before
