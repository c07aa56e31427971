"""The desktop's Database setting against a real PostgreSQL server: chosen through the main
process's own ``settings.update`` (as the Settings dialog sends it), it changes nothing until the
next start (the store is opened once), and "Test connection" tries the stored URL from the main
process; the next ``maka`` start opens the ledger on the server
because of the saved setting alone (no ``MAKA_DATABASE_URL``), a turn run there lands on the
server and not in ``runtime.sqlite``, ``maka`` commands with the same data folder read the same
ledger, and the password never comes back to a window, into the log or into ``maka doctor``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import (
    DatabaseTestedPush,
    MessageKind,
    ProviderChoice,
    SettingsCurrentPush,
    SettingsTestDatabaseRequest,
    SettingsUpdateRequest,
)
from tests.helpers.maka_process import MainProcess, main_log, run_maka, start_main
from tests.helpers.wire_client import WireClient

pytestmark = pytest.mark.e2e

SECRET = "e2e-secret-pw"
"""The cluster trusts loopback connections, so a password in the URL is sent to no one; it is
there to be looked for wherever the URL might leak."""


def _connect(qtbot: QtBot, main: MainProcess) -> WireClient:
    qtbot.waitUntil(lambda: "main process ready" in main_log(main.data_dir), timeout=60_000)
    client = WireClient(main.socket_name)
    client.hello(main.token)
    qtbot.waitUntil(lambda: client.has(MessageKind.HELLO_OK), timeout=10_000)
    return client


def _settings(qtbot: QtBot, client: WireClient, tag: str) -> SettingsCurrentPush:
    client.ask_marker(tag)
    qtbot.waitUntil(lambda: client.answered(tag), timeout=10_000)
    answer = next(m for m in client.received if m.correlation_id == tag)
    assert isinstance(answer, SettingsCurrentPush), answer
    return answer


def _server_sessions(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM sessions").fetchone()
    assert row is not None
    return int(row[0])


def _sqlite_sessions(data_dir: Path) -> int:
    conn = sqlite3.connect(data_dir / "runtime.sqlite")
    try:
        return int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0])
    finally:
        conn.close()


def test_the_saved_setting_opens_the_ledger_on_the_server_at_the_next_start(
    qtbot: QtBot, tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MAKA_DATABASE_URL", raising=False)
    url = postgres_url.replace("postgresql://maka@", f"postgresql://maka:{SECRET}@", 1)
    masked = postgres_url.replace("postgresql://maka@", "postgresql://maka:****@", 1)
    data_dir = tmp_path / "data"
    work = tmp_path / "work"
    work.mkdir()

    first = start_main(data_dir).wait_ready()
    try:
        client = _connect(qtbot, first)
        assert _settings(qtbot, client, "before").database_in_use == ""  # SQLite
        client.send(
            SettingsUpdateRequest(
                provider=ProviderChoice.OFFLINE_DEMO,
                database="postgresql",
                database_url="mysql://maka@127.0.0.1/maka",
                correlation_id="bad",
            )
        )
        qtbot.waitUntil(lambda: client.answered("bad"), timeout=10_000)
        refusal = next(m for m in client.received if m.correlation_id == "bad")
        assert refusal.kind == MessageKind.ERROR
        assert getattr(refusal, "code", None) == "database_url_invalid"
        assert not (data_dir / "settings.json").exists(), "a refused URL is not saved"
        client.send(
            SettingsUpdateRequest(
                provider=ProviderChoice.OFFLINE_DEMO,
                database="postgresql",
                database_url=url,
                correlation_id="save",
            )
        )
        qtbot.waitUntil(lambda: client.answered("save"), timeout=10_000)
        now = _settings(qtbot, client, "after")
        assert (now.database, now.database_url) == ("postgresql", masked)
        assert now.database_in_use == "", "the open store stays SQLite until the next start"
        # "Test connection" of the stored URL (the window sends none: it has no password)
        client.send(SettingsTestDatabaseRequest(database_url=None, correlation_id="test"))
        qtbot.waitUntil(lambda: client.answered("test"), timeout=30_000)
        tested = next(m for m in client.received if m.correlation_id == "test")
        assert isinstance(tested, DatabaseTestedPush), tested
        assert (tested.ok, tested.schema_version, tested.database_url) == (True, 0, masked)
        assert SECRET not in json.dumps([m.model_dump(mode="json") for m in client.received])
        client.close()
    finally:
        first.stop()
    settings_file = data_dir / "settings.json"
    assert oct(os.stat(settings_file).st_mode & 0o777) == "0o600"

    second = start_main(data_dir).wait_ready()
    try:
        client = _connect(qtbot, second)
        assert _settings(qtbot, client, "started").database_in_use == masked
        # A terminal turn with the same data folder: run in this host, on the server.
        ran = run_maka(data_dir, "run", "--cwd", str(work), "write hello.txt saying hi")
        assert ran.returncode == 0, ran.stdout + ran.stderr
        client.close()
    finally:
        second.stop()
    assert _server_sessions(postgres_url) == 1
    assert _sqlite_sessions(data_dir) == 0, "nothing was written to this computer's database"
    assert SECRET not in main_log(data_dir)

    # maka commands without the host read the same ledger, and print no password.
    listed = run_maka(data_dir, "sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)["sessions"]) == 1
    doctor = run_maka(data_dir, "doctor", "--json")
    assert json.loads(doctor.stdout)["engine"] == "postgresql", doctor.stdout
    assert SECRET not in doctor.stdout + doctor.stderr
    # MAKA_DATABASE_URL still wins over the setting.
    other = run_maka(data_dir, "sessions", "--json", extra_env={"MAKA_DATABASE_URL": "mysql://x"})
    assert other.returncode != 0 and "database_url_invalid" in other.stdout + other.stderr
