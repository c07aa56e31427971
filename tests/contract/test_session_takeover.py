"""Takeover on PostgreSQL (docs/design/hosts.md section 2): ``claim_expired_sessions`` takes only
leases that ran out past the grace (or were given up) on sessions with an unfinished run, two
sweeping hosts claim disjoint sessions (``FOR UPDATE SKIP LOCKED``), and the takeover recovery
repairs those sessions only, with startup recovery's code; the old holder is fenced. The host's
own conservative clock refuses a T1 past its runway deadline and tells the host once."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from app.host.host_bootstrap import SessionTakeover, take_over_expired
from runtime.ledger.codes import StoreCode
from runtime.ledger.store_ports import RunStatus, StoreRefusal
from runtime.recovery.startup_recovery import run_takeover_recovery
from storage.ledger.postgres_store import (
    LeaseSettings,
    PostgresLedgerStore,
    lease_settings_from_env,
    open_postgres_store,
)
from storage.ledger.session_lease_heartbeat import SessionLeaseHeartbeat
from tests.helpers.ledger_builders import (
    RunIds,
    call_event,
    dispatch_event,
    terminal,
    user_text,
)
from tests.helpers.store_engines import lease_host
from tests.helpers.store_workloads import add_run, fixed_clock

pytestmark = pytest.mark.contract


def _ids(n: int) -> RunIds:
    return RunIds(f"sess-{n}", f"inv-{n}", f"run-{n}", f"turn-{n}")


def test_only_expired_leases_of_unfinished_sessions_are_claimed(postgres_url: str) -> None:
    with (
        lease_host(postgres_url, "dead", ttl_ms=300) as dead,
        lease_host(postgres_url, "live") as live,
        lease_host(postgres_url, "sweeper", grace_ms=400) as sweeper,
    ):
        add_run(dead, _ids(1))  # unfinished, its lease will run out
        dead.append_event(user_text(ids=_ids(1)))
        add_run(live, _ids(2))  # unfinished, lease live
        assert isinstance(sweeper, SessionTakeover)
        assert sweeper.claim_expired_sessions() == []  # nothing ran out yet
        time.sleep(0.4)
        assert sweeper.claim_expired_sessions() == []  # ran out, but not past the grace
        time.sleep(0.4)
        (claimed,) = sweeper.claim_expired_sessions()
        assert (claimed.session_id, claimed.epoch) == ("sess-1", 2)
        assert sweeper.held_session_leases() == {"sess-1": 2}
        assert sweeper.claim_expired_sessions() == []  # its own lease is never claimed again
        with pytest.raises(StoreRefusal) as fenced:
            dead.append_event(user_text(event_id="late", ids=_ids(1)))
        assert fenced.value.code is StoreCode.SESSION_LEASE_LOST


def test_a_given_up_lease_is_claimed_only_with_an_unfinished_run(postgres_url: str) -> None:
    sweeper = lease_host(postgres_url, "sweeper")
    with sweeper:
        with lease_host(postgres_url, "closed") as closed:
            add_run(closed, _ids(1))
            add_run(closed, _ids(2))
            closed.commit_run_ending(terminal(_ids(2)), RunStatus.COMPLETED, None)
        # given up at close with its run still running: orphaned, claimed at once; the session
        # whose run ended is nobody's business
        assert [lease.session_id for lease in sweeper.claim_expired_sessions()] == ["sess-1"]


def test_two_sweeping_hosts_claim_disjoint_sessions(postgres_url: str) -> None:
    with lease_host(postgres_url, "dead", ttl_ms=100) as dead:
        for n in range(12):
            add_run(dead, _ids(n))
        time.sleep(0.3)
        claims: dict[str, list[str]] = {}
        hosts = [lease_host(postgres_url, f"h{i}") for i in range(3)]

        def sweep(host: PostgresLedgerStore) -> None:
            got: list[str] = []
            while batch := host.claim_expired_sessions(limit=2):
                got.extend(lease.session_id for lease in batch)
            claims[host.owner] = got

        threads = [threading.Thread(target=sweep, args=(host,)) for host in hosts]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
        finally:
            for host in hosts:  # closing gives the leases up: only after every sweep ended
                host.close()
    everything = [session for got in claims.values() for session in got]
    assert sorted(everything) == sorted(f"sess-{n}" for n in range(12))  # each exactly once


def test_takeover_recovery_repairs_the_claimed_sessions_only(postgres_url: str) -> None:
    with (
        lease_host(postgres_url, "dead", ttl_ms=100) as dead,
        lease_host(postgres_url, "live") as live,
        lease_host(postgres_url, "new") as new,
    ):
        for n in (1, 2):
            add_run(dead, _ids(n))
            call = call_event(f"call-{n}", ids=_ids(n))
            dead.commit_tool_prepared(call, dispatch_event(call))
        add_run(live, _ids(3))
        time.sleep(0.3)
        report = take_over_expired(new, owner_epoch=7, clock=fixed_clock())
        assert report.taken_over == ("sess-1", "sess-2")
        assert [(r.run_id, r.recovery_reason) for r in report.repaired] == [
            ("run-1", "tool_interrupted"),
            ("run-2", "tool_interrupted"),
        ]
        for n in (1, 2):
            header = new.read_run_header(f"run-{n}")
            assert header is not None
            assert (header.status, header.failure_class) == (RunStatus.FAILED, "app_restarted")
        live_header = live.read_run_header("run-3")
        assert live_header is not None and live_header.status is RunStatus.CREATED  # untouched
        # The same function again finds nothing to claim and repairs nothing.
        again = run_takeover_recovery(new, ["sess-1"], 7, fixed_clock())
        assert again.repaired == () and again.aligned == ()


def test_no_t1_past_the_hosts_own_runway_deadline(postgres_url: str) -> None:
    told: list[str] = []
    store = open_postgres_store(
        postgres_url,
        clock=fixed_clock(),
        owner="cut-off",
        lease_settings=LeaseSettings(ttl_ms=1200, runway_ms=400),
    )
    try:
        store.on_runway_lost(lambda: told.append("expired"))
        add_run(store, _ids(1))
        call = call_event("call-1", ids=_ids(1))
        assert store.commit_tool_prepared(call, dispatch_event(call)).created
        # cut the renewals off as a silent network would: every beat fails from now on
        store._heartbeat._store = _Failing()  # type: ignore[union-attr]
        deadline = time.monotonic() + 3
        while not told and time.monotonic() < deadline:
            time.sleep(0.05)
        assert told == ["expired"]  # once, from the deadline thread
        second = call_event("call-2", ids=_ids(1))
        with pytest.raises(StoreRefusal) as refused:
            store.commit_tool_prepared(second, dispatch_event(second))
        assert refused.value.code is StoreCode.SESSION_LEASE_LOST
        assert "own clock" in refused.value.message
        assert [row.seq for row in store.read_run_events("run-1")] == [1, 2]  # the first T1 only
        time.sleep(0.5)
        assert told == ["expired"]
    finally:
        store.close()


def test_after_an_outage_the_first_t1_renews_its_leases_itself(postgres_url: str) -> None:
    """Once the server answers again, a T1 past the host's own deadline does not wait for the
    heartbeat's next beat (which may be seconds away): it renews first, as that beat would,
    and goes on; the lease was never taken over, so nothing else could have written."""
    store = open_postgres_store(
        postgres_url,
        clock=fixed_clock(),
        owner="back-again",
        lease_settings=LeaseSettings(ttl_ms=1200, runway_ms=400),
    )
    try:
        add_run(store, _ids(1))
        heartbeat = store._heartbeat
        assert heartbeat is not None
        heartbeat.stop()  # no beat from its thread: only the T1 itself may renew
        real, heartbeat._store = heartbeat._store, _Failing()  # type: ignore[assignment]
        deadline = time.monotonic() + 3
        while time.monotonic() <= heartbeat.runway_deadline and time.monotonic() < deadline:
            time.sleep(0.05)
        first = call_event("call-1", ids=_ids(1))
        with pytest.raises(StoreRefusal) as refused:  # the server is still unreachable
            store.commit_tool_prepared(first, dispatch_event(first))
        assert refused.value.code is StoreCode.SESSION_LEASE_LOST
        heartbeat._store = real  # the network is back
        assert store.commit_tool_prepared(first, dispatch_event(first)).created
        assert heartbeat.runway_deadline > time.monotonic()
    finally:
        store.close()


class _Failing:
    def renew_session_leases(self) -> Sequence[str]:
        raise StoreRefusal(StoreCode.STORE_IO_FAILED, "the network is silent")


def test_heartbeat_tells_once_per_missed_deadline() -> None:
    told: list[int] = []
    beat = SessionLeaseHeartbeat(_Failing(), ttl_s=0.6, margin_s=0.2, on_lost=list, interval_s=0.1)  # type: ignore[arg-type]
    beat.on_expired = lambda: told.append(1)
    beat.start()
    try:
        time.sleep(0.9)
    finally:
        beat.stop()
    assert told == [1] and beat.failures >= 3


def test_lease_numbers_come_from_the_environment() -> None:
    assert lease_settings_from_env({}) == LeaseSettings()
    assert lease_settings_from_env(
        {
            "MAKA_SESSION_LEASE_TTL_MS": "3000",
            "MAKA_SESSION_LEASE_RUNWAY_MS": "1000",
            "MAKA_SESSION_TAKEOVER_GRACE_MS": "500",
        }
    ) == LeaseSettings(3000, 1000, 500)
    for bad in ({"MAKA_SESSION_LEASE_TTL_MS": "3s"}, {"MAKA_SESSION_LEASE_RUNWAY_MS": "40000"}):
        with pytest.raises(StoreRefusal) as refused:
            lease_settings_from_env(bad)
        assert refused.value.code is StoreCode.STORE_IO_FAILED


def _no_process(_operation_id: str) -> str | None:
    return None


def test_a_taken_over_call_is_settled_whatever_the_epochs(postgres_url: str) -> None:
    """The server's owner epoch is every host's: the host that takes over may have started
    before the dead one. Its settlement is allowed once recovery closed the run; a live host's
    call is refused by the lease, whatever the epochs say."""
    from runtime.recovery.settle_verdict import judge_settlement
    from tests.helpers.ledger_builders import operation_of

    with (
        lease_host(postgres_url, "new") as new,
        lease_host(postgres_url, "dead", ttl_ms=100) as dead,
        lease_host(postgres_url, "live") as live,
    ):
        epoch = new.bump_owner_epoch()  # the taking host started first ...
        later = dead.bump_owner_epoch()  # ... the dead one after it
        assert later > epoch
        add_run(dead, _ids(1), epoch=later)
        call = call_event("call-1", "bash", {"command": "make migrate"}, ids=_ids(1))
        dead.commit_tool_prepared(call, dispatch_event(call, recovery_mode="never_auto_retry"))
        add_run(live, _ids(2), epoch=later)
        live_call = call_event("call-2", "bash", {"command": "make migrate"}, ids=_ids(2))
        live.commit_tool_prepared(
            live_call, dispatch_event(live_call, recovery_mode="never_auto_retry")
        )
        time.sleep(0.3)
        assert take_over_expired(new, epoch, fixed_clock()).taken_over == ("sess-1",)
        settled = new.commit_attestation(
            operation_of(call), False, "checked", _no_process, judge_settlement
        )
        assert settled.created
        with pytest.raises(StoreRefusal) as refused:
            new.commit_attestation(
                operation_of(live_call), False, None, _no_process, judge_settlement
            )
        assert refused.value.code is StoreCode.SESSION_LEASE_LOST


def test_a_server_restart_is_met_once_then_the_store_reconnects_with_backoff(
    postgres_cluster: Any, postgres_url: str
) -> None:
    """The call that meets the dead connection answers ``store_io_failed``, nothing committed;
    the next one reopens it, waiting with backoff while the server comes back, and the exact
    retry of the same fact commits it once."""
    from tests.helpers.ledger_builders import model_text

    with lease_host(postgres_url, "restarted") as store:
        ids = _ids(1)
        add_run(store, ids)
        store.append_event(user_text(ids=ids))
        postgres_cluster.stop_server()
        back = threading.Timer(1.0, postgres_cluster.start_server)
        back.start()
        try:
            fact = model_text("after the restart", event_id="m-1", ids=ids)
            with pytest.raises(StoreRefusal) as met:
                store.append_event(fact)
            assert met.value.code is StoreCode.STORE_IO_FAILED
            # The next call reopens the connection, waiting with backoff while the server
            # comes back; a server slow to start on a loaded machine may outlast one call's
            # backoff, and the call after that reconnects then (never a half write).
            deadline = time.monotonic() + 60
            while True:
                try:
                    written = store.append_event(fact)
                    break
                except StoreRefusal as again:
                    assert again.code is StoreCode.STORE_IO_FAILED
                    assert time.monotonic() < deadline, "the store never reconnected"
            assert written.event_seq == 2 and written.created
            assert not store.append_event(fact).created  # the exact retry: already there
        finally:
            back.join()
        assert [row.seq for row in store.read_run_events("run-1")] == [1, 2]


class _Broken:
    def renew_session_leases(self) -> Sequence[str]:
        raise RuntimeError("an error no one expected")


def test_the_heartbeat_survives_an_unexpected_error() -> None:
    """A renewal that raises something other than a refusal must not end the heartbeat's
    thread: a host that silently stopped renewing would refuse every T1 from then on."""
    beat = SessionLeaseHeartbeat(_Broken(), ttl_s=3, margin_s=1, on_lost=list, interval_s=0.05)  # type: ignore[arg-type]
    beat.start()
    try:
        time.sleep(0.5)
        assert beat.failures >= 3
    finally:
        beat.stop()


def test_a_stale_epoch_cannot_delete_a_tool_process_record(postgres_url: str) -> None:
    """``delete_tool_process`` is fenced like every writer: once another host took the session
    over, the old holder's delete is refused with ``session_lease_lost`` and the record stays;
    the new holder may delete it."""
    from runtime.ledger.process_records import ToolProcessRecord

    record = ToolProcessRecord(
        operation_id="toolop_1",
        session_id="sess-1",
        run_id="run-1",
        tool_name="bash",
        command="sleep 60",
        pid=424242,
        process_group=424242,
        create_time=1.0,
        boot_id="boot",
        owner_epoch=1,
        started_at=1,
    )
    with (
        lease_host(postgres_url, "dead", ttl_ms=200) as dead,
        lease_host(postgres_url, "sweeper") as sweeper,
    ):
        add_run(dead, _ids(1))
        dead.record_tool_process(record)
        time.sleep(0.3)
        assert isinstance(sweeper, SessionTakeover)
        (claimed,) = sweeper.claim_expired_sessions()
        assert claimed.session_id == "sess-1"
        with pytest.raises(StoreRefusal) as refused:
            dead.delete_tool_process(record.operation_id, record.pid)
        assert refused.value.code is StoreCode.SESSION_LEASE_LOST
        assert sweeper.list_tool_processes(session_id="sess-1") == [record]
        dead.delete_tool_process("toolop_none", 1)  # no such record: nothing to refuse
        sweeper.delete_tool_process(record.operation_id, record.pid)
        assert list(sweeper.list_tool_processes(session_id="sess-1")) == []


def test_a_host_that_lost_a_lease_says_how_to_carry_on_once_nobody_holds_it(
    postgres_url: str,
) -> None:
    """A host stopped past its lease (its session taken over, then given up by the new holder)
    never takes the session back by a write, so that a turn it had running cannot go on. It
    said "another host took it over" even when no host held it any more, and the advice
    (use that host, or wait) could not work: it now names the holder while one holds it, and
    says to restart this process once none does."""
    ids = _ids(7)
    with (
        lease_host(postgres_url, "stopped", ttl_ms=300) as stopped,
        lease_host(postgres_url, "other", grace_ms=100) as other,
    ):
        add_run(stopped, ids)
        stopped.append_event(user_text(ids=ids))
        time.sleep(0.6)
        assert isinstance(other, SessionTakeover)
        (claimed,) = other.claim_expired_sessions()
        assert claimed.session_id == ids.session_id
        assert stopped.renew_session_leases() == [ids.session_id]  # lost, seen at its renewal
        with pytest.raises(StoreRefusal) as held:
            stopped.append_event(user_text(event_id="while-held", ids=ids))
        assert "it lost the lease earlier, and host other" in held.value.message
        other.release_session_lease(ids.session_id)
        with pytest.raises(StoreRefusal) as free:
            stopped.append_event(user_text(event_id="once-free", ids=ids))
        assert free.value.code is StoreCode.SESSION_LEASE_LOST
        assert "no host holds it now: restart this process" in free.value.message
