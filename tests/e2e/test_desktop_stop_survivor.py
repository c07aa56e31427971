"""A command that survived a crash, seen and stopped from the desktop
(docs/design/recovery.md section 9).

``maka run`` is killed (SIGKILL) while its bash command sleeps, with the supervisor disabled by
the test-only failpoint so the command survives on purpose. The real main process then starts
(flag on): auto-resume parks with ``background_operation_pending`` naming the command and pid.
The real banner (``RendererBridge`` + ``InterruptedBanner``) offers **Stop it**; clicking it ends
the command's process group and the banner updates to the park that still holds. A survivor
that ends by itself updates the banner too, without a click.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import SessionOpenedPush, ToolCardItem
from renderer.interrupted_banner import BannerState, InterruptedBanner
from runtime.ledger.process_records import ToolProcessRecord
from runtime.tools.process_identity import running_process, stop_tool_process
from storage.ledger.ledger_store import open_store
from tests.helpers.desktop_window import connected_banner
from tests.helpers.maka_process import MainProcess, maka_executable, start_main
from tests.helpers.maka_run import scripted_env, write_script

pytestmark = pytest.mark.e2e

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
WAIT_MS = 30_000


def _survivor(tmp_path: Path, seconds: int) -> tuple[ToolProcessRecord, Path, dict[str, str]]:
    """A session whose bash command outlived its SIGKILLed host."""
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    command = f"echo started > started.txt; sleep {seconds}; echo done >> late.txt"
    env = scripted_env(
        write_script(
            tmp_path / "script.json",
            [
                [
                    {
                        "text": "Running it.",
                        "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": command}}],
                    },
                    {"text": "Done."},
                ]
            ],
        )
    )
    environment = {**os.environ, **env, "MAKA_DATA_DIR": str(data)}
    environment["MAKA_FAILPOINT"] = "tool_supervisor_disabled"
    environment["QT_QPA_PLATFORM"] = "offscreen"
    host = subprocess.Popen(
        [*maka_executable(), "run", "--cwd", str(work), "--permission-mode", "auto", "go"],
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    records: list[ToolProcessRecord] = []
    while not records:
        assert time.monotonic() < deadline, "the command was never recorded"
        if data.exists() and (data / "runtime.sqlite").exists():
            store = open_store(data, read_only=True)
            try:
                records = list(store.list_tool_processes())
            finally:
                store.close()
        time.sleep(0.05)
    host.send_signal(signal.SIGKILL)
    host.wait(10)
    (record,) = records
    assert running_process(record) is not None
    return record, work, env


def _banner(qtbot: QtBot, main: MainProcess, session_id: str) -> InterruptedBanner:
    banner, _bridge = connected_banner(qtbot, main, session_id, WAIT_MS)
    qtbot.waitUntil(lambda: banner.state is BannerState.PARKED, timeout=WAIT_MS)
    return banner


def _card_settleable(qtbot: QtBot, banner: InterruptedBanner, session_id: str) -> bool:
    bridge = banner._bridge
    with qtbot.waitSignal(bridge.session_opened, timeout=WAIT_MS) as opened:
        bridge.open_session(session_id)
    push = opened.args[0]
    assert isinstance(push, SessionOpenedPush)
    (card,) = [item for item in push.items if isinstance(item, ToolCardItem)]
    return card.settleable


def _codes(banner: InterruptedBanner) -> list[str]:
    return [str(label.property("code")) for label in banner.reason_labels]


def test_stop_it_ends_the_survivor_and_the_banner_updates(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    record, work, env = _survivor(tmp_path, 60)
    try:
        main = start_main(tmp_path / "data", {**env, **FLAG}).wait_ready()
        processes.append(main)
        banner = _banner(qtbot, main, record.session_id)
        assert _codes(banner)[0] == "background_operation_pending"
        assert f"pid {record.pid}" in banner.details_label.text()
        assert "sleep 60" in banner.details_label.text()
        assert banner.stop_button.isVisible() and banner.stop_button.isEnabled()
        assert not _card_settleable(qtbot, banner, record.session_id), "no choice while it runs"
        members = [psutil.Process(record.pid), *psutil.Process(record.pid).children(True)]
        banner.stop_button.click()
        qtbot.waitUntil(
            lambda: "background_operation_pending" not in _codes(banner), timeout=WAIT_MS
        )
        assert running_process(record) is None
        _, alive = psutil.wait_procs(members, timeout=5)
        assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
        assert banner.state is BannerState.PARKED
        assert _codes(banner) == ["dangling_tool_state"]
        assert not banner.stop_button.isVisible()
        assert not (work / "late.txt").exists()
        assert _card_settleable(qtbot, banner, record.session_id), "it ended: now the user may say"
        assert main.terminate() == 0
    finally:
        stop_tool_process(record, grace_seconds=0.5)


def test_a_survivor_that_ends_by_itself_updates_the_banner(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    record, work, env = _survivor(tmp_path, 6)
    try:
        main = start_main(tmp_path / "data", {**env, **FLAG}).wait_ready()
        processes.append(main)
        banner = _banner(qtbot, main, record.session_id)
        assert "background_operation_pending" in _codes(banner)
        qtbot.waitUntil(
            lambda: "background_operation_pending" not in _codes(banner), timeout=WAIT_MS
        )
        assert _codes(banner) == ["dangling_tool_state"]
        assert (work / "late.txt").exists(), "it ran to its end, unstopped"
        assert main.terminate() == 0
    finally:
        stop_tool_process(record, grace_seconds=0.5)
