"""The desktop's session list: the session with the most recent activity first, so the one
worked in last is at the top after a restart (not merely the newest created)."""

from __future__ import annotations

from pathlib import Path

from app.host.desktop_services import DesktopServices
from runtime.ledger.store_ports import RunHeader, RunStatus, SessionRecord
from storage.ledger.ledger_store import open_store


def _run(session_id: str, name: str, at: int) -> RunHeader:
    return RunHeader(
        run_id=f"run-{name}",
        session_id=session_id,
        invocation_id=f"inv-{name}",
        turn_id=f"turn-{name}",
        status=RunStatus.CREATED,
        cwd="/work",
        owner_epoch=1,
        created_at=at,
        updated_at=at,
    )


def test_sessions_are_listed_by_last_activity(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = open_store(data)
    for session_id, created in (("old", 100), ("middle", 200), ("new", 300)):
        store.create_session(SessionRecord(session_id, "/work", session_id, created))
    store.create_run(_run("old", "a", 1_000))  # the oldest session was worked in last
    store.create_run(_run("middle", "b", 250))
    store.close()
    services = DesktopServices(open_store(data), data, safe_resume_enabled=False)
    try:
        services.recover_at_startup()  # ends the two unfinished runs; their times stay
        order = [summary.session_id for summary in services.list_sessions()]
    finally:
        services.close()
    assert order == ["old", "new", "middle"]
