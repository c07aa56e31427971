"""The two engines give the same verdicts: random workloads (every writer, retries, conflicts,
refusals, reopens, and damage written behind the store's back by another connection) played on
the SQLite store and on the PostgreSQL store answer identically step by step, and end with the same
events, operations and journal rows (docs/postgres.md)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import psycopg
from hypothesis import HealthCheck, Phase, given, settings

from runtime.ledger.canonical_codec import canonical_bytes
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from storage.ledger.postgres_store import open_postgres_store
from tests.helpers.ledger_builders import call_event
from tests.helpers.store_engines import store_state
from tests.helpers.store_workload_strategies import (
    CALL_IDS,
    RUNS,
    WORKLOADS,
    Step,
    apply_step,
)
from tests.helpers.store_workloads import add_run, fixed_clock, store_with_runs, without_fsync


def _damage_postgres(url: str, step: Step) -> None:
    """What ``store_workload_strategies._damage`` does to the SQLite file, done by another
    connection as another host would write: a second call for an existing provider call id, with
    the run's ``next_seq`` moved on."""
    ids = RUNS[step.run]
    with psycopg.connect(url) as conn:
        seq = int(
            conn.execute(
                "SELECT next_seq FROM runs WHERE run_id = %s FOR UPDATE", (ids.run_id,)
            ).fetchone()[0]  # type: ignore[index]
        )
        injected = call_event(
            CALL_IDS[step.call], ids=ids, event_id=f"injected-{ids.invocation_id}-{seq}"
        )
        conn.execute(
            "INSERT INTO runtime_events VALUES (%s, %s, %s, %s, %s, %s, 'function_call', 0, %s, 1)",
            (
                injected["id"],
                ids.session_id,
                ids.invocation_id,
                ids.run_id,
                ids.turn_id,
                seq,
                canonical_bytes(injected),
            ),
        )
        conn.execute("UPDATE runs SET next_seq = %s WHERE run_id = %s", (seq + 1, ids.run_id))


def _reopen_postgres(url: str, clock: Any) -> SqliteLedgerStore:
    store = without_fsync(open_postgres_store(url, clock=clock))
    for session_id in sorted({ids.session_id for ids in RUNS}):
        store.take_session_lease(session_id)  # the closed store gave its leases up
    return store


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    # Each example is a database of its own: shrinking a failure would take many minutes.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(workload=WORKLOADS)
def test_postgresql_gives_the_verdicts_of_sqlite(
    postgres_cluster: Any, workload: list[Step]
) -> None:
    url: str = postgres_cluster.new_database()
    clocks = {engine: fixed_clock() for engine in ("sqlite", "postgresql")}
    with tempfile.TemporaryDirectory() as root:
        folder = Path(root)
        sqlite = store_with_runs(folder, *RUNS, clock=clocks["sqlite"], durable=False)
        postgres = without_fsync(open_postgres_store(url, clock=clocks["postgresql"]))
        for ids in RUNS:
            add_run(postgres, ids)
        try:
            for step in workload:
                sqlite, expected = apply_step(
                    sqlite,
                    step,
                    lambda: without_fsync(open_store(folder, clock=clocks["sqlite"])),
                )
                if step.kind == "damage":
                    _damage_postgres(url, step)
                    got: tuple[str, object] = ("ok", None)
                else:
                    postgres, got = apply_step(
                        postgres, step, lambda: _reopen_postgres(url, clocks["postgresql"])
                    )
                assert got == expected, step
            sqlite_state, postgres_state = store_state(sqlite), store_state(postgres)
        finally:
            sqlite.close()
            postgres.close()
    # The commit times differ by the lease transactions a reopen runs on PostgreSQL (the test
    # clock ticks once per transaction); everything else is the same.
    assert _untimed(postgres_state.events) == _untimed(sqlite_state.events)
    assert postgres_state.operations == sqlite_state.operations
    assert _untimed(postgres_state.journal) == _untimed(sqlite_state.journal)


def _untimed(rows: tuple[tuple[Any, ...], ...]) -> list[tuple[Any, ...]]:
    """Rows without their last column (``committed_at``)."""
    return [row[:-1] for row in rows]
