"""The main process's IPC server: ``QLocalServer`` + the bridge contract's frames.

Trust model: the socket lives in a directory only this user can enter (``ipc_endpoint``) and is
user-only itself (``UserAccessOption``), and a connection becomes a renderer only by sending
``hello`` with this launch's token and the contract's protocol version as its first frame. The
token is bound to the first process that uses it: the first successful ``hello`` records the
peer's process id, and a later ``hello`` with the same token is accepted only from that process
(the renderer reconnecting). Where the peer's pid cannot be read, the token is single-use.

Everything a peer sends passes through the contract's strict decoder (``FrameReader``). Any frame
that is malformed, oversized, of an unknown kind, not a request, invalid for its model (for example
``sessions.resumeLatest`` with a field besides ``sessionId``), or sent before a successful handshake
closes *that* connection and is logged by code, never by content; the server keeps serving
everyone else. Nothing from a refused frame reaches the services.

A terminal client (``maka sessions`` and the other commands, ``app.host.host_client``) says
``hello`` with ``role: terminal`` and the terminal token, which the host publishes in its private
``ipc`` folder (``ipc_endpoint.publish_terminal_token``). That token is not bound to one process
(any number of commands may attach), so it is accepted only from a peer running as this user
(``SO_PEERCRED``) and a terminal may send only ``TERMINAL_REQUEST_KINDS``: anything else closes
its connection like any other refused frame. A terminal hears only the answers to its own
requests.

One exception to the handshake rule: a connection whose first frame is ``window.activate`` is a
second ``maka`` launch asking this instance to show its window. It carries no data and has no
effect besides raising the window, so it needs no token (the second launch has none); the
connection is closed right after it.

Connections that have not finished the handshake have their own small limit
(``MAX_PENDING_PEERS``): when it is reached, the oldest such connection is closed to make room, so
idle half-open connections can never lock the real renderer out. Authenticated renderers are
limited separately (``MAX_RENDERERS``).

Refusals are logged by code on one line, peer-chosen text escaped, repeats rate-limited
(``log_limits``), so a flood of bad connections cannot rotate the log's history away.
"""

from __future__ import annotations

import hmac
import logging
import os
import socket
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtNetwork import QAbstractSocket, QLocalServer, QLocalSocket

from app.bridge_contract import (
    PROTOCOL_VERSION,
    REQUEST_KINDS,
    TERMINAL_ONLY_KINDS,
    TERMINAL_REQUEST_KINDS,
    BridgeErrorCode,
    BridgeProtocolError,
    ClientRole,
    FrameReader,
    HelloOkPush,
    HelloRejectedPush,
    HelloRequest,
    Message,
    WindowActivateRequest,
    encode_frame,
)
from main_process.log_limits import RateLimitedLog, escape

_log = logging.getLogger("maka.main.ipc")

HANDSHAKE_TIMEOUT_MS = 5000
MAX_RENDERERS = 16
MAX_TERMINALS = 32
# Connections that have not sent a valid hello yet; a new one beyond this closes the oldest.
MAX_PENDING_PEERS = 4
# Before the handshake a peer may buffer only this much: a hello frame is well under 1 KiB, so a
# stranger can never make the server hold megabytes.
MAX_PREAUTH_BYTES = 64 * 1024
# A peer that stops reading while we push: give up on it rather than buffering without limit.
MAX_PENDING_WRITE_BYTES = 64 * 1024 * 1024
_CLOSE_FLUSH_MS = 500


_limited = RateLimitedLog(_log)


def peer_uid(sock: QLocalSocket) -> int | None:
    """The connected peer's user id (Linux ``SO_PEERCRED``), or None where it cannot be read."""
    descriptor = int(sock.socketDescriptor())
    if descriptor < 0 or not hasattr(socket, "SO_PEERCRED"):
        return None
    try:
        with socket.socket(fileno=os.dup(descriptor)) as dup:
            raw = dup.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    return int(struct.unpack("3i", raw)[1])


def peer_pid(sock: QLocalSocket) -> int | None:
    """The connected peer's process id (Linux ``SO_PEERCRED``, macOS ``LOCAL_PEERPID``), or None
    where the platform does not say."""
    descriptor = int(sock.socketDescriptor())
    if descriptor < 0 or sys.platform == "win32":
        return None
    try:
        with socket.socket(fileno=os.dup(descriptor)) as dup:
            if hasattr(socket, "SO_PEERCRED"):
                raw = dup.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
                pid = int(struct.unpack("3i", raw)[0])
            elif sys.platform == "darwin":
                sol_local, local_peerpid = 0, 2
                raw = dup.getsockopt(sol_local, local_peerpid, struct.calcsize("i"))
                pid = int(struct.unpack("i", raw)[0])
            else:
                return None
    except OSError:
        return None
    return pid if pid > 0 else None


class IpcListenError(RuntimeError):
    pass


class PeerRole(StrEnum):
    PENDING = "pending"
    RENDERER = "renderer"
    TERMINAL = "terminal"


@dataclass(slots=True)
class _Peer:
    peer_id: int
    socket: QLocalSocket
    reader: FrameReader = field(default_factory=lambda: FrameReader(accept=REQUEST_KINDS))
    role: PeerRole = PeerRole.PENDING
    timer: QTimer | None = None
    closing: bool = False
    command: str | None = None  # a terminal's command (its hello), named in what it answers
    data_dir_said: str | None = None  # the folder a terminal's suggestions name (its hello)


class IpcServer(QObject):
    """Accepts renderer connections and routes their requests.

    Signals (all on the event loop thread):
    ``request_received(peer_id, message)`` for every valid request of an authenticated renderer
    (never ``hello``); ``activate_requested()`` for a second launch; ``renderer_connected(peer_id)``
    after a successful handshake; ``peer_closed(peer_id)``; ``peer_refused(code)`` whenever a
    connection is closed for a protocol violation (tests and logs).
    """

    request_received = Signal(int, object)
    activate_requested = Signal()
    renderer_connected = Signal(int)
    peer_closed = Signal(int)
    peer_refused = Signal(str)

    def __init__(
        self,
        socket_name: str,
        token: str,
        hello_reply: Callable[[], HelloOkPush],
        parent: QObject | None = None,
        terminal_token: str = "",
        *,
        windowless: Callable[[], bool] | None = None,
    ) -> None:
        """``terminal_token``: what terminal clients say hello with (empty: none accepted);
        ``windowless``: whether this host has no window of its own open or coming (``maka
        host`` alone), said to a window whose token it refuses."""
        super().__init__(parent)
        self._windowless = windowless
        self._name = socket_name
        self._terminal_token = terminal_token.encode("utf-8")
        self._token = token.encode("utf-8")
        self._token_used = False
        self._token_pid: int | None = None
        self._hello_reply = hello_reply
        self._server = QLocalServer(self)
        self._server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        self._server.newConnection.connect(self._on_new_connection)
        self._peers: dict[int, _Peer] = {}
        self._next_id = 1
        self._closed = False

    @property
    def socket_name(self) -> str:
        return self._name

    @property
    def full_server_name(self) -> str:
        return self._server.fullServerName()

    @property
    def listening(self) -> bool:
        return self._server.isListening()

    def set_token(self, token: str) -> None:
        """A new renderer launch gets a new token; already authenticated peers stay."""
        self._token = token.encode("utf-8")
        self._token_used = False
        self._token_pid = None

    def listen(self) -> None:
        """Only the instance-lock holder may call this: it removes a leftover socket first."""
        QLocalServer.removeServer(self._name)
        if not self._server.listen(self._name):
            raise IpcListenError(f"cannot listen on {self._name}: {self._listen_failure()}")
        _log.info("listening on %s", self._server.fullServerName())

    def _listen_failure(self) -> str:
        error = self._server.serverError()
        errors = QAbstractSocket.SocketError
        if error == errors.AddressInUseError:
            reason = "something else already uses that name and could not be removed"
        elif error == errors.SocketAccessError:
            reason = "permission denied"
        elif error == errors.HostNotFoundError:
            reason = "the name is not usable (too long, or its folder does not exist)"
        else:
            reason = "the system refused"
        return f"{reason} ({self._server.errorString()})"

    def renderer_ids(self) -> tuple[int, ...]:
        return tuple(p.peer_id for p in self._peers.values() if p.role is PeerRole.RENDERER)

    def terminal_ids(self) -> tuple[int, ...]:
        return tuple(p.peer_id for p in self._peers.values() if p.role is PeerRole.TERMINAL)

    def peer_process_id(self, peer_id: int) -> int | None:
        """The process of an authenticated peer (``peer_pid``), or None."""
        peer = self._peers.get(peer_id)
        if peer is None or peer.role is PeerRole.PENDING:
            return None
        return peer_pid(peer.socket)

    def peer_wording(self, peer_id: int) -> tuple[str | None] | None:
        """How a terminal peer's suggested commands are worded: the data folder they name
        (None: none), or None for a peer that is no terminal (the host's own wording)."""
        peer = self._peers.get(peer_id)
        if peer is None or peer.role is not PeerRole.TERMINAL:
            return None
        return (peer.data_dir_said,)

    def peer_command(self, peer_id: int) -> str | None:
        """The ``maka`` command a terminal peer said it is (``run``, ``tui``...), or None."""
        peer = self._peers.get(peer_id)
        return peer.command if peer is not None else None

    def send(self, peer_id: int, message: Message) -> bool:
        peer = self._peers.get(peer_id)
        if peer is None or peer.closing or peer.role is PeerRole.PENDING:
            return False
        return self._write(peer, encode_frame(message))

    def broadcast(self, message: Message) -> int:
        """Send to every authenticated renderer; returns how many got it."""
        frame = encode_frame(message)
        sent = 0
        for peer in list(self._peers.values()):
            if peer.role is PeerRole.RENDERER and not peer.closing and self._write(peer, frame):
                sent += 1
        return sent

    def close(self) -> None:
        """Stop listening, flush what is queued and drop every connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._server.close()
        for peer in list(self._peers.values()):
            # The last push ("closed") must reach the renderer before the connection ends; a
            # peer that does not read within the grace period is cut off anyway.
            peer.socket.flush()
            if peer.socket.bytesToWrite() > 0:
                peer.socket.waitForBytesWritten(_CLOSE_FLUSH_MS)
            self._drop(peer)
        QLocalServer.removeServer(self._name)

    # ----------------------------------------------------------------------------- internals

    def _on_new_connection(self) -> None:
        while self._server.hasPendingConnections():
            sock = self._server.nextPendingConnection()
            if sock is None:  # pragma: no cover - Qt contract
                break
            if self._closed:
                sock.abort()
                sock.deleteLater()
                continue
            pending = [p for p in self._peers.values() if p.role is PeerRole.PENDING]
            if len(pending) >= MAX_PENDING_PEERS:
                # The oldest half-open connection makes room: idle strangers cannot keep the
                # real renderer (which says hello at once) out.
                oldest = min(pending, key=lambda p: p.peer_id)
                self._refuse(oldest, BridgeErrorCode.HANDSHAKE_REQUIRED, "too many waiting")
                self._drop(oldest)
            peer = _Peer(self._next_id, sock)
            self._next_id += 1
            self._peers[peer.peer_id] = peer
            timer = QTimer(self)
            timer.setSingleShot(True)
            timer.timeout.connect(lambda pid=peer.peer_id: self._on_handshake_timeout(pid))
            timer.start(HANDSHAKE_TIMEOUT_MS)
            peer.timer = timer
            sock.readyRead.connect(lambda pid=peer.peer_id: self._on_ready_read(pid))
            sock.disconnected.connect(lambda pid=peer.peer_id: self._on_disconnected(pid))
            if sock.bytesAvailable() > 0:
                self._on_ready_read(peer.peer_id)

    def _on_ready_read(self, peer_id: int) -> None:
        peer = self._peers.get(peer_id)
        if peer is None or peer.closing:
            return
        data = peer.socket.readAll().data()
        if not data:
            return
        if peer.role is PeerRole.PENDING and peer.reader.buffered + len(data) > MAX_PREAUTH_BYTES:
            self._refuse(peer, BridgeErrorCode.FRAME_TOO_LARGE, "too much data before hello")
            return
        try:
            messages = peer.reader.feed(bytes(data))
        except BridgeProtocolError as error:
            self._refuse(peer, error.code, error.message)
            return
        for message in messages:
            if peer.closing:
                return
            self._dispatch(peer, message)

    def _dispatch(self, peer: _Peer, message: Message) -> None:
        if peer.role is PeerRole.PENDING:
            self._handshake(peer, message)
            return
        if isinstance(message, HelloRequest):
            self._refuse(peer, BridgeErrorCode.KIND_NOT_ACCEPTED, "hello sent twice")
            return
        if peer.role is PeerRole.TERMINAL and message.kind not in TERMINAL_REQUEST_KINDS:
            self._refuse(peer, BridgeErrorCode.KIND_NOT_ACCEPTED, f"{message.kind} from a terminal")
            return
        if peer.role is PeerRole.RENDERER and message.kind in TERMINAL_ONLY_KINDS:
            self._refuse(peer, BridgeErrorCode.KIND_NOT_ACCEPTED, f"{message.kind} from a window")
            return
        if isinstance(message, WindowActivateRequest):
            self.activate_requested.emit()
            return
        self.request_received.emit(peer.peer_id, message)

    def _handshake(self, peer: _Peer, message: Message) -> None:
        if isinstance(message, WindowActivateRequest):
            _limited.log(logging.INFO, "activate", "a second launch asked to show the window")
            self._stop_timer(peer)
            peer.closing = True
            peer.socket.disconnectFromServer()
            self.activate_requested.emit()
            return
        if not isinstance(message, HelloRequest):
            self._refuse(peer, BridgeErrorCode.HANDSHAKE_REQUIRED, f"{message.kind} before hello")
            return
        if message.role is ClientRole.TERMINAL:
            self._terminal_handshake(peer, message)
            return
        if not self._token or not hmac.compare_digest(message.token.encode("utf-8"), self._token):
            # (a window of an earlier start reconnecting, mostly: it closes, and is told
            # whether this start has a window of its own)
            windowless = self._windowless is not None and self._windowless()
            self._reject_hello(
                peer,
                BridgeErrorCode.TOKEN_INVALID,
                "the token is not valid (a window of an earlier start of Maka, say"
                + (", told to open a new one)" if windowless else ")"),
                windowless_owner=windowless,
            )
            return
        pid = peer_pid(peer.socket)
        if self._token_used and (pid is None or pid != self._token_pid):
            # The token was consumed by another process: a copy read from the renderer's
            # environment (or the test's stdout) is worth nothing.
            self._reject_hello(peer, BridgeErrorCode.TOKEN_INVALID, "the token was already used")
            return
        if not self._admit(peer, message, PeerRole.RENDERER):
            return
        self._token_used = True
        self._token_pid = pid
        self.renderer_connected.emit(peer.peer_id)

    def _terminal_handshake(self, peer: _Peer, message: HelloRequest) -> None:
        token = self._terminal_token
        if not token or not hmac.compare_digest(message.token.encode("utf-8"), token):
            self._reject_hello(peer, BridgeErrorCode.TOKEN_INVALID, "the token is not valid")
            return
        uid = peer_uid(peer.socket)
        if sys.platform != "win32" and uid != os.getuid():
            # The token file is private, but a terminal token is reusable: only this user's
            # processes may present it.
            self._reject_hello(peer, BridgeErrorCode.TOKEN_INVALID, "another user's process")
            return
        self._admit(peer, message, PeerRole.TERMINAL)

    def _admit(self, peer: _Peer, message: HelloRequest, role: PeerRole) -> bool:
        """The tail both handshakes share once the token was accepted: the protocol version,
        the room left for the role, then ``hello.ok``. False: refused (and said so)."""
        if message.protocol_version != PROTOCOL_VERSION:
            self._reject_hello(
                peer,
                BridgeErrorCode.PROTOCOL_VERSION_UNSUPPORTED,
                f"protocol {message.protocol_version} is not {PROTOCOL_VERSION}",
            )
            return False
        renderer = role is PeerRole.RENDERER
        present = self.renderer_ids() if renderer else self.terminal_ids()
        if len(present) >= (MAX_RENDERERS if renderer else MAX_TERMINALS):
            self._reject_hello(peer, BridgeErrorCode.HANDSHAKE_REQUIRED, f"too many {role}s")
            return False
        self._stop_timer(peer)
        peer.role = role
        peer.command = message.command.value if message.command is not None else None
        peer.data_dir_said = message.data_dir_said
        reply = self._hello_reply().model_copy(update={"correlation_id": message.correlation_id})
        self._write(peer, encode_frame(reply))
        _log.info("%s connection %d authenticated", role, peer.peer_id)
        return True

    def _reject_hello(
        self, peer: _Peer, code: BridgeErrorCode, text: str, *, windowless_owner: bool = False
    ) -> None:
        push = HelloRejectedPush(code=code.value, message=text, windowless_owner=windowless_owner)
        self._write(peer, encode_frame(push))
        self._refuse(peer, code, text)

    def _refuse(self, peer: _Peer, code: BridgeErrorCode | str, text: str) -> None:
        _limited.log(
            logging.WARNING,
            str(code),
            "closing connection %d [%s]: %s",
            peer.peer_id,
            code,
            escape(text, 160),
        )
        self.peer_refused.emit(str(code))
        peer.closing = True
        self._stop_timer(peer)
        # Flush a hello.rejected (if any) before the close; discard whatever the peer still sends.
        peer.socket.flush()
        peer.socket.disconnectFromServer()
        if peer.socket.state() != QLocalSocket.LocalSocketState.UnconnectedState:
            # A peer that never finishes reading our last frame is cut off a second later;
            # the socket is the timer's context, so a socket already deleted cancels it.
            QTimer.singleShot(1000, peer.socket, peer.socket.abort)

    def _on_handshake_timeout(self, peer_id: int) -> None:
        peer = self._peers.get(peer_id)
        if peer is not None and peer.role is PeerRole.PENDING and not peer.closing:
            self._refuse(peer, BridgeErrorCode.HANDSHAKE_REQUIRED, "no hello within the timeout")

    def _write(self, peer: _Peer, frame: bytes) -> bool:
        if peer.socket.bytesToWrite() + len(frame) > MAX_PENDING_WRITE_BYTES:
            _limited.log(
                logging.WARNING,
                "stopped_reading",
                "connection %d stopped reading; closing it",
                peer.peer_id,
            )
            peer.closing = True
            peer.socket.abort()
            return False
        return peer.socket.write(frame) == len(frame)

    def _stop_timer(self, peer: _Peer) -> None:
        if peer.timer is not None:
            peer.timer.stop()
            peer.timer.deleteLater()
            peer.timer = None

    def _on_disconnected(self, peer_id: int) -> None:
        peer = self._peers.get(peer_id)
        if peer is not None:
            self._drop(peer)

    def _drop(self, peer: _Peer) -> None:
        if self._peers.pop(peer.peer_id, None) is None:
            return
        self._stop_timer(peer)
        peer.closing = True
        if peer.socket.state() != QLocalSocket.LocalSocketState.UnconnectedState:
            peer.socket.abort()
        peer.socket.deleteLater()
        self.peer_closed.emit(peer.peer_id)
