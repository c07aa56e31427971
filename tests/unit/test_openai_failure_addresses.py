"""Every failure of the OpenAI-compatible provider names the address it tried
(``scheme://host:port/path/chat/completions``, never a password or a query), and a 429 or 503
with ``Retry-After`` says how long the server asks to wait, without waiting or retrying."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from runtime.base.cancel_token import CancelToken
from runtime.providers.openai_compatible_provider import (
    OpenAICompatibleProvider,
    OpenAISettings,
    data_deadline,
    retry_after_seconds,
)
from runtime.providers.provider_port import (
    ProviderError,
    ProviderErrorCode,
    ProviderRequest,
    UserText,
)
from tests.helpers.chat_server import Reply, chat_server, chunk, json_error, send_data, sse_headers

REQUEST = ProviderRequest("", (UserText("hi"),))


def _failure(reply: Reply, **settings: Any) -> tuple[ProviderError, str, int, float]:
    """The error, the URL the provider posted to, how many requests the server got, and how
    long the call took."""
    with chat_server([reply]) as server:
        url = server.base_url.replace("http://", "http://user:pw@") + "/"
        provider = OpenAICompatibleProvider(
            OpenAISettings(base_url=url, model="m", read_timeout=5, **settings)
        )
        started = time.monotonic()
        with pytest.raises(ProviderError) as caught:
            list(provider.stream(REQUEST, CancelToken()))
        elapsed = time.monotonic() - started
        asked = len(server.bodies)
    assert "pw" not in caught.value.message and "user:" not in caught.value.message
    return caught.value, f"{server.base_url}/chat/completions", asked, elapsed


def _status(status: int, **headers: str) -> Reply:
    def reply(handler: BaseHTTPRequestHandler) -> None:
        body = b'{"error": {"message": "not now"}}'
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            handler.send_header(name.replace("_", "-"), value)
        handler.end_headers()
        handler.wfile.write(body)

    return reply


def test_a_404_names_the_address_tried() -> None:
    error, url, _, _ = _failure(json_error(404, {"error": {"message": "no such route"}}))
    assert error.code == ProviderErrorCode.HTTP_ERROR
    assert f"the model server at {url} answered HTTP 404" in error.message
    assert "MAKA_OPENAI_BASE_URL" in error.message and "no such route" in error.message


@pytest.mark.parametrize("status", [401, 500])
def test_other_http_errors_name_the_address_tried(status: int) -> None:
    error, url, _, _ = _failure(json_error(status, {"error": {"message": "nope"}}))
    assert f"the model server at {url} answered HTTP {status}" in error.message


def test_a_429_with_retry_after_says_the_wait_and_neither_waits_nor_retries() -> None:
    error, url, asked, elapsed = _failure(_status(429, Retry_After="30"))
    assert error.code == ProviderErrorCode.HTTP_ERROR
    assert f"the model server at {url} answered HTTP 429" in error.message
    assert "the server asks to retry after 30 seconds" in error.message
    assert "not now" in error.message
    assert asked == 1 and elapsed < 5


def test_a_503_with_a_retry_after_date_says_the_wait_in_seconds() -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)
    error, url, asked, _ = _failure(_status(503, Retry_After=when))
    assert f"the model server at {url} answered HTTP 503" in error.message
    assert "the server asks to retry after 1" in error.message  # 119 or 120 seconds
    assert asked == 1


@pytest.mark.parametrize(
    ("after", "said"),
    [
        (timedelta(hours=5), "retry after 5.0 hours"),
        (timedelta(days=30000), "retry after 2"),  # a date: "2108-...-... UTC"
    ],
)
def test_a_long_retry_after_is_said_in_hours_or_as_the_date_it_names(
    after: timedelta, said: str
) -> None:
    """``Retry-After: Wed, 21 Oct 2099 ...`` was said as "retry after 2299587978 seconds"."""
    when = format_datetime(datetime.now(UTC) + after + timedelta(seconds=30), usegmt=True)
    error, _, _, _ = _failure(_status(503, Retry_After=when))
    assert said in error.message, error.message
    assert "seconds" not in error.message, error.message
    if after.days > 1:
        assert " UTC)" in error.message, error.message


def test_a_429_without_retry_after_says_no_wait() -> None:
    error, _, _, _ = _failure(_status(429))
    assert "retry after" not in error.message


def test_retry_after_values() -> None:
    assert retry_after_seconds(None) is None
    assert retry_after_seconds(" 7 ") == 7
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds("-3") is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=lambda: 1445412470.0) == 10


def _bad_chunk(handler: BaseHTTPRequestHandler) -> None:
    sse_headers(handler)
    send_data(handler, "oops")


def _bad_utf8(handler: BaseHTTPRequestHandler) -> None:
    sse_headers(handler)
    handler.wfile.write(b'data: {"choices": [{"delta": {"content": "\xff"}}]}\n\n')
    handler.wfile.flush()


def _in_stream_error(handler: BaseHTTPRequestHandler) -> None:
    sse_headers(handler)
    send_data(handler, '{"error": {"message": "the model crashed"}}')


def _bad_arguments(handler: BaseHTTPRequestHandler) -> None:
    sse_headers(handler)
    call = {"index": 0, "id": "c", "function": {"name": "bash", "arguments": "{nope"}}
    send_data(handler, chunk({"tool_calls": [call]}, finish="tool_calls"))


@pytest.mark.parametrize(
    ("reply", "code", "words"),
    [
        (_bad_chunk, ProviderErrorCode.MALFORMED_STREAM, "is not JSON"),
        (_bad_utf8, ProviderErrorCode.MALFORMED_STREAM, "not valid UTF-8"),
        (_in_stream_error, ProviderErrorCode.HTTP_ERROR, "the model crashed"),
        (_bad_arguments, ProviderErrorCode.MALFORMED_STREAM, "not valid JSON"),
    ],
    ids=["chunk_not_json", "invalid_utf8", "error_in_stream", "arguments_not_json"],
)
def test_stream_failures_name_the_address(
    reply: Reply, code: ProviderErrorCode, words: str
) -> None:
    error, url, _, _ = _failure(reply)
    assert error.code == code
    assert words in error.message and url in error.message


def test_the_keep_alive_timeout_names_the_address() -> None:
    clock = iter([0.0, 0.0, 100.0])

    def lines() -> Iterator[bytes]:
        yield b"data: {}\n"
        yield b": ping\n"

    url = "http://127.0.0.1:8080/v1/chat/completions"
    with pytest.raises(ProviderError) as caught:
        list(data_deadline(lines(), 10, lambda: next(clock), endpoint=url))
    assert caught.value.code == ProviderErrorCode.TIMEOUT
    assert f"the model server at {url} sent only keep-alive comments" in caught.value.message


def test_the_keep_alive_timeout_of_a_live_stream_names_the_address() -> None:
    def reply(handler: BaseHTTPRequestHandler) -> None:
        sse_headers(handler)
        send_data(handler, chunk({"content": "thinking"}))
        for _ in range(30):
            handler.wfile.write(b": ping\n\n")
            handler.wfile.flush()
            time.sleep(0.1)

    error, url, _, _ = _failure(reply, data_timeout=0.5)
    assert error.code == ProviderErrorCode.TIMEOUT
    assert f"the model server at {url} sent only keep-alive comments" in error.message


@pytest.mark.parametrize("said_first", [True, False])
def test_a_server_that_stalls_says_whether_it_had_answered(said_first: bool) -> None:
    """A server that sent part of its reply and then nothing: "did not answer within 1 s" was
    untrue (the user had just seen its words). Silent from the start, it did not answer."""

    def reply(handler: BaseHTTPRequestHandler) -> None:
        sse_headers(handler)
        if said_first:
            send_data(handler, chunk({"content": "partial "}))
        time.sleep(4)

    with chat_server([reply]) as server:
        provider = OpenAICompatibleProvider(
            OpenAISettings(base_url=server.base_url, model="m", read_timeout=1)
        )
        with pytest.raises(ProviderError) as caught:
            list(provider.stream(REQUEST, CancelToken()))
    assert caught.value.code == ProviderErrorCode.TIMEOUT
    message = caught.value.message
    if said_first:
        assert "stopped sending in the middle of its reply: nothing came for 1 s" in message
        assert "did not answer" not in message
    else:
        assert "did not answer within 1 s (MAKA_OPENAI_TIMEOUT)" in message
