"""A turn stopped by its store (the database went away mid-turn) says which calls had started
with no outcome recorded, as a terminal says it when its host stops: ``maka run`` ended with
only ``store_io_failed`` while the command it had started had run."""

from __future__ import annotations

import io

from app.host.terminal_transcript import TerminalTranscript, left_running
from tests.helpers.ledger_builders import call_event, dispatch_event, response_event


def test_a_dispatched_call_without_a_result_is_named_and_a_finished_one_is_not() -> None:
    transcript = TerminalTranscript(io.StringIO())
    done = call_event("c1", "write_file", {"path": "a.txt", "content": "x"})
    running = call_event("c2", "bash", {"command": "sleep 3; echo two >> one.txt"})
    for event in (done, dispatch_event(done), response_event(done), running):
        transcript.committed(event)
    assert left_running(transcript, "session_s") == ""  # c2 asked for, never dispatched
    transcript.committed(dispatch_event(running))
    said = left_running(transcript, "session_s")
    assert said.startswith(". 1 tool call (bash) had started with no outcome recorded"), said
    assert "maka plan session_s" in said and "once the database answers" in said
    transcript.committed(response_event(running))
    assert transcript.started_without_outcome() == []
