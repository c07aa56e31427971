"""The desktop's branch options name a tool result's call in short (``tool_args``), as its
transcript card does, so one of many calls of the same tool can be told apart."""

from __future__ import annotations

from pathlib import Path

from app.host.branch_desktop import options_push
from storage.ledger.ledger_store import open_store
from tests.helpers.ledger_builders import (
    bound_response,
    call_event,
    dispatch_event,
    terminal,
    user_text,
)
from tests.helpers.stored_run import import_run


def test_each_tool_result_names_its_calls_arguments(tmp_path: Path) -> None:
    events = [user_text("write them", event_id="evt-ask", ts=1)]
    for number in (1, 2):
        call = call_event(
            f"call-{number}",
            tool_name="write_file",
            args={"path": f"notes/f{number}.txt", "content": "x"},
            event_id=f"evt-c{number}",
            ts=1 + number,
        )
        events += [call, dispatch_event(call), bound_response(call)]
    events.append(terminal(status="completed", ts=10))
    session_id = import_run(tmp_path / "data", events)
    store = open_store(tmp_path / "data", read_only=True)
    try:
        push = options_push(store, None, session_id)
    finally:
        store.close()
    results = [o for o in push.options if o.kind == "tool_result"]
    assert [(o.tool_call_id, o.tool_args) for o in results] == [
        ("call-1", "notes/f1.txt"),
        ("call-2", "notes/f2.txt"),
    ]


def test_a_run_not_ended_is_named_so_a_listing_through_the_host_says_why_it_is_missing(
    tmp_path: Path,
) -> None:
    """``maka branch S`` through a host printed the earlier runs' points as if the session were
    idle while a turn ran there; the answer now names the runs whose points are not listed."""
    from tests.helpers.ledger_builders import RunIds
    from tests.helpers.resume_fixtures import seed_interrupted_run

    ids = RunIds("session_busy", "inv-busy", "run-busy", "turn-busy")
    with open_store(tmp_path / "data") as store:
        seed_interrupted_run(store, ids, [user_text("go on", ids=ids, marker=True)], cwd="/w")
        push = options_push(store, None, ids.session_id)
    assert push.runs_running == ("run-busy",)
    assert push.options == ()
