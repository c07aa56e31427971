"""A real renderer (the window, or the interrupted-session banner alone) connected to a real main
process started by ``maka_process.start_main``: the start-up every desktop e2e test repeats."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from renderer.bridge_client import RendererBridge
from renderer.bridge_port import ConnectionState
from renderer.interrupted_banner import InterruptedBanner
from renderer.main_window import MainWindow
from tests.helpers.maka_process import MainProcess

CONNECT_MS = 30_000


def connected_window(
    qtbot: QtBot, main: MainProcess, timeout_ms: int = CONNECT_MS
) -> tuple[MainWindow, RendererBridge]:
    """The main window, shown and connected to ``main``."""
    bridge = RendererBridge(main.socket_name, main.token)
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.show()
    bridge.start()
    qtbot.waitUntil(
        lambda: bridge.connection_state is ConnectionState.CONNECTED, timeout=timeout_ms
    )
    return window, bridge


def connected_banner(
    qtbot: QtBot, main: MainProcess, session_id: str, timeout_ms: int = CONNECT_MS
) -> tuple[InterruptedBanner, RendererBridge]:
    """The interrupted-session banner of ``session_id`` alone, shown and connected to ``main``."""
    bridge = RendererBridge(main.socket_name, main.token)
    banner = InterruptedBanner(bridge)
    qtbot.addWidget(banner)
    banner.show()
    banner.set_session(session_id, interrupted=True)
    bridge.start()
    qtbot.waitUntil(
        lambda: bridge.connection_state is ConnectionState.CONNECTED, timeout=timeout_ms
    )
    return banner, bridge
