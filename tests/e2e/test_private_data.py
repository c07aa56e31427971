"""Other users cannot read the data directory: the folder 0700 and every file in it 0600, on
every path that creates them (desktop and CLI), whatever the umask; ``maka doctor`` names wider
modes."""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import MessageKind, ProviderChoice, SettingsUpdateRequest
from storage.private_log import PrivateRotatingFileHandler
from tests.helpers.maka_process import main_log, run_maka, start_main
from tests.helpers.maka_run import maka
from tests.helpers.wire_client import WireClient

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform == "win32", reason="Windows uses ACLs, not modes"),
]


@pytest.fixture(autouse=True)
def _usual_umask() -> Iterator[None]:
    """The common default: without care, new files would be 0644 and folders 0755."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def _wider(data_dir: Path) -> list[str]:
    found = []
    for path in [data_dir, *data_dir.rglob("*")]:
        info = os.lstat(path)
        if stat.S_ISSOCK(info.st_mode) or stat.S_ISLNK(info.st_mode):
            continue
        if stat.S_IMODE(info.st_mode) & 0o077:
            found.append(f"{path.relative_to(data_dir)} {stat.S_IMODE(info.st_mode):o}")
    return found


def test_the_desktop_creates_a_private_data_directory(qtbot: QtBot, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"  # not there yet: the desktop creates it
    main = start_main(data_dir).wait_ready()
    try:
        qtbot.waitUntil(lambda: "main process ready" in main_log(data_dir), timeout=30_000)
        client = WireClient(main.socket_name)
        client.hello(main.token)
        qtbot.waitUntil(lambda: client.has(MessageKind.HELLO_OK), timeout=10_000)
        client.send(SettingsUpdateRequest(provider=ProviderChoice.OFFLINE_DEMO, correlation_id="s"))
        qtbot.waitUntil(lambda: client.has(MessageKind.SETTINGS_CURRENT), timeout=10_000)
        names = {p.name for p in data_dir.rglob("*")}
        assert {"runtime.sqlite", "runtime.sqlite-wal", "main.log", "settings.json"} <= names
        assert "maka-main.lock" in names
        assert _wider(data_dir) == []
    finally:
        main.stop()


def test_the_cli_creates_private_files_and_a_private_export(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    data_dir = tmp_path / "cli-data"
    result = maka(
        ["run", "--cwd", str(workspace), "--permission-mode", "auto", "build the demo"], data_dir
    )
    assert result.returncode == 0, result.stderr
    assert "runtime.sqlite" in {p.name for p in data_dir.iterdir()}
    assert _wider(data_dir) == []
    sessions = maka(["sessions", "--json"], data_dir)
    session_id = json.loads(sessions.stdout)["sessions"][0]["sessionId"]
    target = tmp_path / "export.jsonl"
    exported = maka(["export", session_id, "-o", str(target)], data_dir)
    assert exported.returncode == 0, exported.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_files_an_earlier_version_left_readable_are_tightened_and_doctor_names_them(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    data_dir = tmp_path / "old"
    assert maka(["run", "--cwd", str(workspace), "hello"], data_dir).returncode == 0
    # As an earlier version (or a careless copy) left them:
    data_dir.chmod(0o755)
    (data_dir / "runtime.sqlite").chmod(0o644)
    (data_dir / "logs").mkdir(exist_ok=True)
    (data_dir / "logs").chmod(0o755)
    (data_dir / "logs" / "main.log").write_text("old history\n")
    (data_dir / "logs" / "main.log").chmod(0o644)

    doctor = run_maka(data_dir, "doctor", "--json")
    assert doctor.returncode == 1, doctor.stdout
    problems = json.loads(doctor.stdout)["problems"]
    flagged = {Path(p["message"].split(" has mode")[0]).name for p in problems}
    assert {p["code"] for p in problems} == {"data_not_private"}
    assert flagged == {data_dir.name, "logs", "runtime.sqlite", "main.log"}
    assert any("chmod 700" in p["message"] for p in problems)

    # The next start of the desktop (or a CLI command) tightens what it opens.
    assert maka(["run", "--cwd", str(workspace), "hello"], data_dir).returncode == 0
    remaining = _wider(data_dir)
    # The CLI does not write the desktop's log; the desktop does.
    assert remaining == ["logs 755", "logs/main.log 644"], remaining
    main = start_main(data_dir).wait_ready()
    main.stop()
    assert _wider(data_dir) == []
    doctor = run_maka(data_dir, "doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr


def test_a_rotated_log_starts_private(tmp_path: Path) -> None:
    handler = PrivateRotatingFileHandler(tmp_path / "main.log", maxBytes=200, backupCount=2)
    logger = logging.getLogger("test.private.rotation")
    logger.addHandler(handler)
    try:
        for index in range(30):
            logger.warning("record %d %s", index, "x" * 40)
    finally:
        logger.removeHandler(handler)
        handler.close()
    files = sorted(tmp_path.iterdir())
    assert [f.name for f in files] == ["main.log", "main.log.1", "main.log.2"]
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
