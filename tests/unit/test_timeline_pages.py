"""The main process's timeline paging: filtered pages and a row's place among those shown.

A filtered page counts only the rows the filter shows, in ``event_seq`` order, with problems
(and rows a reason is pinned to) kept by "only problems"; ``locate`` gives a row's place among
the rows shown, None when the filter hides it; a page and a place answer the same question.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from app.bridge_contract import MAX_TIMELINE_PAGE, TimelineRowFilter
from main_process.timeline_pages import TimelinePages
from runtime.ledger.timeline_model import RowFilter
from runtime.ledger.timeline_pins import SessionTimeline
from tests.helpers.timeline_demo import parked_session

SESSION = parked_session(rows_before=60)
RUN = SESSION.runs[0]


def _pages(timeline: SessionTimeline = SESSION) -> TimelinePages:
    return TimelinePages(lambda _session_id: timeline)


def _all(pages: TimelinePages, filters: TimelineRowFilter | None) -> list[int]:
    seqs: list[int] = []
    while True:
        page = pages.page("s", RUN.run_id, len(seqs), 7, filters)
        seqs += [row.seq for row in page.rows]
        if len(seqs) >= page.total:
            return seqs


def test_only_problems_pages_hold_the_problems_and_the_pinned_rows_alone() -> None:
    pages = _pages()
    only = TimelineRowFilter(only_problems=True)
    first = pages.page("s", RUN.run_id, 0, MAX_TIMELINE_PAGE, only)
    pinned = {pin.seq for pin in SESSION.header.pins if pin.seq is not None}  # type: ignore[union-attr]
    expected = [row.seq for row in RUN.rows if row.problem or row.seq in pinned]
    assert [row.seq for row in first.rows] == expected
    assert first.total == len(expected) == 4
    assert first.filters == only
    assert any(not row.problem and row.seq in pinned for row in RUN.rows)  # the stale snapshot


def test_an_empty_filter_is_no_filter() -> None:
    pages = _pages()
    page = pages.page("s", RUN.run_id, 0, 10, TimelineRowFilter())
    assert page.filters is None and page.total == len(RUN.rows)
    assert [row.seq for row in page.rows] == [row.seq for row in RUN.rows[:10]]


def test_a_rows_place_is_counted_among_the_rows_shown() -> None:
    pages = _pages()
    bash = next(row for row in RUN.rows if row.tool_name == "bash")
    unfiltered = pages.locate("s", RUN.run_id, bash.seq)
    assert unfiltered.position == RUN.rows.index(bash)
    tools = TimelineRowFilter(kind="tool")
    located = pages.locate("s", RUN.run_id, bash.seq, tools)
    assert located.filters == tools
    assert located.position == [row.seq for row in RUN.rows if row.kind == "tool"].index(bash.seq)
    page = pages.page("s", RUN.run_id, located.position, 1, tools)
    assert page.rows[0].seq == bash.seq
    hidden = pages.locate("s", RUN.run_id, bash.seq, TimelineRowFilter(kind="message"))
    assert hidden.position is None
    assert pages.locate("s", RUN.run_id, 10**6).position is None  # no row starts there


_FILTERS = st.builds(
    TimelineRowFilter,
    kind=st.sampled_from(["", "tool", "message", "checkpoint", "tool_dispatch", "run_end"]),
    tool=st.sampled_from(["", "BASH", "read", "nothing"]),
    status=st.sampled_from(["", "ok", "unknown", "damaged", "failed"]),
    text=st.sampled_from(["", "question 1", "EVT-BASH", "answer", "zzz"]),
    only_problems=st.booleans(),
)


@settings(max_examples=60, deadline=None)
@given(filters=_FILTERS)
def test_every_filter_pages_exactly_the_rows_it_matches_and_locates_each(
    filters: TimelineRowFilter,
) -> None:
    pages = _pages()
    where = RowFilter(
        filters.kind, filters.tool, filters.status, filters.text, filters.only_problems
    )
    pinned = {pin.seq for pin in SESSION.header.pins if pin.seq is not None}  # type: ignore[union-attr]
    expected = [row.seq for row in RUN.rows if where.matches(row, row.seq in pinned)]
    shown = _all(pages, filters)
    assert shown == expected
    for row in RUN.rows:
        place = pages.locate("s", RUN.run_id, row.seq, filters).position
        assert place == (expected.index(row.seq) if row.seq in expected else None)
    # failures and unknown outcomes are never hidden by "only problems"
    if filters == TimelineRowFilter(only_problems=True):
        assert all(row.seq in shown for row in RUN.rows if row.problem)


def test_a_session_opened_again_is_filtered_on_its_new_reading() -> None:
    """Positions worked out for a filter belong to one reading of the session: opened again
    (a run grew), the same filter is worked out anew, never served from the older reading."""
    readings = [parked_session(rows_before=4), parked_session(rows_before=40)]
    pages = TimelinePages(lambda _session_id: readings[0])
    only = TimelineRowFilter(only_problems=True)
    pages.open("s")
    before = pages.page("s", "run-1", 0, 50, only)
    readings.pop(0)
    pages.open("s")
    after = pages.page("s", "run-1", 0, 50, only)
    expected = [row.seq for row in readings[0].runs[0].rows[-4:]]
    assert [row.seq for row in after.rows] == expected != [row.seq for row in before.rows]
    bash = next(row for row in readings[0].runs[0].rows if row.tool_name == "bash")
    assert pages.locate("s", "run-1", bash.seq, only).position == 1
