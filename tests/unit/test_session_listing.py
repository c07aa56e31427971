"""``maka sessions``' read-only listing: every session's runs, in the header store's order, read
in one query of the run headers however many sessions there are."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from runtime.agent.session_overview import list_session_overviews
from runtime.ledger.branch_facts import BranchRecord
from runtime.ledger.store_ports import RunFact, RunHeader, RunStatus, SessionRecord
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


class _Reader:
    """Sessions, runs and branches in memory, listed per session (``list_session_runs``)."""

    def __init__(
        self,
        sessions: list[SessionRecord],
        runs: list[RunHeader],
        branches: list[BranchRecord],
    ) -> None:
        self.sessions, self.runs, self.branches = sessions, runs, branches

    def list_sessions(self) -> Sequence[SessionRecord]:
        return self.sessions

    def list_session_runs(self, session_id: str) -> Sequence[RunHeader]:
        return [run for run in self.runs if run.session_id == session_id]

    def list_branches(self) -> Sequence[BranchRecord]:
        return self.branches


class _FactReader(_Reader):
    """The same, and every run's list columns in one call, as the read-only listing gives them
    (in no particular order: here forward or backward)."""

    backward = False

    def list_run_facts(self) -> Sequence[RunFact]:
        facts = [
            (r.session_id, r.run_id, r.status, r.failure_class, r.created_at, r.updated_at)
            for r in self.runs
        ]
        return facts[::-1] if self.backward else facts


def _branch(session_id: str, source: str, event: str) -> BranchRecord:
    return BranchRecord(session_id, source, f"run-{source}", 3, event, "digest", {}, 50)


@pytest.mark.parametrize("backward", [False, True])
def test_a_list_from_run_facts_is_the_list_read_session_by_session(backward: bool) -> None:
    """Every field of every row: the last run by creation time then run id (ids and times
    disagree in order, and two runs share a time), its status and failure class, the count, the
    last activity, resumable, interrupted by a restart, and the branches both ways."""
    sessions = [SessionRecord(f"s{index}", "/work", f"t{index}", 100 * index) for index in range(7)]
    sessions.append(SessionRecord("later", "/work", "created after its runs' updates", 90_000))
    endings = [
        (RunStatus.FAILED, "app_restarted"),
        (RunStatus.FAILED, "provider_error"),
        (RunStatus.CANCELLED, "cancelled_by_user"),
        (RunStatus.COMPLETED, None),
        (RunStatus.RUNNING, None),
        (RunStatus.CREATED, None),
    ]
    runs: list[RunHeader] = []
    for index, (status, failure) in enumerate(endings):
        session_id = f"s{index}"
        for turn, (at, updated) in enumerate(((500, 900), (700, 800), (700, 750))):
            ending = index if turn == 2 - index % 3 else (index + 3) % len(endings)
            header = _run(session_id, f"{session_id}-{'zyx'[turn]}", at)._replace(
                updated_at=updated + index,
                status=endings[ending][0],
                failure_class=endings[ending][1],
            )
            runs.append(header if turn else header._replace(status=status, failure_class=failure))
    runs.append(_run("later", "later-a", 10))
    branches = [_branch("s1", "s0", "e1"), _branch("s2", "s0", "e2"), _branch("s3", "s2", "e3")]
    fact_reader = _FactReader(sessions, runs, branches)
    fact_reader.backward = backward
    by_facts = list_session_overviews(fact_reader)
    by_session = list_session_overviews(_Reader(sessions, runs, branches))
    assert by_facts == by_session
    assert {overview.resumable for overview in by_facts} == {True, False}
    assert {overview.interrupted for overview in by_facts} == {True, False}
    assert [overview.run_count for overview in by_facts] == [3] * 6 + [0, 1]


def test_the_listing_reads_run_facts_as_it_reads_headers(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _seed(data, 5)
    with SessionListing.open(data) as listing:
        facts = sorted(listing.list_run_facts())
        headers = run_header_store.list_headers(listing._conn)
    assert facts == sorted(
        (h.session_id, h.run_id, h.status, h.failure_class, h.created_at, h.updated_at)
        for h in headers
    )
