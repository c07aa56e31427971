"""The Database page's "Test connection" against a real PostgreSQL server
(``app/host/desktop_settings.py`` ``try_database``, what the main process runs on a worker
thread): a database without a ledger, one with the ledger, a server that does not answer and a
malformed URL, each with its code and never with the password.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from app import bridge_contract as bc
from app.host.desktop_settings import DesktopSettings, try_database
from app.host.host_services import SettingsChange
from runtime.ledger.store_ports import StoreRefusal
from storage.ledger.postgres_schema import SCHEMA_VERSION
from storage.ledger.postgres_store import open_postgres_store

pytestmark = pytest.mark.contract

SECRET = "probe-secret"


def _with_password(url: str) -> str:
    return url.replace("postgresql://maka@", f"postgresql://maka:{SECRET}@", 1)


def test_a_database_without_a_ledger_and_then_with_one(postgres_url: str) -> None:
    empty = try_database(_with_password(postgres_url))
    assert empty.ok and empty.code is None
    assert empty.server_version and empty.server_version[0].isdigit()
    assert empty.schema_version == 0
    assert SECRET not in empty.database_url and ":****@" in empty.database_url
    open_postgres_store(postgres_url, heartbeat=False).close()
    ready = try_database(postgres_url)
    assert ready.ok and ready.schema_version == ready.program_schema_version == SCHEMA_VERSION


def test_a_server_that_does_not_answer_is_store_io_failed_without_the_password() -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    tested = try_database(f"postgresql://maka:{SECRET}@127.0.0.1:{port}/maka")
    assert not tested.ok and tested.code == "store_io_failed"
    assert SECRET not in tested.message + tested.database_url


def test_a_malformed_url_is_refused_before_any_connection() -> None:
    tested = try_database("mysql://maka:pw@db/maka")
    assert (tested.ok, tested.code) == (False, "database_url_invalid")


def test_the_stored_url_is_tried_when_the_window_sends_none_or_the_masked_one(
    tmp_path: Path, postgres_url: str
) -> None:
    settings = DesktopSettings(tmp_path)
    view = settings.update(
        SettingsChange(
            bc.ProviderChoice.OFFLINE_DEMO,
            database="postgresql",
            database_url=_with_password(postgres_url),
        )
    )
    assert settings.database_url_to_try(None) == _with_password(postgres_url)
    assert settings.database_url_to_try(view.database_url) == _with_password(postgres_url)
    assert try_database(settings.database_url_to_try(None)).ok


def test_a_server_the_setting_chose_that_does_not_answer_says_how_to_go_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window's Settings cannot open while the store is refused: the refusal says how to
    start with this computer's database again (and never shows the password)."""
    from storage.ledger.ledger_store import open_store

    monkeypatch.delenv("MAKA_DATABASE_URL", raising=False)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    DesktopSettings(tmp_path).update(
        SettingsChange(
            bc.ProviderChoice.OFFLINE_DEMO,
            database="postgresql",
            database_url=f"postgresql://maka:{SECRET}@127.0.0.1:{port}/maka",
        )
    )
    with pytest.raises(StoreRefusal) as refused:
        open_store(tmp_path)
    assert refused.value.code == "store_io_failed"
    assert 'set "database" to "sqlite" in ' + str(tmp_path / "settings.json") in (
        refused.value.message
    )
    assert SECRET not in refused.value.message
    assert not (tmp_path / "runtime.sqlite").exists()
