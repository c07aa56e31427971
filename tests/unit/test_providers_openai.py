"""The OpenAI-compatible provider against a real local HTTP server speaking SSE.

Every failure mode must end in a ``ProviderError`` with a readable message within the read
timeout: never a hang, never half a tool call.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from runtime.base.cancel_token import CancelToken
from runtime.providers.openai_compatible_provider import (
    OpenAICompatibleProvider,
    OpenAISettings,
    messages_from_history,
)
from runtime.providers.provider_port import (
    AssistantText,
    Finished,
    ProviderError,
    ProviderErrorCode,
    ProviderRequest,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolCallReady,
    ToolResult,
    ToolSpec,
    Usage,
    UserText,
)

Scenario = Callable[[BaseHTTPRequestHandler], None]


class _Server:
    def __init__(self) -> None:
        self.scenario: Scenario = lambda handler: None
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                if not self.path.endswith("/chat/completions"):
                    self.send_error(404)  # a server without llama.cpp's extras
                    return
                outer.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                )
                outer.scenario(self)

            def log_message(self, format: str, *args: Any) -> None:
                del format, args

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[_Server]:
    instance = _Server()
    yield instance
    instance.close()


def _sse_headers(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.end_headers()


def _send(handler: BaseHTTPRequestHandler, payload: str) -> None:
    handler.wfile.write(f"data: {payload}\n\n".encode())
    handler.wfile.flush()


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _provider(server: _Server, timeout: float = 2.0) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(
        OpenAISettings(
            base_url=server.base_url, model="test-model", api_key="sk-test", read_timeout=timeout
        )
    )


REQUEST = ProviderRequest(
    system_prompt="be brief",
    history=(UserText("write a file"),),
    tools=(ToolSpec("write_file", "write a file", {"type": "object"}),),
)


def _collect(provider: OpenAICompatibleProvider, cancel: CancelToken | None = None) -> list[Any]:
    return list(provider.stream(REQUEST, cancel or CancelToken()))


def test_streams_text_thinking_usage_and_a_tool_call_assembled_from_fragments(
    server: _Server,
) -> None:
    def scenario(handler: BaseHTTPRequestHandler) -> None:
        _sse_headers(handler)
        handler.wfile.write(b": keep-alive comment\n\n")
        _send(handler, _chunk({"role": "assistant", "reasoning_content": "hmm"}))
        _send(handler, _chunk({"content": "Writing "}))
        _send(handler, _chunk({"content": "now."}))
        first = {"index": 0, "id": "call_1", "function": {"name": "write_file", "arguments": ""}}
        _send(handler, _chunk({"tool_calls": [first]}))
        _send(handler, _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"pa'}}]}))
        rest = {"index": 0, "function": {"arguments": 'th": "a.txt"}'}}
        _send(handler, _chunk({"tool_calls": [rest]}, finish="tool_calls"))
        usage = {"prompt_tokens": 12, "completion_tokens": 7}
        _send(handler, json.dumps({"choices": [], "usage": usage}))
        _send(handler, "[DONE]")

    server.scenario = scenario
    events = _collect(_provider(server))
    assert events == [
        ThinkingDelta("hmm"),
        TextDelta("Writing "),
        TextDelta("now."),
        Usage(12, 7),
        ToolCallReady("call_1", "write_file", {"path": "a.txt"}),
        Finished("tool_calls"),
    ]
    sent = server.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["auth"] == "Bearer sk-test"
    assert sent["body"]["stream"] is True
    assert sent["body"]["model"] == "test-model"
    assert sent["body"]["messages"][0] == {"role": "system", "content": "be brief"}
    assert sent["body"]["tools"][0]["function"]["name"] == "write_file"


def test_a_finish_reason_without_done_marker_is_a_clean_end(server: _Server) -> None:
    def scenario(handler: BaseHTTPRequestHandler) -> None:
        _sse_headers(handler)
        _send(handler, _chunk({"content": "hi"}, finish="stop"))

    server.scenario = scenario
    assert _collect(_provider(server)) == [TextDelta("hi"), Finished("end_turn")]


def _expect_error(server: _Server, scenario: Scenario, code: ProviderErrorCode) -> ProviderError:
    server.scenario = scenario
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        _collect(_provider(server, timeout=0.5))
    assert time.monotonic() - started < 10
    assert caught.value.code == code
    assert caught.value.message
    return caught.value


def test_a_malformed_chunk_is_a_readable_error(server: _Server) -> None:
    def scenario(handler: BaseHTTPRequestHandler) -> None:
        _sse_headers(handler)
        _send(handler, _chunk({"content": "ok"}))
        _send(handler, "{not json")

    error = _expect_error(server, scenario, ProviderErrorCode.MALFORMED_STREAM)
    assert "not JSON" in error.message


def test_malformed_tool_arguments_never_become_a_tool_call(server: _Server) -> None:
    def scenario(handler: BaseHTTPRequestHandler) -> None:
        _sse_headers(handler)
        call = {"index": 0, "id": "c", "function": {"name": "bash", "arguments": '{"comm'}}
        _send(handler, _chunk({"tool_calls": [call]}, finish="tool_calls"))
        _send(handler, "[DONE]")

    error = _expect_error(server, scenario, ProviderErrorCode.MALFORMED_STREAM)
    assert "bash" in error.message


def test_http_500_reports_status_and_server_message(server: _Server) -> None:
    def scenario(handler: BaseHTTPRequestHandler) -> None:
        body = json.dumps({"error": {"message": "model is overloaded"}}).encode()
        handler.send_response(500)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    error = _expect_error(server, scenario, ProviderErrorCode.HTTP_ERROR)
    assert "HTTP 500" in error.message
    assert "model is overloaded" in error.message


def test_a_silent_server_times_out_instead_of_hanging(server: _Server) -> None:
    def scenario(handler: BaseHTTPRequestHandler) -> None:
        _sse_headers(handler)
        _send(handler, _chunk({"content": "start"}))
        server.release.wait(30)

    error = _expect_error(server, scenario, ProviderErrorCode.TIMEOUT)
    # (it had answered "start": it stopped sending, said as that)
    assert "stopped sending in the middle of its reply" in error.message


def test_a_dropped_connection_mid_stream_is_reported(server: _Server) -> None:
    def scenario(handler: BaseHTTPRequestHandler) -> None:
        _sse_headers(handler)
        _send(handler, _chunk({"content": "partial answer"}))
        handler.wfile.flush()
        handler.close_connection = True

    error = _expect_error(server, scenario, ProviderErrorCode.CONNECTION_LOST)
    assert "before it finished" in error.message


def test_connection_refused_is_reported() -> None:
    provider = OpenAICompatibleProvider(
        OpenAISettings(base_url="http://127.0.0.1:9/v1", model="m", read_timeout=1)
    )
    with pytest.raises(ProviderError) as caught:
        list(provider.stream(REQUEST, CancelToken()))
    assert caught.value.code == ProviderErrorCode.CONNECTION_LOST


def test_cancel_closes_the_connection_promptly(server: _Server) -> None:
    def scenario(handler: BaseHTTPRequestHandler) -> None:
        _sse_headers(handler)
        _send(handler, _chunk({"content": "thinking..."}))
        server.release.wait(30)

    server.scenario = scenario
    cancel = CancelToken()
    threading.Timer(0.3, cancel.cancel).start()
    started = time.monotonic()
    events: list[StreamEvent] = []
    with pytest.raises(ProviderError) as caught:
        for event in _provider(server, timeout=20).stream(REQUEST, cancel):
            events.append(event)
    assert caught.value.code == ProviderErrorCode.CANCELLED
    assert time.monotonic() - started < 5
    assert events == [TextDelta("thinking...")]


def test_invalid_configuration_is_refused_up_front() -> None:
    with pytest.raises(ProviderError) as caught:
        OpenAICompatibleProvider(OpenAISettings(base_url="ftp://x", model="m"))
    assert caught.value.code == ProviderErrorCode.CONFIG_INVALID
    with pytest.raises(ProviderError):
        OpenAICompatibleProvider(OpenAISettings(base_url="http://localhost:1/v1", model=""))


def test_history_becomes_chat_messages_with_paired_tool_messages() -> None:
    messages = messages_from_history(
        "",
        (
            UserText("hi"),
            AssistantText("let me look"),
            ToolCall("c1", "read_file", {"path": "a"}),
            ToolCall("c2", "read_file", {"path": "b"}),
            ToolResult("c1", "read_file", {"content": "A"}),
            ToolResult("c2", "read_file", "boom", is_error=True),
            AssistantText("done"),
        ),
    )
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["c1", "c2"]
    assert json.loads(messages[1]["tool_calls"][0]["function"]["arguments"]) == {"path": "a"}
    assert messages[3]["content"] == "[error] boom"


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999/v1", "http://127.0.0.1:abc/v1"])
def test_an_invalid_port_is_a_configuration_error(url: str) -> None:
    with pytest.raises(ProviderError) as caught:
        OpenAICompatibleProvider(OpenAISettings(base_url=url, model="m"))
    assert caught.value.code == ProviderErrorCode.CONFIG_INVALID
    assert "invalid port" in caught.value.message


def _page(status: int, content_type: str, body: bytes) -> Scenario:
    def scenario(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return scenario


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/html; charset=utf-8", b"<html><body>Please log in</body></html>"),
        ("application/json", json.dumps({"choices": [{"message": {"content": "hi"}}]}).encode()),
    ],
)
def test_an_answer_that_is_not_a_stream_says_so(
    server: _Server, content_type: str, body: bytes
) -> None:
    error = _expect_error(
        server, _page(200, content_type, body), ProviderErrorCode.MALFORMED_STREAM
    )
    assert (
        content_type.split(";", maxsplit=1)[0] in error.message and "not a stream" in error.message
    )
    assert "MAKA_OPENAI_BASE_URL" in error.message


def test_http_errors_point_at_the_setting_to_check(server: _Server) -> None:
    denied = _page(401, "application/json", b'{"error": {"message": "bad key"}}')
    error = _expect_error(server, denied, ProviderErrorCode.HTTP_ERROR)
    assert "HTTP 401" in error.message and "MAKA_OPENAI_API_KEY" in error.message
    assert "bad key" in error.message
    gateway = _page(502, "text/html", b"<html><h1>502 Bad Gateway</h1></html>")
    error = _expect_error(server, gateway, ProviderErrorCode.HTTP_ERROR)
    assert "an HTML page" in error.message and "<h1>" not in error.message
