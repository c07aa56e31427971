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
