"""Validation cost independent of history, proven equivalent: a store validating against its
incremental per-run state gives exactly the verdicts of a store that rescans the whole run before
every write, on random workloads (every writer, retries, conflicts, refusals, restarts, damage
injected behind the store's back), and both end with identical databases."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from tests.helpers.store_workload_strategies import RUNS, WORKLOADS, Step, apply_step
from tests.helpers.store_workloads import db_state, fixed_clock, store_with_runs, without_fsync


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workload=WORKLOADS)
def test_incremental_validation_matches_a_full_rescan(workload: list[Step]) -> None:
    with tempfile.TemporaryDirectory() as root:
        folders = {mode: Path(root) / mode for mode in ("incremental", "full")}
        clocks = {mode: fixed_clock() for mode in folders}
        stores = {
            mode: store_with_runs(folder, *RUNS, full_rescan=mode == "full", clock=clocks[mode])
            for mode, folder in folders.items()
        }
        try:
            for step in workload:
                verdicts = {}
                for mode, folder in folders.items():

                    def reopen(mode: str = mode, folder: Path = folder) -> SqliteLedgerStore:
                        return without_fsync(
                            open_store(folder, full_rescan=mode == "full", clock=clocks[mode])
                        )

                    stores[mode], verdicts[mode] = apply_step(stores[mode], step, reopen)
                assert verdicts["incremental"] == verdicts["full"], step
        finally:
            for store in stores.values():
                store.close()
        assert db_state(folders["incremental"] / "runtime.sqlite") == db_state(
            folders["full"] / "runtime.sqlite"
        )
