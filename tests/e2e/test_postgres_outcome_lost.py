"""The PostgreSQL server stops while a command of ``maka run`` runs: the command's outcome
cannot be committed (its T2 is refused), so the turn ends ``tool_boundary_failed``. The
terminal said only "T2 runtime commit failed" and "the turn ended failed", while the command
had run; it now names the call that started with no outcome recorded, as a terminal does when
its host stops (docs/postgres.md)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.helpers.maka_process import maka_executable
from tests.helpers.maka_run import scripted_env, write_script

pytestmark = pytest.mark.e2e


def _dispatched(url: str) -> bool:
    with psycopg.connect(url) as conn:
        made = conn.execute(
            "SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = current_schema() "
            "AND tablename = 'tool_operations'"
        ).fetchone()
        if made is None:
            return False
        row = conn.execute(
            "SELECT count(*) FROM tool_operations WHERE current_state = 'prepared'"
        ).fetchone()
        # (and its command started: its process is recorded before it runs)
        spawned = conn.execute("SELECT count(*) FROM tool_processes").fetchone()
    return row is not None and row[0] == 1 and spawned is not None and spawned[0] >= 1


def stop_the_server_once_dispatched(
    cluster: Any, url: str, process: subprocess.Popen[str]
) -> threading.Timer:
    """Once the command's call is dispatched (and its process recorded), stop the server and
    start it again a moment later (the returned timer, to join): the call's outcome (T2)
    meets the stopped server, and the run's ending is committed once the store reconnects."""
    deadline = time.monotonic() + 60
    while not _dispatched(url):
        assert process.poll() is None, "the command ended before its call was dispatched"
        assert time.monotonic() < deadline, "the call was never dispatched"
        time.sleep(0.1)
    cluster.stop_server()
    back = threading.Timer(1.0, cluster.start_server)
    back.start()
    return back


def test_a_call_whose_outcome_the_stopped_server_refused_is_named(
    tmp_path: Path, postgres_cluster: Any, postgres_url: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    command = "sleep 3; echo ran > ran.txt"
    call = {"id": "c1", "name": "bash", "args": {"command": command}}
    script = write_script(tmp_path / "script.json", [[{"toolCalls": [call]}, {"text": "done"}]])
    env = dict(os.environ)
    env.pop("MAKA_FAILPOINT", None)
    env.update(scripted_env(script))
    env.update({"MAKA_DATA_DIR": str(tmp_path / "data"), "MAKA_DATABASE_URL": postgres_url})
    process = subprocess.Popen(
        [*maka_executable(), "run", "--cwd", str(work), "--permission-mode", "auto", "go"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # (so the turn ends tool_boundary_failed, not on an error)
        back = stop_the_server_once_dispatched(postgres_cluster, postgres_url, process)
        try:
            out, err = process.communicate(timeout=120)
        finally:
            back.join()
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert (work / "ran.txt").exists(), (out, err)
    assert (work / "ran.txt").read_text() == "ran\n"  # the command ran
    said = " ".join(err.split())
    assert process.returncode == 1, (out, err)
    assert "Traceback" not in err, err
    assert "1 tool call (bash) had started with no outcome recorded and may have done" in said, said
    assert "maka plan session_" in said, said
    assert "(tool_boundary_failed)" in said, said
