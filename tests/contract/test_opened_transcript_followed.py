"""A session whose transcript the window read, followed on a shared ledger: when another host
commits to it (a new event in its running turn, the turn's end, a new run), the takeover sweep's
``elsewhere_changes`` names it once, so the window reads the transcript again; while nothing
changed, nothing is named, and a session the window never opened is followed as before (by its
summary only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.host.desktop_services import DesktopServices
from app.host.host_services import ElsewhereChanges
from runtime.ledger.store_ports import RunStatus
from tests.helpers.ledger_builders import RunIds, model_text, terminal, user_text
from tests.helpers.store_engines import lease_host
from tests.helpers.store_workloads import add_run

pytestmark = pytest.mark.contract

ONE = RunIds("sess-1", "inv-1", "run-1", "turn-1")
ONE_AGAIN = RunIds("sess-1", "inv-1b", "run-1b", "turn-1b")
TWO = RunIds("sess-2", "inv-2", "run-2", "turn-2")


def _named(changes: ElsewhereChanges) -> list[str]:
    return sorted(summary.session_id for summary in changes.updated)


def test_an_opened_session_another_host_adds_to_is_named_once_per_change(
    postgres_url: str, tmp_path: Path
) -> None:
    with lease_host(postgres_url, "other") as other, lease_host(postgres_url, "here") as here:
        for ids in (ONE, TWO):
            add_run(other, ids)
            other.append_event(user_text("hello", ids=ids, event_id=f"evt-u-{ids.run_id}"))
        services = DesktopServices(here, tmp_path, safe_resume_enabled=False)
        services.recover_at_startup()
        services.list_sessions()
        services.open_session("sess-1")  # the window shows it
        assert services.elsewhere_changes() == ElsewhereChanges()
        other.append_event(model_text("working", ids=ONE, event_id="evt-m-1"))
        other.append_event(model_text("working", ids=TWO, event_id="evt-m-2"))
        (moved,) = services.elsewhere_changes().updated  # the same summary: its ledger moved
        assert moved.session_id == "sess-1" and moved.running_elsewhere
        assert services.elsewhere_changes() == ElsewhereChanges()  # told once
        other.commit_run_ending(terminal(ONE), RunStatus.COMPLETED, None)
        assert _named(services.elsewhere_changes()) == ["sess-1"]  # named once, ended
        assert services.elsewhere_changes() == ElsewhereChanges()
        add_run(other, ONE_AGAIN)  # a new turn there
        other.append_event(user_text("again", ids=ONE_AGAIN, event_id="evt-u-again"))
        assert _named(services.elsewhere_changes()) == ["sess-1"]
        services.open_session("sess-1")  # the window read it again: nothing new since
        assert services.elsewhere_changes() == ElsewhereChanges()
