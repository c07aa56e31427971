"""Values an OpenAI-compatible server sends that no ledger event may hold never reach a turn.

A usage count outside 0..2^53-1 (or not an integer) is read as not reported; a lone surrogate
(``"\\ud800"`` as a JSON escape) in any text the server sends (the reply, its reasoning, a tool
call's id, name and arguments, an error message) becomes U+FFFD where the provider decodes it.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest

from runtime.base.cancel_token import CancelToken
from runtime.ledger.canonical_codec import canonical_json_bytes
from runtime.providers.openai_compatible_provider import OpenAICompatibleProvider, OpenAISettings
from runtime.providers.openai_errors import error_message
from runtime.providers.provider_port import (
    Finished,
    ProviderError,
    ProviderRequest,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallReady,
    Usage,
    UserText,
)
from runtime.providers.server_text import LEDGER_INT_MAX, server_json
from runtime.providers.sse_stream_codec import ChunkAssembler
from tests.helpers.chat_server import chat_server, json_error, send_data, sse_headers

LONE = "\\ud800"  # a JSON escape naming half of a surrogate pair
REPLACED = "\ufffd"


def _feed(*payloads: str) -> tuple[list[StreamEvent], list[ToolCallReady]]:
    assembler = ChunkAssembler()
    events = [event for payload in payloads for event in assembler.feed(payload)]
    return events, assembler.finish()


def _usage(prompt: str, completion: str) -> str:
    usage = f'{{"prompt_tokens": {prompt}, "completion_tokens": {completion}}}'
    return f'{{"choices": [], "usage": {usage}}}'


@pytest.mark.parametrize(
    ("prompt", "completion", "expected"),
    [
        ("100000000000000000000", "3", Usage(0, 3)),
        (str(LEDGER_INT_MAX + 1), str(-(2**60)), Usage(0, 0)),
        (str(LEDGER_INT_MAX), "-5", Usage(LEDGER_INT_MAX, 0)),
        ("1.5", '"12"', Usage(0, 0)),
        ("1e400", "true", Usage(0, 0)),
        ("7", "11", Usage(7, 11)),
    ],
)
def test_a_usage_count_no_ledger_event_can_hold_is_read_as_not_reported(
    prompt: str, completion: str, expected: Usage
) -> None:
    events, _ = _feed(_usage(prompt, completion))
    assert events == [expected]
    canonical_json_bytes({"input": expected.input_tokens, "output": expected.output_tokens})


def test_lone_surrogates_in_text_reasoning_and_tool_calls_become_replacement_characters() -> None:
    delta = (
        f'{{"content": "a{LONE}b", "reasoning_content": "r{LONE}", "reasoning": "\\udc00s",'
        f' "tool_calls": [{{"index": 0, "id": "call{LONE}", "function": {{"name": "list{LONE}",'
        f' "arguments": "{{\\"path\\": \\"x{LONE}\\", \\"y\\": \\"\\\\ud800\\"}}"}}}}]}}'
    )
    payload = f'{{"choices": [{{"index": 0, "delta": {delta}, "finish_reason": "tool_calls"}}]}}'
    events, calls = _feed(payload)
    assert events == [
        ThinkingDelta(f"r{REPLACED}"),
        ThinkingDelta(f"{REPLACED}s"),
        TextDelta(f"a{REPLACED}b"),
    ]
    # The arguments' own JSON may escape a lone surrogate too (``\\ud800`` inside the string).
    assert calls == [
        ToolCallReady(f"call{REPLACED}", f"list{REPLACED}", {"path": f"x{REPLACED}", "y": REPLACED})
    ]
    for event in events:
        assert isinstance(event, (TextDelta, ThinkingDelta))
        event.text.encode("utf-8")  # no UnicodeEncodeError
    canonical_json_bytes(calls[0].args)


def test_a_proper_surrogate_pair_is_kept_as_its_character() -> None:
    payload = '{"choices": [{"index": 0, "delta": {"content": "\\ud83d\\ude00 \\udc00\\ud800"}}]}'
    events, _ = _feed(payload)
    assert events == [TextDelta(f"\U0001f600 {REPLACED}{REPLACED}")]


def test_server_json_cleans_object_keys_and_nested_lists() -> None:
    value = server_json(f'{{"k{LONE}": [["{LONE}"], {{"n": 1}}], "plain": "\\u00e9"}}')
    assert value == {f"k{REPLACED}": [[REPLACED], {"n": 1}], "plain": "\u00e9"}


def test_a_lone_surrogate_in_an_error_body_is_replaced() -> None:
    message = error_message(json.dumps({"error": {"message": "bad \ud800 request"}}))
    assert message == f"bad {REPLACED} request"
    message.encode("utf-8")


def _hostile(handler: BaseHTTPRequestHandler) -> None:
    sse_headers(handler)
    send_data(handler, f'{{"choices": [{{"index": 0, "delta": {{"content": "hi{LONE}"}}}}]}}')
    send_data(handler, '{"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}')
    send_data(handler, _usage("100000000000000000000", "-1"))
    send_data(handler, "[DONE]")


def _stream(url: str) -> list[StreamEvent]:
    provider = OpenAICompatibleProvider(OpenAISettings(base_url=url, model="m", read_timeout=5))
    request = ProviderRequest("", (UserText("hello"),))
    return list(provider.stream(request, CancelToken()))


def test_the_provider_passes_on_only_values_a_ledger_event_can_hold() -> None:
    with chat_server([_hostile]) as server:
        events = _stream(server.base_url)
    assert events == [TextDelta(f"hi{REPLACED}"), Usage(0, 0), Finished("end_turn")]


def test_a_lone_surrogate_in_an_http_error_message_is_replaced() -> None:
    body = ('{"error": {"message": "no such model ' + LONE + '"}}').encode()
    with chat_server([json_error(400, body)]) as server, pytest.raises(ProviderError) as caught:
        _stream(server.base_url)
    assert f"no such model {REPLACED}" in caught.value.message
    caught.value.message.encode("utf-8")
