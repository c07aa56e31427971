"""The second launch's side of single instance: ask the running one to show its window.

When ``maka`` finds the data directory's instance lock held by a live process, it connects to that
instance's socket (its path derives from the data directory, see
``app.host.ipc_endpoint.find_endpoint``), sends one ``window.activate`` frame and exits 0. The
running instance may still be in its startup recovery (not listening yet), so the connection is
retried for a few seconds before giving up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from PySide6.QtNetwork import QLocalSocket

from app.bridge_contract import WindowActivateRequest, encode_frame

_log = logging.getLogger("maka.main.activation")

_RETRY_INTERVAL_S = 0.1


def request_activation(endpoint: Callable[[], str | None], timeout_s: float = 10.0) -> bool:
    """Blocking (no event loop needed). True when the running instance received the request.

    ``endpoint`` is asked again on every attempt: a running instance that is just starting may
    not have said where it listens yet."""
    deadline = time.monotonic() + timeout_s
    frame = encode_frame(WindowActivateRequest())
    socket_name = None
    while True:
        socket_name = endpoint()
        socket = QLocalSocket()
        if socket_name is not None:
            socket.connectToServer(socket_name)
        if socket_name is not None and socket.waitForConnected(1000):
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
