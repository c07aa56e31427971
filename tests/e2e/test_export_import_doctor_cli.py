"""The real ``maka`` command: ``export``, ``import`` and ``doctor`` on real data directories."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from storage.ledger.ledger_schema import SCHEMA_VERSION
from storage.ledger.sqlite_connection import DATABASE_NAME
from tests.helpers.ledger_builders import RunIds, clean_ledger
from tests.helpers.maka_process import maka_executable
from tests.helpers.store_workloads import commit_ledger, db_state, store_with_runs

pytestmark = pytest.mark.e2e

IDS = RunIds()


def maka(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "MAKA_FAILPOINT"}
    env["MAKA_DATA_DIR"] = str(data_dir)
    return subprocess.run(
        [*maka_executable(), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    data_dir = tmp_path / "origin"
    with store_with_runs(data_dir, IDS) as store:
        commit_ledger(store, clean_ledger(5, ids=IDS))
    return data_dir


def _clean(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr, result.stderr


def test_export_import_round_trip_and_doctor(origin: Path, tmp_path: Path) -> None:
    out = tmp_path / "session.jsonl"
    exported = maka(origin, "export", IDS.session_id, "-o", str(out))
    assert exported.returncode == 0, exported.stderr
    assert out.read_bytes().endswith(b"\n")

    again = maka(origin, "export", IDS.session_id, "-o", str(out))
    assert again.returncode == 2 and "export_target_exists" in again.stderr
    assert maka(origin, "export", IDS.session_id, "-o", str(out), "--force").returncode == 0

    copy = tmp_path / "copy"
    first = maka(copy, "import", str(out), "--json")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["eventsCreated"] == report["eventsRead"] == 19
    second = maka(copy, "import", str(out), "--json")
    assert second.returncode == 0 and json.loads(second.stdout)["eventsCreated"] == 0

    reexported = tmp_path / "again.jsonl"
    assert maka(copy, "export", IDS.session_id, "-o", str(reexported)).returncode == 0
    assert reexported.read_bytes() == out.read_bytes()

    doctor = maka(copy, "doctor", "--json")
    assert doctor.returncode == 0, doctor.stdout
    document = json.loads(doctor.stdout)
    assert document["ok"] is True and document["schemaVersion"] == SCHEMA_VERSION
    assert (document["runs"], document["events"]) == (1, 19)
    human = maka(copy, "doctor")
    assert human.returncode == 0 and "integrity check: ok" in human.stdout


def test_import_refusals(origin: Path, tmp_path: Path) -> None:
    out = tmp_path / "session.jsonl"
    assert maka(origin, "export", IDS.session_id, "-o", str(out)).returncode == 0
    data = out.read_bytes()

    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(data[:-10])
    refused = maka(tmp_path / "a", "import", str(torn))
    assert refused.returncode == 2 and "import_torn_tail" in refused.stderr
    _clean(refused)
    accepted = maka(tmp_path / "a", "import", str(torn), "--accept-torn-tail")
    assert accepted.returncode == 0, accepted.stderr
    assert "dropped a torn last line of" in accepted.stdout

    conflicting = tmp_path / "conflict.jsonl"
    conflicting.write_bytes(data.replace(b'"text":"done"', b'"text":"changed"'))
    target = tmp_path / "b"
    assert maka(target, "import", str(out)).returncode == 0
    before = db_state(target / DATABASE_NAME)
    clash = maka(target, "import", str(conflicting))
    assert clash.returncode == 1 and "identity_conflict" in clash.stderr
    _clean(clash)
    assert db_state(target / DATABASE_NAME) == before
    assert maka(target, "doctor").returncode == 0

    # A key written twice: decoders keep the last, so the history would change unseen (a
    # model message turned partial is left out of what the model is given). It was imported.
    lines = data.split(b"\n")
    at = next(i for i, line in enumerate(lines) if b'"partial":false' in line and b'"id"' in line)
    lines[at] = lines[at][:-1] + b',"partial":true}'
    twice = tmp_path / "twice.jsonl"
    twice.write_bytes(b"\n".join(lines))
    repeated = maka(tmp_path / "d", "import", str(twice))
    assert repeated.returncode == 2 and "import_line_invalid" in repeated.stderr, repeated.stderr
    assert f"line {at + 1}" in repeated.stderr and "'partial' twice" in repeated.stderr
    _clean(repeated)
    assert not (tmp_path / "d" / DATABASE_NAME).exists()

    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"not json\n")
    invalid = maka(tmp_path / "c", "import", str(garbage))
    assert invalid.returncode == 2 and "import_line_invalid" in invalid.stderr
    _clean(invalid)
    missing = maka(tmp_path / "c", "import", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and "import_file_unreadable" in missing.stderr
    unknown = maka(origin, "export", "no-such-session", "-o", str(tmp_path / "x.jsonl"))
    assert unknown.returncode == 2 and "session_not_found" in unknown.stderr
    assert not (tmp_path / "x.jsonl").exists()


def test_doctor_reports_damage_and_refusals(origin: Path, tmp_path: Path) -> None:
    conn = sqlite3.connect(origin / DATABASE_NAME)
    conn.execute("UPDATE runs SET status = 'running'")
    conn.commit()
    conn.close()
    damaged = maka(origin, "doctor", "--json")
    assert damaged.returncode == 1
    codes = [problem["code"] for problem in json.loads(damaged.stdout)["problems"]]
    assert codes == ["header_terminal_mismatch"]

    newer = tmp_path / "newer"
    newer.mkdir()
    conn = sqlite3.connect(newer / DATABASE_NAME)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    refused = maka(newer, "doctor", "--json")
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["problems"][0]["code"] == "schema_newer_than_program"

    empty = maka(tmp_path / "empty", "doctor")
    assert empty.returncode == 0 and "nothing to check" in empty.stdout
    assert not (tmp_path / "empty" / DATABASE_NAME).exists()
