"""A model server that echoes the API key never gets it shown, logged, committed or exported.

The real ``maka run`` talks to a local HTTP stub that answers with error texts quoting the
canary key it was sent (in the message, as the ``Authorization`` header, JSON-escaped and
URL-encoded). Afterwards the key appears nowhere: not on stdout or stderr, not in any file of the
data directory (the database, its WAL, the logs), not in ``maka export``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.helpers.maka_run import committed_runs, maka

pytestmark = pytest.mark.e2e

CANARY = "sk-canary/7f3a+Q9z=secret"


class _Echo(BaseHTTPRequestHandler):
    mode = "http_401"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        auth = self.headers.get("Authorization", "")
        key = auth.removeprefix("Bearer ")
        echo = (
            f"Incorrect API key provided: {key}. You sent '{auth}' "
            f"(escaped {json.dumps(key)}, in a URL {quote(key, safe='')})"
        )
        if self.mode == "http_401":
            body = json.dumps({"error": {"message": echo}}).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.mode == "http_500_text":
            body = echo.encode()
            self.send_response(500)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        # An error inside the event stream.
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(f"data: {json.dumps({'error': {'message': echo}})}\n\n".encode())
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        del format, args


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _spellings() -> list[bytes]:
    return [
        CANARY.encode(),
        json.dumps(CANARY)[1:-1].encode(),
        quote(CANARY, safe="").encode(),
        b"sk-canary/7f3a",  # a distinctive prefix of the key
    ]


@pytest.mark.parametrize("mode", ["http_401", "http_500_text", "stream_error"])
def test_an_echoed_key_is_redacted_everywhere(
    server: ThreadingHTTPServer, tmp_path: Path, mode: str
) -> None:
    _Echo.mode = mode
    workspace = tmp_path / "ws"
    workspace.mkdir()
    data_dir = tmp_path / "data"
    port = server.server_address[1]
    result = maka(
        ["run", "--cwd", str(workspace), "--provider", "openai", "hello"],
        data_dir,
        env={
            "MAKA_OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
            "MAKA_MODEL": "m",
            "MAKA_OPENAI_API_KEY": CANARY,
        },
    )
    assert result.returncode == 1, result.stderr
    shown = (result.stdout + result.stderr).encode()
    assert "[redacted]" in result.stdout + result.stderr
    [(header, events)] = committed_runs(data_dir)
    assert header.failure_class == "provider_error"
    exported = maka(["export", header.session_id, "-o", "-"], data_dir)
    assert exported.returncode == 0, exported.stderr
    assert b"[redacted]" in exported.stdout.encode()
    stored = b"".join(path.read_bytes() for path in data_dir.rglob("*") if path.is_file())
    for spelling in _spellings():
        assert spelling not in shown
        assert spelling not in exported.stdout.encode()
        assert spelling not in stored
    assert len(events) >= 2
