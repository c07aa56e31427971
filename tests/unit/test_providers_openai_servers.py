"""What real OpenAI-compatible servers need from the provider (issue: real model servers).

Each test pins a behaviour a real server (llama.cpp's, llama-cpp-python's, vLLM, Ollama) showed
was needed: request shapes they accept, errors they send in the stream or after the headers, and
streams that stall behind keep-alive comments.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.base.cancel_token import CancelToken
from runtime.providers.openai_compatible_provider import (
    OpenAICompatibleProvider,
    OpenAISettings,
    messages_from_history,
)
from runtime.providers.openai_errors import error_message, is_context_overflow
from runtime.providers.provider_port import (
    AssistantText,
    Finished,
    HistoryItem,
    HostNotice,
    ProviderError,
    ProviderErrorCode,
    ProviderRequest,
    TextDelta,
    Thinking,
    ToolCall,
    ToolResult,
    ToolSpec,
    UserText,
)
from runtime.providers.provider_registry import build_provider
from tests.helpers.chat_server import (
    ChatServer,
    Reply,
    chat_server,
    chunk,
    json_error,
    send_data,
    sse_headers,
    text_reply,
)

TOOLS = (ToolSpec("read_file", "read a file", {"type": "object"}),)
REQUEST = ProviderRequest("be brief", (UserText("hi"),), TOOLS)


def _provider(server: ChatServer, **settings: Any) -> OpenAICompatibleProvider:
    options: dict[str, Any] = {"read_timeout": 2.0, **settings}
    return OpenAICompatibleProvider(
        OpenAISettings(base_url=server.base_url, model="tiny", **options)
    )


def _error(reply: Reply, **settings: Any) -> ProviderError:
    with chat_server([reply]) as server:
        started = time.monotonic()
        with pytest.raises(ProviderError) as caught:
            list(_provider(server, **settings).stream(REQUEST, CancelToken()))
        assert time.monotonic() - started < 10
    return caught.value


# ---- 1. an assistant message with only tool calls -------------------------------------------


def test_an_assistant_message_with_only_tool_calls_sends_empty_content_not_null() -> None:
    messages = messages_from_history(
        "",
        (
            UserText("look"),
            ToolCall("c1", "read_file", {"path": "a"}),
            ToolResult("c1", "read_file", "A"),
        ),
    )
    assistant = messages[1]
    assert assistant["role"] == "assistant"
    assert "content" in assistant and assistant["content"] == ""
    assert assistant["tool_calls"][0]["id"] == "c1"


# ---- 2. never two adjacent messages of one role ----------------------------------------------


def test_adjacent_user_messages_and_host_notices_are_merged_keeping_every_text() -> None:
    notice = "Note from the host: an earlier turn was interrupted."
    messages = messages_from_history(
        "sys",
        (
            UserText("first try"),  # its turn failed: no reply
            UserText("second try"),
            AssistantText("ok"),
            HostNotice(notice),
            UserText("third"),
        ),
    )
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[1]["content"] == "first try\n\nsecond try"
    assert messages[3]["content"] == f"{notice}\n\nthird"


def test_adjacent_assistant_messages_merge_and_tool_messages_never_do() -> None:
    messages = messages_from_history(
        "",
        (
            UserText("go"),
            AssistantText("part one"),
            Thinking("hidden"),
            AssistantText("part two"),
            ToolCall("c1", "read_file", {"path": "a"}),
            ToolCall("c2", "read_file", {"path": "b"}),
            ToolResult("c1", "read_file", "A"),
            ToolResult("c2", "read_file", "B"),
        ),
    )
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
    assert messages[1]["content"] == "part one\n\npart two"
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["c1", "c2"]


_ITEMS = st.lists(
    st.one_of(
        st.builds(UserText, st.text(min_size=1, max_size=5)),
        st.builds(HostNotice, st.text(min_size=1, max_size=5)),
        st.builds(AssistantText, st.text(min_size=1, max_size=5)),
        st.builds(Thinking, st.text(max_size=5)),
    ),
    max_size=12,
)


@given(_ITEMS)
def test_no_history_produces_two_adjacent_messages_of_one_role(items: list[HistoryItem]) -> None:
    messages = messages_from_history("sys", tuple(items))
    roles = [m["role"] for m in messages]
    assert all(a != b for a, b in itertools.pairwise(roles))
    sent = "".join(m["content"] for m in messages)
    for item in items:
        if isinstance(item, (UserText, HostNotice, AssistantText)):
            assert item.text in sent


# ---- 3. errors after the 200 headers -----------------------------------------------------------


def _empty_stream(handler: BaseHTTPRequestHandler) -> None:
    sse_headers(handler)


def _events_then_close(handler: BaseHTTPRequestHandler) -> None:
    sse_headers(handler)
    send_data(handler, chunk({"content": "partial"}))


def test_an_empty_event_stream_is_told_apart_from_a_stream_cut_mid_reply() -> None:
    empty = _error(_empty_stream)
    assert empty.code == ProviderErrorCode.EMPTY_STREAM
    assert "no events" in empty.message and "before it finished" not in empty.message
    cut = _error(_events_then_close)
    assert cut.code == ProviderErrorCode.CONNECTION_LOST
    assert "before it finished" in cut.message


@pytest.mark.parametrize(
    ("error", "code", "words"),
    [
        ({"message": "template error: bad role", "type": "server_error"}, "http", "bad role"),
        ("plain words from the server", "http", "plain words"),
        (
            {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
            },
            "overflow",
            "exceeds the available context size",
        ),
    ],
)
def test_an_error_object_inside_the_stream_is_reported_in_its_words(
    error: Any, code: str, words: str
) -> None:
    def reply(handler: BaseHTTPRequestHandler) -> None:
        sse_headers(handler)
        handler.wfile.write(b"event: error\n")
        send_data(handler, json.dumps({"error": error}))

    caught = _error(reply)
    expected = (
        ProviderErrorCode.CONTEXT_OVERFLOW if code == "overflow" else ProviderErrorCode.HTTP_ERROR
    )
    assert caught.code == expected
    assert words in caught.message
    assert "None" not in caught.message


# ---- 4. a context overflow is named as such ----------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"message": "Requested tokens (4100) exceed context window of 2048"}},
        {
            "error": {
                "message": "This model's maximum context length is 8192 tokens. However, "
                "your messages resulted in 9000 tokens.",
                "code": "context_length_exceeded",
            }
        },
        {"detail": "Requested tokens (700) exceed context window of 512"},
    ],
)
def test_an_http_context_overflow_gets_its_own_code_and_plain_words(body: Any) -> None:
    caught = _error(json_error(400, body))
    assert caught.code == ProviderErrorCode.CONTEXT_OVERFLOW
    assert "longer than the model's context window" in caught.message


def test_ordinary_errors_are_not_mistaken_for_an_overflow() -> None:
    assert not is_context_overflow('{"error": {"message": "model not found"}}')
    assert not is_context_overflow("Internal Server Error")


# ---- 5. a stream stalled behind keep-alive comments --------------------------------------------


def test_keep_alive_comments_do_not_keep_a_stalled_stream_alive_forever() -> None:
    stop = threading.Event()

    def reply(handler: BaseHTTPRequestHandler) -> None:
        sse_headers(handler)
        send_data(handler, chunk({"content": "thinking"}))
        for _ in range(60):  # 6 s of pings, then the server gives up
            if stop.is_set():
                return
            handler.wfile.write(b": ping\n\n")
            handler.wfile.flush()
            time.sleep(0.1)

    with chat_server([reply]) as server:
        provider = _provider(server, read_timeout=0.5, data_timeout=1.0)
        started = time.monotonic()
        events: list[Any] = []
        with pytest.raises(ProviderError) as caught:
            events.extend(provider.stream(REQUEST, CancelToken()))
        elapsed = time.monotonic() - started
        stop.set()
    assert caught.value.code == ProviderErrorCode.TIMEOUT
    assert (
        "keep-alive" in caught.value.message and "MAKA_OPENAI_DATA_TIMEOUT" in caught.value.message
    )
    assert elapsed < 4


def test_prompt_processing_pings_shorter_than_the_data_timeout_are_fine() -> None:
    def reply(handler: BaseHTTPRequestHandler) -> None:
        sse_headers(handler)
        for _ in range(8):
            handler.wfile.write(b": ping\n\n")
            handler.wfile.flush()
            time.sleep(0.1)
        send_data(handler, chunk({"content": "done"}, finish="stop"))

    with chat_server([reply]) as server:
        provider = _provider(server, read_timeout=0.5, data_timeout=5.0)
        events = list(provider.stream(REQUEST, CancelToken()))
    assert events == [TextDelta("done"), Finished("end_turn")]


def test_the_data_timeout_is_configured_and_never_below_the_read_timeout() -> None:
    base = {"MAKA_MODEL": "m", "MAKA_OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}
    provider = build_provider("openai", {**base, "MAKA_OPENAI_DATA_TIMEOUT": "900"})
    assert provider._settings.data_timeout == 900  # type: ignore[attr-defined]
    with pytest.raises(ProviderError) as caught:
        build_provider(
            "openai", {**base, "MAKA_OPENAI_TIMEOUT": "60", "MAKA_OPENAI_DATA_TIMEOUT": "30"}
        )
    assert caught.value.code == ProviderErrorCode.CONFIG_INVALID
    assert "MAKA_OPENAI_DATA_TIMEOUT" in caught.value.message
    with pytest.raises(ProviderError):
        build_provider("openai", {**base, "MAKA_OPENAI_DATA_TIMEOUT": "soon"})


# ---- 6. long error bodies and FastAPI bodies ---------------------------------------------------


def test_an_error_body_longer_than_two_kilobytes_is_parsed_not_shown_raw() -> None:
    body = {"error": {"message": "the chat template failed", "trace": "x" * 5000}}
    caught = _error(json_error(500, body))
    assert caught.code == ProviderErrorCode.HTTP_ERROR
    assert caught.message.endswith("the chat template failed")
    assert "trace" not in caught.message and "{" not in caught.message


def test_fastapi_detail_bodies_are_read() -> None:
    caught = _error(json_error(500, {"detail": "Model is still loading"}))
    assert caught.message.endswith("Model is still loading")
    validation = {
        "detail": [
            {
                "loc": ["body", "messages", 1, "content"],
                "msg": "Input should be a valid string",
                "type": "string_type",
            }
        ]
    }
    caught = _error(json_error(422, validation))
    assert "body.messages.1.content: Input should be a valid string" in caught.message


def test_a_long_error_message_is_cut_only_for_display() -> None:
    shown = error_message(json.dumps({"error": {"message": "word " * 400}}))
    assert len(shown) <= 300 and shown.startswith("word word") and shown.endswith("…")


# ---- 7. arguments and results in one serialization ---------------------------------------------


def test_tool_arguments_and_results_are_serialized_independent_of_key_order() -> None:
    live = (
        UserText("go"),
        ToolCall("c1", "write_file", {"path": "a.txt", "content": "é", "n": 1.0}),
        ToolResult("c1", "write_file", {"path": "a.txt", "bytesWritten": 2}),
    )
    rebuilt = (
        UserText("go"),
        ToolCall("c1", "write_file", {"content": "é", "n": 1, "path": "a.txt"}),
        ToolResult("c1", "write_file", {"bytesWritten": 2, "path": "a.txt"}),
    )
    assert json.dumps(messages_from_history("s", live)) == json.dumps(
        messages_from_history("s", rebuilt)
    )


# ---- 8. tool_choice ------------------------------------------------------------------------------


def test_tool_choice_auto_is_sent_whenever_tools_are_offered() -> None:
    with chat_server([text_reply("hi")]) as server:
        provider = _provider(server)
        list(provider.stream(REQUEST, CancelToken()))
        list(provider.stream(ProviderRequest("s", (UserText("hi"),)), CancelToken()))
        with_tools, without = server.requests()
    assert with_tools["tool_choice"] == "auto" and with_tools["tools"]
    assert "tool_choice" not in without and "tools" not in without


def test_tool_choice_can_be_left_out_for_servers_that_refuse_it() -> None:
    base = {"MAKA_MODEL": "m", "MAKA_OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}
    off = build_provider("openai", {**base, "MAKA_OPENAI_TOOL_CHOICE": "off"})
    assert isinstance(off, OpenAICompatibleProvider)
    body = json.loads(off.request_body(REQUEST))
    assert body["tools"] and "tool_choice" not in body
    with pytest.raises(ProviderError) as caught:
        build_provider("openai", {**base, "MAKA_OPENAI_TOOL_CHOICE": "always"})
    assert caught.value.code == ProviderErrorCode.CONFIG_INVALID


def test_a_tool_call_cut_off_by_the_length_limit_says_so() -> None:
    def reply(handler: BaseHTTPRequestHandler) -> None:
        sse_headers(handler)
        call = {"index": 0, "id": "c", "function": {"name": "read_file", "arguments": '{"pa'}}
        send_data(handler, chunk({"tool_calls": [call]}, finish="length"))
        send_data(handler, "[DONE]")

    caught = _error(reply)
    assert caught.code == ProviderErrorCode.MALFORMED_STREAM
    assert "length limit" in caught.message and "read_file" in caught.message


def test_a_configured_context_size_refuses_an_oversized_request_without_sending_it() -> None:
    big = ProviderRequest("be brief", (UserText("word " * 2000),), TOOLS)
    with chat_server([text_reply("hi")]) as server:
        provider = _provider(server, context_tokens=1000)
        with pytest.raises(ProviderError) as caught:
            list(provider.stream(big, CancelToken()))
        assert server.bodies == []
        assert list(provider.stream(REQUEST, CancelToken()))[-1] == Finished("end_turn")
    assert caught.value.code == ProviderErrorCode.CONTEXT_OVERFLOW
    assert "MAKA_OPENAI_CONTEXT_TOKENS" in caught.value.message
    base = {"MAKA_MODEL": "m", "MAKA_OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}
    configured = build_provider("openai", {**base, "MAKA_OPENAI_CONTEXT_TOKENS": "8192"})
    assert configured._settings.context_tokens == 8192  # type: ignore[attr-defined]
    with pytest.raises(ProviderError):
        build_provider("openai", {**base, "MAKA_OPENAI_CONTEXT_TOKENS": "-5"})
