"""While the main process opens a database an older Maka left, the window is told it is being
upgraded (a long history takes seconds), not only that interrupted runs are checked; a current
database gets no such note."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import HostState as WireHostState
from app.bridge_contract import HostStatePush, MessageKind, SessionSummary
from app.host.host_services import RecoveryReport
from app.host.ipc_endpoint import find_endpoint
from main_process.host_app import HostApp, HostConfig, upgrade_note
from renderer.bridge_port import ConnectionState
from renderer.connection_status import ConnectionStatus
from storage.ledger.ledger_store import open_store
from tests.helpers.fake_bridge import FakeBridge
from tests.helpers.fake_host_services import FakeHostServices
from tests.helpers.schema_v3 import current_store_with_ledgers, write_schema_3
from tests.helpers.wire_client import WireClient


class _HeldRecovery(FakeHostServices):
    """Opening that waits for the test, so the window connects while it runs."""

    def __init__(self) -> None:
        super().__init__(sessions={"s1": SessionSummary(session_id="s1", cwd="/tmp", title="one")})
        self.release = threading.Event()

    def recover_at_startup(self) -> RecoveryReport:
        self.release.wait(10)
        return super().recover_at_startup()


def _details_while_opening(
    qtbot: QtBot, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> list[str]:
    services = _HeldRecovery()
    config = HostConfig(
        data_dir, safe_resume_enabled=False, launch_renderer=False, announce_endpoint=True
    )
    host = HostApp(config, lambda _path, **_: services, lambda _code: None)
    assert host.start() is None
    token = capsys.readouterr().out.split("token=")[1].split()[0]
    endpoint = find_endpoint(data_dir)
    assert endpoint is not None
    try:
        client = WireClient(endpoint)
        client.hello(token)
        qtbot.waitUntil(lambda: client.has(MessageKind.HELLO_OK), timeout=5000)
        # The ready state, broadcast only after opening, is the marker that every push sent
        # on connecting has arrived.
        services.release.set()
        qtbot.waitUntil(
            lambda: any(
                isinstance(m, HostStatePush) and m.state == WireHostState.READY
                for m in client.received
            ),
            timeout=5000,
        )
        return [
            m.detail
            for m in client.received
            if isinstance(m, HostStatePush) and m.state == WireHostState.RECOVERING
        ]
    finally:
        services.release.set()
        host.close()


def test_an_older_database_is_said_to_be_upgraded_while_the_host_opens(
    qtbot: QtBot, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_schema_3(current_store_with_ledgers(tmp_path / "current"), tmp_path / "data")
    details = _details_while_opening(qtbot, data.parent, capsys)
    assert len(details) == 1 and details[0].startswith(
        "Upgrading saved data from an earlier Maka"
    ), details


def test_a_current_database_gets_no_upgrade_note(
    qtbot: QtBot, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    open_store(data).close()
    assert upgrade_note(data) == ""
    assert upgrade_note(tmp_path / "nothing-here") == ""
    assert _details_while_opening(qtbot, data, capsys) == []


def test_the_status_bar_shows_the_upgrade_instead_of_the_generic_check(qtbot: QtBot) -> None:
    bridge = FakeBridge()
    status = ConnectionStatus(bridge)
    qtbot.addWidget(status)
    assert bridge.connection_state is ConnectionState.CONNECTED
    bridge.host_state_changed.emit(HostStatePush(state=WireHostState.RECOVERING))
    assert status.host_label.text() == "Checking interrupted runs…"
    note = "Upgrading the saved data of an earlier Maka (once), then checking interrupted runs…"
    bridge.host_state_changed.emit(HostStatePush(state=WireHostState.RECOVERING, detail=note))
    assert status.host_label.text() == note
    bridge.host_state_changed.emit(HostStatePush(state=WireHostState.READY))
    assert status.host_label.text() == ""


def test_a_copied_database_is_checked_with_its_progress_in_the_window(
    qtbot: QtBot, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A restored backup (its stamp names another file) is checked in full on the start-up
    worker while the window is connected; the window is told how far, then the generic
    check, then ready."""
    import shutil

    from storage.ledger.store_verification import stamp_path

    database = current_store_with_ledgers(tmp_path / "original")
    data = tmp_path / "data"
    data.mkdir()
    shutil.copyfile(database, data / database.name)
    shutil.copyfile(stamp_path(database), stamp_path(data / database.name))
    services = _HeldRecovery()
    connected = threading.Event()

    def open_then_serve(path: Path, **_: object) -> _HeldRecovery:
        connected.wait(10)
        open_store(path).close()  # the real open: the whole-file check of the copy
        return services

    config = HostConfig(
        data, safe_resume_enabled=False, launch_renderer=False, announce_endpoint=True
    )
    host = HostApp(config, open_then_serve, lambda _code: None)
    assert host.start() is None
    token = capsys.readouterr().out.split("token=")[1].split()[0]
    endpoint = find_endpoint(data)
    assert endpoint is not None
    try:
        client = WireClient(endpoint)
        client.hello(token)
        qtbot.waitUntil(lambda: client.has(MessageKind.HELLO_OK), timeout=5000)
        connected.set()
        services.release.set()
        qtbot.waitUntil(
            lambda: any(
                isinstance(m, HostStatePush) and m.state == WireHostState.READY
                for m in client.received
            ),
            timeout=10_000,
        )
    finally:
        connected.set()
        services.release.set()
        host.close()
    details = [
        m.detail
        for m in client.received
        if isinstance(m, HostStatePush) and m.state == WireHostState.RECOVERING
    ]
    checking = [d for d in details if d.startswith("Checking the whole database")]
    assert checking and checking[0].endswith(": 0%…"), details
    assert details[-1] == "", details  # passed: the generic "checking interrupted runs"
