"""A loopback TCP proxy that can stop forwarding without closing anything: a network gone
silent (docs/postgres.md). Pure Python sockets and threads.

``SilentProxy(host, port)`` listens on a free loopback port and forwards every connection it
accepts to ``host:port``, both ways. ``silence()`` stops it reading from any socket, existing
connections and new ones alike: the sockets stay open, the kernel keeps acknowledging what a
client sends (until its buffers fill), and nothing reaches the other side, so no TCP timer of
the client ever fires; only a deadline of its own can notice. ``resume()`` forwards again (what
was held in the buffers goes on, as a network that comes back delivers it). ``close()`` ends
every connection and the listener.

``silence_after(marker)`` forwards the next client bytes holding ``marker`` and goes silent right
after them: ``b"COMMIT\x00"`` (the statement's text as sent, unprepared: the client's prepared
statements send their text once, to be parsed, then only their name) lets a COMMIT reach the
server and holds its answer back, the ambiguous commit.

``proxied_url(url)`` is the same PostgreSQL URL through the proxy.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from urllib.parse import urlsplit, urlunsplit


class SilentProxy:
    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._forwarding = threading.Event()
        self._forwarding.set()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._trigger: bytes | None = None
        self.connections = 0
        threading.Thread(target=self._accept, name="silent-proxy-accept", daemon=True).start()

    @classmethod
    def for_url(cls, url: str) -> SilentProxy:
        parts = urlsplit(url)
        return cls(parts.hostname or "127.0.0.1", parts.port or 5432)

    def proxied_url(self, url: str) -> str:
        parts = urlsplit(url)
        user = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{self.port}"))

    def silence(self) -> None:
        """Stop forwarding, in both directions, on every connection; keep them all open."""
        self._forwarding.clear()

    def silence_after(self, marker: bytes) -> None:
        """Go silent right after forwarding the next client bytes that hold ``marker``."""
        self._trigger = marker

    def resume(self) -> None:
        self._trigger = None
        self._forwarding.set()

    @property
    def silent(self) -> bool:
        return not self._forwarding.is_set()

    def close(self) -> None:
        self._closed.set()
        self._forwarding.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self._target, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._sockets += [client, server]
                self.connections += 1
            for source, sink, outbound in ((client, server, True), (server, client, False)):
                threading.Thread(
                    target=self._pump,
                    args=(source, sink, outbound),
                    name="silent-proxy-pump",
                    daemon=True,
                ).start()

    def _pump(self, source: socket.socket, sink: socket.socket, outbound: bool) -> None:
        try:
            while not self._closed.is_set():
                if not self._forwarding.wait(0.1):
                    continue  # silent: read nothing, close nothing
                readable, _, _ = select.select([source], [], [], 0.1)
                if not readable or not self._forwarding.is_set():
                    continue
                data = source.recv(65536)
                if not data:
                    with contextlib.suppress(OSError):
                        sink.shutdown(socket.SHUT_WR)
                    return
                sink.sendall(data)
                trigger = self._trigger
                if outbound and trigger is not None and trigger in data:
                    self._trigger = None
                    self._forwarding.clear()
        except (OSError, ValueError):  # the other direction closed both sockets
            pass
        finally:
            with contextlib.suppress(OSError):
                source.close()
            with contextlib.suppress(OSError):
                sink.close()
