"""Parallel tool calls told apart by their ids. Some OpenAI-compatible servers send each call
whole in its own chunk with its own ``id``, name and arguments, and no ``index``; others give
every call index 0. A fragment with a new id starts a new call; one without an id (or with the
current call's) continues the call it names."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from typing import Any

from runtime.base.cancel_token import CancelToken
from runtime.providers.openai_compatible_provider import OpenAICompatibleProvider, OpenAISettings
from runtime.providers.provider_port import (
    Finished,
    ProviderRequest,
    ToolCallReady,
    UserText,
)
from runtime.providers.sse_stream_codec import ChunkAssembler
from tests.helpers.chat_server import chat_server, chunk, send_data, sse_headers


def _call(arguments: str, call_id: str | None = None, name: str | None = None) -> dict[str, Any]:
    fragment: dict[str, Any] = {"type": "function", "function": {"arguments": arguments}}
    if call_id is not None:
        fragment["id"] = call_id
    if name is not None:
        fragment["function"]["name"] = name
    return fragment


def _assemble(*fragments: dict[str, Any]) -> list[ToolCallReady]:
    assembler = ChunkAssembler()
    for fragment in fragments:
        list(assembler.feed(chunk({"tool_calls": [fragment]})))
    list(assembler.feed(chunk({}, finish="tool_calls")))
    return assembler.finish()


def test_two_whole_calls_without_index_are_two_calls() -> None:
    calls = _assemble(
        _call('{"path": "."}', "call_1", "list_dir"),
        _call('{"command": "ls"}', "call_2", "bash"),
    )
    assert calls == [
        ToolCallReady("call_1", "list_dir", {"path": "."}),
        ToolCallReady("call_2", "bash", {"command": "ls"}),
    ]


def test_a_fragment_without_index_or_id_continues_the_last_call() -> None:
    calls = _assemble(
        _call('{"path": ', "call_1", "list_dir"),
        _call('"."}'),
        _call('{"comm', "call_2", "bash"),
        _call('and": "ls"}'),
    )
    assert calls == [
        ToolCallReady("call_1", "list_dir", {"path": "."}),
        ToolCallReady("call_2", "bash", {"command": "ls"}),
    ]


def test_a_fragment_repeating_the_current_id_continues_its_call() -> None:
    calls = _assemble(
        _call('{"path": ', "call_1", "list_dir"),
        _call('"."}', "call_1"),
    )
    assert calls == [ToolCallReady("call_1", "list_dir", {"path": "."})]


def test_an_id_arriving_after_an_anonymous_opening_names_that_call() -> None:
    calls = _assemble(_call("", name="bash"), _call('{"command": "ls"}', "call_9"))
    assert calls == [ToolCallReady("call_9", "bash", {"command": "ls"})]


def test_indexed_fragments_are_assembled_by_index_as_before() -> None:
    calls = _assemble(
        {"index": 0, "id": "a", "function": {"name": "list_dir", "arguments": '{"path"'}},
        {"index": 1, "id": "b", "function": {"name": "bash", "arguments": '{"command": "ls"}'}},
        {"index": 0, "function": {"arguments": ': "."}'}},
    )
    assert calls == [
        ToolCallReady("a", "list_dir", {"path": "."}),
        ToolCallReady("b", "bash", {"command": "ls"}),
    ]


def _parallel_without_index(handler: BaseHTTPRequestHandler) -> None:
    sse_headers(handler)
    send_data(handler, chunk({"role": "assistant", "content": None}))
    send_data(handler, chunk({"tool_calls": [_call('{"path": "."}', "call_a", "list_dir")]}))
    send_data(handler, chunk({"tool_calls": [_call('{"command": "ls"}', "call_b", "bash")]}))
    send_data(handler, chunk({}, finish="tool_calls"))
    send_data(handler, "[DONE]")


def test_the_provider_streams_parallel_calls_without_index_as_separate_calls() -> None:
    with chat_server([_parallel_without_index]) as server:
        provider = OpenAICompatibleProvider(
            OpenAISettings(base_url=server.base_url, model="m", read_timeout=5)
        )
        events = list(provider.stream(ProviderRequest("", (UserText("hi"),)), CancelToken()))
    assert events == [
        ToolCallReady("call_a", "list_dir", {"path": "."}),
        ToolCallReady("call_b", "bash", {"command": "ls"}),
        Finished("tool_calls"),
    ]


def _indexed(
    index: int, arguments: str, call_id: str | None = None, name: str | None = None
) -> Any:
    return {**_call(arguments, call_id, name), "index": index}


def test_parallel_calls_all_given_index_0_are_told_apart_by_their_ids() -> None:
    """Some servers give every parallel call index 0, each with its own id: they were merged
    into one call (``list_dirbash``) whose arguments were not JSON."""
    calls = _assemble(
        _indexed(0, '{"path": ', "call_1", "list_dir"),
        _indexed(0, '"."}'),
        _indexed(0, '{"command": "ls"}', "call_2", "bash"),
    )
    assert calls == [
        ToolCallReady("call_1", "list_dir", {"path": "."}),
        ToolCallReady("call_2", "bash", {"command": "ls"}),
    ]


def test_indexed_calls_as_openai_streams_them_are_unchanged() -> None:
    """The id once, on a call's first fragment; a server repeating it on every fragment too."""
    calls = _assemble(
        _indexed(0, "", "call_1", "list_dir"),
        _indexed(1, "", "call_2", "bash"),
        _indexed(0, '{"path": "."}'),
        _indexed(1, '{"command": "ls"}', "call_2"),
    )
    assert calls == [
        ToolCallReady("call_1", "list_dir", {"path": "."}),
        ToolCallReady("call_2", "bash", {"command": "ls"}),
    ]
