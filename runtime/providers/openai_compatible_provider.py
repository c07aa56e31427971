"""An OpenAI-compatible chat-completions provider (Ollama, llama.cpp server, vLLM, hosted APIs).

Streaming with tool calls over plain ``http.client``: no SDK, so every failure mode is ours to
handle. Each socket read is bounded by ``read_timeout`` seconds; the time between *data* events
is bounded separately by ``data_timeout`` (larger: a server processing a long prompt sends only
keep-alive comments, which reset the socket timeout but are no progress). Cancellation closes the
socket from the cancelling thread, and every failure (HTTP status, timeout, dropped connection,
malformed chunk, an ``error`` object in the stream) becomes a ``ProviderError`` with a readable
message that names the URL tried.

How a stream ends matters. A body cut short (a chunked body without its terminating chunk, or
fewer bytes than its ``Content-Length``) is a connection that was cut: the server stopped or the
network dropped, whether or not events came first. A body that ended properly without ``[DONE]``
and without a finish reason is a dropped reply when events came first, and a refused request
when none came at all (some servers report a context overflow or a template error that way,
after the 200 headers). An empty reply ended by the server's content filter
(``finish_reason: "content_filter"``) says so; otherwise the ``tool_choice`` hint is given
only when the request carried it.
Settings and environment variables: ``docs/providers.md``.
"""

from __future__ import annotations

import contextlib
import email.utils
import http.client
import json
import math
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from runtime.base.cancel_token import CancelToken
from runtime.providers.openai_errors import ERROR_BODY_LIMIT, error_message, is_context_overflow
from runtime.providers.openai_messages import messages_from_history
from runtime.providers.provider_port import (
    Finished,
    ProviderError,
    ProviderErrorCode,
    ProviderRequest,
    StreamEvent,
    TextDelta,
    tool_call_stub,
)
from runtime.providers.secret_redaction import redacted_error
from runtime.providers.server_tokens import ServerTokens
from runtime.providers.sse_stream_codec import ChunkAssembler, sse_data_payloads
from runtime.providers.token_estimate import estimated_tokens

__all__ = ["OpenAICompatibleProvider", "OpenAISettings", "messages_from_history"]

DEFAULT_READ_TIMEOUT = 120.0
DEFAULT_DATA_TIMEOUT = 600.0
TOOL_CHOICE_OFF = (
    "set MAKA_OPENAI_TOOL_CHOICE=off, or Tool choice: off in the desktop's Settings "
    "(docs/providers.md)"
)

CONTENT_FILTER = "content_filter"
CONTENT_FILTER_HINT = (
    'the server\'s content filter stopped the reply (finish_reason "content_filter"), so '
    "nothing the model wrote was let through; rephrasing the message may help"
)


@dataclass(frozen=True, slots=True)
class OpenAISettings:
    base_url: str
    model: str
    api_key: str | None = None
    connect_timeout: float = 15.0
    read_timeout: float = DEFAULT_READ_TIMEOUT
    data_timeout: float = DEFAULT_DATA_TIMEOUT
    """Longest wait between two data events (keep-alive comments do not count)."""
    context_tokens: int | None = None
    """The model's context size, when configured: a request counted above it is not sent
    (for servers that report an overflow only in their log)."""
    send_tool_choice: bool = True
    """``tool_choice: "auto"`` goes with the tools (some servers enable tool calling only then;
    a few, such as llama-cpp-python's ``chatml-function-calling`` format, refuse it when
    streaming or answer every plain turn empty: ``MAKA_OPENAI_TOOL_CHOICE=off`` leaves it out)."""


class OpenAICompatibleProvider:
    def __init__(self, settings: OpenAISettings) -> None:
        parts = urlsplit(settings.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ProviderError(
                ProviderErrorCode.CONFIG_INVALID,
                f"MAKA_OPENAI_BASE_URL must be an http(s) URL, got {settings.base_url!r}",
            )
        try:
            parts.port  # noqa: B018 - urlsplit checks the port only when it is read
        except ValueError:
            raise ProviderError(
                ProviderErrorCode.CONFIG_INVALID,
                f"MAKA_OPENAI_BASE_URL has an invalid port: {settings.base_url!r}",
            ) from None
        if not settings.model:
            raise ProviderError(
                ProviderErrorCode.CONFIG_INVALID, "no model configured (set MAKA_MODEL)"
            )
        self._settings = settings
        self._parts = parts
        self._endpoint = shown_url(settings.base_url, "/chat/completions")
        self._server = ServerTokens(
            settings.base_url, settings.model, settings.api_key, settings.connect_timeout
        )

    @property
    def name(self) -> str:
        return "openai"

    @property
    def label(self) -> str:
        return f"{self._settings.model} via {self._parts.hostname}"

    def _connection(self) -> http.client.HTTPConnection:
        host = self._parts.hostname or ""
        timeout = self._settings.connect_timeout
        if self._parts.scheme == "https":
            return http.client.HTTPSConnection(
                host, self._parts.port, timeout=timeout, context=ssl.create_default_context()
            )
        return http.client.HTTPConnection(host, self._parts.port, timeout=timeout)

    def request_body(self, request: ProviderRequest) -> bytes:
        """The exact bytes POSTed for ``request`` (the same for a live turn and a rebuilt one)."""
        return json.dumps(self._document(request)).encode("utf-8")

    def _document(self, request: ProviderRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._settings.model,
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": messages_from_history(request.system_prompt, request.history),
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": dict(tool.parameters),
                    },
                }
                for tool in request.tools
            ]
            if self._settings.send_tool_choice:
                body["tool_choice"] = "auto"
        return body

    def stream(self, request: ProviderRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        try:
            yield from self._stream(request, cancel)
        except ProviderError as error:  # a server may echo the key: never pass it on
            raise redacted_error(error, (self._settings.api_key,)) from None

    def _stream(self, request: ProviderRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        try:
            exchange = _Exchange(self._connection())
        except (http.client.HTTPException, OSError, ValueError) as error:
            raise self._connection_failed(error) from None
        unregister = cancel.on_cancel(exchange.abort)
        try:
            yield from self._exchange(exchange, request, cancel)
        except ProviderError:
            raise
        except TimeoutError:
            self._raise_if_cancelled(cancel)
            waited = f"{self._settings.read_timeout:g} s (MAKA_OPENAI_TIMEOUT)"
            said = (
                # It did answer: what was shown of the reply came, then nothing more.
                f"stopped sending in the middle of its reply: nothing came for {waited}"
                if exchange.events
                else f"did not answer within {waited}"
            )
            raise ProviderError(
                ProviderErrorCode.TIMEOUT, f"the model server at {self._endpoint} {said}"
            ) from None
        except (http.client.HTTPException, OSError, ValueError) as error:
            self._raise_if_cancelled(cancel)
            raise self._connection_failed(error) from None
        finally:
            unregister()
            exchange.close()

    def _connection_failed(self, error: BaseException) -> ProviderError:
        if isinstance(error, http.client.IncompleteRead):
            return self._cut(events=None)
        return ProviderError(
            ProviderErrorCode.CONNECTION_LOST,
            f"the connection to the model server at {self._endpoint} failed: {_describe(error)}",
        )

    def _cut(self, events: int | None) -> ProviderError:
        when = (
            "before it sent any event"
            if events == 0
            else "in the middle of the reply"
            if events
            else "before the reply ended"
        )
        return ProviderError(
            ProviderErrorCode.CONNECTION_LOST,
            f"the connection to the model server at {self._endpoint} was cut {when} (the server "
            "stopped or the network dropped); the server's log may say why",
        )

    def _check_context(self, document: dict[str, Any], body: bytes, cancel: CancelToken) -> None:
        """Refuse, unsent, a request longer than the model's context: the size configured, else
        the one the server reports; the tokens as the server counts them, else estimated."""
        configured = self._settings.context_tokens
        limit = configured if configured is not None else self._server.context_tokens(cancel)
        if limit is None:
            return
        counted = self._server.count(document, cancel)
        if counted is None:
            counted = estimated_tokens(body)
            how = f"about {counted} tokens by a cautious estimate"
        else:
            how = f"{counted} tokens as the server counts them"
        if counted > limit:
            source = (
                f"the {limit} of MAKA_OPENAI_CONTEXT_TOKENS"
                if configured is not None
                else f"the server's context size of {limit}"
            )
            raise ProviderError(
                ProviderErrorCode.CONTEXT_OVERFLOW,
                f"the request is longer than the model's context window ({how}, more than "
                f"{source}); it was not sent",
            )

    def _tool_choice_sent(self, request: ProviderRequest) -> bool:
        return bool(request.tools) and self._settings.send_tool_choice

    @staticmethod
    def _raise_if_cancelled(cancel: CancelToken) -> None:
        if cancel.is_cancelled():
            raise ProviderError(ProviderErrorCode.CANCELLED, "the turn was cancelled")

    def _exchange(
        self, exchange: _Exchange, request: ProviderRequest, cancel: CancelToken
    ) -> Iterator[StreamEvent]:
        connection = exchange.connection
        document = self._document(request)
        body = json.dumps(document).encode("utf-8")
        self._check_context(document, body, cancel)
        self._raise_if_cancelled(cancel)
        path = (self._parts.path.rstrip("/") or "") + "/chat/completions"
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self._settings.api_key:
            headers["Authorization"] = f"Bearer {self._settings.api_key}"
        connection.request("POST", path, body=body, headers=headers)
        # http.client forgets the socket once a response says "close"; keep it for abort().
        exchange.sock = connection.sock
        if exchange.sock is not None:
            exchange.sock.settimeout(self._settings.read_timeout)
        self._raise_if_cancelled(cancel)
        response = connection.getresponse()
        exchange.response = response
        if response.status != 200:
            raise _http_error(response, self._endpoint, (self._settings.api_key,))
        content_type = (response.getheader("Content-Type") or "").split(";")[0].strip().lower()
        if content_type and content_type != "text/event-stream":
            # A login page, a web UI, or a server that ignores "stream": true.
            raise ProviderError(
                ProviderErrorCode.MALFORMED_STREAM,
                f"the server at {self._endpoint} answered {content_type}, not a stream "
                "of chat completion events (text/event-stream); check MAKA_OPENAI_BASE_URL and "
                "that the server supports streaming",
            )
        assembler = ChunkAssembler(secrets=(self._settings.api_key,))
        lines = data_deadline(
            response_lines(response), self._settings.data_timeout, endpoint=self._endpoint
        )
        events = 0
        said: list[str] = []
        try:
            for payload in sse_data_payloads(lines):
                self._raise_if_cancelled(cancel)
                events += 1
                exchange.events = events
                for event in assembler.feed(payload):
                    if isinstance(event, TextDelta):
                        said.append(event.text)
                    yield event
                if assembler.done:
                    break
        except http.client.IncompleteRead:
            self._raise_if_cancelled(cancel)
            raise self._cut(events) from None
        except ProviderError as error:
            raise self._placed(error) from None
        self._raise_if_cancelled(cancel)
        if not assembler.done and assembler.finish_reason is None:
            raise self._unfinished_stream(events, self._tool_choice_sent(request))
        try:
            calls = assembler.finish()
        except ProviderError as error:
            raise self._placed(error) from None
        yield from calls
        reason = assembler.finish_reason or ("tool_calls" if calls else "end_turn")
        hint = None
        text = "".join(said)
        nothing_said = not text.strip() or tool_call_stub(text) is not None
        if nothing_said and not calls and assembler.finish_reason == CONTENT_FILTER:
            hint = CONTENT_FILTER_HINT
        elif nothing_said and not calls and self._tool_choice_sent(request):
            hint = (
                'the request carried tool_choice "auto", and some servers answer every plain '
                f"turn empty with it: {TOOL_CHOICE_OFF}"
            )
        yield Finished("end_turn" if reason == "stop" else reason, empty_reply_hint=hint)

    def _placed(self, error: ProviderError) -> ProviderError:
        """``error`` (from decoding the stream) naming the address it came from."""
        if error.code is ProviderErrorCode.CANCELLED or self._endpoint in error.message:
            return error
        return ProviderError(error.code, f"{error.message} (from {self._endpoint})")

    def _unfinished_stream(self, events: int, tool_choice_sent: bool) -> ProviderError:
        if events == 0:
            causes = "a prompt longer than the model's context or a chat template error"
            if tool_choice_sent:
                causes = (
                    "a prompt longer than the model's context, a chat template error, or a "
                    f"tool_choice it cannot stream: {TOOL_CHOICE_OFF}"
                )
            return ProviderError(
                ProviderErrorCode.EMPTY_STREAM,
                f"the model server at {self._endpoint} accepted the request but sent no events "
                f"at all: it probably refused it (for example {causes}); the server's log says "
                "why",
            )
        return ProviderError(
            ProviderErrorCode.CONNECTION_LOST,
            f"the model server at {self._endpoint} closed the stream before it finished",
        )


class _Exchange:
    """One request's connection, socket and response, so that another thread can abort it and
    the generator's ``finally`` can release all three."""

    def __init__(self, connection: http.client.HTTPConnection) -> None:
        self.connection = connection
        self.sock: socket.socket | None = None
        self.response: http.client.HTTPResponse | None = None
        self.events = 0  # the reply's data events received so far

    def abort(self) -> None:
        sock = self.sock or self.connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        if self.response is not None:
            with contextlib.suppress(Exception):
                self.response.close()
        self.connection.close()
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()


def _http_error(
    response: http.client.HTTPResponse, endpoint: str, secrets: tuple[str | None, ...]
) -> ProviderError:
    """The whole body is parsed (up to ``ERROR_BODY_LIMIT``); only the sentence shown is cut,
    after ``secrets`` are redacted from it. The sentence names ``endpoint``, and for 429 and
    503 the wait a ``Retry-After`` header asks for (nothing waits or retries here)."""
    detail = response.read(ERROR_BODY_LIMIT).decode("utf-8", "replace").strip()
    message = error_message(detail, secrets) if detail else ""
    if is_context_overflow(detail):
        return ProviderError(
            ProviderErrorCode.CONTEXT_OVERFLOW,
            f"the request is longer than the model's context window (HTTP {response.status} "
            f"from {endpoint}: {message})",
        )
    hint = ""
    if response.status in (401, 403):
        hint = " (check MAKA_OPENAI_API_KEY)"
    elif response.status == 404:
        hint = " (check MAKA_OPENAI_BASE_URL: it should end where /chat/completions starts)"
    elif response.status in (429, 503):
        wait = retry_after_seconds(response.getheader("Retry-After"))
        if wait is not None:
            hint = f" (the server asks to retry after {_wait_words(wait)})"
    return ProviderError(
        ProviderErrorCode.HTTP_ERROR,
        f"the model server at {endpoint} answered HTTP {response.status} {response.reason}{hint}"
        + (f": {message}" if message else ""),
    )


def _wait_words(seconds: int) -> str:
    """``Retry-After`` in words a person reads: seconds, minutes or hours; past a day, the
    moment it names ("2299587978 seconds" said nothing)."""
    if seconds < 3600:
        return f"{seconds} second{'' if seconds == 1 else 's'}"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} hours"
    import datetime

    try:
        when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
    except OverflowError:
        return "a date past the year 9999"
    return f"{when:%Y-%m-%d %H:%M} UTC"


def retry_after_seconds(value: str | None, now: Callable[[], float] = time.time) -> int | None:
    """The wait a ``Retry-After`` header asks for, in whole seconds: its delay in seconds, or the
    time until its HTTP date (0 for a date passed); None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return int(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0, math.ceil(when.timestamp() - now()))


def data_deadline(
    lines: Iterator[bytes],
    limit: float,
    clock: Callable[[], float] = time.monotonic,
    *,
    endpoint: str = "",
) -> Iterator[bytes]:
    """Pass stream lines through, failing when ``limit`` seconds pass without a ``data:`` line
    (a stalled server that only sends keep-alive comments never trips the socket timeout).
    The failure names ``endpoint`` when given."""
    server = f"the model server at {endpoint}" if endpoint else "the model server"
    last_data = clock()
    for raw in lines:
        if raw.startswith(b"data:"):
            last_data = clock()
        elif clock() - last_data > limit:
            raise ProviderError(
                ProviderErrorCode.TIMEOUT,
                f"{server} sent only keep-alive comments and no data for {limit:g} s "
                "(MAKA_OPENAI_DATA_TIMEOUT)",
            )
        yield raw


def response_lines(response: http.client.HTTPResponse, block: int = 65536) -> Iterator[bytes]:
    """The body's lines, each with its newline, as they arrive. A body cut short raises
    ``IncompleteRead``: ``readline()`` on a chunked body turns a missing terminating chunk into a
    clean end of file, so the body is read with ``read1``, which does not."""
    pending = b""
    while True:
        data = response.read1(block)
        if not data:
            break
        pieces = (pending + data).split(b"\n")
        pending = pieces.pop()
        for piece in pieces:
            yield piece + b"\n"
    if response.length:  # a Content-Length body that ended early
        raise http.client.IncompleteRead(pending, response.length)
    if pending:
        yield pending


def shown_url(base_url: str, path: str) -> str:
    """``base_url`` followed by ``path``, without any user name or password it holds."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{host}{port}{parts.path.rstrip('/')}{path}"


def _describe(error: BaseException) -> str:
    if isinstance(error, ConnectionRefusedError):
        return "connection refused (is the server running?)"
    text = str(error) or type(error).__name__
    return text
