"""``maka sessions``' read-only listing: every session's runs, in the header store's order, read
in one query of the run headers however many sessions there are."""

from __future__ import annotations

from pathlib import Path

from runtime.agent.session_overview import list_session_overviews
from runtime.ledger.store_ports import RunHeader, RunStatus, SessionRecord
from storage.ledger import run_header_store
from storage.ledger.ledger_store import open_store
from storage.sessions.session_listing import SessionListing


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


def _seed(data: Path, sessions: int) -> None:
    with open_store(data) as store:
        for index in range(sessions):
            session_id = f"s{index:03}"
            store.create_session(SessionRecord(session_id, "/work", session_id, index))
            # Runs of different sessions interleave in time; ids and times disagree in order.
            for turn, at in enumerate((5_000 - index, 10_000 + index, 10_000 + index)):
                store.create_run(_run(session_id, f"{session_id}-{2 - turn}", at))
        store.create_session(SessionRecord("empty", "/work", "no runs", 9_999))


def test_each_sessions_runs_are_those_the_header_store_lists(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _seed(data, 12)
    with SessionListing.open(data) as listing:
        sessions = listing.list_sessions()
        assert len(sessions) == 13
        for record in sessions:
            runs = listing.list_session_runs(record.session_id)
            assert runs == run_header_store.list_session_headers(listing._conn, record.session_id)
        assert listing.list_session_runs("empty") == []
        assert listing.list_session_runs("no-such-session") == []


def test_a_list_reads_the_run_headers_in_one_query(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _seed(data, 40)
    statements: list[str] = []
    with SessionListing.open(data) as listing:
        listing._conn.set_trace_callback(statements.append)
        overviews = list_session_overviews(listing)
    assert len(overviews) == 41
    assert sum(1 for overview in overviews if overview.run_count == 3) == 40
    on_runs = [text for text in statements if "FROM runs" in text]
    assert len(on_runs) == 1, on_runs
