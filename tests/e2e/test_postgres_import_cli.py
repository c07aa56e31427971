"""``maka import`` into the ledger on PostgreSQL (docs/postgres.md): an export from SQLite imports
into the server (all of it, once: a second import creates nothing), the server's export is
byte-identical, and it imports back into a new SQLite data folder with the same bytes again. The
imported session's lease is taken in each import's transaction and given up at exit."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from tests.helpers.ledger_builders import RunIds, clean_ledger
from tests.helpers.maka_run import maka
from tests.helpers.store_workloads import commit_ledger, store_with_runs

pytestmark = pytest.mark.e2e

IDS = RunIds()


def test_an_export_moves_between_the_engines_byte_for_byte(
    tmp_path: Path, postgres_url: str
) -> None:
    origin = tmp_path / "origin"
    with store_with_runs(origin, IDS) as store:
        commit_ledger(store, clean_ledger(5, ids=IDS))
    out = tmp_path / "from-sqlite.jsonl"
    assert maka(["export", IDS.session_id, "-o", str(out)], origin).returncode == 0
    server = {"MAKA_DATABASE_URL": postgres_url}
    data = tmp_path / "host"
    first = maka(["import", str(out), "--json"], data, env=server)
    assert first.returncode == 0, first.stdout + first.stderr
    report = json.loads(first.stdout)
    assert report["eventsCreated"] == report["eventsRead"] == 19
    second = maka(["import", str(out), "--json"], data, env=server)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["eventsCreated"] == 0
    from_server = tmp_path / "from-postgres.jsonl"
    exported = maka(["export", IDS.session_id, "-o", str(from_server)], data, env=server)
    assert exported.returncode == 0, exported.stderr
    assert from_server.read_bytes() == out.read_bytes()
    back = tmp_path / "back"
    assert maka(["import", str(from_server)], back).returncode == 0
    again = tmp_path / "again.jsonl"
    assert maka(["export", IDS.session_id, "-o", str(again)], back).returncode == 0
    assert again.read_bytes() == out.read_bytes()
    assert not (data / "runtime.sqlite").exists()
    with psycopg.connect(postgres_url) as conn:
        ((next_seq,),) = conn.execute("SELECT next_seq FROM runs").fetchall()
        seqs = [row[0] for row in conn.execute("SELECT event_seq FROM runtime_events ORDER BY 1")]
        lease = conn.execute("SELECT epoch, owner FROM session_leases").fetchall()
    assert seqs == list(range(1, next_seq)) and len(seqs) == 19
    # each import took the free lease in its transaction (epochs 1, 2) and gave it up at exit
    assert lease == [(2, None)]
