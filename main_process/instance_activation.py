"""The second launch's side of single instance: ask the running one to show its window.

When ``maka`` finds the data directory's instance lock held by a live process, it connects to that
instance's socket (the name derives from the data directory, see ``ipc_server.socket_name_for``),
sends one ``window.activate`` frame and exits 0. The running instance may still be in its startup
recovery (not listening yet), so the connection is retried for a few seconds before giving up.
"""

from __future__ import annotations

import logging
import time

from PySide6.QtNetwork import QLocalSocket

from app.bridge_contract import WindowActivateRequest, encode_frame

_log = logging.getLogger("maka.main.activation")

_RETRY_INTERVAL_S = 0.1


def request_activation(socket_name: str, timeout_s: float = 10.0) -> bool:
    """Blocking (no event loop needed). True when the running instance received the request."""
    deadline = time.monotonic() + timeout_s
    frame = encode_frame(WindowActivateRequest())
    while True:
        socket = QLocalSocket()
        socket.connectToServer(socket_name)
        if socket.waitForConnected(1000):
            socket.write(frame)
            delivered = socket.waitForBytesWritten(2000) or socket.bytesToWrite() == 0
            # The server closes the connection once it handled the request; waiting for that
            # makes sure the frame was read before this process exits.
            if socket.state() != QLocalSocket.LocalSocketState.UnconnectedState:
                socket.waitForDisconnected(2000)
            socket.abort()
            if delivered:
                return True
        else:
            socket.abort()
        if time.monotonic() >= deadline:
            _log.warning("the running instance did not answer on %s", socket_name)
            return False
        time.sleep(_RETRY_INTERVAL_S)
