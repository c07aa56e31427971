"""A takeover sweep that fails after its repair committed (docs/design/hosts.md section 2): the
host remembers the sessions it claimed, or whose runs its own turns left unfinished, from before
the repair until a sweep hands the repaired run to automatic resume. Without that memory a
sweep cut short by a lost connection (after the repair, before the hand-over) forgets a run no
later sweep finds unfinished again, and the session waits, interrupted, for nobody."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from app.host import desktop_services, host_bootstrap
from app.host.desktop_services import DesktopServices
from runtime.ledger.codes import StoreCode
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import RunStatus
from storage.ledger.sqlite_store import SqliteLedgerStore
from tests.helpers.ledger_builders import RunIds, call_event, dispatch_event
from tests.helpers.store_engines import lease_host
from tests.helpers.store_workloads import add_run

pytestmark = pytest.mark.contract

IDS = RunIds("sess-1", "inv-1", "run-1", "turn-1")


def _started_call(store: SqliteLedgerStore) -> None:
    add_run(store, IDS)
    call = call_event("call-1", ids=IDS)
    store.commit_tool_prepared(call, dispatch_event(call))


def _fail_after_repair(monkeypatch: pytest.MonkeyPatch, after: str) -> list[str]:
    """The sweep's step ``after`` the repair raises a lost connection, once."""
    failed: list[str] = []
    real = getattr(DesktopServices, after)

    def cut(self: DesktopServices, *args: Any, **kwargs: Any) -> Any:
        if not failed:
            failed.append(after)
            raise LedgerError(StoreCode.STORE_IO_FAILED, "terminating connection")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(DesktopServices, after, cut)
    return failed


def _repaired(store: SqliteLedgerStore) -> bool:
    header = store.read_run_header(IDS.run_id)
    assert header is not None
    return (header.status, header.failure_class) == (RunStatus.FAILED, "app_restarted")


def test_a_stalled_run_repaired_by_a_failed_sweep_is_resumed_by_the_next(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with lease_host(postgres_url, "host") as store:
        services = DesktopServices(store, tmp_path, safe_resume_enabled=True)
        services.recover_at_startup()
        _started_call(store)  # this host's own turn, ended on a lost connection
        failed = _fail_after_repair(monkeypatch, "_repaired_awaiting_resume")
        with pytest.raises(LedgerError):
            services.take_over_expired()
        assert failed and _repaired(store)  # the repair committed, the sweep failed after it
        (interrupted,) = services.take_over_expired()
        assert (interrupted.session_id, interrupted.run_id) == ("sess-1", "run-1")
        assert not interrupted.automatic_continuation
        assert services.take_over_expired() == ()  # handed over once


def test_a_claimed_session_repaired_by_a_failed_sweep_is_resumed_by_the_next(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        lease_host(postgres_url, "dead", ttl_ms=100) as dead,
        lease_host(postgres_url, "new") as new,
    ):
        _started_call(dead)
        services = DesktopServices(new, tmp_path, safe_resume_enabled=True)
        services.recover_at_startup()
        time.sleep(0.3)  # the dead host's lease runs out
        real = host_bootstrap.take_over_expired

        def cut_after(*args: Any, **kwargs: Any) -> Any:
            real(*args, **kwargs)
            raise LedgerError(StoreCode.STORE_IO_FAILED, "terminating connection")

        monkeypatch.setattr(desktop_services, "take_over_expired", cut_after)
        with pytest.raises(LedgerError):
            services.take_over_expired()
        assert _repaired(new)
        monkeypatch.setattr(desktop_services, "take_over_expired", real)
        (interrupted,) = services.take_over_expired()
        assert (interrupted.session_id, interrupted.run_id) == ("sess-1", "run-1")
        assert services.take_over_expired() == ()
