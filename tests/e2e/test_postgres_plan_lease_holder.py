"""What the commands say of a session whose lease another process holds, on a PostgreSQL ledger
shared by two data folders (docs/postgres.md, "What the other commands say of leases").

Real processes, a real server. A ``maka host`` on folder A holds a session's lease after its
turn: ``maka plan`` with folder B, through a ``maka host`` there or alone, names host A
(``leaseHeldBy``) and advises no command its lease refuses here, in the same words both ways. A
``maka run`` killed with SIGKILL mid-turn holds its lease until it runs out: every reader (``maka
plan`` with Safe resume off or on, ``maka sessions``, ``maka timeline``) says that process is gone,
not that its turn still runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psycopg
import pytest

from tests.helpers.maka_process import MainProcess, maka_executable, start_main
from tests.helpers.maka_run import maka, scripted_env, write_script

pytestmark = pytest.mark.e2e

GONE = "a Maka process of this computer that is gone (killed or crashed)"


def _host(data: Path, env: dict[str, str], started: list[MainProcess]) -> MainProcess:
    data.mkdir(parents=True, exist_ok=True)
    host = start_main(data, env, "host")
    started.append(host)
    return host.wait_ready()


def _owner(url: str) -> tuple[str, str]:
    with psycopg.connect(url) as conn:
        [(session, owner)] = conn.execute(
            "SELECT s.session_id, l.owner FROM sessions s JOIN session_leases l USING (session_id)"
        ).fetchall()
    return str(session), str(owner or "")


def _plan(data: Path, session: str, env: dict[str, str], *more: str) -> tuple[int, str, str]:
    done = maka(["--data-dir", str(data), "plan", session, *more], data, env=env)
    return done.returncode, done.stdout, done.stderr


def test_a_plan_through_a_host_names_the_other_host_holding_the_lease(
    tmp_path: Path, postgres_url: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    script = write_script(tmp_path / "script.json", [[{"text": "Hello."}]])
    env = {**scripted_env(script), "MAKA_DATABASE_URL": postgres_url}
    started: list[MainProcess] = []
    plain = {"MAKA_DATABASE_URL": postgres_url}
    try:
        host_a = _host(tmp_path / "a", env, started)
        host_b = _host(tmp_path / "b", env, started)
        turn = maka(["run", "--cwd", str(work), "hi"], tmp_path / "a", env=plain)
        assert turn.returncode == 0, turn.stderr
        session, owner = _owner(postgres_url)
        assert f":{host_a.process.pid}:" in owner, owner
        code, text, err = _plan(tmp_path / "b", session, plain)
        assert code == 3, err
        _, document, _ = _plan(tmp_path / "b", session, plain, "--json")
        resumed = [_resume(tmp_path / "b", session, plain, *more) for more in ((), ("--json",))]
        assert host_b.terminate() == 0, host_b.stderr()[-3000:]
        # The same plan with no host running on folder B.
        code_alone, text_alone, err_alone = _plan(tmp_path / "b", session, plain)
        _, document_alone, _ = _plan(tmp_path / "b", session, plain, "--json")
        resumed += [_resume(tmp_path / "b", session, plain, *more) for more in ((), ("--json",))]
        assert host_a.process.poll() is None, host_a.stderr()[-3000:]
    finally:
        for host in started:
            host.stop()
    # maka resume, through host B and alone, says what maka plan says: nothing to resume, and
    # no command that host A's lease refuses here (it advised `run --session` and `settle`).
    for words, doc in (resumed[:2], resumed[2:]):
        assert (words[0], doc[0]) == (3, 3), (words, doc)
        assert f"Host {owner} holds this session's lease now" in words[1], words
        assert "run --session" not in words[1] and "carry on with" not in words[1], words
        assert json.loads(doc[1])["leaseHeldBy"] == owner, doc
    assert f"Host {owner} holds this session's lease now" in text, text
    # No command that the lease refuses with this data folder is offered.
    assert "carry on with a new message" not in text, text
    assert "run --session" not in text and " settle session" not in text, text
    assert json.loads(document)["leaseHeldBy"] == owner, document
    # Through the host or alone: the same words, the same document.
    assert (code_alone, text_alone) == (code, text), err_alone
    assert json.loads(document_alone) == json.loads(document)


def _resume(data: Path, session: str, env: dict[str, str], *more: str) -> tuple[int, str, str]:
    on = {**env, "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
    done = maka(["--data-dir", str(data), "resume", session, *more], data, env=on)
    return done.returncode, done.stdout, done.stderr


STEPS = [
    {
        "text": "Waiting.",
        "toolCalls": [{"id": "s1", "name": "bash", "args": {"command": "sleep 20"}}],
    },
    {"text": "Done."},
]


def _dispatched(url: str) -> bool:
    try:
        with psycopg.connect(url) as conn:
            found = conn.execute("SELECT count(*) FROM tool_operations").fetchone()
    except psycopg.errors.UndefinedTable:
        return False  # the ledger's schema is not made yet
    return bool(found and found[0])


def test_every_reader_says_a_killed_lease_holder_is_gone(tmp_path: Path, postgres_url: str) -> None:
    work, data_a, data_b = tmp_path / "work", tmp_path / "a", tmp_path / "b"
    work.mkdir()
    script = write_script(tmp_path / "script.json", [STEPS])
    env = {
        **os.environ,
        **scripted_env(script),
        "MAKA_DATABASE_URL": postgres_url,
        "MAKA_DATA_DIR": str(data_a),
        # the lease outlives the checks below by far
        "MAKA_SESSION_LEASE_TTL_MS": "120000",
    }
    env.pop("MAKA_RUNTIME_SAFE_BOUNDARY_RESUME", None)
    runner = subprocess.Popen(
        [*maka_executable(), "run", "--cwd", str(work), "--permission-mode", "auto", "wait"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not _dispatched(postgres_url):
            assert runner.poll() is None and time.monotonic() < deadline, "never dispatched"
            time.sleep(0.2)
        os.kill(runner.pid, signal.SIGKILL)
        assert runner.wait(10) == -signal.SIGKILL
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait(10)
    session, owner = _owner(postgres_url)
    assert f":{runner.pid}:" in owner, owner
    plain = {"MAKA_DATABASE_URL": postgres_url}
    base = {k: v for k, v in os.environ.items() if k != "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME"}
    texts = []
    for flag in ({}, {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}):  # Safe resume off, on
        done = subprocess.run(
            [*maka_executable(), "--data-dir", str(data_b), "plan", session],
            env={**base, **plain, **flag, "QT_QPA_PLATFORM": "offscreen"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 3, done.stderr
        said = done.stdout + done.stderr
        assert f"The Maka process that ran session {session}'s turn is gone" in said, said
        assert f"{owner}, {GONE}" in said, said
        assert "still running" not in said and "may still be running" not in said, said
        assert "The Maka process that ran its turn is gone (killed or crashed)" in said, said
        assert "holds this session's lease now" not in said, said
        assert "carry on with a new message" not in said, said
        texts.append(done.stdout)
    assert texts[0] == texts[1]  # whatever the Safe resume setting
    listed = maka(["sessions"], data_b, env=plain)
    assert listed.returncode == 0, listed.stderr
    assert f"{owner}, {GONE}" in listed.stdout, listed.stdout
    rows = json.loads(maka(["sessions", "--json"], data_b, env=plain).stdout)["sessions"]
    assert rows[0]["host"] == owner and rows[0]["hostGone"] is True, rows
    timeline = maka(["timeline", session], data_b, env=plain)
    assert timeline.returncode == 0, timeline.stderr
    assert f"{owner}, {GONE}" in timeline.stdout, timeline.stdout


def _runs(url: str) -> int:
    try:
        with psycopg.connect(url) as conn:
            found = conn.execute("SELECT count(*) FROM runs").fetchone()
    except psycopg.errors.UndefinedTable:
        return 0  # the ledger's schema is not made yet
    return int(found[0]) if found else 0


def test_a_resume_another_host_holds_is_refused_before_anything_is_written(
    tmp_path: Path, postgres_url: str
) -> None:
    """A turn killed while its model answered (no tool call), taken over by host B once its
    lease ran out: host B holds the session. From folder C, ``maka plan`` says Safe resume could
    continue it but host B's lease refuses that here, and ``maka resume`` is refused with
    ``session_busy`` naming host B, writing nothing (it would have been refused at its first
    write, ``session_lease_lost``, after saying that it continued)."""
    work = tmp_path / "work"
    work.mkdir()
    script = write_script(tmp_path / "script.json", [[{"text": "Thinking.", "delayMs": 60000}]])
    lease = {"MAKA_SESSION_LEASE_TTL_MS": "3000", "MAKA_SESSION_LEASE_RUNWAY_MS": "1000"}
    plain = {"MAKA_DATABASE_URL": postgres_url, **lease}
    env = {**os.environ, **scripted_env(script), **plain, "MAKA_DATA_DIR": str(tmp_path / "a")}
    env.pop("MAKA_RUNTIME_SAFE_BOUNDARY_RESUME", None)
    runner = subprocess.Popen(
        [*maka_executable(), "run", "--cwd", str(work), "think"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    started: list[MainProcess] = []
    try:
        deadline = time.monotonic() + 60
        while not _runs(postgres_url):
            assert runner.poll() is None and time.monotonic() < deadline, "never started"
            time.sleep(0.2)
        time.sleep(0.5)
        os.kill(runner.pid, signal.SIGKILL)
        assert runner.wait(10) == -signal.SIGKILL
        host_b = _host(tmp_path / "b", {**scripted_env(script), **plain}, started)
        deadline = time.monotonic() + 60
        while f":{host_b.process.pid}:" not in _owner(postgres_url)[1]:
            assert time.monotonic() < deadline, "host B never took the session over"
            time.sleep(0.3)
        session, owner = _owner(postgres_url)
        code, text, err = _plan(tmp_path / "c", session, {**plain, **_ON})
        runs = _runs(postgres_url)
        said = [_resume(tmp_path / "c", session, plain, *more) for more in ((), ("--json",))]
        assert _runs(postgres_url) == runs
        assert host_b.process.poll() is None, host_b.stderr()[-3000:]
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait(10)
        for host in started:
            host.stop()
    assert code == 0, err
    assert f"Safe resume can continue session {session}" in text, text
    assert f"But host {owner} holds this session's lease now" in text, text
    (resume_code, words, resume_err), (json_code, document, _) = said
    assert (resume_code, json_code) == (3, 3), said
    assert (
        "Safe resume refused before the provider was called: [session_busy] "
        f"session {session} is held by another host, {owner}"
    ) in words, (words, resume_err)
    body = json.loads(document)
    assert (body["disposition"], body["code"]) == ("refused", "session_busy"), body
    assert owner in body["message"], body


_ON = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
