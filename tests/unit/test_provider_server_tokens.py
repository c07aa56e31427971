"""Counting a request's tokens the way the server does, and taking the context size from the
server where it says it: llama.cpp (``/props``, ``/tokenize``), llama-cpp-python
(``/extras/tokenize/count``), vLLM (``max_model_len`` in ``/v1/models``) and Ollama (``num_ctx``
from ``/api/show``), each played by a stand-in server; else a cautious estimate.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from runtime.base.cancel_token import CancelToken
from runtime.providers.openai_compatible_provider import OpenAICompatibleProvider, OpenAISettings
from runtime.providers.provider_port import (
    Finished,
    ProviderError,
    ProviderErrorCode,
    ProviderRequest,
    UserText,
)
from runtime.providers.server_tokens import TOKENS_PER_MESSAGE, is_local_host, prompt_text
from tests.helpers.chat_server import chunk

Answer = Callable[[dict[str, Any]], Any]


class FactsServer:
    """A chat server that also answers the given GET and POST paths with JSON; every other path
    is a 404. ``asked`` lists the paths asked, ``chats`` the chat requests' bodies."""

    def __init__(self, get: dict[str, Any], post: dict[str, Answer]) -> None:
        self.asked: list[str] = []
        self.chats: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def _json(self, value: Any) -> None:
                data = json.dumps(value).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                outer.asked.append(f"GET {self.path}")
                if self.path in get:
                    self._json(get[self.path])
                else:
                    self.send_error(404)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.asked.append(f"POST {self.path}")
                if self.path == "/v1/chat/completions":
                    outer.chats.append(body)
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    self.wfile.write(f"data: {chunk({'content': 'ok'}, 'stop')}\n\n".encode())
                elif self.path in post:
                    self._json(post[self.path](body))
                else:
                    self.send_error(404)

            def log_message(self, format: str, *args: Any) -> None:
                del format, args

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@contextmanager
def facts_server(get: dict[str, Any], post: dict[str, Answer]) -> Iterator[FactsServer]:
    server = FactsServer(get, post)
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


def _tokenize(body: dict[str, Any]) -> Any:
    """llama.cpp's /tokenize, with a tokenizer that makes a token of every character."""
    return {"tokens": list(range(len(body["content"])))}


def _request(text: str) -> ProviderRequest:
    return ProviderRequest("", (UserText(text),))


def _stream(server: FactsServer, text: str, **settings: Any) -> list[Any]:
    provider = OpenAICompatibleProvider(
        OpenAISettings(server.base_url, "tiny", read_timeout=20.0, **settings)
    )
    return list(provider.stream(_request(text), CancelToken()))


def test_llama_cpp_reports_its_context_and_counts_the_prompt_with_its_tokenizer() -> None:
    props = {"/props": {"default_generation_settings": {"n_ctx": 64}}}
    with facts_server(props, {"/tokenize": _tokenize}) as server:
        assert _stream(server, "short")[-1] == Finished("end_turn")
        # 60 characters: the 4-bytes-a-token estimate says 15 tokens, the server's tokenizer 60,
        # and with a message's markers that is over the 64 the server runs with.
        with pytest.raises(ProviderError) as caught:
            _stream(server, "x" * 60)
    assert caught.value.code == ProviderErrorCode.CONTEXT_OVERFLOW
    assert "as the server counts them" in caught.value.message
    assert "the server's context size of 64" in caught.value.message
    assert "it was not sent" in caught.value.message
    assert [body["messages"][0]["content"] for body in server.chats] == ["short"]


def test_a_configured_context_size_wins_over_the_servers() -> None:
    props = {"/props": {"n_ctx": 100_000}}
    with (
        facts_server(props, {"/tokenize": _tokenize}) as server,
        pytest.raises(ProviderError) as caught,
    ):
        _stream(server, "x" * 60, context_tokens=50)
    assert "the 50 of MAKA_OPENAI_CONTEXT_TOKENS" in caught.value.message
    assert server.chats == []


def test_llama_cpp_python_counts_through_its_extras() -> None:
    def count(body: dict[str, Any]) -> Any:
        assert body["model"] == "tiny"
        return {"count": len(body["input"])}

    with facts_server({}, {"/extras/tokenize/count": count}) as server:
        with pytest.raises(ProviderError) as caught:
            _stream(server, "y" * 90, context_tokens=80)
        assert "as the server counts them" in caught.value.message
        assert _stream(server, "y" * 20, context_tokens=80)[-1] == Finished("end_turn")
    # After llama.cpp's /tokenize answered 404 once, it is not asked again in the turn.
    assert server.asked.count("POST /tokenize") == 2  # once for each provider (each turn)


def test_vllm_and_ollama_report_the_context_they_run_with() -> None:
    models = {"/v1/models": {"data": [{"id": "other"}, {"id": "tiny", "max_model_len": 10}]}}
    with facts_server(models, {}) as server, pytest.raises(ProviderError) as caught:
        _stream(server, "z" * 200)
    assert "the server's context size of 10" in caught.value.message
    assert "cautious estimate" in caught.value.message  # vLLM has no tokenizer endpoint here

    def show(body: dict[str, Any]) -> Any:
        return {"parameters": "stop <|im_end|>\nnum_ctx 12"} if body["model"] == "tiny" else {}

    with facts_server({}, {"/api/show": show}) as server, pytest.raises(ProviderError) as caught:
        _stream(server, "z" * 200)
    assert "the server's context size of 12" in caught.value.message


def test_a_server_that_reports_nothing_is_sent_the_request_uncounted() -> None:
    with facts_server({}, {}) as server:
        assert _stream(server, "w" * 5000)[-1] == Finished("end_turn")
    assert not any("tokenize" in path for path in server.asked)  # no limit: nothing to count


def test_the_counted_text_holds_roles_contents_tool_calls_and_tools() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "read it"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "read_file", "arguments": '{"path":"a"}'}}],
            },
        ],
        "tools": [{"type": "function", "function": {"name": "read_file"}}],
    }
    text, messages = prompt_text(body)
    assert messages == 2
    for part in ("user", "read it", "assistant", '{"path":"a"}', '"name": "read_file"'):
        assert part in text
    assert TOKENS_PER_MESSAGE > 0


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("127.0.0.1", True),
        ("localhost", True),
        ("192.168.1.20", True),
        ("10.0.0.7", True),
        ("::1", True),
        ("gpu-box", True),
        ("llm.local", True),
        ("api.openai.com", False),
        ("8.8.8.8", False),
    ],
)
def test_only_servers_on_this_computer_or_network_are_asked(host: str, local: bool) -> None:
    assert is_local_host(host) is local


class _Hanging:
    """A server whose GET never answers (until released) and whose chat answers at once;
    ``trickle``: its GET answers 200 and then sends one byte of its body at a time."""

    def __init__(self, *, trickle: bool = False) -> None:
        self.release = threading.Event()
        self.asked: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_GET(self) -> None:
                outer.asked.append(f"GET {self.path}")
                if trickle:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "100000")
                    self.end_headers()
                    while not outer.release.wait(0.3):
                        try:
                            self.wfile.write(b" ")
                            self.wfile.flush()
                        except OSError:
                            return
                    return
                outer.release.wait(60)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                outer.asked.append(f"POST {self.path}")
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                self.wfile.write(f"data: {chunk({'content': 'ok'}, 'stop')}\n\n".encode())

            def log_message(self, format: str, *args: Any) -> None:
                del format, args

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_server_that_lets_a_question_time_out_is_asked_nothing_more() -> None:
    server = _Hanging()
    try:
        provider = OpenAICompatibleProvider(OpenAISettings(server.base_url, "tiny", read_timeout=1))
        events = list(provider.stream(_request("hello"), CancelToken()))
    finally:
        server.close()
    assert events[-1] == Finished("end_turn")
    assert server.asked == ["GET /props", "POST /v1/chat/completions"]


def test_a_server_that_trickles_its_answer_to_a_question_is_asked_nothing_more() -> None:
    """A server answering the context-size question 200, then a byte every 0.3 s: each read
    was answered within the timeout, so ``maka run`` waited forever before the turn."""
    server = _Hanging(trickle=True)
    started = time.monotonic()
    try:
        provider = OpenAICompatibleProvider(OpenAISettings(server.base_url, "tiny", read_timeout=1))
        events = list(provider.stream(_request("hello"), CancelToken()))
    finally:
        server.close()
    assert events[-1] == Finished("end_turn")
    assert server.asked == ["GET /props", "POST /v1/chat/completions"]
    assert time.monotonic() - started < 30


def test_cancelling_while_the_server_is_asked_stops_the_turn_unsent() -> None:
    server = _Hanging()
    cancel = CancelToken()
    timer = threading.Timer(0.5, cancel.cancel)
    try:
        provider = OpenAICompatibleProvider(
            OpenAISettings(server.base_url, "tiny", read_timeout=60)
        )
        timer.start()
        with pytest.raises(ProviderError) as caught:
            list(provider.stream(_request("hello"), cancel))
    finally:
        timer.cancel()
        server.close()
    assert caught.value.code == ProviderErrorCode.CANCELLED
    assert "POST /v1/chat/completions" not in server.asked
