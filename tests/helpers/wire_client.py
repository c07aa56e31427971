"""A test client for the main process's IPC server: raw bytes or contract messages over
``QLocalSocket``, event driven so it works with a server in the same thread (pytest-qt) or in
another process. Use ``qtbot.waitUntil`` with the predicates below."""

from __future__ import annotations

from PySide6.QtNetwork import QLocalSocket

from app.bridge_contract import (
    PROTOCOL_VERSION,
    PUSH_KINDS,
    BridgeProtocolError,
    FrameReader,
    HelloRequest,
    Message,
    MessageKind,
    SettingsGetRequest,
    encode_frame,
)


class WireClient:
    def __init__(self, socket_name: str) -> None:
        self.socket = QLocalSocket()
        self.reader = FrameReader(accept=PUSH_KINDS)
        self.received: list[Message] = []
        self.disconnected = False
        self.protocol_error: str | None = None
        self.socket.readyRead.connect(self._on_ready_read)
        self.socket.disconnected.connect(self._on_disconnected)
        self.socket.connectToServer(socket_name)

    @property
    def connected(self) -> bool:
        return self.socket.state() == QLocalSocket.LocalSocketState.ConnectedState

    def send(self, message: Message) -> None:
        self.send_raw(encode_frame(message))

    def send_raw(self, data: bytes) -> None:
        self.socket.write(data)
        self.socket.flush()

    def hello(self, token: str, version: int = PROTOCOL_VERSION) -> None:
        self.send(HelloRequest(token=token, protocol_version=version, correlation_id="hello"))

    def kinds(self) -> list[str]:
        return [str(message.kind) for message in self.received]

    def first(self, kind: MessageKind) -> Message | None:
        return next((m for m in self.received if m.kind == kind), None)

    def all(self, kind: MessageKind) -> list[Message]:
        return [m for m in self.received if m.kind == kind]

    def has(self, kind: MessageKind) -> bool:
        return self.first(kind) is not None

    def ask_marker(self, tag: str) -> None:
        """Ask for the settings (a question every ready main process answers) with
        ``correlationId`` ``tag``. The answer is written after everything already sent to this
        client (the pushes right after the handshake, or right after a ``session.opened``):
        once ``answered(tag)``, a push that has not arrived was not sent before the question."""
        self.send(SettingsGetRequest(correlation_id=tag))

    def answered(self, tag: str) -> bool:
        return any(message.correlation_id == tag for message in self.received)

    def close(self) -> None:
        self.socket.abort()

    def _on_ready_read(self) -> None:
        data = self.socket.readAll().data()
        try:
            self.received.extend(self.reader.feed(bytes(data)))
        except BridgeProtocolError as error:
            self.protocol_error = str(error.code)

    def _on_disconnected(self) -> None:
        self.disconnected = True
