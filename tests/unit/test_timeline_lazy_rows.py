"""The desktop's timeline, opened from the store's index with its rows made when asked for,
is the timeline the full read builds (``maka timeline``'s), row for row.

Each ledger is stored and read both ways (``read_session_timeline``, which decodes every
event, and ``read_session_timeline_lazily``): the example ledgers of the golden files, the
benchmark's mix (texts, tool calls with and without dispatch, synthetic results, parked and
completed recovery bundles; several pages of rows), and an interrupted session recovered at
start with the plan Safe resume makes (pinned reasons, the boundary). The runs, every row and
its grouping, statuses and summaries, the JSON of ``maka timeline --json`` and the main
process's pages, places and events must be equal.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from app.bridge_contract import TimelineRowFilter
from app.host.session_timeline import read_session_timeline, read_session_timeline_lazily
from bench.bench_ledger import IDS, generate
from main_process.timeline_pages import TimelinePages
from runtime.continuation.continuation_planner import ContinuationPlan
from runtime.ledger.codes import Lane
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.lane_rules import classify_lane
from runtime.ledger.store_ports import StoredEvent
from runtime.ledger.timeline_lazy import LazyRows
from runtime.ledger.timeline_model import TimelineRow
from runtime.ledger.timeline_pins import (
    SessionTimeline,
    TimelineReason,
    pin_reasons,
    timeline_json,
)
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from storage.ledger.timeline_index import timeline_index_of
from tests.helpers.stored_run import import_run

GOLDEN = Path(__file__).parents[1] / "data" / "timeline"
FILTERS = (
    None,
    TimelineRowFilter(only_problems=True),
    TimelineRowFilter(kind="tool"),
    TimelineRowFilter(kind="message", text="step 1"),
    TimelineRowFilter(tool="write", status="parked"),
    TimelineRowFilter(status="ok"),
    TimelineRowFilter(text="dispatched (never_auto"),
    TimelineRowFilter(text="error result"),
    TimelineRowFilter(kind="tool_response", status="failed"),
    TimelineRowFilter(tool="READ"),
    TimelineRowFilter(kind="recovery", only_problems=True),
)


@pytest.fixture
def opened(
    tmp_path: Path,
) -> Iterator[Callable[[list[RuntimeEvent]], tuple[SqliteLedgerStore, str]]]:
    stores: list[SqliteLedgerStore] = []

    def open_ledger(events: list[RuntimeEvent]) -> tuple[SqliteLedgerStore, str]:
        data_dir = tmp_path / f"store-{len(stores)}"
        session_id = import_run(data_dir, events)
        stores.append(open_store(data_dir, read_only=True))
        _same_index_in_python(stores[-1], session_id)
        return stores[-1], session_id

    yield open_ledger
    for store in stores:
        store.close()


def _same_index_in_python(store: SqliteLedgerStore, session_id: str) -> None:
    """The index made in Python from the decoded events (what the PostgreSQL store serves)
    equals the one SQLite answers in SQL."""
    for header in store.list_session_runs(session_id):
        events = store.read_run_events(header.run_id)
        assert timeline_index_of(events) == store.read_run_timeline_index(header.run_id)


def _same(full: SessionTimeline, lazy: SessionTimeline) -> None:
    assert lazy.header == full.header
    assert [run.run_id for run in lazy.runs] == [run.run_id for run in full.runs]
    for whole, made in zip(full.runs, lazy.runs, strict=True):
        assert isinstance(made.rows, LazyRows)
        assert replace(made, rows=tuple(made.rows)) == whole
        rows = whole.rows
        assert len(made.rows) == len(rows)
        assert made.rows[3:257] == tuple(rows[3:257])
        assert made.rows[-1] == rows[-1] and made.rows[::7] == tuple(rows[::7])
        assert list(reversed(made.rows)) == list(reversed(rows))
        for position, row in enumerate(rows):
            assert made.rows.position_of(row.seq) == position
    assert timeline_json(lazy.runs, lazy.header) == timeline_json(full.runs, full.header)
    for whole, made in zip(full.runs, lazy.runs, strict=True):
        assert isinstance(made.rows, LazyRows)
        assert [_as_searched(row) for row in made.rows.searchable()] == [
            _as_searched(row) for row in whole.rows
        ]
    _same_pages(full, lazy)


def _as_searched(row: TimelineRow) -> tuple[object, ...]:
    """Everything of a row a filter reads (``RowFilter.matches``), and its facts' places."""
    entries = tuple(
        (entry.seq, entry.event_id, entry.kind, entry.lane, entry.status, entry.summary)
        for entry in row.entries
    )
    return (row.kind, row.status, row.summary, row.tool_name, row.tool_call_id, entries)


def _same_pages(full: SessionTimeline, lazy: SessionTimeline) -> None:
    """The main process answers the renderer the same from either."""
    whole, made = TimelinePages(lambda _: full), TimelinePages(lambda _: lazy)
    session_id = full.session_id
    assert made.open(session_id) == whole.open(session_id)
    for run in full.runs:
        for where in FILTERS:
            for start in (0, 1, 99, 250):
                assert made.page(session_id, run.run_id, start, 150, where) == whole.page(
                    session_id, run.run_id, start, 150, where
                )
        for row in run.rows[:40]:
            for where in FILTERS:
                assert made.locate(session_id, run.run_id, row.seq, where) == whole.locate(
                    session_id, run.run_id, row.seq, where
                )
            for entry in row.entries:
                assert made.event(session_id, run.run_id, entry.event_id) == whole.event(
                    session_id, run.run_id, entry.event_id
                )


@pytest.mark.parametrize("folder", sorted(path.name for path in GOLDEN.iterdir() if path.is_dir()))
def test_an_example_ledger_reads_the_same_either_way(
    folder: str, opened: Callable[[list[RuntimeEvent]], tuple[SqliteLedgerStore, str]]
) -> None:
    lines = (GOLDEN / folder / "ledger.jsonl").read_text(encoding="utf-8").splitlines()
    store, session_id = opened([json.loads(line) for line in lines])
    full = read_session_timeline(store, session_id, None)
    _same(full, read_session_timeline_lazily(store, session_id, None))


def test_the_benchmarks_mix_reads_the_same_either_way_over_several_pages(
    opened: Callable[[list[RuntimeEvent]], tuple[SqliteLedgerStore, str]],
) -> None:
    store, session_id = opened(generate(1500))
    full = read_session_timeline(store, session_id, None)
    assert len(full.runs[0].rows) > 300
    assert {row.status.value for row in full.runs[0].rows} >= {"ok", "failed", "not_run"}
    _same(full, read_session_timeline_lazily(store, session_id, None))
    assert session_id == IDS.session_id


def test_a_first_filter_decodes_only_the_events_the_store_cannot_describe(
    opened: Callable[[list[RuntimeEvent]], tuple[SqliteLedgerStore, str]],
) -> None:
    """The store reads the few fields of an event on a tool lane (call, dispatch, response,
    observation, decision) in SQL: a filter's first pass over the run decodes the other events
    only (messages, the ending), and finds the rows the full read finds."""
    events = generate(1500)
    store, session_id = opened(events)
    decoded: list[int] = []
    read_at = store.read_run_events_at

    def counted(run_id: str, seqs: Sequence[int]) -> Sequence[StoredEvent]:
        found = read_at(run_id, seqs)
        decoded.extend(row.seq for row in found)
        return found

    store.read_run_events_at = counted  # type: ignore[method-assign]
    lazy = read_session_timeline_lazily(store, session_id, None)
    full = read_session_timeline(store, session_id, None)
    pages = TimelinePages(lambda _: lazy)
    pages.open(session_id)
    decoded.clear()
    rows = lazy.runs[0].rows
    assert isinstance(rows, LazyRows)
    searched = rows.searchable()  # what the first filter of the run reads
    tool_facts = sum(1 for event in events if classify_lane(event) is not Lane.ORDINARY)
    assert tool_facts > len(events) // 2
    assert 0 < len(decoded) <= len(events) - tool_facts, (len(decoded), tool_facts)
    assert len(searched) == len(full.runs[0].rows)
    where = TimelineRowFilter(only_problems=True)
    shown = pages.page(session_id, full.runs[0].run_id, 0, 10_000, where)
    expected = [row.seq for row in full.runs[0].rows if row.problem]
    assert expected and [row.seq for row in shown.rows] == expected


def test_an_unended_run_reads_the_same_either_way(
    opened: Callable[[list[RuntimeEvent]], tuple[SqliteLedgerStore, str]],
) -> None:
    """Without its ending a dispatched call is still running, not of unknown outcome."""
    from tests.helpers.ledger_builders import call_event, dispatch_event

    events = [event for event in generate(400) if event.get("status") is None]
    call = call_event("call-last", event_id="evt-call-last", ids=IDS, ts=99_999)
    store, session_id = opened([*events, call, dispatch_event(call)])
    full = read_session_timeline(store, session_id, None)
    assert full.runs[0].rows[-1].status.value == "running"
    _same(full, read_session_timeline_lazily(store, session_id, None))


def test_calls_the_user_settled_both_ways_read_the_same_either_way(
    opened: Callable[[list[RuntimeEvent]], tuple[SqliteLedgerStore, str]],
) -> None:
    """Two attested calls of the same shape, one the user said ran and one that did not: the
    first filter (which reads the facts, not the events) words each as the full read does."""
    from tests.helpers.ledger_builders import (
        attestation_bundle,
        call_event,
        dispatch_event,
        terminal,
        user_text,
    )

    ran = call_event("call-ran", event_id="evt-ran", ids=IDS, ts=10)
    not_run = call_event("call-not", event_id="evt-not", ids=IDS, ts=20)
    ran_dispatch = dispatch_event(ran, ts=11)
    not_dispatch = dispatch_event(not_run, ts=21)
    events = [
        user_text(ids=IDS, marker=True, ts=1),
        ran,
        ran_dispatch,
        not_run,
        not_dispatch,
        terminal(IDS, status="failed", ts=30),
        *attestation_bundle(ran, ran_dispatch, ran=True, ts=40),
        *attestation_bundle(not_run, not_dispatch, ran=False, ts=50),
    ]
    store, session_id = opened(events)
    full = read_session_timeline(store, session_id, None)
    summaries = [row.summary for row in full.runs[0].rows if row.tool_call_id]
    assert [s.split(": ", 1)[1] for s in summaries] == [
        "ran, settled by you",
        "did not run, settled by you",
    ]
    _same(full, read_session_timeline_lazily(store, session_id, None))


def test_an_interrupted_session_and_its_plan_read_the_same_either_way(tmp_path: Path) -> None:
    from app.host.host_bootstrap import now_ms
    from app.host.resume_seam import resume_service
    from runtime.tools.process_tree import BackgroundShellRegistry
    from runtime.tools.tool_catalog import default_catalog
    from tests.helpers.ledger_builders import DEFAULT_IDS, call_event, dispatch_event, user_text
    from tests.helpers.resume_fixtures import recover, seed_interrupted_run

    data, folder = tmp_path / "data", tmp_path / "work"
    folder.mkdir()
    store = open_store(data)
    call = call_event("call-1", tool_name="bash", event_id="evt-call")
    events = [user_text(marker=True), call, dispatch_event(call, recovery_mode="never_auto_retry")]
    seed_interrupted_run(store, DEFAULT_IDS, events, cwd=str(folder))
    store.close()
    store, _ = recover(data)
    try:
        service = resume_service(
            store,
            default_catalog().names,
            BackgroundShellRegistry.in_data_dir(data),
            enabled=True,
            clock=now_ms,
            lifecycle=None,
            processes=store,
            checkpoints=None,
        )
        plan: Callable[[str], ContinuationPlan] = service.plan_latest
        full = read_session_timeline(store, DEFAULT_IDS.session_id, plan)
        assert full.header is not None and any(pin.seq is not None for pin in full.header.pins)
        _same(full, read_session_timeline_lazily(store, DEFAULT_IDS.session_id, plan))
    finally:
        store.close()


def test_reasons_are_pinned_to_the_same_rows_either_way(
    opened: Callable[[list[RuntimeEvent]], tuple[SqliteLedgerStore, str]],
) -> None:
    """By event id (a tool call's later fact pins its row), by call id, and a snapshot reason
    to the latest snapshot's row, found without making the lazy rows (a message naming
    ``workspaceCheckpoint`` is no snapshot)."""
    from tests.helpers.ledger_builders import user_text
    from tests.helpers.timeline_demo import chat_events, checkpoint_event

    def hidden_snapshot(event_id: str, high_water: int) -> RuntimeEvent:
        event = checkpoint_event(event_id, high_water)
        event["modelVisibility"] = "hidden"
        return event

    chat = chat_events(18)
    events = [
        *chat[:12],
        hidden_snapshot("evt-snap-1", 12),
        *chat[12:],
        hidden_snapshot("evt-snap-2", 19),
        user_text(event_id="evt-says-snapshot", text="no workspaceCheckpoint here"),
    ]
    for n, event in enumerate(events):
        event["ts"] = 1000 + n
    store, session_id = opened(events)
    full = read_session_timeline(store, session_id, None)
    lazy = read_session_timeline_lazily(store, session_id, None)
    _same(full, lazy)
    rows = full.runs[0].rows
    tool = next(row for row in rows if len(row.entries) > 1)
    reasons = [
        TimelineReason("unknown_tool_outcome", "m", event_id=tool.entries[-1].event_id),
        TimelineReason("unknown_tool_outcome", "m", tool_call_id=tool.tool_call_id),
        TimelineReason("unknown_tool_outcome", "m", event_id="no-such-event"),
        TimelineReason("workspace_checkpoint_stale", "m"),
    ]
    parks = ("workspace_checkpoint_failed", "workspace_drift")
    pinned = pin_reasons(lazy.runs, reasons, parks)
    assert pinned == pin_reasons(full.runs, reasons, parks)
    snapshot = next(row.seq for row in rows if row.entries[0].event_id == "evt-snap-2")
    assert [pin.seq for pin in pinned] == [tool.seq, tool.seq, None, snapshot, snapshot, None]


def test_a_tool_fact_changed_outside_the_store_is_refused_by_the_first_filter(
    opened: Callable[[list[RuntimeEvent]], tuple[SqliteLedgerStore, str]], tmp_path: Path
) -> None:
    """A dispatch whose mode was made an object behind the store's back reads in SQL as JSON
    text: it is decoded in full instead, and refused as the page that shows it would be."""
    import sqlite3

    from runtime.ledger.codes import StoreCode
    from runtime.ledger.store_ports import StoreRefusal

    _, session_id = opened(generate(300))
    database = tmp_path / "store-0" / "runtime.sqlite"  # the fixture's first store
    conn = sqlite3.connect(database)
    try:
        changed = conn.execute(
            "UPDATE runtime_events SET payload = CAST(json_set(CAST(payload AS TEXT),"
            " '$.actions.toolDispatch.recoveryMode', json('{\"x\":1}')) AS BLOB)"
            " WHERE event_seq = (SELECT min(event_seq) FROM runtime_events"
            " WHERE lane = 'tool_dispatch')"
        ).rowcount
        conn.commit()
    finally:
        conn.close()
    assert changed == 1
    reopened = open_store(database.parent, read_only=True)
    try:
        lazy = read_session_timeline_lazily(reopened, session_id, None)
        rows = lazy.runs[0].rows
        assert isinstance(rows, LazyRows)
        with pytest.raises(StoreRefusal) as refused:
            rows.searchable()
        assert refused.value.code is StoreCode.STORE_CORRUPT
    finally:
        reopened.close()


def test_a_store_without_the_facts_reading_filters_the_same(
    opened: Callable[[list[RuntimeEvent]], tuple[SqliteLedgerStore, str]],
) -> None:
    """The PostgreSQL store answers no reading of the tool facts (None): the first filter then
    makes every row from its events, and reads the same rows."""
    from runtime.ledger.timeline_lazy import run_ended

    store, session_id = opened(generate(1500))
    run_id = store.list_session_runs(session_id)[0].run_id
    index = store.read_run_timeline_index(run_id)
    ended = run_ended([(row.seq, row.event) for row in index.endings])

    def load(seqs: Sequence[int]) -> list[tuple[int, RuntimeEvent]]:
        return [(row.seq, row.event) for row in store.read_run_events_at(run_id, seqs)]

    def find(event_id: str) -> tuple[int, RuntimeEvent] | None:
        row = store.read_run_event(run_id, event_id)
        return (row.seq, row.event) if row is not None else None

    without = LazyRows(index, ended, load, find, facts=lambda _: None)
    read = LazyRows(
        index, ended, load, find, facts=lambda high: store.read_run_tool_facts(run_id, high)
    )
    assert [_as_searched(row) for row in without.searchable()] == [
        _as_searched(row) for row in read.searchable()
    ]
    assert len(without.searchable()) == len(index.rows) > 300


def test_a_call_stopped_by_a_cancel_or_by_maka_is_not_a_failure_either_way(
    opened: Callable[[list[RuntimeEvent]], tuple[SqliteLedgerStore, str]],
) -> None:
    """A command the user stopped (its result ``cancelled``), one Maka ended (``stoppedByHost``)
    and a call refused because the turn was cancelled read as stopped, not failed, and are no
    problem; results that only look alike (a ``cancelled`` that is not JSON true, a result
    that is no object) stay failures. Both readings agree on each."""
    from tests.helpers.ledger_builders import (
        bound_response,
        call_event,
        dispatch_event,
        response_event,
        terminal,
        user_text,
    )

    results: list[tuple[object, bool]] = [
        ({"cancelled": True, "exitCode": -15, "error": "the command was cancelled"}, True),
        ({"stoppedByHost": True, "cancelled": True, "exitCode": -15}, True),
        ({"cancelled": "yes", "exitCode": 1}, True),
        ({"cancelled": 1, "exitCode": 1}, True),
        (["cancelled"], True),
        ({"cancelled": True, "exitCode": 0}, False),
        ({"code": "cancelled", "error": "the turn was cancelled"}, True),
        ({"code": "cancelled_later", "error": "no"}, True),
    ]
    events: list[RuntimeEvent] = [user_text(ids=IDS, marker=True, ts=1)]
    for index, (result, error) in enumerate(results):
        command = {"command": "sleep 9"}
        call = call_event(f"call-{index}", "bash", command, ids=IDS, ts=10 * index + 2)
        if index == 6:  # refused before its T1: never dispatched
            events += [call, response_event(call, result, is_error=error)]
        else:
            events += [call, dispatch_event(call), bound_response(call, result, is_error=error)]
    events.append(terminal(IDS, status="cancelled", ts=999, state_delta={"abortSource": "user"}))
    store, session_id = opened(events)
    full = read_session_timeline(store, session_id, None)
    rows = [row for row in full.runs[0].rows if row.tool_call_id]
    assert [(row.status.value, row.summary) for row in rows] == [
        ("cancelled", "bash: stopped when the turn was cancelled"),
        ("cancelled", "bash: stopped by Maka"),
        ("failed", "bash: failed"),
        ("failed", "bash: failed"),
        ("failed", "bash: failed"),
        ("ok", "bash: done"),
        ("cancelled", "bash: not run (the turn was cancelled)"),
        ("failed", "bash: failed"),
    ]
    _same(full, read_session_timeline_lazily(store, session_id, None))


def test_a_text_filter_searches_a_messages_whole_text_either_way(
    opened: Callable[[list[RuntimeEvent]], tuple[SqliteLedgerStore, str]],
) -> None:
    """A message's summary is cut (160 characters): a text filter reads its whole text, as
    the full read and the lazy one (from the store's facts) both keep it, without the rest of
    its event."""
    from tests.helpers.ledger_builders import user_text

    writes = "; ".join(f"write f{n}.txt saying n{n}" for n in range(30))
    events = [event for event in generate(200) if event.get("status") is None]
    long = user_text(f"Please: {writes}", event_id="evt-long", ids=IDS, ts=99_999)
    store, session_id = opened([*events, long])
    full = read_session_timeline(store, session_id, None)
    lazy = read_session_timeline_lazily(store, session_id, None)
    run_id = full.runs[0].run_id
    for text in ("saying n17", "F17.TXT"):
        where = TimelineRowFilter(text=text)
        for timeline in (full, lazy):
            pages = TimelinePages({session_id: timeline}.__getitem__)
            page = pages.page(session_id, run_id, 0, 50, where)
            assert [row.entries[0].event_id for row in page.rows] == ["evt-long"]
    _same(full, lazy)
