"""``maka doctor`` against the ledger on PostgreSQL: the schema version, the leases held and by
whom, those that ran out (marking the sessions a running host would take over), the SQLite
doctor's checks over runs, events and workspace facts (a damaged row reported with the same code
on both engines), and a URL that is not PostgreSQL's refused with a code, nothing opened
(docs/postgres.md)."""

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
    assert (
        redacted("postgresql://maka:secret@db:5432/maka") == "postgresql://maka:****@db:5432/maka"
    )
    assert redacted("postgresql://maka@db/maka") == "postgresql://maka@db/maka"
    assert (
        redacted("postgresql://maka@/maka?host=/sock&password=secret&sslpassword=key")
        == "postgresql://maka@/maka?host=/sock&password=****&sslpassword=****"
    )


def test_a_query_password_never_reaches_the_report(tmp_path: Path, postgres_url: str) -> None:
    """The server takes the login (trust), the report is whole, and the password given as a
    query parameter is in none of it; nor in the refusal of a URL whose query is bad."""
    secret = "S3cretPW_xyz"
    env = {"MAKA_DATABASE_URL": f"{postgres_url}&password={secret}"}
    open_postgres_store(postgres_url, owner="machine-a:1:setup", heartbeat=False).close()
    report = maka(["doctor", "--json"], tmp_path / "data", env=env)
    text = maka(["doctor"], tmp_path / "data", env=env)
    assert report.returncode == 0, report.stdout + report.stderr
    assert json.loads(report.stdout)["database"].endswith("&password=****")
    assert text.returncode == 0 and "&password=**** (PostgreSQL)" in text.stdout
    for bad in ("port=70000", "sslmode=zz", "connect_timeout=abc", "bogusopt=1"):
        url = f"{postgres_url}&password={secret}&{bad}"
        refused = maka(["doctor", "--json"], tmp_path / "data", env={"MAKA_DATABASE_URL": url})
        assert refused.returncode == 1, refused.stdout
        (problem,) = json.loads(refused.stdout)["problems"]
        assert problem["code"] == "database_url_invalid", problem
        for result in (refused, report, text):
            assert secret not in result.stdout + result.stderr


def test_sessions_show_each_sessions_host(tmp_path: Path, postgres_url: str) -> None:
    env = {"MAKA_DATABASE_URL": postgres_url}
    held = open_postgres_store(postgres_url, owner="machine-a:4242:held", heartbeat=False)
    try:
        add_run(held, RunIds("sess-held", "inv-1", "run-1", "turn-1"))
        add_run(held, RunIds("sess-free", "inv-2", "run-2", "turn-2"))
        held.release_session_lease("sess-free")
        (tmp_path / "data").mkdir()  # a host's data folder that no host runs on now
        listed = maka(["sessions", "--json"], tmp_path / "data", env=env)
        text = maka(["sessions"], tmp_path / "data", env=env)
        timeline = maka(["timeline", "sess-held", "--json"], tmp_path / "data", env=env)
    finally:
        held.close()
    # Its run is marked running and this data folder has no host: on a shared ledger that says
    # nothing (another host holds the lease and may be running it), so no "awaits repair".
    (held_line,) = [line for line in text.stdout.splitlines() if line.startswith("sess-held")]
    assert "INTERRUPTED" not in held_line and "repaired at the next start" not in held_line
    assert timeline.returncode == 0, timeline.stderr
    assert "awaitingRepair" not in json.loads(timeline.stdout), timeline.stdout
    assert listed.returncode == 0, listed.stderr
    hosts = {row["sessionId"]: row["host"] for row in json.loads(listed.stdout)["sessions"]}
    assert hosts == {"sess-held": "machine-a:4242:held", "sess-free": None}
    (line,) = [line for line in text.stdout.splitlines() if line.startswith("sess-held")]
    assert line.endswith("host machine-a:4242:held")
    (free,) = [line for line in text.stdout.splitlines() if line.startswith("sess-free")]
    assert "host " not in free
    # Nobody holds that session's lease: its unfinished run's process is gone (given up), so
    # it awaits repair, which the next command or host taking the session over makes.
    assert "INTERRUPTED (repaired at the next start)" in free, free


DAMAGED_CODES = {"event_seq_gap", "header_terminal_mismatch"}


def _two_runs(tmp_path: Path, data: Path, env: dict[str, str]) -> None:
    for name, prompt in (("a", "write hello.txt saying hi"), ("b", "list files")):
        work = tmp_path / f"work-{name}"
        work.mkdir(parents=True)
        ran = maka(["run", "--cwd", str(work), prompt], data, env=env)
        assert ran.returncode == 0, ran.stdout + ran.stderr


# The same damage on either engine: the last event of the first run moved to event_seq + 100 (a
# gap), and the second run's header says cancelled while its terminal event says completed. (A
# payload that no longer decodes is store_corrupt for the whole report on both engines: the
# checkpoint audit reads every event.)
_FIRST_RUN = "(SELECT run_id FROM runs ORDER BY created_at, run_id LIMIT 1)"
_DAMAGE = (
    (
        f"UPDATE runtime_events SET event_seq = event_seq + 100 WHERE run_id = {_FIRST_RUN}"
        " AND event_seq = (SELECT max(event_seq) FROM runtime_events"
        f" WHERE run_id = {_FIRST_RUN})",
        (),
    ),
    (
        "UPDATE runs SET status = 'cancelled' WHERE run_id ="
        " (SELECT run_id FROM runs ORDER BY created_at DESC, run_id DESC LIMIT 1)",
        (),
    ),
)


def _damage_sqlite(data: Path) -> None:
    import sqlite3

    conn = sqlite3.connect(data / "runtime.sqlite")
    try:
        with conn:
            for sql, params in _DAMAGE:
                assert conn.execute(sql, params).rowcount == 1
    finally:
        conn.close()


def _damage_postgres(url: str) -> None:
    from storage.ledger.postgres_connection import connect

    conn = connect(url)
    try:
        conn.execute("BEGIN IMMEDIATE")
        for sql, params in _DAMAGE:
            assert conn.execute(sql, params).rowcount == 1
        conn.execute("COMMIT")
    finally:
        conn.close()


def _doctor_problems(data: Path, env: dict[str, str]) -> tuple[int, list[dict[str, str]], str]:
    result = maka(["doctor", "--json"], data, env=env)
    assert "Traceback" not in result.stderr, result.stderr
    text = maka(["doctor"], data, env=env)
    return result.returncode, json.loads(result.stdout)["problems"], text.stdout


def test_a_damaged_row_on_the_server_is_reported_with_the_sqlite_doctors_code(
    tmp_path: Path, postgres_url: str
) -> None:
    """The PostgreSQL doctor runs the SQLite doctor's checks over runs, events and workspace
    facts: the same damage gives the same codes on the same runs and events."""
    on_sqlite, on_server = tmp_path / "sqlite-data", tmp_path / "server-data"
    server_env = {"MAKA_DATABASE_URL": postgres_url}
    _two_runs(tmp_path / "s", on_sqlite, {})
    _two_runs(tmp_path / "p", on_server, server_env)

    healthy = maka(["doctor", "--json"], on_server, env=server_env)
    assert healthy.returncode == 0, healthy.stdout
    clean = json.loads(healthy.stdout)
    assert (clean["ok"], clean["problems"], clean["engine"]) == (True, [], "postgresql")
    assert (clean["sessions"], clean["runs"]) == (2, 2) and clean["events"] > 4
    assert {item["marker"] for item in clean["workspaces"]} == {"valid"}
    assert "workspaceCheckpoints" in clean
    assert clean["awaitingTakeover"] == [], "both runs ended; their leases were given up"

    _damage_sqlite(on_sqlite)
    _damage_postgres(postgres_url)
    sqlite_exit, sqlite_problems, _ = _doctor_problems(on_sqlite, {})
    server_exit, server_problems, server_text = _doctor_problems(on_server, server_env)

    assert sqlite_exit == server_exit == 1
    assert {p["code"] for p in server_problems} == DAMAGED_CODES
    assert [p["code"] for p in server_problems] == [p["code"] for p in sqlite_problems]
    gap = next(p for p in server_problems if p["code"] == "event_seq_gap")
    assert gap["eventId"] and gap["runId"]
    assert "PROBLEM [event_seq_gap] run " in server_text
    assert "PROBLEM [header_terminal_mismatch] run " in server_text
    assert "2 problem(s) found" in server_text


def test_snapshots_another_host_took_are_a_note_not_a_problem(
    tmp_path: Path, postgres_url: str
) -> None:
    """On a shared ledger each host keeps the snapshots it took in its own data folder: checked
    from another host's data folder they are missing there, which the doctor says in a note (and
    why), not as a damaged store; from the folder that took them, nothing is missing."""
    env = {"MAKA_DATABASE_URL": postgres_url}
    _two_runs(tmp_path, tmp_path / "host-a", env)
    own = json.loads(maka(["doctor", "--json"], tmp_path / "host-a", env=env).stdout)
    assert own["ok"] is True and own["workspaceCheckpoints"]["missing"] == []
    assert own["notes"] == []
    recorded = own["workspaceCheckpoints"]["facts"]
    assert recorded > 0, "the write was snapshotted"

    other = maka(["doctor", "--json"], tmp_path / "host-b", env=env)
    assert other.returncode == 0, other.stdout + other.stderr
    report = json.loads(other.stdout)
    assert report["ok"] is True and report["problems"] == []
    assert len(report["workspaceCheckpoints"]["missing"]) == recorded
    assert report["notes"] and {note["code"] for note in report["notes"]} == {
        "workspace_checkpoint_missing"
    }
    assert all("another host's may hold them" in note["message"] for note in report["notes"])
    text = maka(["doctor"], tmp_path / "host-b", env=env).stdout
    assert f"0 missing, {recorded} not in this data folder" in text
    assert "PROBLEM" not in text


def test_checkpoints_and_branch_say_another_hosts_snapshot_is_elsewhere(
    tmp_path: Path, postgres_url: str
) -> None:
    """The doctor's reading everywhere: from another host's data folder, ``maka checkpoints``
    and ``maka branch`` say the snapshot is not in this data folder (another host's may keep
    it), not that it is MISSING or damaged."""
    env = {"MAKA_DATABASE_URL": postgres_url}
    _two_runs(tmp_path, tmp_path / "host-a", env)
    listed = json.loads(maka(["sessions", "--json"], tmp_path / "host-b", env=env).stdout)
    session = next(
        str(row["sessionId"]) for row in listed["sessions"] if row["cwd"].endswith("work-a")
    )
    shown = maka(["checkpoints", session], tmp_path / "host-b", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "MISSING" not in shown.stdout, shown.stdout
    assert "not in this data folder (another host's may keep it)" in shown.stdout
    here = maka(["checkpoints", session], tmp_path / "host-a", env=env).stdout
    assert "present" in here and "not in this data folder" not in here

    points = json.loads(maka(["branch", session, "--json"], tmp_path / "host-a", env=env).stdout)
    end = next(p for p in points["boundaries"] if p.get("checkpointRef"))
    branched = maka(
        ["branch", session, "--at", str(end["eventId"]), "--to", str(tmp_path / "copy")],
        tmp_path / "host-b",
        env=env,
    )
    assert branched.returncode != 0, branched.stdout
    assert "branch_snapshot_unavailable" in branched.stderr, branched.stderr
    assert "not in this data folder" in branched.stderr, branched.stderr
    assert "damaged" not in branched.stderr, branched.stderr
    assert not (tmp_path / "copy").exists()
