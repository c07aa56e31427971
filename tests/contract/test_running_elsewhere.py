"""A session another host runs, as the desktop's host shows it (docs/design/hosts.md section 2):
on a shared ledger a session whose latest run is unfinished and whose lease this host does not
hold is ``running_elsewhere`` (the window can neither stop it nor send in it), and every takeover
sweep tells the window what became of the sessions it last showed that way: the other host
ended the turn, or this host took the session over and repaired it; and of the sessions other
hosts created since the window's list. On the data folder's own ledger every run is this
host's."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.bridge_contract import RunStatusValue
from app.host.desktop_services import DesktopServices
from app.host.host_services import ElsewhereChanges
from runtime.ledger.store_ports import RunStatus
from storage.ledger.ledger_store import open_store
from tests.helpers.ledger_builders import RunIds, call_event, dispatch_event, terminal
from tests.helpers.store_engines import lease_host
from tests.helpers.store_workloads import add_run

pytestmark = pytest.mark.contract

ONE = RunIds("sess-1", "inv-1", "run-1", "turn-1")
TWO = RunIds("sess-2", "inv-2", "run-2", "turn-2")
THREE = RunIds("sess-3", "inv-3", "run-3", "turn-3")
FOUR = RunIds("sess-4", "inv-4", "run-4", "turn-4")


def test_sessions_another_host_runs_are_shown_and_followed(
    postgres_url: str, tmp_path: Path
) -> None:
    with (
        lease_host(postgres_url, "dead", ttl_ms=300) as dead,
        lease_host(postgres_url, "alive") as alive,
        lease_host(postgres_url, "here") as here,
    ):
        add_run(dead, ONE)  # its host is gone mid-call
        call = call_event("call-1", ids=ONE)
        dead.commit_tool_prepared(call, dispatch_event(call))
        add_run(alive, TWO)  # its host is still at work
        services = DesktopServices(here, tmp_path, safe_resume_enabled=False)
        services.recover_at_startup()
        shown = {summary.session_id: summary for summary in services.list_sessions()}
        assert shown["sess-1"].running_elsewhere and shown["sess-2"].running_elsewhere
        assert services.elsewhere_changes() == ElsewhereChanges()  # nothing changed since
        alive.commit_run_ending(terminal(TWO), RunStatus.COMPLETED, None)  # its turn ends
        (ended,) = services.elsewhere_changes().updated
        assert ended.session_id == "sess-2"
        assert ended.last_run_status is RunStatusValue.COMPLETED and not ended.running_elsewhere
        assert services.elsewhere_changes() == ElsewhereChanges()  # told once
        time.sleep(0.6)  # the dead host's lease runs out
        services.take_over_expired()
        (repaired,) = services.elsewhere_changes().updated
        assert repaired.session_id == "sess-1" and repaired.interrupted
        assert not repaired.running_elsewhere  # this host holds it now
        assert services.elsewhere_changes() == ElsewhereChanges()
        add_run(alive, THREE)  # a session another host creates after the window's list
        (made,) = services.elsewhere_changes().updated
        assert made.session_id == "sess-3" and made.running_elsewhere
        assert services.elsewhere_changes() == ElsewhereChanges()  # told once; followed from now on
        alive.commit_run_ending(terminal(THREE, event_id="evt-end-3"), RunStatus.COMPLETED, None)
        (done,) = services.elsewhere_changes().updated
        assert done.session_id == "sess-3" and not done.running_elsewhere


def test_sessions_other_hosts_rename_move_or_remove_are_told_once(
    postgres_url: str, tmp_path: Path
) -> None:
    """The window's list follows what other hosts do to a session it shows: a new title or
    folder comes as an update, a removal as the session's id, each once; what this host did
    itself was told already."""
    with lease_host(postgres_url, "other") as other, lease_host(postgres_url, "here") as here:
        for ids in (ONE, TWO, THREE):
            add_run(other, ids)
            other.commit_run_ending(
                terminal(ids, event_id=f"evt-end-{ids.session_id}"), RunStatus.COMPLETED, None
            )
        add_run(here, FOUR)  # a session of this host's
        here.commit_run_ending(terminal(FOUR, event_id="evt-end-4"), RunStatus.COMPLETED, None)
        services = DesktopServices(here, tmp_path, safe_resume_enabled=False)
        services.recover_at_startup()
        listed = {s.session_id for s in services.list_sessions()}
        assert listed == {"sess-1", "sess-2", "sess-3", "sess-4"}
        assert services.elsewhere_changes() == ElsewhereChanges()
        other.rename_session("sess-1", "Release checklist")
        other.relocate_session("sess-2", str(tmp_path))
        other.remove_session("sess-3")
        changes = services.elsewhere_changes()
        assert sorted((s.session_id, s.title, s.cwd) for s in changes.updated) == [
            ("sess-1", "Release checklist", "/work"),
            ("sess-2", "a session", str(tmp_path)),
        ]
        assert changes.removed == ("sess-3",)
        assert services.elsewhere_changes() == ElsewhereChanges()  # told once
        services.rename_session("sess-4", "Mine")  # this host's own change: told by its answer
        assert services.elsewhere_changes() == ElsewhereChanges()


def test_on_the_data_folders_own_ledger_every_run_is_this_hosts(tmp_path: Path) -> None:
    store = open_store(tmp_path / "data")
    try:
        services = DesktopServices(store, tmp_path / "data", safe_resume_enabled=False)
        services.recover_at_startup()
        add_run(store, ONE)  # a turn of this host's (or one its crash left, until it restarts)
        (summary,) = services.list_sessions()
        assert summary.last_run_status is RunStatusValue.CREATED  # unfinished
        assert not summary.running_elsewhere
        assert services.elsewhere_changes() == ElsewhereChanges()
    finally:
        store.close()


def test_a_session_another_live_host_holds_is_shown_held_until_it_lets_go(
    postgres_url: str, tmp_path: Path
) -> None:
    """A finished session whose lease another process still holds (a ``maka host`` that served
    it and runs on) is ``held_elsewhere``, named by its holder: the window cannot send in it.
    When that process lets the lease go, a sweep tells the window; this host's own leases are
    never someone else's."""
    with (
        lease_host(postgres_url, "host-b:4242:n1") as other,
        lease_host(postgres_url, "here") as here,
    ):
        add_run(other, ONE)
        other.commit_run_ending(terminal(ONE), RunStatus.COMPLETED, None)
        add_run(here, TWO)
        here.commit_run_ending(terminal(TWO, event_id="evt-end-2"), RunStatus.COMPLETED, None)
        services = DesktopServices(here, tmp_path, safe_resume_enabled=False)
        services.recover_at_startup()
        shown = {summary.session_id: summary for summary in services.list_sessions()}
        assert shown["sess-1"].held_elsewhere == "host-b, pid 4242"
        assert not shown["sess-1"].running_elsewhere
        assert shown["sess-2"].held_elsewhere is None  # this host's own
        assert services.elsewhere_changes() == ElsewhereChanges()
        other.release_session_lease("sess-1")
        (free,) = services.elsewhere_changes().updated
        assert free.session_id == "sess-1" and free.held_elsewhere is None
        assert services.elsewhere_changes() == ElsewhereChanges()
        other.take_session_lease("sess-1")  # taken again: told again
        (taken,) = services.elsewhere_changes().updated
        assert taken.held_elsewhere == "host-b, pid 4242"
