"""A chat-completions server that dies the way a crashed model server does: it accepts the
request, sends the 200 headers of a chunked event stream, and is then killed with SIGKILL before
its first event (the kernel closes its socket; no terminating chunk is ever sent).

Run as ``python -m tests.helpers.dying_chat_server``: it prints its port on the first line of
standard output, then serves until the first chat request kills it.
"""

from __future__ import annotations

import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if not self.path.endswith("/chat/completions"):
            self.send_error(404)  # no tokenizer or model facts here
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    def log_message(self, format: str, *args: Any) -> None:
        del format, args


def main() -> None:
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    print(server.server_address[1], flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
