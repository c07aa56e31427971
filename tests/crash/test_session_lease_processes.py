"""Session leases between two real host processes on one PostgreSQL ledger (docs/postgres.md): the
first host is stopped (SIGSTOP) past its lease, the second takes the session over, the first is
continued (SIGCONT) and its next T1 is refused with ``session_lease_lost``, nothing committed; the
run's ``event_seq`` stays gap-free."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg

REPO = Path(__file__).resolve().parents[2]
TTL_MS = 800


def _host(url: str, role: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.crash.lease_host_child", url, role, str(TTL_MS)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_a_host_stopped_past_its_lease_cannot_commit_a_t1_after_a_takeover(
    postgres_url: str,
) -> None:
    first = _host(postgres_url, "first")
    try:
        assert first.stdin is not None and first.stdout is not None
        assert first.stdout.readline().strip() == "ready"
        first.stdin.write("t1 call-before\n")
        first.stdin.flush()
        assert json.loads(first.stdout.readline()) == {"created": True, "seq": 3}
        first.send_signal(signal.SIGSTOP)
        time.sleep(TTL_MS / 1000 + 0.5)  # its lease runs out while it cannot renew
        second = _host(postgres_url, "second")
        out, _ = second.communicate(timeout=60)
        assert second.returncode == 0
        assert json.loads(out) == {"epoch": 2}
        first.send_signal(signal.SIGCONT)
        first.stdin.write("t1 call-after\n")
        first.stdin.flush()
        assert json.loads(first.stdout.readline()) == {"code": "session_lease_lost"}
    finally:
        first.kill()
        first.wait(timeout=30)
        for stream in (first.stdin, first.stdout):
            if stream is not None:
                stream.close()
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute(
            "SELECT event_seq, event_id, payload FROM runtime_events WHERE run_id = 'run-lease'"
            " ORDER BY event_seq"
        ).fetchall()
        lease = conn.execute(
            "SELECT epoch, owner FROM session_leases WHERE session_id = 'sess-lease'"
        ).fetchone()
    assert [row[0] for row in rows] == [1, 2, 3, 4]
    assert rows[-1][1] == "second-host"
    assert not any(b"call-after" in bytes(row[2]) for row in rows)
    assert lease is not None and lease[0] == 2
