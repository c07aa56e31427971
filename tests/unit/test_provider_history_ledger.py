"""The OpenAI-compatible provider driven by the real run loop on a real SQLite ledger, against a
local chat server: what a live turn sends, and what a history rebuilt from the ledger sends.

- the request bytes rebuilt from the ledger equal the bytes the live run sent (tool arguments and
  results serialize the same way in memory and after a round trip through the ledger);
- a failed turn, an empty reply or a host notice never leaves two adjacent user messages;
- a context overflow commits a host notice that leaves the turn out of later requests, and the
  ledger keeps every event;
- a reply cut off by the length limit says so.
"""

from __future__ import annotations

import io
import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.commands.terminal_transcript import TerminalTranscript
from runtime.agent.permission_policy import PermissionMode, PermissionPolicy
from runtime.agent.run_loop import DEFAULT_SYSTEM_PROMPT, RunSettings
from runtime.agent.session_service import SessionService
from runtime.agent.transcript_projection import transcript_of_run
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import RunStatus
from runtime.providers.history_projection import history_from_events
from runtime.providers.openai_compatible_provider import OpenAICompatibleProvider, OpenAISettings
from runtime.providers.provider_port import ProviderRequest
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from tests.helpers.chat_server import ChatServer, Reply, chat_server, json_error, text_reply
from tests.helpers.chat_server import tool_reply as call_reply

IDENTITY = "workspace:v1:11111111-2222-4333-8444-555555555555"
POLICY = PermissionPolicy(PermissionMode.AUTO)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteLedgerStore]:
    instance = open_store(tmp_path / "data")
    yield instance
    instance.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    (path / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    return Path(os.path.realpath(path))


class Recorder:
    def text_delta(self, text: str) -> None:
        del text

    def thinking_delta(self, text: str) -> None:
        del text

    def committed(self, event: RuntimeEvent) -> None:
        del event

    def run_status(self, run_id: str, status: RunStatus, failure_class: str | None) -> None:
        del run_id, status, failure_class


def _provider(server: ChatServer) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(
        OpenAISettings(base_url=server.base_url, model="tiny", read_timeout=5)
    )


def _service(store: SqliteLedgerStore, server: ChatServer) -> SessionService:
    return SessionService(
        store=store,
        provider_factory=lambda: _provider(server),
        owner_epoch=1,
        workspace_identity=lambda folder: IDENTITY,
        settings=RunSettings(max_steps=6),
    )


def _session(
    store: SqliteLedgerStore, server: ChatServer, workspace: Path
) -> tuple[SessionService, str]:
    service = _service(store, server)
    return service, service.create_session(workspace).session_id


def _events(store: SqliteLedgerStore, run_id: str) -> list[RuntimeEvent]:
    return [row.event for row in store.read_run_events(run_id)]


def _roles(body: dict[str, Any]) -> list[str]:
    return [message["role"] for message in body["messages"]]


def _no_adjacent_roles(body: dict[str, Any]) -> bool:
    roles = [role for role in _roles(body) if role != "tool"]
    return all(a != b for a, b in itertools.pairwise(roles))


# ---- 7. live bytes == bytes rebuilt from the ledger ------------------------------------------

# Keys deliberately out of sorted order, a float that canonical JSON writes as an integer and a
# non-ASCII character: the three ways an in-memory value and its ledger round trip can differ.
ARGUMENTS = '{"path": "notes.txt", "limit": 2.0, "offset": 1, "why": "vérifier"}'


def test_the_request_rebuilt_from_the_ledger_is_byte_identical_to_the_live_one(
    store: SqliteLedgerStore, workspace: Path
) -> None:
    replies = [call_reply("call_1", "read_file", ARGUMENTS, text="Reading."), text_reply("Done.")]
    with chat_server(replies) as server:
        service, session_id = _session(store, server, workspace)
        outcome = service.send_turn(session_id, "read the notes", Recorder(), POLICY)
        live = list(server.bodies)
        provider = _provider(server)
    assert outcome.status is RunStatus.COMPLETED and len(live) == 2
    events = _events(store, outcome.run_id)
    response = max(
        i
        for i, e in enumerate(events)
        if "content" in e and e["content"]["kind"] == "function_response"
    )
    rebuilt_history = history_from_events(events[: response + 1])
    request = ProviderRequest(DEFAULT_SYSTEM_PROMPT, rebuilt_history, service.catalog.specs())
    assert provider.request_body(request) == live[1]
    sent = json.loads(live[1])
    assistant = sent["messages"][2]
    assert assistant["content"] == "Reading."
    arguments = assistant["tool_calls"][0]["function"]["arguments"]
    assert json.loads(arguments) == {
        "path": "notes.txt",
        "limit": 2,
        "offset": 1,
        "why": "vérifier",
    }


def test_the_next_turn_repeats_the_live_run_byte_for_byte(
    store: SqliteLedgerStore, workspace: Path
) -> None:
    replies = [
        call_reply("call_1", "read_file", ARGUMENTS),
        text_reply("Done."),
        text_reply("Again."),
    ]
    with chat_server(replies) as server:
        service, session_id = _session(store, server, workspace)
        service.send_turn(session_id, "read the notes", Recorder(), POLICY)
        service.send_turn(session_id, "thanks", Recorder(), POLICY)
        live, next_turn = json.loads(server.bodies[1]), json.loads(server.bodies[2])
    prefix = live["messages"]
    assert next_turn["messages"][: len(prefix)] == prefix
    encode = json.dumps
    assert encode(next_turn["messages"][: len(prefix)]).encode() == encode(prefix).encode()
    assert next_turn["messages"][len(prefix)] == {"role": "assistant", "content": "Done."}


# ---- 2. no two adjacent user messages, live or rebuilt ---------------------------------------


@pytest.mark.parametrize(
    "first",
    [
        json_error(503, {"error": {"message": "loading model"}}),  # a failed turn
        text_reply(""),  # an empty reply
    ],
    ids=["failed_turn", "empty_reply"],
)
def test_a_failed_or_empty_turn_never_leaves_two_user_messages_in_a_row(
    store: SqliteLedgerStore, workspace: Path, first: Reply
) -> None:
    with chat_server([first, text_reply("Hello.")]) as server:
        service, session_id = _session(store, server, workspace)
        service.send_turn(session_id, "first message", Recorder(), POLICY)
        outcome = service.send_turn(session_id, "second message", Recorder(), POLICY)
        provider = _provider(server)
        body = json.loads(server.bodies[1])
    assert outcome.status is RunStatus.COMPLETED
    assert _roles(body) == ["system", "user"]
    assert body["messages"][1]["content"] == "first message\n\nsecond message"
    # The same holds for the history rebuilt from the ledger, byte for byte.
    rebuilt = service.prior_history(session_id)[:-1]  # both turns, without the last reply
    request = ProviderRequest(DEFAULT_SYSTEM_PROMPT, rebuilt, service.catalog.specs())
    assert provider.request_body(request) == server.bodies[1]


# ---- 4. a context overflow leaves the turn out, recorded in the ledger -----------------------

OVERFLOW = json_error(
    400, {"error": {"message": "Requested tokens (9000) exceed context window of 2048"}}
)


def test_a_context_overflow_is_recorded_and_the_next_turn_can_continue(
    store: SqliteLedgerStore, workspace: Path
) -> None:
    huge = "paste " * 3000
    with chat_server([text_reply("Hi."), OVERFLOW, text_reply("Short is fine.")]) as server:
        service, session_id = _session(store, server, workspace)
        service.send_turn(session_id, "hello", Recorder(), POLICY)
        failed = service.send_turn(session_id, huge, Recorder(), POLICY)
        after = service.send_turn(session_id, "a short question", Recorder(), POLICY)
        bodies = server.requests()
    assert failed.status is RunStatus.FAILED and failed.failure_class == "provider_error"
    assert failed.message is not None
    assert "longer than the model's context window" in failed.message
    assert "left out of what the model sees" in failed.message
    # The ledger keeps the oversized message and records the decision as a host notice.
    events = _events(store, failed.run_id)
    assert events[0]["content"] == {"kind": "text", "text": huge}
    notice = next(e for e in events if e["author"] == "host")
    assert notice["role"] == "user"
    assert notice["actions"]["stateDelta"]["providerHistoryOmits"] == [events[0]["id"]]
    assert "did not fit the model's context window" in notice["content"]["text"]  # type: ignore[typeddict-item]
    # The next request leaves the oversized message out and carries the notice instead.
    assert after.status is RunStatus.COMPLETED
    sent = bodies[2]
    assert all(huge not in message["content"] for message in sent["messages"])
    last = sent["messages"][-1]
    assert last["role"] == "user"
    assert "did not fit the model's context window" in last["content"]
    assert last["content"].endswith("a short question")
    assert _no_adjacent_roles(sent)
    # The user sees the notice and the failure in the transcript.
    entries = transcript_of_run(events)
    codes = [entry.code for entry in entries if entry.type == "notice"]
    assert codes == ["context_overflow", "provider_error"]


def _empty_stream(handler: Any) -> None:
    """A server that refuses a prompt by sending 200 headers and no event at all (how
    llama-cpp-python's server answers a context overflow)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.end_headers()


def test_an_overflow_also_leaves_out_an_earlier_turn_the_model_never_answered(
    store: SqliteLedgerStore, workspace: Path
) -> None:
    """The oversized message failed with an error not recognisable as an overflow (a proxy's
    503), so it stayed in the history; the next turn's overflow must leave it out too, or every
    later short message is dropped one by one while the real cause stays."""
    huge = "paste " * 3000
    gateway = json_error(503, {"error": {"message": "upstream closed"}})
    replies = [text_reply("Hi."), gateway, OVERFLOW, text_reply("Short is fine.")]
    with chat_server(replies) as server:
        service, session_id = _session(store, server, workspace)
        service.send_turn(session_id, "hello", Recorder(), POLICY)
        first = service.send_turn(session_id, huge, Recorder(), POLICY)
        second = service.send_turn(session_id, "hello again", Recorder(), POLICY)
        after = service.send_turn(session_id, "a short question", Recorder(), POLICY)
        bodies = server.requests()
    assert first.status is RunStatus.FAILED and second.status is RunStatus.FAILED
    assert huge in json.dumps(bodies[2])  # the unanswered turn was still sent once more
    notice = next(e for e in _events(store, second.run_id) if e["author"] == "host")
    omits = notice["actions"]["stateDelta"]["providerHistoryOmits"]
    huge_id = _events(store, first.run_id)[0]["id"]
    assert omits == [huge_id, _events(store, second.run_id)[0]["id"]]
    text = notice["content"]["text"]  # type: ignore[typeddict-item]
    assert "earlier turns the model never answered" in text and "18000 characters" in text
    # The next turn goes through without either message; the answered first turn stays.
    assert after.status is RunStatus.COMPLETED
    sent = bodies[3]
    assert huge not in json.dumps(sent)
    assert _roles(sent) == ["system", "user", "assistant", "user"]
    assert [m["content"] for m in sent["messages"][1:3]] == ["hello", "Hi."]
    last = sent["messages"][-1]["content"]  # the notice (naming what it left out), then the text
    assert last.startswith("Note from the host: the previous turn did not fit")
    assert last.endswith("a short question")
    assert _no_adjacent_roles(sent)
    # A restart rebuilds the same history from the ledger.
    rebuilt = service.prior_history(session_id)
    assert all(huge not in json.dumps(str(item)) for item in rebuilt)


def test_an_empty_stream_leaves_its_turn_out_so_a_short_message_goes_through(
    store: SqliteLedgerStore, workspace: Path
) -> None:
    """A server that answers an overflow with 200 headers and no event: the turn is left out at
    once, with the same kind of host notice as an overflow, so the next message is not sent
    with it (and does not fail the same way, again and again)."""
    huge = "paste " * 3000
    replies = [text_reply("Hi."), _empty_stream, text_reply("Short is fine.")]
    with chat_server(replies) as server:
        service, session_id = _session(store, server, workspace)
        service.send_turn(session_id, "hello", Recorder(), POLICY)
        failed = service.send_turn(session_id, huge, Recorder(), POLICY)
        after = service.send_turn(session_id, "a short question", Recorder(), POLICY)
        bodies = server.requests()
    assert failed.status is RunStatus.FAILED and failed.failure_class == "provider_error"
    assert failed.message is not None
    assert "sent no events at all" in failed.message
    assert "left out of what the model sees" in failed.message
    events = _events(store, failed.run_id)
    assert events[0]["content"] == {"kind": "text", "text": huge}  # the ledger keeps it
    notice = next(e for e in events if e["author"] == "host")
    assert notice["actions"]["stateDelta"]["providerHistoryOmits"] == [events[0]["id"]]
    text = notice["content"]["text"]  # type: ignore[typeddict-item]
    assert text.startswith("Note from the host: the model server refused the previous turn")
    assert after.status is RunStatus.COMPLETED
    sent = bodies[2]
    assert huge not in json.dumps(sent)
    assert _roles(sent) == ["system", "user", "assistant", "user"]
    assert sent["messages"][-1]["content"].endswith("a short question")
    codes = [entry.code for entry in transcript_of_run(events) if entry.type == "notice"]
    assert codes == ["context_overflow", "provider_error"]
    # A restart rebuilds the same history from the ledger.
    assert all(huge not in json.dumps(str(item)) for item in service.prior_history(session_id))


def test_an_overflow_in_a_tool_step_leaves_out_the_whole_turn_paired(
    store: SqliteLedgerStore, workspace: Path
) -> None:
    replies = [
        call_reply("call_1", "read_file", '{"path": "notes.txt"}'),
        OVERFLOW,
        text_reply("ok"),
    ]
    with chat_server(replies) as server:
        service, session_id = _session(store, server, workspace)
        service.send_turn(session_id, "read it", Recorder(), POLICY)
        service.send_turn(session_id, "next", Recorder(), POLICY)
        sent = server.requests()[2]
    assert _roles(sent) == ["system", "user"]
    assert "1 tool result" in sent["messages"][1]["content"]
    assert "tool_calls" not in json.dumps(sent["messages"])


# ---- 8. a reply cut off by the length limit ----------------------------------------------------


def test_a_reply_cut_off_by_the_length_limit_says_so(
    store: SqliteLedgerStore, workspace: Path
) -> None:
    with chat_server([text_reply("The answer is", finish="length")]) as server:
        service, session_id = _session(store, server, workspace)
        recorder = Recorder()
        outcome = service.send_turn(session_id, "explain", recorder, POLICY)
    assert outcome.status is RunStatus.COMPLETED and outcome.stop_reason == "length"
    assert outcome.message is not None and "cut off" in outcome.message
    events = _events(store, outcome.run_id)
    entries = transcript_of_run(events)
    notice = entries[-1]
    assert notice.type == "notice" and notice.code == "length" and "cut off" in notice.text
    terminal = io.StringIO()
    printer = TerminalTranscript(terminal)
    for event in events:
        printer.committed(event)
    assert "[completed] the reply was cut off" in terminal.getvalue()


# ---- 9. a reply with neither text nor a tool call -----------------------------------------------


def test_an_empty_reply_is_a_coded_notice_in_the_ledger_transcript_and_terminal(
    store: SqliteLedgerStore, workspace: Path
) -> None:
    with chat_server([text_reply(""), text_reply("  \n")]) as server:
        service, session_id = _session(store, server, workspace)
        outcomes = [service.send_turn(session_id, text, Recorder(), POLICY) for text in "ab"]
    for outcome in outcomes:
        assert outcome.status is RunStatus.COMPLETED
        assert outcome.stop_reason == "provider_empty_reply"
        assert outcome.message is not None and "empty reply" in outcome.message
        # The request carried tool_choice: the notice says how to leave it out.
        assert "MAKA_OPENAI_TOOL_CHOICE=off" in outcome.message
        events = _events(store, outcome.run_id)
        terminal_event = events[-1]
        assert terminal_event["actions"]["stateDelta"]["stopReason"] == "provider_empty_reply"
        assert terminal_event["content"]["code"] == "provider_empty_reply"  # type: ignore[typeddict-item]
        notice = transcript_of_run(events)[-1]
        assert notice.type == "notice" and notice.code == "provider_empty_reply"
        assert notice.level == "warn" and "empty reply" in notice.text
        terminal = io.StringIO()
        printer = TerminalTranscript(terminal)
        for event in events:
            printer.committed(event)
        assert "[provider_empty_reply] the model ended its turn" in terminal.getvalue()


def test_an_empty_reply_without_tool_choice_gives_no_tool_choice_hint(
    store: SqliteLedgerStore, workspace: Path
) -> None:
    with chat_server([text_reply("")]) as server:
        service = SessionService(
            store=store,
            provider_factory=lambda: OpenAICompatibleProvider(
                OpenAISettings(server.base_url, "tiny", read_timeout=5, send_tool_choice=False)
            ),
            owner_epoch=1,
            workspace_identity=lambda folder: IDENTITY,
            settings=RunSettings(max_steps=6),
        )
        session_id = service.create_session(workspace).session_id
        outcome = service.send_turn(session_id, "hi", Recorder(), POLICY)
    assert outcome.stop_reason == "provider_empty_reply"
    assert outcome.message is not None and "tool_choice" not in outcome.message
    assert "server's log" in outcome.message
