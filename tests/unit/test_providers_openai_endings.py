"""How a chat-completions stream ends, told apart: an empty reply, an empty stream that ended
properly, a body cut without its terminating chunk, a connection refused. Each message names the
URL tried, and the ``tool_choice`` hint comes only with a request that carried it.
"""

from __future__ import annotations

import http.client
import json
import socket
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.base.cancel_token import CancelToken
from runtime.providers.openai_compatible_provider import (
    OpenAICompatibleProvider,
    OpenAISettings,
    response_lines,
    shown_url,
)
from runtime.providers.provider_port import (
    Finished,
    ProviderError,
    ProviderErrorCode,
    ProviderRequest,
    StreamEvent,
    TextDelta,
    ToolSpec,
    UserText,
    tool_call_stub,
)
from runtime.providers.token_estimate import estimated_tokens
from tests.helpers.chat_server import ChatServer, Reply, chat_server, chunk

TOOLS = (ToolSpec("read_file", "read a file", {"type": "object"}),)
REQUEST = ProviderRequest("be brief", (UserText("hi"),), TOOLS)


def _provider(url: str, **settings: Any) -> OpenAICompatibleProvider:
    options: dict[str, Any] = {"read_timeout": 20.0, **settings}
    return OpenAICompatibleProvider(OpenAISettings(base_url=url, model="tiny", **options))


def _events(reply: Reply, **settings: Any) -> list[StreamEvent]:
    with chat_server([reply]) as server:
        return list(_provider(server.base_url, **settings).stream(REQUEST, CancelToken()))


def _error(reply: Reply, **settings: Any) -> tuple[ProviderError, str]:
    with chat_server([reply]) as server:
        with pytest.raises(ProviderError) as caught:
            list(_provider(server.base_url, **settings).stream(REQUEST, CancelToken()))
        return caught.value, f"{server.base_url}/chat/completions"


def _raw(*parts: bytes) -> Reply:
    """Write ``parts`` as the whole response (status line included), then close."""

    def reply(handler: BaseHTTPRequestHandler) -> None:
        for part in parts:
            handler.wfile.write(part)
            handler.wfile.flush()
        handler.close_connection = True

    return reply


CHUNKED_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _event(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return f"data: {chunk(delta, finish)}\n\n".encode()


# ---- an empty reply ------------------------------------------------------------------------------


def _empty_reply(handler: BaseHTTPRequestHandler) -> None:
    _raw(CHUNKED_HEAD, _chunk(_event({"role": "assistant", "content": ""}, "stop")), b"0\r\n\r\n")(
        handler
    )


def test_an_empty_reply_to_a_request_with_tool_choice_carries_the_way_to_turn_it_off() -> None:
    events = _events(_empty_reply)
    assert len(events) == 1 and isinstance(events[0], Finished)
    hint = events[0].empty_reply_hint
    assert hint is not None
    assert "tool_choice" in hint and "MAKA_OPENAI_TOOL_CHOICE=off" in hint


def test_an_empty_reply_without_tool_choice_or_a_reply_with_words_carries_no_hint() -> None:
    assert _events(_empty_reply, send_tool_choice=False) == [Finished("end_turn")]
    said = _raw(CHUNKED_HEAD, _chunk(_event({"content": "hello"}, "stop")), b"0\r\n\r\n")
    assert _events(said) == [TextDelta("hello"), Finished("end_turn")]


def _stub_reply(handler: BaseHTTPRequestHandler) -> None:
    # The text arrives in two events, as a server streaming its grammar's output does.
    parts = (_event({"content": "functions."}), _event({"content": "edit_file:"}, "stop"))
    _raw(CHUNKED_HEAD, *(_chunk(part) for part in parts), b"0\r\n\r\n")(handler)


def test_a_reply_that_only_opens_a_tool_call_carries_the_tool_choice_hint_when_sent() -> None:
    events = _events(_stub_reply)
    assert events[:2] == [TextDelta("functions."), TextDelta("edit_file:")]
    assert isinstance(events[-1], Finished)
    hint = events[-1].empty_reply_hint
    assert hint is not None and "MAKA_OPENAI_TOOL_CHOICE=off" in hint
    assert _events(_stub_reply, send_tool_choice=False)[-1] == Finished("end_turn")


@given(st.text(max_size=40))
def test_only_text_that_is_a_bare_functions_opening_is_a_call_stub(text: str) -> None:
    stub = tool_call_stub(text)
    if stub is not None:
        assert text.strip() == f"functions.{stub}:"
    assert tool_call_stub(f"functions.{text}:") in (None, text.strip() if text else None)


def test_call_stubs_are_found_with_their_tool_name() -> None:
    assert tool_call_stub("functions.edit_file:") == "edit_file"
    assert tool_call_stub("\n functions.bash:\n") == "bash"
    for text in ("functions.edit_file: {}", "call functions.bash:", "functions.:", "Summary:"):
        assert tool_call_stub(text) is None, text


# ---- a cut body and an empty stream --------------------------------------------------------------


def test_a_chunked_body_cut_before_its_terminating_chunk_is_a_cut_connection() -> None:
    before_any = _raw(CHUNKED_HEAD)
    error, url = _error(before_any)
    assert error.code == ProviderErrorCode.CONNECTION_LOST
    assert "was cut before it sent any event" in error.message and url in error.message
    assert "tool_choice" not in error.message and "no events" not in error.message
    midway = _raw(CHUNKED_HEAD, _chunk(_event({"content": "partial"})))
    error, _ = _error(midway)
    assert error.code == ProviderErrorCode.CONNECTION_LOST
    assert "was cut in the middle of the reply" in error.message
    inside_a_chunk = _raw(CHUNKED_HEAD, b"400\r\n" + _event({"content": "partial"}))
    error, _ = _error(inside_a_chunk)
    assert error.code == ProviderErrorCode.CONNECTION_LOST and "was cut" in error.message


def test_a_body_shorter_than_its_content_length_is_a_cut_connection() -> None:
    event = _event({"content": "partial"})
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        + f"Content-Length: {len(event) + 500}\r\n\r\n".encode()
    )
    error, _ = _error(_raw(head, event))
    assert error.code == ProviderErrorCode.CONNECTION_LOST and "was cut" in error.message


def test_an_empty_stream_that_ended_properly_is_a_refusal_with_the_hint_only_if_sent() -> None:
    ended = _raw(CHUNKED_HEAD, b"0\r\n\r\n")
    error, url = _error(ended)
    assert error.code == ProviderErrorCode.EMPTY_STREAM
    assert "sent no events at all" in error.message and url in error.message
    assert "MAKA_OPENAI_TOOL_CHOICE=off" in error.message
    error, _ = _error(ended, send_tool_choice=False)
    assert error.code == ProviderErrorCode.EMPTY_STREAM
    assert "tool_choice" not in error.message.lower()


def test_events_split_across_chunks_anywhere_are_read_whole() -> None:
    stream = _event({"content": "hel"}) + _event({"content": "lo"}, "stop") + b"data: [DONE]\n\n"
    pieces = [stream[i : i + 7] for i in range(0, len(stream), 7)]
    reply = _raw(CHUNKED_HEAD, *(_chunk(piece) for piece in pieces), b"0\r\n\r\n")
    assert _events(reply) == [TextDelta("hel"), TextDelta("lo"), Finished("end_turn")]


# ---- connection errors name the URL --------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_refused_connection_names_the_url_tried_without_credentials() -> None:
    port = _closed_port()
    provider = _provider(f"http://user:secret@127.0.0.1:{port}/v1")
    with pytest.raises(ProviderError) as caught:
        list(provider.stream(REQUEST, CancelToken()))
    assert caught.value.code == ProviderErrorCode.CONNECTION_LOST
    assert f"http://127.0.0.1:{port}/v1/chat/completions" in caught.value.message
    assert "connection refused" in caught.value.message and "secret" not in caught.value.message


def test_a_shown_url_keeps_scheme_host_port_and_path() -> None:
    assert shown_url("https://k:p@[::1]:8443/api/v1/", "/x") == "https://[::1]:8443/api/v1/x"
    assert shown_url("http://localhost/v1", "/chat/completions") == (
        "http://localhost/v1/chat/completions"
    )


# ---- the estimate --------------------------------------------------------------------------------


@given(st.binary(max_size=2000))
def test_the_estimate_is_never_below_a_token_for_every_three_bytes(data: bytes) -> None:
    estimate = estimated_tokens(data)
    assert estimate >= -(-len(data) // 3)
    assert estimate <= max(len(data), 1) or not data


def test_the_estimate_counts_json_and_digests_higher_than_prose() -> None:
    prose = b"the quick brown fox jumps over the lazy dog and runs far away " * 20
    digest = json.dumps(
        {"sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}
    )
    assert estimated_tokens(prose) == -(-len(prose) // 3)
    assert estimated_tokens(digest.encode()) > len(digest) / 2


def test_a_server_closed_before_headers_is_a_connection_failure_naming_the_url() -> None:
    server = ChatServer([_raw()])
    try:
        with pytest.raises(ProviderError) as caught:
            list(_provider(server.base_url).stream(REQUEST, CancelToken()))
    finally:
        server.close()
    assert caught.value.code == ProviderErrorCode.CONNECTION_LOST
    assert server.base_url in caught.value.message


class _Pieces:
    """A response whose body arrives in the given pieces (``read1`` returns one at a time; an
    empty answer is the end, as from ``http.client``)."""

    def __init__(self, pieces: list[bytes], length: int | None = None) -> None:
        self._pieces = list(pieces)
        self.length = length

    def read1(self, size: int) -> bytes:
        del size
        return self._pieces.pop(0) if self._pieces else b""


@given(st.lists(st.binary(min_size=1, max_size=40), max_size=20))
def test_lines_are_the_body_split_after_each_newline_however_it_arrives(
    pieces: list[bytes],
) -> None:
    body = b"".join(pieces)
    lines = list(response_lines(_Pieces(pieces), block=7))  # type: ignore[arg-type]
    assert b"".join(lines) == body
    assert all(line.endswith(b"\n") for line in lines[:-1])
    assert all(line.count(b"\n") <= 1 and line for line in lines)


def test_a_content_length_body_that_ends_early_raises_incomplete_read() -> None:
    with pytest.raises(http.client.IncompleteRead):
        list(response_lines(_Pieces([b"data: x\n"], length=100)))  # type: ignore[arg-type]
