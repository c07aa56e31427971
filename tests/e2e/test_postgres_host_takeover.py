"""Two ``maka host`` processes on one PostgreSQL ledger: a killed host's session continues on the
other (docs/postgres.md, docs/design/hosts.md section 2).

Real processes, a real server: host A (its own data folder) runs a scripted turn of two tool calls
and kills itself with SIGKILL right after the first call's T2 committed (``MAKA_FAILPOINT``); host
B, started beside it with automatic resume on and short leases, claims the expired lease on its
takeover sweep, repairs the run with startup recovery's code and continues it: the second call
(read-only) runs once, the first never again, and the session ends with one completed
continuation. The lease's epoch went up once; host B gave it up when it stopped.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.helpers.maka_process import MainProcess, maka_executable, start_main
from tests.helpers.maka_run import maka, scripted_env, write_script
from tests.helpers.user_git import user_git

pytestmark = pytest.mark.e2e

BASH = "echo x >> one.txt"
READ = {"path": "one.txt"}

SCRIPT: list[list[dict[str, Any]]] = [
    [
        {"text": "One.", "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": BASH}}]},
        # read-only: the continuation runs it without asking (no viewer is attached to host B)
        {"text": "Check.", "toolCalls": [{"id": "c2", "name": "read_file", "args": READ}]},
        {"text": "Written once."},
    ]
]
LEASES = {
    "MAKA_SESSION_LEASE_TTL_MS": "3000",
    "MAKA_SESSION_LEASE_RUNWAY_MS": "1000",
    "MAKA_SESSION_TAKEOVER_GRACE_MS": "500",
}


def _host(data: Path, env: dict[str, str], started: list[MainProcess]) -> MainProcess:
    data.mkdir(parents=True, exist_ok=True)
    host = start_main(data, env, "host")
    started.append(host)
    return host.wait_ready()


def _common(tmp_path: Path, postgres_url: str, *, checkpoints: bool = False) -> dict[str, str]:
    """Every host's environment: the scripted turn, short leases, the server, automatic resume."""
    script = write_script(tmp_path / "script.json", SCRIPT)
    return {
        **scripted_env(script, checkpoints=checkpoints),
        **LEASES,
        "MAKA_DATABASE_URL": postgres_url,
        "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1",
    }


def _turn_dies_with(host_a: MainProcess, work: Path, tmp_path: Path, postgres_url: str) -> None:
    """A turn through host A (its data folder ``tmp_path / "a"``), which its failpoint kills."""
    turn = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "write both files"],
        tmp_path / "a",
        env={"MAKA_DATABASE_URL": postgres_url},
    )
    assert turn.returncode != 0  # its host died under it
    assert host_a.process.wait(30) == -9, host_a.stderr()[-2000:]


def _runs(url: str) -> list[tuple[str, str | None, bool]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT status, failure_class, continuation_source IS NOT NULL FROM runs"
            " ORDER BY created_at, run_id"
        ).fetchall()
    return [(str(r[0]), r[1], bool(r[2])) for r in rows]


def test_a_killed_hosts_session_continues_on_the_other_host(
    tmp_path: Path, postgres_url: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    common = _common(tmp_path, postgres_url)
    started: list[MainProcess] = []
    try:
        host_a = _host(tmp_path / "a", {**common, "MAKA_FAILPOINT": "t2_after_commit"}, started)
        host_b = _host(tmp_path / "b", common, started)
        _turn_dies_with(host_a, work, tmp_path, postgres_url)
        killed_at = time.monotonic()
        deadline = killed_at + 30
        while time.monotonic() < deadline:
            runs = _runs(postgres_url)
            if any(status == "completed" for status, _, _ in runs):
                break
            time.sleep(0.2)
        took = time.monotonic() - killed_at
        assert host_b.process.poll() is None, host_b.stderr()[-3000:]
        # Host B keeps the session's lease: a plan from A's data folder says where to answer
        # (it suggested commands the lease refuses there).
        with psycopg.connect(postgres_url) as conn:
            [(session,)] = conn.execute("SELECT session_id FROM sessions").fetchall()
        planned = maka(["plan", str(session)], tmp_path / "a", env=common)
        assert "holds this session's lease now" in planned.stdout, planned.stdout
        planned_json = json.loads(
            maka(["plan", str(session), "--json"], tmp_path / "a", env=common).stdout
        )
        assert planned_json["leaseHeldBy"], planned_json
        assert host_b.terminate() == 0, host_b.stderr()[-3000:]  # orderly stop: SIGTERM
    finally:
        for host in started:
            host.stop()
    assert _runs(postgres_url) == [
        ("failed", "app_restarted", False),
        ("completed", None, True),
    ], host_b.stderr()[-3000:]
    assert (work / "one.txt").read_text() == "x\n"  # the side effect happened once
    with psycopg.connect(postgres_url) as conn:
        states = conn.execute(
            "SELECT tool_name, current_state FROM tool_operations ORDER BY tool_name"
        ).fetchall()
    # one operation per call: the bash call's outcome committed by host A before it died, the
    # read by host B's continuation; nothing unpaired
    assert states == [("bash", "outcome_committed"), ("read_file", "outcome_committed")]
    with psycopg.connect(postgres_url) as conn:
        lease = conn.execute("SELECT epoch, owner FROM session_leases").fetchone()
    assert lease == (2, None)  # taken at creation (1), taken over (2), given up at B's stop
    # not before the lease ran out (renewed at most ttl/3 before the kill) and within ttl + 5 s
    assert 2.0 <= took < 3 + 5, took
    print(json.dumps({"takeover_to_completed_s": round(took, 2)}))


def test_a_taken_over_session_whose_folder_is_gone_parks_and_relocates(
    tmp_path: Path, postgres_url: str
) -> None:
    """The session's folder is not reachable from the host that takes it over (moved away here):
    automatic resume parks with ``workspace_folder_missing``; once the user relocates the session
    to where the folder is now (with that host's data folder, the host stopped: relocating is not
    served by a host), ``maka resume`` continues it, the first call never again."""
    work = tmp_path / "work"
    work.mkdir()
    common = _common(tmp_path, postgres_url)
    started: list[MainProcess] = []
    moved = tmp_path / "elsewhere"
    try:
        host_a = _host(tmp_path / "a", {**common, "MAKA_FAILPOINT": "t2_after_commit"}, started)
        _turn_dies_with(host_a, work, tmp_path, postgres_url)
        work.rename(moved)  # not reachable from host B under its old path
        host_b = _host(tmp_path / "b", common, started)
        log = tmp_path / "b" / "logs" / "main.log"
        deadline = time.monotonic() + 30
        while "workspace_folder_missing" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, log.read_text() if log.exists() else ""
            time.sleep(0.2)
        env = {**common}
        listed = json.loads(maka(["sessions", "--json"], tmp_path / "b", env=env).stdout)
        (row,) = listed["sessions"]
        assert row["folderMissing"] is True and row["host"] is not None
        session = row["sessionId"]
        # Host B serves its data folder: the relocation and the resume go through it (it holds
        # the session's lease; a command of its own could not write under it).
        relocated = maka(["sessions", "relocate", session, str(moved)], tmp_path / "b", env=env)
        assert relocated.returncode == 0, relocated.stdout + relocated.stderr
        assert relocated.stdout.strip() == f"session {session} now uses {moved.resolve()}"
        resumed = maka(["resume", session, "--permission-mode", "auto"], tmp_path / "b", env=env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert host_b.process.poll() is None, host_b.stderr()[-3000:]
        assert host_b.terminate() == 0, host_b.stderr()[-3000:]
    finally:
        for host in started:
            host.stop()
    assert _runs(postgres_url) == [("failed", "app_restarted", False), ("completed", None, True)]
    assert (moved / "one.txt").read_text() == "x\n"  # the side effect happened once


@pytest.mark.parametrize("edited", [False, True])
def test_with_snapshots_on_the_other_host_verifies_the_folder_by_its_tree(
    tmp_path: Path, postgres_url: str, edited: bool
) -> None:
    """A user's defaults: snapshots on, the folder a Git repository with uncommitted work. Host A
    dies after the turn's calls and their snapshots committed, before the run's ending (P8).
    Host B keeps no snapshot of that folder (they are in A's data folder), but the folder's
    tree, captured on B, is the tree A's last snapshot recorded: B continues the session
    automatically (``workspace_verified``, compared by tree), the command never again. With a
    file edited after the kill the trees differ, and B parks (``workspace_checkpoint_missing``):
    it cannot say which file changed, and continues nothing."""
    work = tmp_path / "work"
    work.mkdir()
    user_git(work, "init", "-q")
    (work / "notes.txt").write_text("first\n")
    user_git(work, "add", "notes.txt")
    user_git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    (work / "notes.txt").write_text("first\nuncommitted\n")
    common = _common(tmp_path, postgres_url, checkpoints=True)
    started: list[MainProcess] = []
    try:
        host_a = _host(tmp_path / "a", {**common, "MAKA_FAILPOINT": "P8"}, started)
        _turn_dies_with(host_a, work, tmp_path, postgres_url)
        if edited:
            (work / "notes.txt").write_text("edited while no host ran the session\n")
        host_b = _host(tmp_path / "b", common, started)
        log = tmp_path / "b" / "logs" / "main.log"
        deadline = time.monotonic() + 30
        want = "workspace_checkpoint_missing" if edited else None
        while time.monotonic() < deadline:
            runs = _runs(postgres_url)
            if want is None and any(status == "completed" for status, _, _ in runs):
                break
            if want is not None and want in (log.read_text() if log.exists() else ""):
                break
            time.sleep(0.2)
        assert host_b.process.poll() is None, host_b.stderr()[-3000:]
        assert host_b.terminate() == 0, host_b.stderr()[-3000:]
    finally:
        for host in started:
            host.stop()
    expected: list[tuple[str, str | None, bool]] = [("failed", "app_restarted", False)]
    if not edited:
        expected.append(("completed", None, True))
    assert _runs(postgres_url) == expected, log.read_text() if log.exists() else ""
    assert (work / "one.txt").read_text() == "x\n"  # the command ran once, on host A
    assert not (work / ".maka-workspace.json").exists()  # the marker stays in .maka/
    if edited:
        # The park's headline said the snapshot was "gone or damaged", an error: it is in
        # host A's data folder, as the diagnostic below it says.
        with psycopg.connect(postgres_url) as conn:
            row = conn.execute("SELECT session_id FROM sessions").fetchone()
        assert row is not None
        said = maka(["plan", str(row[0])], tmp_path / "b", env=common).stdout
        assert (
            "[warn] workspace_checkpoint_missing: The snapshot of the folder taken at the stop "
            "is not in this data folder: another host keeps it." in said
        ), said
        assert "gone or damaged" not in said, said


def test_a_plan_right_after_a_host_died_names_the_lease_not_a_quarantine(
    tmp_path: Path, postgres_url: str
) -> None:
    """``maka plan`` from the killed host's data folder before its lease ran out (what the
    ``host_stopped`` advice says to run): the run is still leased to the dead host, so nothing
    here may repair it. The plan says whose lease holds it; it once said the run's ledger
    "could not be repaired and is quarantined" (``runtime_ledger_unreadable``), which was false;
    it still did in the takeover grace after the lease ran out. Once the grace is over, the same
    plan repairs the run and offers to continue it."""
    work = tmp_path / "work"
    work.mkdir()
    # A wide takeover grace: after the lease ran out, no host may take the run over for 3 s
    # more, and the plans polled then must still name the lease, not a quarantine.
    common = {
        **_common(tmp_path, postgres_url),
        "MAKA_SESSION_LEASE_TTL_MS": "8000",
        "MAKA_SESSION_TAKEOVER_GRACE_MS": "3000",
    }
    started: list[MainProcess] = []
    try:
        host_a = _host(tmp_path / "a", {**common, "MAKA_FAILPOINT": "t2_after_commit"}, started)
        _turn_dies_with(host_a, work, tmp_path, postgres_url)
    finally:
        for host in started:
            host.stop()
    listed = json.loads(maka(["sessions", "--json"], tmp_path / "a", env=common).stdout)
    session = str(listed["sessions"][0]["sessionId"])
    early = maka(["plan", session, "--json"], tmp_path / "a", env=common)
    body = json.loads(early.stdout)
    assert body["rejectionReasons"] == ["session_busy"], body
    [busy] = [d for d in body["diagnostics"] if d["code"] == "session_busy"]
    assert "holds the session's lease" in busy["message"], busy
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        later = json.loads(maka(["plan", session, "--json"], tmp_path / "a", env=common).stdout)
        if later["rejectionReasons"] != ["session_busy"]:
            break
        time.sleep(0.5)
    assert "runtime_ledger_unreadable" not in later["rejectionReasons"], later
    assert later["disposition"] == "continue", later


def test_a_message_from_another_data_folder_while_a_host_runs_the_turn_is_busy(
    tmp_path: Path, postgres_url: str
) -> None:
    """``maka run --session S`` with another data folder (another machine) while host A runs S's
    turn: refused with ``session_busy`` naming the host, before anything is said about the
    history. It once printed "an earlier turn was interrupted" about the call running on A,
    then failed with ``session_lease_lost``."""
    work = tmp_path / "work"
    work.mkdir()
    slow = [
        [
            {
                "text": "Wait.",
                "toolCalls": [{"id": "s1", "name": "bash", "args": {"command": "sleep 20"}}],
            },
            {"text": "Done."},
        ]
    ]
    env = {
        **scripted_env(write_script(tmp_path / "slow.json", slow)),
        **LEASES,
        "MAKA_DATABASE_URL": postgres_url,
    }
    started: list[MainProcess] = []
    try:
        _host(tmp_path / "a", env, started)
        turn = subprocess.Popen(
            [*maka_executable(), "run", "--cwd", str(work), "--permission-mode", "auto", "wait"],
            env={**os.environ, **env, "MAKA_DATA_DIR": str(tmp_path / "a")},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with psycopg.connect(postgres_url) as conn:
                    try:
                        counted = conn.execute("SELECT count(*) FROM tool_operations").fetchone()
                    except psycopg.errors.UndefinedTable:
                        counted = (0,)  # the first turn has not made the schema yet
                if counted != (0,):
                    break
                time.sleep(0.2)
            listed = json.loads(maka(["sessions", "--json"], tmp_path / "a", env=env).stdout)
            session = str(listed["sessions"][0]["sessionId"])
            (tmp_path / "b").mkdir()
            other = maka(
                ["run", "--session", session, "--permission-mode", "auto", "list files"],
                tmp_path / "b",
                env=env,
            )
            # A chat's message the same (it went to the turn and failed at its first write
            # with session_lease_lost).
            (tmp_path / "c").mkdir()
            chat = maka(
                ["tui", "--session", session, "--permission-mode", "auto"],
                tmp_path / "c",
                env=env,
                stdin="list files\n/quit\n",
            )
            # The same through a host of that other data folder (it once printed the note).
            _host(tmp_path / "b", env, started)
            served = maka(
                ["run", "--session", session, "--permission-mode", "auto", "list files"],
                tmp_path / "b",
                env=env,
            )
        finally:
            turn.kill()
            turn.wait(30)
    finally:
        for host in started:
            host.stop()
    for said in (other, served):
        assert said.returncode == 1, said.stderr
        assert "[session_busy]" in said.stderr and "is held by another host" in said.stderr
        assert "interrupted" not in said.stderr and "note:" not in said.stderr, said.stderr
    assert "[session_busy]" in chat.stderr and "is held by another host" in chat.stderr
    assert "session_lease_lost" not in chat.stderr, chat.stderr


def test_a_write_refused_by_another_hosts_lease_names_that_host(
    tmp_path: Path, postgres_url: str
) -> None:
    """A running host keeps the lease of a session it opened; a command with another data folder
    that writes to that session (a rename here) is refused with ``session_lease_lost``, naming
    the host that holds it and what to do, where it once said only "another host"."""
    work = tmp_path / "work"
    work.mkdir()
    common = _common(tmp_path, postgres_url)
    started: list[MainProcess] = []
    try:
        _host(tmp_path / "a", common, started)
        turn = maka(
            ["run", "--cwd", str(work), "--permission-mode", "auto", "write both files"],
            tmp_path / "a",
            env={"MAKA_DATABASE_URL": postgres_url},
        )
        assert turn.returncode == 0, turn.stderr
        listed = json.loads(maka(["sessions", "--json"], tmp_path / "a", env=common).stdout)
        session = str(listed["sessions"][0]["sessionId"])
        host = str(listed["sessions"][0]["host"])
        (tmp_path / "b").mkdir()
        renamed = maka(["sessions", "rename", session, "elsewhere"], tmp_path / "b", env=common)
    finally:
        for started_host in started:
            started_host.stop()
    assert renamed.returncode != 0, renamed.stdout
    assert "[session_lease_lost]" in renamed.stderr, renamed.stderr
    assert f"host {host} holds a live lease, running out in" in renamed.stderr, renamed.stderr
    assert (
        "use that host's data folder or wait for that command to end, or stop it" in renamed.stderr
    )


def test_a_terminal_whose_host_lost_the_lease_mid_command_is_told_to_look(
    tmp_path: Path, postgres_url: str
) -> None:
    """``maka run`` through host B, whose host is stopped (SIGSTOP) past its lease while the
    command runs; host A takes the session over. The terminal's refusal said only that
    "nothing was committed", while the command had written its first line: it now says the
    turn had started and a command may have done part of its work, and to look first."""
    import signal

    work = tmp_path / "work"
    work.mkdir()
    marker = work / "marker"
    command = f"echo start >> {marker}; sleep 8; echo end >> {marker}"
    turn = [
        [
            {
                "text": "Run.",
                "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": command}}],
            },
            {"text": "Done."},
        ]
    ]
    env = {
        **scripted_env(write_script(tmp_path / "turn.json", turn)),
        **LEASES,
        "MAKA_DATABASE_URL": postgres_url,
    }
    started: list[MainProcess] = []
    try:
        host_b = _host(tmp_path / "b", env, started)
        _host(tmp_path / "a", env, started)
        terminal = subprocess.Popen(
            [*maka_executable(), "run", "--cwd", str(work), "--permission-mode", "auto", "go"],
            env={**os.environ, **env, "MAKA_DATA_DIR": str(tmp_path / "b")},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.read_text() == "start\n"
        os.kill(host_b.pid, signal.SIGSTOP)
        time.sleep(6)  # past the lease and the grace: host A takes the session over
        os.kill(host_b.pid, signal.SIGCONT)
        _out, err = terminal.communicate(timeout=90)
    finally:
        for host in started:
            host.stop()
    assert terminal.returncode == 1, err
    assert "[session_lease_lost]" in err, err
    assert "a command it ran may have done part of its work; look before you run it" in err, err


@pytest.mark.parametrize("beside_a_host", [False, True])
def test_the_tui_opening_a_session_another_process_holds_names_the_holder(
    tmp_path: Path, postgres_url: str, beside_a_host: bool
) -> None:
    """``maka tui --session S`` while another Maka process's lease holds S (here: the host
    killed mid-turn, whose lease has not run out): the greeting said "type /resume", and
    /resume, a message and /settle were all refused. It now names the holder, as ``maka
    plan`` does, alone and beside a running host of another data folder."""
    work = tmp_path / "work"
    work.mkdir()
    common = {
        **_common(tmp_path, postgres_url),
        "MAKA_SESSION_LEASE_TTL_MS": "30000",
        "MAKA_SESSION_LEASE_RUNWAY_MS": "5000",
    }
    started: list[MainProcess] = []
    try:
        host_a = _host(tmp_path / "a", {**common, "MAKA_FAILPOINT": "t2_after_commit"}, started)
        _turn_dies_with(host_a, work, tmp_path, postgres_url)
        listed = json.loads(maka(["sessions", "--json"], tmp_path / "a", env=common).stdout)
        session = str(listed["sessions"][0]["sessionId"])
        folder = tmp_path / "c"
        if beside_a_host:
            _host(folder, common, started)
        chat = maka(["tui", "--session", session], folder, env=common, stdin="/quit\n")
    finally:
        for host in started:
            host.stop()
    assert chat.returncode == 0, chat.stderr
    assert "Traceback" not in chat.stdout + chat.stderr
    assert f"Another Maka process holds this session: session {session} is held by" in (
        chat.stdout
    ), chat.stdout
    assert "refused (session_busy)" in chat.stdout
    assert "type /resume" not in chat.stdout, chat.stdout
