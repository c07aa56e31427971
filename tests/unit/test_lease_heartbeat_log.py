"""The heartbeat logs each cause of an outage once: a second, different cause in the same
outage (a connection ended, then a network gone silent) is told too, a repeated one is not, and
the renewal that ends the outage says how many beats failed
(``storage/ledger/session_lease_heartbeat.py``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pytest

from runtime.ledger.codes import StoreCode
from runtime.ledger.store_ports import StoreRefusal
from storage.ledger.ledger_store import open_store
from storage.ledger.session_lease_heartbeat import SessionLeaseHeartbeat

ENDED = "PostgreSQL: terminating connection due to administrator command"
SILENT = "PostgreSQL: no answer within 2000 ms; the connection was abandoned"


def test_each_cause_of_an_outage_is_logged_once(
    data_dir: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    script: list[str | None] = [ENDED, ENDED, SILENT, SILENT, None, SILENT, None]

    def renew() -> Sequence[str]:
        cause = script.pop(0)
        if cause is not None:
            raise StoreRefusal(StoreCode.STORE_IO_FAILED, cause)
        return []

    with open_store(data_dir) as store:
        monkeypatch.setattr(store, "renew_session_leases", renew)
        heartbeat = SessionLeaseHeartbeat(store, ttl_s=3, margin_s=1, on_lost=lambda lost: None)
        with caplog.at_level(logging.WARNING, logger="maka.store"):
            for _ in range(7):
                heartbeat.beat()
    told = [record.getMessage() for record in caplog.records]
    assert [sum(cause in line for line in told) for cause in (ENDED, SILENT)] == [1, 2]
    assert [line for line in told if "renewed again" in line] == [
        "session leases renewed again after 4 failed renewal(s)",
        "session leases renewed again after 1 failed renewal(s)",
    ]
    assert heartbeat.failures == 5 and script == []


def test_leases_given_up_during_an_outage_are_not_said_to_be_renewed(
    data_dir: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A renewal failed (the server down) while a turn held its session's lease; the turn
    ended and gave it up; the next beat, holding none, asked the server nothing, and the log
    said "session leases renewed again" while the server was still down."""
    script: list[str | None] = [ENDED, None]

    with open_store(data_dir) as store:

        def renew() -> Sequence[str]:
            cause = script.pop(0)
            if cause is not None:
                raise StoreRefusal(StoreCode.STORE_IO_FAILED, cause)
            # (the turn ended meanwhile and gave its lease up: nothing held, nothing asked)
            monkeypatch.setattr(store, "last_renewal_empty", True, raising=False)
            return []

        monkeypatch.setattr(store, "renew_session_leases", renew)
        heartbeat = SessionLeaseHeartbeat(store, ttl_s=3, margin_s=1, on_lost=lambda lost: None)
        with caplog.at_level(logging.WARNING, logger="maka.store"):
            heartbeat.beat()
            heartbeat.beat()
    told = [record.getMessage() for record in caplog.records]
    assert not any("renewed again" in line for line in told), told
    assert "no session lease is held now, so none was renewed" in told[-1], told


def test_a_failed_renewal_is_retried_soon_not_at_the_next_interval(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the defaults (ttl 30 s, margin 10 s, interval 10 s) the runway is two intervals:
    a renewal that failed once (a connection the server ended) was retried only at the runway's
    end, after the host had ended its commands. It is retried in half a second, then backs off
    up to the interval."""
    outcomes: list[bool] = [False, False, False, False, False, False, True]

    def renew() -> Sequence[str]:
        if not outcomes.pop(0):
            raise StoreRefusal(StoreCode.STORE_IO_FAILED, ENDED)
        return []

    with open_store(data_dir) as store:
        monkeypatch.setattr(store, "renew_session_leases", renew)
        heartbeat = SessionLeaseHeartbeat(store, ttl_s=30, margin_s=10, on_lost=lambda lost: None)
        assert heartbeat.next_wait() == 10
        waits = []
        for _ in range(7):
            heartbeat.beat()
            waits.append(heartbeat.next_wait())
    assert waits == [0.5, 1.0, 2.0, 4.0, 8.0, 10, 10]
    # The retries of one outage fit in the runway many times over.
    assert sum(waits[:3]) < 20 / 5


def test_the_renewal_that_ends_an_outage_names_the_sessions_lost_meanwhile(
    data_dir: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an outage longer than the lease, another host may have taken a session over:
    "renewed again" alone hid that this host no longer holds it."""
    script: list[Sequence[str] | None] = [None, ["s2", "s1"]]

    def renew() -> Sequence[str]:
        lost = script.pop(0)
        if lost is None:
            raise StoreRefusal(StoreCode.STORE_IO_FAILED, ENDED)
        return lost

    gone: list[Sequence[str]] = []
    with open_store(data_dir) as store:
        monkeypatch.setattr(store, "renew_session_leases", renew)
        heartbeat = SessionLeaseHeartbeat(store, ttl_s=3, margin_s=1, on_lost=gone.append)
        with caplog.at_level(logging.WARNING, logger="maka.store"):
            heartbeat.beat()
            heartbeat.beat()
    told = [
        record.getMessage() for record in caplog.records if "renewed again" in record.getMessage()
    ]
    assert told == [
        "session leases renewed again after 1 failed renewal(s); lost meanwhile (their leases "
        "ran out): s1, s2"
    ]
    assert gone == [["s2", "s1"]]
