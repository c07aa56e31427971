"""Orderly shutdown of the real main process on SIGTERM, SIGINT and SIGHUP.

The signal arrives while Qt sits in its event loop (where Python handlers alone would never run);
the main process tells its renderers it is closing, closes the IPC server, closes the store,
releases the lock and exits 0. The next start then finds no lock and no socket to take over.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import HostStatePush, MessageKind
from main_process.instance_lock import LOCK_FILE_NAME
from tests.helpers.maka_process import main_log, start_main
from tests.helpers.wire_client import WireClient

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=str)
def test_signal_runs_the_orderly_shutdown_and_exits_0(
    qtbot: QtBot, data_dir: Path, sig: signal.Signals
) -> None:
    main = start_main(data_dir).wait_ready()
    try:
        renderer = WireClient(main.socket_name)
        renderer.hello(main.token)
        qtbot.waitUntil(lambda: renderer.has(MessageKind.HELLO_OK), timeout=10_000)
        assert (data_dir / LOCK_FILE_NAME).exists()
        assert main.terminate(sig) == 0, main.stderr()
        qtbot.waitUntil(lambda: renderer.disconnected, timeout=10_000)
        states = [m.state for m in renderer.received if isinstance(m, HostStatePush)]
        assert "closing" in states
        assert not (data_dir / LOCK_FILE_NAME).exists(), "the lock is released"
        log = main_log(data_dir)
        assert f"signal {int(sig)}: shutting down" in log
        assert "main process closed (exit 0)" in log
        assert "Traceback" not in main.stderr()
    finally:
        main.stop()
    again = start_main(data_dir).wait_ready()
    try:
        assert again.process.poll() is None
    finally:
        assert again.terminate() == 0
        again.stop()


def test_repeated_signals_close_once(data_dir: Path) -> None:
    main = start_main(data_dir).wait_ready()
    try:
        main.process.send_signal(signal.SIGTERM)
        main.process.send_signal(signal.SIGTERM)
        main.process.send_signal(signal.SIGINT)
        assert main.process.wait(30) == 0
        assert main_log(data_dir).count("main process closed") == 1
    finally:
        main.stop()
