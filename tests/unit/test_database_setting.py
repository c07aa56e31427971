"""The desktop's Database setting (``storage/ledger/database_choice.py``, ``DesktopSettings``):
kept in the data folder's ``settings.json`` (mode 0600), a malformed URL refused with
``database_url_invalid`` and nothing written, the password never sent back (masked, and the masked
URL saved again keeps it), ``MAKA_DATABASE_URL`` winning, and every reader of the data folder
(``open_store``, ``maka`` commands) selecting the same database.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from app import bridge_contract as bc
from app.host.desktop_settings import DesktopSettings
from app.host.host_services import SettingsChange
from runtime.ledger.database_url import database_url_problem, masked_database_url
from runtime.ledger.store_ports import StoreRefusal
from storage.ledger import database_choice
from storage.ledger.database_choice import (
    DatabaseSource,
    database_url,
    select_database,
    unmasked_database_url,
    uses_postgres,
)

pytestmark = pytest.mark.unit

SERVER = "postgresql://maka:s3cr%40t@db.example.org:5432/maka"
MASKED = "postgresql://maka:****@db.example.org:5432/maka"


def _change(**database: str | None) -> SettingsChange:
    return SettingsChange(provider=bc.ProviderChoice.OFFLINE_DEMO, **database)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("", "is empty"),
        ("mysql://maka@db/maka", "must start with postgresql:// or postgres://"),
        ("db.example.org:5432/maka", "must start with postgresql:// or postgres://"),
        ("postgresql:///maka", "names no server (host)"),
        ("postgresql://maka@db:port/maka", "has a port that is not a number from 1 to 65535"),
        ("postgresql://maka@db:70000/maka", "has a port that is not a number from 1 to 65535"),
        ("postgresql://maka@db:0/maka", "has a port that is not a number from 1 to 65535"),
        ("postgresql://maka@db/ma ka", "contains spaces or control characters"),
        ("postgresql://" + "x" * 2100, "is longer than 2048 characters"),
    ],
)
def test_a_malformed_url_has_a_reason(url: str, problem: str) -> None:
    assert database_url_problem(url) == problem


@pytest.mark.parametrize(
    "url",
    [
        SERVER,
        "postgres://maka@127.0.0.1/maka",
        "postgresql://maka@[::1]:5433/maka",
        "postgresql:///maka?host=/var/run/postgresql",  # a Unix socket
        " postgresql://db/maka ",
    ],
)
def test_a_postgresql_url_passes(url: str) -> None:
    assert database_url_problem(url) is None


def test_the_password_is_masked_and_the_masked_url_keeps_it() -> None:
    assert masked_database_url(SERVER) == MASKED
    assert masked_database_url("postgresql://maka@db/maka") == "postgresql://maka@db/maka"
    assert (
        masked_database_url("postgresql://u:p@[::1]:5433/m") == "postgresql://u:****@[::1]:5433/m"
    )
    assert unmasked_database_url(MASKED, SERVER) == SERVER
    # the host edited in the masked URL: the password is kept, the new host taken
    edited = unmasked_database_url(MASKED.replace("db.example.org", "db2"), SERVER)
    assert edited == SERVER.replace("db.example.org", "db2")
    # a new password typed replaces the stored one
    assert (
        unmasked_database_url("postgresql://maka:new@db/m", SERVER) == "postgresql://maka:new@db/m"
    )


def test_sqlite_is_the_default(tmp_path: Path) -> None:
    view = DesktopSettings(tmp_path).view()
    assert (view.database, view.database_url) == ("sqlite", "")
    assert select_database(tmp_path, {}) == database_choice.DatabaseSelection(
        None, DatabaseSource.DEFAULT
    )
    assert database_url(tmp_path, {}) is None
    assert not (tmp_path / "settings.json").exists(), "reading writes nothing"


def test_the_server_is_stored_privately_and_never_shown_back(tmp_path: Path) -> None:
    settings = DesktopSettings(tmp_path)
    view = settings.update(_change(database="postgresql", database_url=f" {SERVER} "))
    assert (view.database, view.database_url) == ("postgresql", MASKED)
    path = tmp_path / "settings.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stored = json.loads(path.read_text(encoding="utf-8"))
    assert (stored["database"], stored["database_url"]) == ("postgresql", SERVER)
    # read by a new process (the next start, a maka command) from the same data folder
    assert DesktopSettings(tmp_path).view().database_url == MASKED
    assert select_database(tmp_path, {}).source is DatabaseSource.SETTING
    assert database_url(tmp_path, {}) == SERVER
    # saving the dialog again with the masked URL it showed keeps the password
    settings.update(_change(database_url=MASKED))
    assert json.loads(path.read_text(encoding="utf-8"))["database_url"] == SERVER


def test_choosing_sqlite_again_keeps_the_url_for_later(tmp_path: Path) -> None:
    settings = DesktopSettings(tmp_path)
    settings.update(_change(database="postgresql", database_url=SERVER))
    view = settings.update(_change(database="sqlite"))
    assert (view.database, view.database_url) == ("sqlite", MASKED)
    assert database_url(tmp_path, {}) is None


@pytest.mark.parametrize("bad", ["mysql://maka@db/maka", "postgresql:///maka", ""])
def test_a_malformed_url_is_refused_and_nothing_is_saved(tmp_path: Path, bad: str) -> None:
    settings = DesktopSettings(tmp_path)
    settings.update(_change(database="sqlite"))
    before = (tmp_path / "settings.json").read_bytes()
    with pytest.raises(StoreRefusal) as refused:
        settings.update(_change(database="postgresql", database_url=bad))
    assert refused.value.code == "database_url_invalid"
    assert (tmp_path / "settings.json").read_bytes() == before
    assert settings.view().database == "sqlite"


def test_without_the_driver_the_server_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database_choice, "postgres_driver_installed", lambda: False)
    monkeypatch.setattr(
        "app.host.desktop_settings.postgres_driver_installed", lambda: False, raising=True
    )
    settings = DesktopSettings(tmp_path)
    assert settings.view().postgres_driver is False
    with pytest.raises(StoreRefusal) as refused:
        settings.update(_change(database="postgresql", database_url=SERVER))
    assert refused.value.code == "postgres_driver_missing"
    assert "pip install 'maka[postgres]'" in refused.value.message
    # a setting saved while the driver was there: the next open says what to install
    (tmp_path / "settings.json").write_text(
        json.dumps({"database": "postgresql", "database_url": SERVER}), encoding="utf-8"
    )
    with pytest.raises(StoreRefusal) as opening:
        database_url(tmp_path, {})
    assert opening.value.code == "postgres_driver_missing"
    assert "s3cr" not in opening.value.message


def test_the_environment_variable_wins(tmp_path: Path) -> None:
    DesktopSettings(tmp_path).update(_change(database="postgresql", database_url=SERVER))
    env = {"MAKA_DATABASE_URL": "postgresql://ci@127.0.0.1:5433/other"}
    assert select_database(tmp_path, env).source is DatabaseSource.ENVIRONMENT
    assert database_url(tmp_path, env) == "postgresql://ci@127.0.0.1:5433/other"
    with pytest.raises(StoreRefusal) as refused:
        database_url(tmp_path, {"MAKA_DATABASE_URL": "mysql://x"})
    assert refused.value.code == "database_url_invalid"
    assert refused.value.message.startswith("MAKA_DATABASE_URL must start with postgresql://")


def test_a_damaged_stored_url_is_refused_with_its_code_and_without_its_password(
    tmp_path: Path,
) -> None:
    (tmp_path / "settings.json").write_text(
        json.dumps({"database": "postgresql", "database_url": "mysql://u:hunter2@db/x"}),
        encoding="utf-8",
    )
    with pytest.raises(StoreRefusal) as refused:
        database_url(tmp_path, {})
    assert refused.value.code == "database_url_invalid"
    assert "settings.json" in refused.value.message and "hunter2" not in refused.value.message


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"database": "postgresql", "database_url": "postgresql://u@db/x"', "not JSON text"),
        ("{not json", "not JSON text"),
        ("", "not JSON text"),
        ('["postgresql"]', "holds a JSON list, not an object"),
        ('{"database": 5}', 'its "database" is 5, not "sqlite" or "postgresql"'),
        ('{"database": "PostgreSQL"}', 'its "database" is "PostgreSQL", not'),
        (
            '{"database": "postgresql://maka:hunter2@db/x"}',
            'its "database" holds a URL, not "sqlite" or "postgresql": a server\'s URL goes in',
        ),
        ('{"database": "postgresql", "database_url": {"x": 1}}', 'its "database_url" is not text'),
    ],
)
def test_a_damaged_settings_file_is_refused_not_read_as_this_computers_database(
    tmp_path: Path, text: str, why: str
) -> None:
    """A settings file that is there but cannot be read (a hand edit left it broken) may have
    chosen a PostgreSQL server: read as the default, every command opened (and started) a
    second ledger in the data folder. It is refused with ``settings_damaged``, saying why and
    what to do; the variable still wins, and a missing file is still the default."""
    (tmp_path / "settings.json").write_text(text, encoding="utf-8")
    with pytest.raises(StoreRefusal) as refused:
        database_url(tmp_path, {})
    assert refused.value.code == "settings_damaged"
    assert why in refused.value.message and "remove it" in refused.value.message
    assert "hunter2" not in refused.value.message  # a URL's password is never shown
    assert uses_postgres(tmp_path, {}) is True  # (so no "no ledger yet" skips the refusal)
    assert not (tmp_path / "runtime.sqlite").exists()
    server = "postgresql://ci@127.0.0.1:5433/other"
    assert database_url(tmp_path, {"MAKA_DATABASE_URL": server}) == server
    (tmp_path / "settings.json").unlink()
    assert database_url(tmp_path, {}) is None
    (tmp_path / "settings.json").write_text('{"provider": "offline_demo"}', encoding="utf-8")
    assert database_url(tmp_path, {}) is None
    (tmp_path / "settings.json").write_text('\ufeff{"database": "sqlite"}', encoding="utf-8")
    assert database_url(tmp_path, {}) is None  # an editor's byte-order mark is no damage


def test_the_default_path_never_imports_the_driver(tmp_path: Path) -> None:
    """The settings, the choice and the dialog's check ask whether psycopg is installed without
    importing it; SQLite users never load it."""
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from app.host.desktop_settings import DesktopSettings\n"
        "from storage.ledger.database_choice import database_url\n"
        "from storage.ledger.ledger_store import open_store\n"
        "data = Path(sys.argv[1])\n"
        "view = DesktopSettings(data).view()\n"
        "assert database_url(data, {}) is None and view.database == 'sqlite'\n"
        "open_store(data).close()\n"
        "print('psycopg' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MAKA_DATABASE_URL"}
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path)],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
