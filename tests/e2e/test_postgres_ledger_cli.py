"""``maka run`` with ``MAKA_DATABASE_URL`` keeps its ledger on the PostgreSQL server
(docs/postgres.md): a whole turn with a tool call (T1 and T2) commits there, gap-free, the run
completed, and the data folder holds no SQLite database; ``maka sessions`` lists it from the
server, and later commands continue and rename the session, each taking its free lease."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from tests.helpers.maka_run import maka

pytestmark = pytest.mark.e2e


def test_a_turn_with_a_tool_call_commits_on_postgresql(tmp_path: Path, postgres_url: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    result = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "write hello.txt saying hi"],
        data,
        env={"MAKA_DATABASE_URL": postgres_url},
    )
    assert result.returncode == 0, result.stderr
    assert (work / "hello.txt").exists()
    assert not (data / "runtime.sqlite").exists()
    with psycopg.connect(postgres_url) as conn:
        (status, next_seq), *_ = conn.execute("SELECT status, next_seq FROM runs").fetchall()
        seqs = [
            row[0]
            for row in conn.execute("SELECT event_seq FROM runtime_events ORDER BY event_seq")
        ]
        operation = conn.execute("SELECT current_state FROM tool_operations").fetchall()
        lease = conn.execute("SELECT epoch, owner FROM session_leases").fetchall()
    assert status == "completed"
    assert seqs == list(range(1, next_seq))
    assert operation == [("outcome_committed",)]
    assert len(lease) == 1 and lease[0][1] is None  # taken at creation, given up at exit
    url = {"MAKA_DATABASE_URL": postgres_url}
    listed = maka(["sessions", "--json"], data, env=url)
    assert listed.returncode == 0, listed.stderr
    (session,) = json.loads(listed.stdout)["sessions"]
    session_id = session["sessionId"]
    again = maka(["run", "--session", session_id, "list files"], data, env=url)
    assert again.returncode == 0, again.stderr
    renamed = maka(["sessions", "rename", session_id, "on the server"], data, env=url)
    assert renamed.returncode == 0, renamed.stderr
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (2,)
        assert conn.execute("SELECT title FROM sessions").fetchone() == ("on the server",)
        # each command took the free lease by its first write and gave it up at exit
        assert conn.execute("SELECT epoch, owner FROM session_leases").fetchone() == (3, None)


def test_a_bad_call_deadline_is_a_coded_error(tmp_path: Path, postgres_url: str) -> None:
    """``MAKA_DATABASE_CALL_TIMEOUT_MS`` that is not a positive whole number of milliseconds is
    refused before anything is opened: a coded error, no traceback."""
    work = tmp_path / "work"
    work.mkdir()
    for value in ("5s", "0"):
        env = {"MAKA_DATABASE_URL": postgres_url, "MAKA_DATABASE_CALL_TIMEOUT_MS": value}
        for args in (["run", "--cwd", str(work), "hello"], ["sessions"]):
            result = maka(args, tmp_path / "data", env=env)
            assert result.returncode != 0, (args, value)
            assert "store_io_failed" in result.stderr, result.stderr
            assert "MAKA_DATABASE_CALL_TIMEOUT_MS" in result.stderr, result.stderr
            assert "Traceback" not in result.stderr, result.stderr


def test_the_commands_that_read_a_session_find_it_on_the_server(
    tmp_path: Path, postgres_url: str
) -> None:
    """With the ledger on the server the data folder has no database file, and without a
    running host ``maka plan``, ``timeline``, ``checkpoints``, ``branch`` and ``settle`` read the
    session from the server (they said ``session_not_found``: "no data in DIR")."""
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    url = {"MAKA_DATABASE_URL": postgres_url}
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "write hello.txt saying hi"]
    assert maka(args, data, env=url).returncode == 0
    assert not (data / "runtime.sqlite").exists()
    listed = maka(["sessions", "--json"], data, env=url)
    (session,) = json.loads(listed.stdout)["sessions"]
    session_id = session["sessionId"]
    for command in (["timeline"], ["checkpoints"], ["branch"]):
        result = maka([*command, session_id], data, env=url)
        assert result.returncode == 0, (command, result.stderr)
        assert "session_not_found" not in result.stderr, (command, result.stderr)
    planned = maka(["plan", session_id, "--json"], data, env=url)
    assert "session_not_found" not in planned.stderr, planned.stderr
    assert json.loads(planned.stdout)["sessionId"] == session_id  # (exit 3: Safe resume is off)
    timeline = maka(["timeline", session_id], data, env=url).stdout
    assert "write_file" in timeline, timeline
    # settle reads the session too: an operation it does not have is its own refusal
    settled = maka(["settle", session_id, "no-such-operation", "--ran"], data, env=url)
    assert settled.returncode != 0
    assert "session_not_found" not in settled.stderr, settled.stderr
    assert "Traceback" not in settled.stderr, settled.stderr


def test_a_host_says_it_serves_the_folder_only_once_its_database_is_open(tmp_path: Path) -> None:
    """``maka host`` with a server that does not answer: it exits with the coded refusal and
    never said it was serving the folder (it once said so first, then failed)."""
    refused = maka(
        ["host"],
        tmp_path / "data",
        env={"MAKA_DATABASE_URL": "postgresql://maka@127.0.0.1:9/maka"},
        timeout=60,
    )
    assert refused.returncode != 0, refused.stderr
    assert "store_io_failed" in refused.stderr, refused.stderr
    assert "serving" not in refused.stderr, refused.stderr


def test_a_host_says_it_serves_the_folder_once_ready(tmp_path: Path, postgres_url: str) -> None:
    """The line comes once the database is open, and then commands attach to the host."""
    import os
    import signal
    import subprocess

    from tests.helpers.maka_process import maka_executable

    host = subprocess.Popen(
        [*maka_executable(), "--data-dir", str(tmp_path / "data"), "host"],
        env={**os.environ, "MAKA_DATABASE_URL": postgres_url},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert host.stderr is not None
        line = host.stderr.readline()
        assert line.startswith(f"maka host: serving {tmp_path / 'data'} (pid {host.pid})"), line
        listed = maka(
            ["sessions", "--json"], tmp_path / "data", env={"MAKA_DATABASE_URL": postgres_url}
        )
        assert listed.returncode == 0, listed.stderr  # it serves: the command attached
    finally:
        host.send_signal(signal.SIGTERM)
        host.wait(30)
        if host.stderr is not None:
            host.stderr.close()


def test_an_export_from_another_hosts_data_folder_says_where_the_snapshots_are(
    tmp_path: Path, postgres_url: str
) -> None:
    """On a shared ledger each host keeps its snapshots in its own data folder: ``maka export``
    with another data folder carries none of them and says they are not in that folder, not
    that they are damaged (as ``maka checkpoints`` and ``maka doctor`` say it)."""
    work = tmp_path / "work"
    work.mkdir()
    env = {"MAKA_DATABASE_URL": postgres_url, "MAKA_WORKSPACE_CHECKPOINTS": "on"}
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "write hello.txt saying hi"]
    assert maka(args, tmp_path / "a", env=env).returncode == 0
    (session,) = json.loads(maka(["sessions", "--json"], tmp_path / "a", env=env).stdout)[
        "sessions"
    ]
    out = tmp_path / "out.jsonl"
    exported = maka(["export", session["sessionId"], "-o", str(out)], tmp_path / "b", env=env)
    assert exported.returncode == 0, exported.stderr
    assert "is in this data folder (the ledger is on a PostgreSQL server shared" in (
        exported.stderr
    ), exported.stderr
    assert "damaged" not in exported.stderr, exported.stderr


@pytest.mark.parametrize("version", ["banana", "0", None])
def test_a_meta_table_of_someone_elses_is_refused_the_same_by_every_command(
    tmp_path: Path, postgres_url: str, version: str | None
) -> None:
    """A database holding a ``meta`` table Maka did not create: a value that is no number
    printed a Python traceback, other columns a raw PostgreSQL error."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        if version is None:
            conn.execute("CREATE TABLE meta (x integer)")
        else:
            conn.execute("CREATE TABLE meta (key text PRIMARY KEY, value text)")
            conn.execute("INSERT INTO meta VALUES ('schema_version', %s)", (version,))
    env = {"MAKA_DATABASE_URL": postgres_url}
    for args in (["sessions"], ["doctor"], ["run", "--cwd", str(tmp_path), "hello"]):
        result = maka(args, tmp_path / "data", env=env)
        assert result.returncode != 0, (args, result)
        text = result.stdout + result.stderr
        assert "Traceback" not in text, text
        assert "store_corrupt" in text and "meta table Maka did not create" in text, (args, text)


@pytest.mark.parametrize("tables", [["users"], ["sessions", "runs"]])
def test_another_applications_database_is_refused_the_same_by_every_command(
    tmp_path: Path, postgres_url: str, tables: list[str]
) -> None:
    """A database holding another application's tables and no Maka ledger: ``maka run`` put
    Maka's tables beside them (exit 0), and with tables of Maka's names ``maka sessions`` said
    "no sessions yet" while ``maka run`` refused. Every command now refuses it and nothing is
    created."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for table in tables:
            conn.execute(f"CREATE TABLE {table} (id integer)")
    env = {"MAKA_DATABASE_URL": postgres_url}
    work = tmp_path / "work"
    work.mkdir()
    for args in (
        ["sessions"],
        ["sessions", "--json"],
        ["doctor"],
        ["plan", "session_x"],
        ["run", "--cwd", str(work), "hello"],
    ):
        result = maka(args, tmp_path / "data", env=env)
        text = result.stdout + result.stderr
        assert result.returncode != 0, (args, result)
        assert "Traceback" not in text, text
        assert "store_corrupt" in text and "Maka did not create" in text, (args, text)
        assert tables[0] in text, (args, text)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        found = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
    assert sorted(row[0] for row in found) == sorted(tables)


def test_a_url_with_a_stray_percent_is_refused_before_it_reaches_the_server(
    tmp_path: Path,
) -> None:
    """libpq refused such a URL quoting the token, so the password was printed."""
    url = "postgresql://u:p%zzsecret@/x?host=/nowhere"
    for args in (["sessions"], ["doctor"], ["doctor", "--json"]):
        result = maka(args, tmp_path / "data", env={"MAKA_DATABASE_URL": url})
        text = result.stdout + result.stderr
        assert result.returncode != 0, result
        assert "zzsecret" not in text, text
        assert "database_url_invalid" in text and "%25" in text, text


def test_plan_from_a_new_data_folder_owns_it_and_makes_it_private(
    tmp_path: Path, postgres_url: str
) -> None:
    """A second machine's first ``maka plan``: its data folder did not exist, so the lock
    could not be taken and the plan said another Maka process owned it, and the folder its
    log then made was world-readable (``maka doctor`` called it ``data_not_private``)."""
    work = tmp_path / "work"
    work.mkdir()
    env = {"MAKA_DATABASE_URL": postgres_url}
    made = maka(["run", "--cwd", str(work), "hello"], tmp_path / "one", env=env)
    assert made.returncode == 0, made.stderr
    with psycopg.connect(postgres_url) as conn:
        [(session,)] = conn.execute("SELECT session_id FROM sessions").fetchall()
    other = tmp_path / "two"
    planned = maka(["plan", str(session)], other, env=env)
    assert "another Maka process owns" not in planned.stderr, planned.stderr
    assert "Traceback" not in planned.stderr
    assert other.stat().st_mode & 0o777 == 0o700
    doctor = maka(["doctor"], other, env=env)
    assert "data_not_private" not in doctor.stdout + doctor.stderr


def test_a_run_whose_process_is_gone_is_said_to_await_repair_once_its_lease_ran_out(
    tmp_path: Path, postgres_url: str
) -> None:
    """A ``maka run`` killed on a shared ledger: once its lease ran out, ``maka sessions`` and
    ``maka timeline`` said the run was running (no data folder lock tells on a server)."""
    import time

    work = tmp_path / "work"
    work.mkdir()
    env = {
        "MAKA_DATABASE_URL": postgres_url,
        "MAKA_SESSION_LEASE_TTL_MS": "3000",
        "MAKA_SESSION_LEASE_RUNWAY_MS": "1000",
        "MAKA_SESSION_TAKEOVER_GRACE_MS": "500",
    }
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "write k.md saying 1"]
    killed = maka(args, tmp_path / "one", env={**env, "MAKA_FAILPOINT": "t2_after_commit"})
    assert killed.returncode == -9, killed.stderr
    with psycopg.connect(postgres_url) as conn:
        [(session,)] = conn.execute("SELECT session_id FROM sessions").fetchall()
    # Another machine's view, while the lease is held and once it ran out.
    held = json.loads(maka(["sessions", "--json"], tmp_path / "two", env=env).stdout)
    assert not held["sessions"][0].get("awaitingRepair"), held
    time.sleep(4.0)
    listed = json.loads(maka(["sessions", "--json"], tmp_path / "two", env=env).stdout)
    assert listed["sessions"][0]["awaitingRepair"] is True, listed
    timeline = maka(["timeline", str(session)], tmp_path / "two", env=env)
    assert "no Maka process holds its session any more" in timeline.stdout, timeline.stdout


def test_naming_a_session_in_a_database_without_a_ledger_changes_nothing(
    tmp_path: Path, postgres_url: str
) -> None:
    """A database with no Maka schema (a new one, or a mistyped name): every command that only
    names a session says ``session_not_found`` and leaves the database empty. ``plan``,
    ``settle``, ``resume``, ``run --session`` and ``sessions rename`` created the whole schema
    (and took an owner epoch) to say so."""
    data = tmp_path / "data"
    url = {"MAKA_DATABASE_URL": postgres_url}
    for args in (
        ["plan", "session_nope"],
        ["settle", "session_nope", "call", "--ran"],
        ["resume", "session_nope"],
        ["run", "--session", "session_nope", "hi"],
        ["sessions", "rename", "session_nope", "a title"],
        ["sessions", "remove", "session_nope", "--yes"],
    ):
        result = maka(args, data, env=url)
        assert result.returncode == 2, (args, result.stderr)
        assert "[session_not_found]" in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr, result.stderr
    with psycopg.connect(postgres_url) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchone()
    assert tables == (0,)


def _as_another_user(url: str, *, create: bool) -> str:
    """``url`` (a schema of its own, as ``postgres_url`` gives it) for a new login role that may
    use the schema (and create in it, with ``create``) but has no rights on its tables."""
    import uuid

    role = f"stranger_{uuid.uuid4().hex[:12]}"
    schema = url.rsplit("search_path%3D", 1)[1]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        rights = "USAGE, CREATE" if create else "USAGE"
        conn.execute(f'GRANT {rights} ON SCHEMA "{schema}" TO "{role}"')
    return url.replace("postgresql://maka@", f"postgresql://{role}@", 1)


def test_another_applications_tables_the_user_may_not_read_are_still_refused(
    tmp_path: Path, postgres_url: str
) -> None:
    """Another application's tables on which Maka's database user has no rights: the check read
    ``information_schema``, which hides them, so ``maka sessions`` said "no sessions yet" and
    ``maka run`` put Maka's tables beside them."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE customers (id integer)")
        conn.execute("CREATE TABLE orders (id integer)")
    url = {"MAKA_DATABASE_URL": _as_another_user(postgres_url, create=True)}
    work = tmp_path / "work"
    work.mkdir()
    for args in (["sessions"], ["doctor"], ["run", "--cwd", str(work), "hello"]):
        result = maka(args, tmp_path / "data", env=url)
        text = result.stdout + result.stderr
        assert result.returncode != 0 and "Traceback" not in text, (args, text)
        assert "store_corrupt" in text and "customers, orders" in text, (args, text)
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = current_schema()"
        ).fetchall()
    assert sorted(row[0] for row in rows) == ["customers", "orders"]


def test_a_ledger_the_user_may_not_read_is_refused_not_read_as_empty(
    tmp_path: Path, postgres_url: str
) -> None:
    """A Maka ledger created by another database user that granted nothing: ``maka sessions``
    said "no sessions yet" (exit 0), ``maka doctor`` "no ledger in that database" and
    ``maka run`` failed on ``CREATE TABLE``. Each now says ``database_access_denied``."""
    work = tmp_path / "work"
    work.mkdir()
    owner = {"MAKA_DATABASE_URL": postgres_url}
    made = maka(["run", "--cwd", str(work), "hello"], tmp_path / "owner", env=owner)
    assert made.returncode == 0, made.stderr
    url = {"MAKA_DATABASE_URL": _as_another_user(postgres_url, create=True)}
    for args in (
        ["sessions"],
        ["sessions", "--json"],
        ["doctor"],
        ["run", "--cwd", str(work), "hello"],
    ):
        result = maka(args, tmp_path / "data", env=url)
        text = result.stdout + result.stderr
        assert result.returncode != 0 and "Traceback" not in text, (args, text)
        assert "database_access_denied" in text and "may not read its tables" in text, (
            args,
            text,
        )
    listed = maka(["sessions", "--json"], tmp_path / "owner", env=owner)
    assert listed.returncode == 0 and len(json.loads(listed.stdout)["sessions"]) == 1


def test_a_search_path_naming_no_schema_is_refused_with_a_code(
    tmp_path: Path, postgres_url: str
) -> None:
    """A URL whose ``options`` set a ``search_path`` no schema of the database has: ``maka
    sessions`` said "no sessions yet", then the first run failed with the server's words
    ("no schema has been selected to create in ... CREATE TABLE meta"), and doctor said
    ``store_not_found``. Each says ``database_url_invalid``, naming the search_path, and
    nothing is made anywhere."""
    joiner = "&" if "?" in postgres_url else "?"
    url = f"{postgres_url}{joiner}options=-csearch_path%3Dnope"
    work = tmp_path / "work"
    work.mkdir()
    for args in (
        ["sessions"],
        ["run", "--cwd", str(work), "--permission-mode", "auto", "hi"],
        ["doctor"],
    ):
        result = maka(args, tmp_path / "data", env={"MAKA_DATABASE_URL": url})
        text = result.stdout + result.stderr
        assert result.returncode != 0, (args, text)
        assert "[database_url_invalid]" in text or "database_url_invalid" in text, (args, text)
        assert "search_path (nope) names no schema that exists" in text, (args, text)
        assert "Traceback" not in text and "CREATE TABLE" not in text, (args, text)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        made = conn.execute(
            "SELECT count(*) FROM pg_catalog.pg_namespace WHERE nspname = 'nope'"
        ).fetchone()
    assert made is not None and made[0] == 0
