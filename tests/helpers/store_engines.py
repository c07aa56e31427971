"""The store's two engines for one conformance suite: SQLite in a data folder and PostgreSQL on
the test session's throwaway cluster (``postgres_cluster`` in tests/conftest.py).

``engine_store`` opens a store with runs on the engine a parametrised fixture names;
``store_state`` reads everything a write can change, for either engine, so a refused write can be
shown to have changed nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from storage.ledger.ledger_store import SqliteLedgerStore
from tests.helpers.ledger_builders import RunIds

if TYPE_CHECKING:
    from storage.ledger.postgres_store import PostgresLedgerStore

from tests.helpers.store_workloads import DbState, add_run, db_state, fixed_clock, store_with_runs

ENGINES = ("sqlite", "postgresql")


def engine_store(
    request: pytest.FixtureRequest,
    engine: str,
    *runs: RunIds,
    full_rescan: bool = False,
    clock: Callable[[], int] | None = None,
) -> SqliteLedgerStore:
    """A store on ``engine`` holding a session and a created run for each of ``runs``."""
    if engine == "sqlite":
        data_dir: Path = request.getfixturevalue("data_dir")
        return store_with_runs(data_dir, *runs, full_rescan=full_rescan, clock=clock)
    from storage.ledger.postgres_store import open_postgres_store

    url: str = request.getfixturevalue("postgres_url")
    store = open_postgres_store(url, clock=clock or fixed_clock())
    for ids in runs or (RunIds(),):
        add_run(store, ids)
    return store


def store_state(store: SqliteLedgerStore) -> DbState:
    """``db_state`` of either engine, read with a connection of its own."""
    url = getattr(store, "url", None)
    if url is None:
        return db_state(store.path)
    import psycopg

    with psycopg.connect(url) as conn:

        def rows(sql: str) -> tuple[tuple[Any, ...], ...]:
            return tuple(tuple(row) for row in conn.execute(sql).fetchall())

        return DbState(
            events=rows(
                "SELECT event_id, session_id, invocation_id, run_id, turn_id, event_seq, lane,"
                " terminal, payload, committed_at FROM runtime_events"
                " ORDER BY invocation_id, event_seq"
            ),
            runs=rows("SELECT * FROM runs ORDER BY run_id"),
            operations=rows("SELECT * FROM tool_operations ORDER BY operation_id"),
            journal=rows(
                "SELECT journal_event_id, operation_id, invocation_id, run_id, turn_id, state,"
                " runtime_event_id, canonical_args_hash, recovery_mode, metadata_json,"
                " committed_at FROM tool_journal_events ORDER BY operation_id, journal_seq"
            ),
            meta=rows("SELECT * FROM meta ORDER BY key")
            + rows("SELECT session_id, epoch, owner FROM session_leases ORDER BY session_id"),
        )


def lease_host(url: str, name: str, ttl_ms: int = 30_000, grace_ms: int = 0) -> PostgresLedgerStore:
    """A host's store on the server named ``name``, with a lease of ``ttl_ms``, no runway and no
    heartbeat: the tests let its leases run out by waiting."""
    from storage.ledger.postgres_store import LeaseSettings, open_postgres_store

    return open_postgres_store(
        url,
        clock=fixed_clock(),
        owner=name,
        lease_settings=LeaseSettings(ttl_ms=ttl_ms, runway_ms=0, grace_ms=grace_ms),
        heartbeat=False,
    )
