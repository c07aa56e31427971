"""``maka doctor`` against the ledger on PostgreSQL: the schema version, the leases held and by
whom, those that ran out (marking the sessions a running host would take over), and a URL that is
not PostgreSQL's refused with a code, nothing opened (docs/postgres.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from storage.ledger.postgres_doctor import redacted
from storage.ledger.postgres_schema import SCHEMA_VERSION
from storage.ledger.postgres_store import LeaseSettings, open_postgres_store
from tests.helpers.ledger_builders import RunIds
from tests.helpers.maka_run import maka
from tests.helpers.store_workloads import add_run

pytestmark = pytest.mark.e2e


def test_doctor_reports_schema_and_leases(tmp_path: Path, postgres_url: str) -> None:
    data = tmp_path / "data"
    env = {"MAKA_DATABASE_URL": postgres_url}
    held = open_postgres_store(postgres_url, owner="machine-a:4242:held", heartbeat=False)
    gone = open_postgres_store(
        postgres_url,
        owner="machine-b:99:dead",
        lease_settings=LeaseSettings(ttl_ms=200, runway_ms=0),
        heartbeat=False,
    )
    try:
        add_run(held, RunIds("sess-held", "inv-1", "run-1", "turn-1"))
        add_run(gone, RunIds("sess-dead", "inv-2", "run-2", "turn-2"))
        time.sleep(0.4)
        result = maka(["doctor", "--json"], data, env=env)
        text = maka(["doctor"], data, env=env)
    finally:
        held.close()
        gone._fence.held.clear()  # a dead host gives nothing up
        gone.close()
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["schemaVersion"] == report["programSchemaVersion"] == SCHEMA_VERSION
    assert (report["sessions"], report["unfinishedRuns"]) == (2, 2)
    assert [(lease["sessionId"], lease["owner"]) for lease in report["leasesHeld"]] == [
        ("sess-held", "machine-a:4242:held")
    ]
    assert report["leasesHeld"][0]["expiresInMs"] > 20_000
    (expired,) = report["leasesExpired"]
    assert (expired["sessionId"], expired["owner"], expired["unfinishedRun"]) == (
        "sess-dead",
        "machine-b:99:dead",
        True,
    )
    assert report["awaitingTakeover"] == ["sess-dead"]
    assert text.returncode == 0
    assert "sess-held  epoch 1  host machine-a:4242:held" in text.stdout
    assert "last host machine-b:99:dead" in text.stdout and "[unfinished run]" in text.stdout
    assert not (data / "runtime.sqlite").exists()  # the data folder's database is not opened


def test_doctor_refuses_a_url_that_is_not_postgresql(tmp_path: Path) -> None:
    result = maka(["doctor", "--json"], tmp_path / "data", env={"MAKA_DATABASE_URL": "mysql://x"})
    assert result.returncode == 1
    assert json.loads(result.stdout)["problems"][0]["code"] == "database_url_invalid"
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "data").exists()


def test_a_password_never_reaches_the_report() -> None:
    assert redacted("postgresql://maka:secret@db:5432/maka") == "postgresql://maka:***@db:5432/maka"
    assert redacted("postgresql://maka@db/maka") == "postgresql://maka@db/maka"


def test_sessions_show_each_sessions_host(tmp_path: Path, postgres_url: str) -> None:
    env = {"MAKA_DATABASE_URL": postgres_url}
    held = open_postgres_store(postgres_url, owner="machine-a:4242:held", heartbeat=False)
    try:
        add_run(held, RunIds("sess-held", "inv-1", "run-1", "turn-1"))
        add_run(held, RunIds("sess-free", "inv-2", "run-2", "turn-2"))
        held.release_session_lease("sess-free")
        listed = maka(["sessions", "--json"], tmp_path / "data", env=env)
        text = maka(["sessions"], tmp_path / "data", env=env)
    finally:
        held.close()
    assert listed.returncode == 0, listed.stderr
    hosts = {row["sessionId"]: row["host"] for row in json.loads(listed.stdout)["sessions"]}
    assert hosts == {"sess-held": "machine-a:4242:held", "sess-free": None}
    (line,) = [line for line in text.stdout.splitlines() if line.startswith("sess-held")]
    assert line.endswith("host machine-a:4242:held")
    (free,) = [line for line in text.stdout.splitlines() if line.startswith("sess-free")]
    assert "host " not in free
