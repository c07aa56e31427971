"""Orderly shutdown of the real main process on SIGTERM, SIGINT and SIGHUP.

The signal arrives while Qt sits in its event loop (where Python handlers alone would never run);
the main process tells its renderers it is closing, closes the IPC server, closes the store,
releases the lock and exits 0. The next start then finds no lock and no socket to take over.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import psutil
import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import (
    HostStatePush,
    MessageKind,
    PermissionDecision,
    PermissionRequestedPush,
    PermissionsAnswerRequest,
    SessionsCreateRequest,
    SessionUpdatedPush,
    TurnsSendRequest,
)
from storage.instance_lock import LOCK_FILE_NAME
from tests.helpers.maka_process import main_log, start_main
from tests.helpers.maka_run import committed_runs, scripted_env, write_script
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


def test_shutdown_cancels_the_running_turn_and_stops_its_background_shell(
    qtbot: QtBot, data_dir: Path, tmp_path: Path
) -> None:
    """SIGTERM while a turn waits on the model and a background shell it started still runs:
    the turn ends with a committed ``cancelled`` terminal event that says Maka stopped it (not
    the user), the shell's process tree is gone, and only then is the store closed and the lock
    released."""
    work = tmp_path / "work"
    work.mkdir()
    script = write_script(
        tmp_path / "script.json",
        [
            [
                {
                    "text": "Starting a server.",
                    "toolCalls": [
                        {
                            "id": "bg",
                            "name": "bash",
                            "args": {"command": "sleep 300", "background": True},
                        }
                    ],
                },
                {"hang": True},
            ]
        ],
    )
    main = start_main(data_dir, scripted_env(script)).wait_ready()
    try:
        client = WireClient(main.socket_name)
        client.hello(main.token)
        qtbot.waitUntil(lambda: client.has(MessageKind.HELLO_OK), timeout=10_000)
        client.send(SessionsCreateRequest(cwd=str(work)))
        qtbot.waitUntil(lambda: client.has(MessageKind.SESSION_UPDATED), timeout=10_000)
        created = client.first(MessageKind.SESSION_UPDATED)
        assert isinstance(created, SessionUpdatedPush)
        session_id = created.session.session_id
        client.send(TurnsSendRequest(session_id=session_id, text="start the server"))
        qtbot.waitUntil(lambda: client.has(MessageKind.PERMISSION_REQUESTED), timeout=10_000)
        ask = client.first(MessageKind.PERMISSION_REQUESTED)
        assert isinstance(ask, PermissionRequestedPush)
        client.send(
            PermissionsAnswerRequest(
                session_id=session_id, request_id=ask.request_id, decision=PermissionDecision.ALLOW
            )
        )
        registry = data_dir / "background-shells.jsonl"
        qtbot.waitUntil(registry.exists, timeout=10_000)
        shell = json.loads(registry.read_text().splitlines()[0])
        assert psutil.pid_exists(shell["pid"])
        qtbot.wait(300)  # the turn is now waiting on the (hanging) model
        assert main.terminate() == 0, main.stderr()
    finally:
        main.stop()
    assert not _alive(shell["pid"]), "the background shell was stopped"
    ((header, events),) = committed_runs(data_dir)
    assert header.status == "cancelled" and header.failure_class == "cancelled_by_user"
    assert events[-1].get("status") == "cancelled"
    # Maka stopped it, not a cancel of the user's: its ending says so.
    ending: dict[str, Any] = dict(events[-1].get("content") or {})
    assert ending.get("reason") == "host_stopped", events[-1]
    assert events[-1]["actions"]["stateDelta"]["abortSource"] == "host"
    assert not (data_dir / LOCK_FILE_NAME).exists()


def _alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
