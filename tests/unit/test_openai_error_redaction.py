"""A server's text quoted in an error is redacted before it is cut, never after.

Each case places the API key where the old cut (300 characters of an error message, 120 of a
chunk that is not JSON) split it: redacting the cut text could no longer recognise the key, and a
prefix of it (``sk-proj-ABCDEFGHIJKLMNOPQRSTUV…``) was shown and committed to the ledger.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest

from runtime.base.cancel_token import CancelToken
from runtime.providers.openai_compatible_provider import OpenAICompatibleProvider, OpenAISettings
from runtime.providers.openai_errors import error_message, quoted
from runtime.providers.provider_port import ProviderError, ProviderRequest, UserText
from runtime.providers.secret_redaction import REDACTED
from runtime.providers.sse_stream_codec import ChunkAssembler
from tests.helpers.chat_server import Reply, chat_server, json_error, send_data, sse_headers

KEY = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdef"


def _no_prefix_of_the_key(text: str) -> None:
    assert KEY[:8] not in text  # so no prefix of 8 characters or more either


def _padded(length: int) -> str:
    return ("x" * (length - 1)) + " "


def _stream_error(*payloads: str) -> ProviderError:
    assembler = ChunkAssembler(secrets=(KEY,))
    with pytest.raises(ProviderError) as caught:
        for payload in payloads:
            list(assembler.feed(payload))
    return caught.value


def test_quoted_redacts_then_cuts() -> None:
    text = _padded(100) + KEY
    shown = quoted(text, 120, (KEY,))
    _no_prefix_of_the_key(shown)
    assert shown == _padded(100) + REDACTED


@pytest.mark.parametrize("at", [260, 280, 295])
def test_an_error_message_with_the_key_across_the_cut_shows_no_part_of_it(at: int) -> None:
    body = json.dumps({"error": {"message": _padded(at) + KEY + " was refused"}})
    shown = error_message(body, (KEY,))
    _no_prefix_of_the_key(shown)
    assert len(shown) <= 300


def test_a_plain_text_error_body_with_the_key_across_the_cut_shows_no_part_of_it() -> None:
    shown = error_message(_padded(270) + KEY, (KEY,))
    _no_prefix_of_the_key(shown)
    assert REDACTED in shown


def test_a_chunk_that_is_not_json_is_quoted_without_any_part_of_the_key() -> None:
    error = _stream_error("not json " + _padded(90) + KEY)
    assert "is not JSON" in error.message
    _no_prefix_of_the_key(error.message)


def test_an_in_stream_error_without_a_message_is_quoted_without_any_part_of_the_key() -> None:
    error = _stream_error(json.dumps({"error": [_padded(270) + KEY]}))
    _no_prefix_of_the_key(error.message)


def _provider(url: str) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(
        OpenAISettings(base_url=url, model="m", api_key=KEY, read_timeout=5)
    )


def _bad_chunk(handler: BaseHTTPRequestHandler) -> None:
    sse_headers(handler)
    send_data(handler, "oops " + _padded(100) + KEY)


@pytest.mark.parametrize(
    "reply",
    [
        json_error(401, {"error": {"message": _padded(260) + KEY}}),
        json_error(500, (_padded(280) + KEY).encode()),
        _bad_chunk,
    ],
    ids=["http_401_json", "http_500_text", "stream_chunk_not_json"],
)
def test_the_provider_never_shows_a_prefix_of_the_key(reply: Reply) -> None:
    request = ProviderRequest("", (UserText("hi"),))
    with chat_server([reply]) as server, pytest.raises(ProviderError) as caught:
        list(_provider(server.base_url).stream(request, CancelToken()))
    _no_prefix_of_the_key(caught.value.message)
    assert REDACTED in caught.value.message
