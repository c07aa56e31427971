"""A local chat-completions server speaking SSE, for provider and end-to-end tests.

Each chat request is answered by the next reply in ``replies`` (the last one repeats); any other
path answers 404, as on a server without llama.cpp's extras. Every chat request
body is kept as the exact bytes received, so tests can compare what a live run sent with what a
run rebuilt from the ledger sends. It listens on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[BaseHTTPRequestHandler], None]


def sse_headers(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.end_headers()


def send_data(handler: BaseHTTPRequestHandler, payload: str) -> None:
    handler.wfile.write(f"data: {payload}\n\n".encode())
    handler.wfile.flush()


def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def text_reply(text: str, finish: str = "stop") -> Reply:
    def reply(handler: BaseHTTPRequestHandler) -> None:
        sse_headers(handler)
        send_data(handler, chunk({"role": "assistant", "content": text}, finish=finish))
        send_data(handler, "[DONE]")

    return reply


def tool_reply(call_id: str, name: str, arguments: str, text: str = "") -> Reply:
    """One tool call whose arguments arrive as the exact JSON text given (key order kept)."""

    def reply(handler: BaseHTTPRequestHandler) -> None:
        sse_headers(handler)
        if text:
            send_data(handler, chunk({"role": "assistant", "content": text}))
        call = {"index": 0, "id": call_id, "function": {"name": name, "arguments": arguments}}
        send_data(handler, chunk({"tool_calls": [call]}, finish="tool_calls"))
        send_data(handler, "[DONE]")

    return reply


def json_error(status: int, body: Any) -> Reply:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()

    def reply(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    return reply


class ChatServer:
    def __init__(self, replies: Sequence[Reply] = ()) -> None:
        self.replies: list[Reply] = list(replies)
        self.bodies: list[bytes] = []
        self.release = threading.Event()
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                if not self.path.endswith("/chat/completions"):
                    self.send_error(404)  # as a server without a tokenizer endpoint answers
                    return
                with outer._lock:
                    outer.bodies.append(body)
                    index = len(outer.bodies) - 1
                    reply = outer.replies[min(index, len(outer.replies) - 1)]
                reply(self)

            def log_message(self, format: str, *args: Any) -> None:
                del format, args

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(body) for body in self.bodies]

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@contextmanager
def chat_server(replies: Sequence[Reply] = ()) -> Iterator[ChatServer]:
    server = ChatServer(replies)
    try:
        yield server
    finally:
        server.close()
