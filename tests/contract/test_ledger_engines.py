"""What the two engines must agree on, and what only the PostgreSQL engine has (docs/postgres.md):
identical canonical bytes and rows for one workload, a gap-free ``event_seq`` under concurrent
writers and rollbacks, the schema's version, the ``MAKA_DATABASE_URL`` switch, and the session
leases that fence every write (``session_lease_lost``, nothing committed)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import psycopg
import pytest

from runtime.ledger.canonical_codec import canonical_json_bytes
from runtime.ledger.codes import StoreCode
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import (
    RunStatus,
    SessionLeaseStore,
    SessionRecord,
    StoreRefusal,
)
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from storage.ledger.postgres_schema import SCHEMA_VERSION
from storage.ledger.postgres_store import LeaseSettings, PostgresLedgerStore, open_postgres_store
from storage.ledger.tool_projection import JOURNAL_COLUMNS, ROW_JOURNAL_COLUMNS
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    dispatch_event,
    model_text,
    terminal,
    user_text,
)
from tests.helpers.store_engines import ENGINES, engine_store, store_state
from tests.helpers.store_workloads import add_run, commit_ledger, fixed_clock

IDS = RunIds()


def workload(ids: RunIds = IDS) -> list[RuntimeEvent]:
    call = call_event("call-1", ids=ids, args={"path": "ünïcode.txt", "content": "a\u2028b 1e3"})
    return [
        user_text("write it", ids=ids),
        call,
        dispatch_event(call),
        bound_response(call, {"ok": True, "bytes": 12}),
        model_text("done", ids=ids, ts=5),
        terminal(ids),
    ]


@pytest.fixture(params=ENGINES)
def store(request: pytest.FixtureRequest) -> Iterator[SqliteLedgerStore]:
    opened = engine_store(request, request.param, IDS)
    yield opened
    opened.close()


def test_both_engines_store_the_same_bytes_and_rows(request: pytest.FixtureRequest) -> None:
    stores = [engine_store(request, engine, IDS) for engine in ENGINES]
    try:
        results = [commit_ledger(store, workload()) for store in stores]
        assert results[0] == results[1]
        sqlite_state, postgres_state = (store_state(store) for store in stores)
        assert sqlite_state.events == postgres_state.events
        assert sqlite_state.operations == postgres_state.operations
        assert sqlite_state.journal == postgres_state.journal
        # PostgreSQL's runs carry next_seq after the columns both engines share.
        assert sqlite_state.runs == tuple(row[:-1] for row in postgres_state.runs)
        assert postgres_state.runs[0][-1] == len(workload()) + 1
        assert [stored.payload for stored in stores[0].read_run_events(IDS.run_id)] == [
            stored.payload for stored in stores[1].read_run_events(IDS.run_id)
        ]
    finally:
        for store in stores:
            store.close()


def test_a_rolled_back_write_leaves_no_gap(store: SqliteLedgerStore) -> None:
    store.append_event(user_text(ids=IDS))
    clash = model_text("other bytes", event_id="evt-user", ids=IDS)
    with pytest.raises(StoreRefusal):
        store.append_event(clash)
    call = call_event("call-1", ids=IDS)
    with pytest.raises(StoreRefusal):  # a T1 whose hash lies is refused inside the transaction
        store.commit_tool_prepared(
            call,
            dispatch_event(call, extra={"actions": {"toolDispatch": {"canonicalArgsHash": "x"}}}),
        )
    assert store.append_event(model_text(ids=IDS)).event_seq == 2
    assert [stored.seq for stored in store.read_run_events(IDS.run_id)] == [1, 2]


def test_concurrent_writers_keep_every_run_gap_free(request: pytest.FixtureRequest) -> None:
    """Four runs, four threads each (the PostgreSQL engine: one store per run, each its own
    connection, all committing at once)."""
    engine = "postgresql"
    runs = [RunIds(f"sess-{n}", f"inv-{n}", f"run-{n}", f"turn-{n}") for n in range(4)]
    stores = [engine_store(request, engine, ids) for ids in runs]
    errors: list[BaseException] = []

    def write(store: SqliteLedgerStore, ids: RunIds, worker: int) -> None:
        try:
            for n in range(15):
                store.append_event(
                    model_text(f"{worker}-{n}", event_id=f"e-{ids.run_id}-{worker}-{n}", ids=ids)
                )
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [
        threading.Thread(target=write, args=(store, ids, worker))
        for store, ids in zip(stores, runs, strict=True)
        for worker in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        for store, ids in zip(stores, runs, strict=True):
            seqs = [stored.seq for stored in store.read_run_events(ids.run_id)]
            assert seqs == list(range(1, 61))
    finally:
        for store in stores:
            store.close()


# ---- schema and the switch -----------------------------------------------------------------


def test_the_schema_is_versioned_and_a_newer_one_is_refused_untouched(postgres_url: str) -> None:
    with open_postgres_store(postgres_url) as store:
        assert store.schema_version() == SCHEMA_VERSION
        assert store.connection_settings().journal_mode == "postgresql"
    with open_postgres_store(postgres_url) as again:  # a current schema: no migration
        assert again.schema_version() == SCHEMA_VERSION
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'", (99,))
    with pytest.raises(StoreRefusal) as error:
        open_postgres_store(postgres_url)
    assert error.value.code is StoreCode.SCHEMA_NEWER_THAN_PROGRAM
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
            99,
        )


def _bytes_or_none(metadata: Mapping[str, Any] | None) -> bytes | None:
    return None if metadata is None else canonical_json_bytes(dict(metadata))


def test_the_upgrade_to_version_3_keeps_every_journal_record(postgres_url: str) -> None:
    with open_postgres_store(postgres_url, clock=fixed_clock()) as store:
        add_run(store, IDS)
        commit_ledger(store, workload())
        operations, journal = store.read_projections()
    assert [row.state for row in journal] == ["prepared", "outcome_committed"]
    with psycopg.connect(postgres_url) as conn:  # the layout version 2 left
        assert conn.execute("SELECT count(*) FROM tool_journal_events").fetchone() == (0,)
        conn.cursor().executemany(
            f"INSERT INTO tool_journal_events (journal_seq, {JOURNAL_COLUMNS})"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [
                (seq, *row[:9], _bytes_or_none(row.metadata), row.committed_at)
                for seq, row in enumerate(journal, start=1)
            ],
        )
        for column in ROW_JOURNAL_COLUMNS.split(","):
            conn.execute(f"ALTER TABLE tool_operations DROP COLUMN {column.strip()}")
        conn.execute("UPDATE meta SET value = 2 WHERE key = 'schema_version'")
    with open_postgres_store(postgres_url) as upgraded:
        assert upgraded.schema_version() == SCHEMA_VERSION == 3
        assert upgraded.read_projections() == (operations, journal)
        assert upgraded.derive_projections() == (operations, journal)
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM tool_journal_events").fetchone() == (0,)


def test_a_read_only_store_reads_and_refuses_writes(postgres_url: str) -> None:
    with pytest.raises(StoreRefusal) as missing:
        open_postgres_store(postgres_url, read_only=True)
    assert missing.value.code is StoreCode.STORE_NOT_FOUND
    with open_postgres_store(postgres_url) as writer:
        add_run(writer, IDS)
        writer.append_event(user_text(ids=IDS))
        with open_postgres_store(postgres_url, read_only=True) as reader:
            assert [stored.seq for stored in reader.read_run_events(IDS.run_id)] == [1]
            with pytest.raises(StoreRefusal) as refused:
                reader.append_event(model_text(ids=IDS))
            assert refused.value.code is StoreCode.STORE_READ_ONLY


def test_maka_database_url_selects_the_engine(
    postgres_url: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAKA_DATABASE_URL", postgres_url)
    with open_store(data_dir) as store:
        assert isinstance(store, PostgresLedgerStore)
    assert not (data_dir / "runtime.sqlite").exists()
    monkeypatch.setenv("MAKA_DATABASE_URL", "mysql://somewhere")
    with pytest.raises(StoreRefusal):
        open_store(data_dir)
    monkeypatch.setenv("MAKA_DATABASE_URL", "")
    with open_store(data_dir) as default:
        assert not isinstance(default, PostgresLedgerStore)


# ---- session leases ------------------------------------------------------------------------


def _host(
    url: str, ttl_ms: int = 30_000, runway_ms: int = 0, name: str = ""
) -> PostgresLedgerStore:
    return open_postgres_store(
        url,
        clock=fixed_clock(),
        owner=name or None,
        lease_settings=LeaseSettings(ttl_ms=ttl_ms, runway_ms=runway_ms),
        heartbeat=False,  # these tests let leases run out
    )


def test_creating_a_session_takes_its_lease_and_a_live_lease_is_not_taken(
    postgres_url: str,
) -> None:
    with _host(postgres_url, name="host-a") as first, _host(postgres_url, name="host-b") as second:
        add_run(first, IDS)
        port: SessionLeaseStore = first
        assert port.held_session_leases() == {IDS.session_id: 1}
        with pytest.raises(StoreRefusal) as taken:
            second.take_session_lease(IDS.session_id)
        assert taken.value.code is StoreCode.SESSION_LEASE_LOST
        # A write without the lease commits nothing.
        before = store_state(first)
        with pytest.raises(StoreRefusal) as fenced:
            second.append_event(user_text(ids=IDS))
        assert fenced.value.code is StoreCode.SESSION_LEASE_LOST
        assert store_state(first) == before
        first.append_event(user_text(ids=IDS))


def test_a_takeover_fences_the_old_holder(postgres_url: str) -> None:
    with _host(postgres_url, ttl_ms=200, name="host-a") as old, _host(postgres_url) as new:
        add_run(old, IDS)
        old.append_event(user_text(ids=IDS))
        time.sleep(0.3)
        lease = new.take_session_lease(IDS.session_id)
        assert lease.epoch == 2
        call = call_event("call-1", ids=IDS)
        before = store_state(new)
        writes: list[Callable[[], object]] = [
            lambda: old.commit_tool_prepared(call, dispatch_event(call)),
            lambda: old.append_event(model_text(ids=IDS)),
            lambda: old.commit_run_ending(terminal(IDS), RunStatus.COMPLETED, None),
            lambda: old.mark_run_running(IDS.run_id),
        ]
        for write in writes:
            with pytest.raises(StoreRefusal) as refused:
                write()
            assert refused.value.code is StoreCode.SESSION_LEASE_LOST
        assert store_state(new) == before
        assert old.renew_session_leases() == [IDS.session_id]
        assert old.held_session_leases() == {}
        # The new holder carries on from the same gap-free sequence.
        assert new.commit_tool_prepared(call, dispatch_event(call)).event_seq == 3
        assert [stored.seq for stored in new.read_run_events(IDS.run_id)] == [1, 2, 3]
        assert new.renew_session_leases() == []


def test_a_t1_needs_runway_on_its_lease_and_other_writes_only_the_epoch(
    postgres_url: str,
) -> None:
    with _host(postgres_url, ttl_ms=2_000, runway_ms=10_000) as store:
        add_run(store, IDS)
        store.append_event(user_text(ids=IDS))
        call = call_event("call-1", ids=IDS)
        before = store_state(store)
        with pytest.raises(StoreRefusal) as refused:
            store.commit_tool_prepared(call, dispatch_event(call))
        assert refused.value.code is StoreCode.SESSION_LEASE_LOST
        assert "runs out" in refused.value.message
        assert store_state(store) == before
        store.append_event(model_text(ids=IDS))


def test_a_racing_takeover_leaves_one_gap_free_run(postgres_url: str) -> None:
    """The old holder writes in a loop while the new one takes the session over: each write of
    the old epoch either committed before the takeover or was refused; none after."""
    with _host(postgres_url, ttl_ms=300, name="old") as old, _host(postgres_url) as new:
        add_run(old, IDS)
        refusals: list[str] = []
        written: list[int] = []

        def keep_writing() -> None:
            for n in range(10_000):
                try:
                    written.append(
                        old.append_event(model_text(event_id=f"old-{n}", ids=IDS)).event_seq
                    )
                except StoreRefusal as error:
                    refusals.append(str(error.code))
                    return

        writer = threading.Thread(target=keep_writing)
        writer.start()
        time.sleep(0.4)
        new.take_session_lease(IDS.session_id)
        writer.join(timeout=30)
        assert refusals == ["session_lease_lost"]
        after = new.append_event(model_text(event_id="new-1", ids=IDS)).event_seq
        seqs = [stored.seq for stored in new.read_run_events(IDS.run_id)]
        assert seqs == list(range(1, len(written) + 2))
        assert after == len(written) + 1


def test_on_sqlite_the_lease_is_the_data_folders_owner_epoch(data_dir: Path) -> None:
    with open_store(data_dir) as store:
        store.create_session(SessionRecord(IDS.session_id, "/w", "a session", 1))
        epoch = store.bump_owner_epoch()
        lease = store.take_session_lease(IDS.session_id)
        assert (lease.epoch, lease.owner, lease.expires_at_ms) == (epoch, None, None)
        assert store.renew_session_leases() == ()
        with pytest.raises(StoreRefusal) as missing:
            store.take_session_lease("no-such-session")
        assert missing.value.code is StoreCode.SESSION_NOT_FOUND


def test_a_writer_renews_its_leases_by_itself(postgres_url: str) -> None:
    """``open_postgres_store`` starts the heartbeat: a lease outlives its ttl while the store is
    open, and a T1 keeps its runway."""
    settings = LeaseSettings(ttl_ms=1500, runway_ms=300)
    with (
        open_postgres_store(postgres_url, lease_settings=settings) as store,
        _host(postgres_url) as other,
    ):
        add_run(store, IDS)
        time.sleep(2.2)
        with pytest.raises(StoreRefusal) as live:
            other.take_session_lease(IDS.session_id)
        assert live.value.code is StoreCode.SESSION_LEASE_LOST
        call = call_event("call-1", ids=IDS)
        assert store.commit_tool_prepared(call, dispatch_event(call)).created


def test_the_heartbeat_keeps_a_lease_and_reports_one_lost(postgres_url: str) -> None:
    from storage.ledger.session_lease_heartbeat import SessionLeaseHeartbeat

    lost: list[str] = []
    with _host(postgres_url, ttl_ms=1500, name="kept") as holder, _host(postgres_url) as other:
        add_run(holder, IDS)
        heartbeat = SessionLeaseHeartbeat(
            holder, ttl_s=1.5, margin_s=0.1, on_lost=lost.extend, interval_s=0.1
        )
        heartbeat.start()
        try:
            time.sleep(2.0)  # past the ttl: only the renewals keep the lease
            with pytest.raises(StoreRefusal) as live:
                other.take_session_lease(IDS.session_id)
            assert live.value.code is StoreCode.SESSION_LEASE_LOST
            assert heartbeat.runway_deadline > time.monotonic()
        finally:
            heartbeat.stop()
        time.sleep(1.6)
        other.take_session_lease(IDS.session_id)
        assert heartbeat.beat() == [IDS.session_id]
        assert lost == [IDS.session_id]
        with pytest.raises(StoreRefusal) as fenced:
            holder.append_event(user_text(ids=IDS))
        assert fenced.value.code is StoreCode.SESSION_LEASE_LOST


def test_a_dropped_connection_is_replaced_and_the_retry_is_exact(postgres_url: str) -> None:
    """The server ends the store's connection (as a restart or a network cut would): the call
    that meets it answers ``store_io_failed``, the next one reconnects, and retrying the same
    facts is safe whether or not the failed call committed (docs/postgres.md)."""
    store = _host(postgres_url)
    with store:
        add_run(store, IDS)
        first = store.append_event(user_text(ids=IDS))
        backend = store._pg.raw.info.backend_pid
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
        with pytest.raises(StoreRefusal) as cut:
            store.append_event(model_text(ids=IDS))
        assert cut.value.code is StoreCode.STORE_IO_FAILED
        assert store.append_event(user_text(ids=IDS)) == first._replace(created=False)
        assert store.append_event(model_text(ids=IDS)).event_seq == 2
        assert [stored.seq for stored in store.read_run_events(IDS.run_id)] == [1, 2]


def test_session_administration_is_fenced_and_removal_takes_the_lease(postgres_url: str) -> None:
    with _host(postgres_url, name="holder") as holder, _host(postgres_url) as other:
        add_run(holder, IDS)
        holder.append_event(user_text(ids=IDS))
        before = store_state(holder)
        writes: list[Callable[[], object]] = [
            lambda: other.rename_session(IDS.session_id, "mine now"),
            lambda: other.relocate_session(IDS.session_id, "/elsewhere"),
            lambda: other.name_new_session(IDS.session_id, "mine", "a session"),
            lambda: other.remove_session(IDS.session_id),
        ]
        for write in writes:
            with pytest.raises(StoreRefusal) as refused:
                write()
            assert refused.value.code is StoreCode.SESSION_LEASE_LOST
        assert store_state(holder) == before
        holder.rename_session(IDS.session_id, "renamed")
        holder.relocate_session(IDS.session_id, "/moved")
        session = holder.get_session(IDS.session_id)
        assert session is not None and (session.title, session.cwd) == ("renamed", "/moved")
        holder.remove_session(IDS.session_id)
        assert holder.get_session(IDS.session_id) is None
        assert holder.held_session_leases() == {}
        with psycopg.connect(postgres_url) as conn:
            assert conn.execute("SELECT count(*) FROM session_leases").fetchone() == (0,)
            assert conn.execute("SELECT count(*) FROM runtime_events").fetchone() == (0,)
