"""The Timeline view's messages through the real ``maka`` main process, end to end: a turn
killed inside its ``bash`` command (P4: the command ran, its result was never recorded), then a
new start with the test playing the renderer over the real socket. ``timeline.open`` answers
with the session's runs and the plan Safe resume makes, its unknown outcome pinned to the bash
row; ``timeline.rows`` serves the rows (the call's facts grouped), filtered there when asked, and
``timeline.locate`` a row's place among those a filter shows; ``timeline.event`` the saved
event's canonical bytes; a run that is not there is refused with its code.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import (
    ErrorPush,
    Message,
    MessageKind,
    PermissionDecision,
    PermissionRequestedPush,
    PermissionsAnswerRequest,
    SessionsCreateRequest,
    SessionUpdatedPush,
    TimelineEventRequest,
    TimelineEventShownPush,
    TimelineLocatedPush,
    TimelineLocateRequest,
    TimelineOpenedPush,
    TimelineOpenRequest,
    TimelinePagePush,
    TimelineRowFilter,
    TimelineRowsRequest,
    TurnsSendRequest,
)
from storage.ledger.ledger_store import open_store
from tests.helpers.maka_process import MainProcess, start_main
from tests.helpers.maka_run import scripted_env, write_script
from tests.helpers.wire_client import WireClient

pytestmark = pytest.mark.e2e

WAIT_MS = 60_000
SCRIPT = [
    [
        {
            "text": "Counting.",
            "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "echo x >> n.txt"}}],
        },
        {"text": "Counted once."},
    ]
]


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[MainProcess]]:
    processes: list[MainProcess] = []
    yield processes
    for process in processes:
        process.stop()


def _connect(main: MainProcess, qtbot: QtBot) -> WireClient:
    client = WireClient(main.socket_name)
    client.hello(main.token)
    qtbot.waitUntil(lambda: client.has(MessageKind.HELLO_OK), timeout=WAIT_MS)
    return client


def _answer(client: WireClient, tag: str) -> Message | None:
    return next((m for m in client.received if m.correlation_id == tag), None)


def test_the_main_process_serves_a_parked_sessions_timeline(
    tmp_path: Path, qtbot: QtBot, started: list[MainProcess]
) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    env = {
        **scripted_env(write_script(tmp_path / "script.json", SCRIPT)),
        "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1",
    }
    main = start_main(data, {**env, "MAKA_FAILPOINT": "P4"}).wait_ready()
    started.append(main)
    client = _connect(main, qtbot)
    client.send(SessionsCreateRequest(cwd=str(work), correlation_id="create"))
    qtbot.waitUntil(lambda: client.has(MessageKind.SESSION_UPDATED), timeout=WAIT_MS)
    created = client.first(MessageKind.SESSION_UPDATED)
    assert isinstance(created, SessionUpdatedPush)
    session = created.session.session_id
    client.send(TurnsSendRequest(session_id=session, text="count once"))
    qtbot.waitUntil(lambda: client.has(MessageKind.PERMISSION_REQUESTED), timeout=WAIT_MS)
    ask = client.first(MessageKind.PERMISSION_REQUESTED)
    assert isinstance(ask, PermissionRequestedPush)
    client.send(
        PermissionsAnswerRequest(
            session_id=session, request_id=ask.request_id, decision=PermissionDecision.ALLOW
        )
    )
    assert main.process.wait(60) == -9, main.stderr()

    main = start_main(data, env).wait_ready()
    started.append(main)
    client = _connect(main, qtbot)
    client.send(TimelineOpenRequest(session_id=session, correlation_id="open"))
    qtbot.waitUntil(lambda: client.has(MessageKind.TIMELINE_OPENED), timeout=WAIT_MS)
    opened = client.first(MessageKind.TIMELINE_OPENED)
    assert isinstance(opened, TimelineOpenedPush)
    assert opened.correlation_id == "open"
    (run,) = opened.runs
    assert (run.status, run.failure_class, run.depth) == ("failed", "app_restarted", 0)
    assert opened.plan is not None and opened.plan.disposition == "park"
    assert "dangling_tool_state" in opened.plan.rejection_reasons
    (pin,) = [pin for pin in opened.plan.pins if pin.code == "pending_tool_result"]
    assert pin.run_id == run.run_id and pin.tool_call_id == "c1"

    client.send(TimelineRowsRequest(session_id=session, run_id=run.run_id, start=0, count=500))
    qtbot.waitUntil(lambda: client.has(MessageKind.TIMELINE_PAGE), timeout=WAIT_MS)
    page = client.first(MessageKind.TIMELINE_PAGE)
    assert isinstance(page, TimelinePagePush)
    assert page.total == run.row_count == len(page.rows)
    (tool,) = [row for row in page.rows if row.kind == "tool"]
    assert (tool.tool_name, tool.status, tool.seq) == ("bash", "unknown", pin.seq)
    assert [entry.kind for entry in tool.entries] == ["tool_call", "tool_dispatch"]
    assert page.rows[-1].kind == "run_end"

    # filtered and located by the main process: only problems are the unknown bash call and
    # the failed ending; the call's place among them, and none among the messages
    problems = TimelineRowFilter(only_problems=True)
    client.send(
        TimelineRowsRequest(
            session_id=session,
            run_id=run.run_id,
            start=0,
            count=500,
            filters=problems,
            correlation_id="problems",
        )
    )
    qtbot.waitUntil(lambda: _answer(client, "problems") is not None, timeout=WAIT_MS)
    filtered = _answer(client, "problems")
    assert isinstance(filtered, TimelinePagePush) and filtered.filters == problems
    assert [row.seq for row in filtered.rows] == [
        row.seq for row in page.rows if row.status in ("unknown", "failed", "damaged", "parked")
    ]
    assert filtered.total == len(filtered.rows) == 2
    for name, filters, position in (
        ("at", problems, 0),
        ("nowhere", TimelineRowFilter(kind="message"), None),
        ("all", None, page.rows.index(tool)),
    ):
        client.send(
            TimelineLocateRequest(
                session_id=session,
                run_id=run.run_id,
                seq=pin.seq or 0,
                filters=filters,
                correlation_id=name,
            )
        )
        qtbot.waitUntil(partial(client.answered, name), timeout=WAIT_MS)
        located = _answer(client, name)
        assert isinstance(located, TimelineLocatedPush)
        assert (located.seq, located.position) == (pin.seq, position)

    call = tool.entries[0]
    client.send(TimelineEventRequest(session_id=session, run_id=run.run_id, event_id=call.event_id))
    qtbot.waitUntil(lambda: client.has(MessageKind.TIMELINE_EVENT_SHOWN), timeout=WAIT_MS)
    shown = client.first(MessageKind.TIMELINE_EVENT_SHOWN)
    assert isinstance(shown, TimelineEventShownPush)
    main.stop()
    with open_store(data, read_only=True) as store:
        stored = {row.event["id"]: row.payload for row in store.read_run_events(run.run_id)}
    assert shown.canonical_json.encode("utf-8") == stored[call.event_id]
    assert not shown.truncated
    assert hashlib.sha256(stored[call.event_id]).hexdigest()


def test_a_run_that_is_not_there_is_refused_with_its_code(
    tmp_path: Path, qtbot: QtBot, started: list[MainProcess]
) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    main = start_main(data, {}).wait_ready()
    started.append(main)
    client = _connect(main, qtbot)
    client.send(SessionsCreateRequest(cwd=str(work), correlation_id="create"))
    qtbot.waitUntil(lambda: client.has(MessageKind.SESSION_UPDATED), timeout=WAIT_MS)
    created = client.first(MessageKind.SESSION_UPDATED)
    assert isinstance(created, SessionUpdatedPush)
    session = created.session.session_id
    client.send(TimelineOpenRequest(session_id=session, correlation_id="open"))
    qtbot.waitUntil(lambda: client.has(MessageKind.TIMELINE_OPENED), timeout=WAIT_MS)
    opened = client.first(MessageKind.TIMELINE_OPENED)
    assert isinstance(opened, TimelineOpenedPush)
    assert opened.runs == () and opened.plan is None
    client.send(
        TimelineRowsRequest(
            session_id=session, run_id="run-x", start=0, count=5, correlation_id="rows"
        )
    )
    qtbot.waitUntil(lambda: client.has(MessageKind.ERROR), timeout=WAIT_MS)
    error = client.first(MessageKind.ERROR)
    assert isinstance(error, ErrorPush)
    assert (error.code, error.correlation_id) == ("run_not_found", "rows")
    assert main.process.poll() is None  # a refusal, not a crash
