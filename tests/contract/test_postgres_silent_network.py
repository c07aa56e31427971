"""A network that goes silent under the PostgreSQL store (docs/postgres.md): a loopback proxy
that stops forwarding keeps every socket open and its kernel keeps acknowledging, so only the
store's own call deadline can notice. A call answers ``store_io_failed`` within the deadline and
commits nothing, the server drops the transaction its client left and frees its row locks, the
lease heartbeat is bounded too, and once the network forwards again the store works on a later
call."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from runtime.ledger.codes import StoreCode
from runtime.ledger.store_ports import StoreRefusal
from storage.ledger.postgres_connection import connect, opening_parameters
from storage.ledger.postgres_store import (
    LeaseSettings,
    PostgresLedgerStore,
    lease_settings_from_env,
    open_postgres_store,
)
from storage.ledger.session_lease_heartbeat import SessionLeaseHeartbeat
from tests.helpers.ledger_builders import RunIds, model_text, user_text
from tests.helpers.silent_proxy import SilentProxy
from tests.helpers.store_workloads import add_run, fixed_clock

pytestmark = pytest.mark.contract

BOUND_MS = 800
IDS = RunIds("sess-1", "inv-1", "run-1", "turn-1")


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[SilentProxy]:
    proxy = SilentProxy.for_url(postgres_url)
    try:
        yield proxy
    finally:
        proxy.close()


def _store(url: str, *, heartbeat: bool = False) -> PostgresLedgerStore:
    return open_postgres_store(
        url,
        clock=fixed_clock(),
        owner="silent",
        lease_settings=LeaseSettings(
            ttl_ms=6000, runway_ms=2000, grace_ms=0, call_timeout_ms=BOUND_MS
        ),
        heartbeat=heartbeat,
    )


def _events(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM runtime_events").fetchone()
        return int(row[0]) if row else 0


def test_a_silent_network_answers_store_io_failed_within_the_bound_and_commits_nothing(
    postgres_url: str, proxy: SilentProxy, caplog: pytest.LogCaptureFixture
) -> None:
    with _store(proxy.proxied_url(postgres_url)) as store:
        add_run(store, IDS)
        store.append_event(user_text(ids=IDS))
        fact = model_text("during the silence", event_id="m-1", ids=IDS)
        proxy.silence()
        started = time.monotonic()
        with pytest.raises(StoreRefusal) as met:
            store.append_event(fact)
        took = time.monotonic() - started
        assert met.value.code is StoreCode.STORE_IO_FAILED
        assert "no answer within 800 ms" in met.value.message
        assert BOUND_MS / 1000 * 0.9 <= took < BOUND_MS / 1000 + 1.5, took
        # The host's log says so too, whatever its caller reports (a turn: only the code).
        assert any(
            "no answer within 800 ms; its connection was abandoned" in record.getMessage()
            for record in caplog.records
        )
        assert _events(postgres_url) == 1  # nothing of the write reached a commit
        proxy.resume()
        written = store.append_event(fact)  # a later call reopens the connection
        assert written.created and written.event_seq == 2
        assert not store.append_event(fact).created  # the exact retry: already there
        assert [row.seq for row in store.read_run_events("run-1")] == [1, 2]
    assert proxy.connections >= 2


def test_a_commit_whose_answer_never_came_is_indeterminate_and_the_retry_exact(
    postgres_url: str, proxy: SilentProxy
) -> None:
    """The COMMIT reached the server, its answer did not: the call answers ``store_io_failed``
    at its deadline although the server committed; the store forgets what it knew, and once the
    network forwards again the exact retry answers ``created=False`` and the next fact follows
    gap-free (from committed facts only)."""
    pg = _store(proxy.proxied_url(postgres_url))
    with pg as store:
        add_run(store, IDS)
        store.append_event(user_text(ids=IDS))
        fact = model_text("its answer was lost", event_id="m-1", ids=IDS)
        # The statements' text on the wire with each execution (psycopg would send a prepared
        # COMMIT's text once, to be parsed, and only its name after): the proxy sees it go.
        pg._pg.raw.prepare_threshold = None
        proxy.silence_after(b"COMMIT\x00")
        with pytest.raises(StoreRefusal) as met:
            store.append_event(fact)
        assert met.value.code is StoreCode.STORE_IO_FAILED
        assert "it may have committed" in met.value.message
        assert _events(postgres_url) == 2  # the server did commit
        proxy.resume()
        again = store.append_event(fact)
        assert not again.created and again.event_seq == 2
        later = store.append_event(model_text("after", event_id="m-2", ids=IDS))
        assert later.created and later.event_seq == 3
        assert [row.seq for row in store.read_run_events("run-1")] == [1, 2, 3]


def test_a_read_on_a_silent_network_is_bounded_too(postgres_url: str, proxy: SilentProxy) -> None:
    with _store(proxy.proxied_url(postgres_url)) as store:
        add_run(store, IDS)
        proxy.silence()
        started = time.monotonic()
        with pytest.raises(StoreRefusal) as met:
            store.read_run_events("run-1")
        assert met.value.code is StoreCode.STORE_IO_FAILED
        assert time.monotonic() - started < BOUND_MS / 1000 + 1.5
        proxy.resume()
        assert store.read_run_events("run-1") == []


def test_the_server_drops_a_transaction_its_silent_client_left(
    postgres_url: str, proxy: SilentProxy
) -> None:
    """The client went silent between two statements of a transaction: the server ends that
    session after ``server_timeout_ms`` idle, its row locks free up (another host's takeover
    could not claim the lease otherwise), and nothing of it commits."""
    with _store(postgres_url) as setup:
        add_run(setup, IDS)
    conn = connect(
        proxy.proxied_url(postgres_url), call_timeout_ms=BOUND_MS, server_timeout_ms=1000
    )
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "SELECT epoch FROM session_leases WHERE session_id = ? FOR UPDATE", ("sess-1",)
        )
        conn.execute("UPDATE sessions SET title = 'half' WHERE session_id = ?", ("sess-1",))
        proxy.silence()
        with psycopg.connect(postgres_url, autocommit=True) as other:
            deadline = time.monotonic() + 10
            while True:
                try:
                    other.execute(
                        "SELECT 1 FROM session_leases WHERE session_id = %s FOR UPDATE NOWAIT",
                        ("sess-1",),
                    )
                    break
                except psycopg.errors.LockNotAvailable:
                    assert time.monotonic() < deadline, "the silent client's lock was kept"
                    time.sleep(0.1)
            title = other.execute(
                "SELECT title FROM sessions WHERE session_id = %s", ("sess-1",)
            ).fetchone()
        assert title is not None and title[0] != "half"
        started = time.monotonic()
        with pytest.raises(Exception) as commit:
            conn.execute("COMMIT")
        assert "no answer within" in str(commit.value)
        assert time.monotonic() - started < BOUND_MS / 1000 + 1.5
        assert conn.lost
    finally:
        proxy.resume()
        conn.close()


def test_the_heartbeat_is_bounded_on_a_silent_network(
    postgres_url: str, proxy: SilentProxy
) -> None:
    """A renewal neither hangs on the silent connection nor waits behind the store's lock longer
    than one call's deadline; it counts as a failed beat and the runway clock stays where the
    last good renewal left it."""
    with _store(proxy.proxied_url(postgres_url)) as store:
        add_run(store, IDS)
        beat = SessionLeaseHeartbeat(
            store, ttl_s=6, margin_s=2, on_lost=lambda lost: None, interval_s=60
        )
        assert not beat.beat()
        deadline = beat.runway_deadline
        # Behind the lock: a turn's call holds it.
        holding = threading.Event()
        release = threading.Event()

        def hold() -> None:
            with store._lock:
                holding.set()
                release.wait(10)

        holder = threading.Thread(target=hold)
        holder.start()
        holding.wait(5)
        started = time.monotonic()
        assert not beat.beat()
        assert time.monotonic() - started < BOUND_MS / 1000 + 0.5
        release.set()
        holder.join()
        # On the silent connection itself.
        proxy.silence()
        started = time.monotonic()
        assert not beat.beat()
        assert time.monotonic() - started < BOUND_MS / 1000 + 1.5
        assert beat.failures == 2 and beat.runway_deadline == deadline
        proxy.resume()
        assert not beat.beat() and beat.failures == 2  # renewed again on a new connection
        assert beat.runway_deadline > deadline


def test_the_call_deadline_comes_from_the_environment_and_never_exceeds_the_runway() -> None:
    assert lease_settings_from_env({}).call_timeout_ms == 5000
    settings = lease_settings_from_env({"MAKA_DATABASE_CALL_TIMEOUT_MS": "1500"})
    assert settings.call_timeout_ms == 1500 and settings.call_bound_ms() == 1500
    assert LeaseSettings(3000, 1000, 500, 5000).call_bound_ms() == 1000  # the runway's
    assert LeaseSettings(3000, 0, 500, 700).call_bound_ms() == 700
    for bad in ("2s", "0", "-1"):
        with pytest.raises(StoreRefusal) as refused:
            lease_settings_from_env({"MAKA_DATABASE_CALL_TIMEOUT_MS": bad})
        assert refused.value.code is StoreCode.STORE_IO_FAILED
        assert "MAKA_DATABASE_CALL_TIMEOUT_MS" in refused.value.message


def test_opening_a_connection_is_bounded_and_the_server_told() -> None:
    params: dict[str, Any] = opening_parameters(
        "postgresql://u@h:1/d?options=-csearch_path%3Dx",
        read_only=False,
        call_timeout_ms=2500,
        server_timeout_ms=4000,
    )
    assert params["connect_timeout"] == 3 and params["tcp_user_timeout"] == 2500
    assert params["keepalives"] == 1 and params["keepalives_idle"] == 3
    assert params["options"].startswith("-csearch_path=x ")
    assert "-c statement_timeout=4000" in params["options"]
    assert "-c idle_in_transaction_session_timeout=4000" in params["options"]
    given = opening_parameters(
        "postgresql://u@h:1/d?connect_timeout=30",
        read_only=True,
        call_timeout_ms=900,
        server_timeout_ms=0,
    )
    assert "connect_timeout" not in given  # the URL's own is kept
    assert given["tcp_user_timeout"] == 900 and "statement_timeout" not in given["options"]
