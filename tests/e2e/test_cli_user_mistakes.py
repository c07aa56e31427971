"""The real ``maka`` command against user mistakes: a stable code, the right exit code, no
traceback, and nothing changed on disk.

Each case is one a careful user can run into: exporting onto something that is not a file,
arguments or terminal lines with bytes that are not UTF-8, ``--cwd`` that contradicts
``--session``, importing a file that is not an export (or while another process owns the data
directory), a damaged database, an empty database file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from storage.instance_lock import InstanceLock, LockOutcome
from storage.ledger.sqlite_connection import DATABASE_NAME
from tests.helpers.ledger_builders import RunIds, clean_ledger, to_jsonl
from tests.helpers.maka_process import maka_executable
from tests.helpers.store_workloads import commit_ledger, db_state, store_with_runs

pytestmark = pytest.mark.e2e

IDS = RunIds()


def maka(
    data_dir: Path, *args: str | bytes, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    env = {key: value for key, value in os.environ.items() if key != "MAKA_FAILPOINT"}
    env["MAKA_DATA_DIR"] = str(data_dir)
    command: Sequence[str | bytes] = [*maka_executable(), *args]
    return subprocess.run(
        command, env=env, input=stdin, capture_output=True, timeout=120, check=False
    )


def refused(result: subprocess.CompletedProcess[bytes], exit_code: int, code: str) -> str:
    """The command failed with ``exit_code`` and ``maka: error [code]``, without a traceback;
    returns its standard error."""
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode == exit_code, (result.returncode, err)
    assert f"maka: error [{code}]" in err, err
    assert "Traceback" not in err, err
    return err


def run_count(data_dir: Path) -> int:
    conn = sqlite3.connect(f"{(data_dir / DATABASE_NAME).resolve().as_uri()}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM runs").fetchone()[0])
    finally:
        conn.close()


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    data_dir = tmp_path / "origin"
    with store_with_runs(data_dir, IDS) as store:
        commit_ledger(store, clean_ledger(3, ids=IDS))
    return data_dir


@pytest.fixture
def session(tmp_path: Path) -> tuple[Path, str, Path]:
    """A data directory with one finished demo session: (data dir, session id, its folder)."""
    data_dir = tmp_path / "data"
    folder = tmp_path / "work"
    folder.mkdir()
    result = maka(data_dir, "run", "--cwd", str(folder), "--permission-mode", "auto", "hello")
    assert result.returncode == 0, result.stderr
    listed = maka(data_dir, "sessions", "--json")
    (row,) = json.loads(listed.stdout)["sessions"]
    return data_dir, str(row["sessionId"]), folder


# ---- export -----------------------------------------------------------------------------------


def test_export_never_replaces_what_is_not_a_regular_file(origin: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    real = tmp_path / "real.jsonl"
    real.write_bytes(b"keep me\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    folder = tmp_path / "folder"
    folder.mkdir()
    for target, kind in ((fifo, "a pipe"), (link, "a symbolic link"), (folder, "a folder")):
        result = maka(origin, "export", IDS.session_id, "-o", str(target), "--force")
        assert kind in refused(result, 2, "export_target_invalid")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert link.is_symlink() and real.read_bytes() == b"keep me\n"
    assert folder.is_dir() and not any(folder.iterdir())
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "folder",
        "link.jsonl",
        "origin",
        "pipe",
        "real.jsonl",
    ]


def test_export_into_a_missing_folder_names_the_folder(origin: Path, tmp_path: Path) -> None:
    target = tmp_path / "nowhere" / "x.jsonl"
    err = refused(
        maka(origin, "export", IDS.session_id, "-o", str(target)), 2, "export_target_invalid"
    )
    assert f"the folder {target.parent} does not exist" in err and ".tmp" not in err


def test_export_to_standard_output_equals_the_file(origin: Path, tmp_path: Path) -> None:
    target = tmp_path / "file.jsonl"
    assert maka(origin, "export", IDS.session_id, "-o", str(target)).returncode == 0
    piped = maka(origin, "export", IDS.session_id, "-o", "-")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == target.read_bytes()
    assert b"lines" in piped.stderr
    assert not (Path.cwd() / "-").exists()


def test_an_unknown_session_is_invalid_input_everywhere(origin: Path, tmp_path: Path) -> None:
    for args in (
        ("export", "nope", "-o", str(tmp_path / "x.jsonl")),
        ("plan", "nope"),
        ("resume", "nope"),
        ("run", "--session", "nope", "hello"),
    ):
        refused(maka(origin, *args), 2, "session_not_found")
    assert not (tmp_path / "x.jsonl").exists()


def test_an_empty_id_or_folder_is_refused_as_empty(session: tuple[Path, str, Path]) -> None:
    """An unset shell variable (``maka plan "$S"``): an empty id is refused as empty, not
    looked up ("no session " naming nothing), and an empty folder is not taken as the current
    one; nothing changes."""
    data_dir, session_id, _ = session
    before = db_state(data_dir / DATABASE_NAME)
    for args, words in (
        (("plan", ""), "session id"),
        (("timeline", " "), "session id"),
        (("settle", session_id, "", "--ran"), "call id"),
        (("branch", session_id, "--at", ""), "event id (--at)"),
        (("run", "--session", "", "hi"), "session id"),
        (("sessions", "relocate", session_id, ""), "folder"),
    ):
        err = refused(maka(data_dir, *args), 2, "invalid_argument")
        assert f"the {words} is empty" in err, err
    assert db_state(data_dir / DATABASE_NAME) == before


def test_an_empty_provider_is_refused_not_taken_as_the_default(
    session: tuple[Path, str, Path],
) -> None:
    """``--provider "$P"`` with P unset ran the demo provider; it is a usage mistake now, and
    nothing changes."""
    data_dir, session_id, work = session
    before = db_state(data_dir / DATABASE_NAME)
    for args in (
        ("run", "--provider", "", "--cwd", str(work), "hi"),
        ("run", "--provider", " ", "--session", session_id, "hi"),
        ("resume", session_id, "--provider", ""),
        ("tui", "--provider", "", "--session", session_id),
    ):
        result = maka(data_dir, *args)
        err = result.stderr.decode("utf-8", "replace")
        assert result.returncode == 2, (result.returncode, err)
        assert "error [usage_invalid]: argument --provider: a provider name is needed" in err
        assert "Traceback" not in err, err
    assert db_state(data_dir / DATABASE_NAME) == before


def test_an_empty_data_dir_is_refused_not_taken_as_the_default(
    session: tuple[Path, str, Path],
) -> None:
    """``--data-dir "$UNSET"``: refused, where it once fell back to MAKA_DATA_DIR or the
    per-user folder and so worked on the user's real sessions."""
    data_dir, session_id, _ = session
    before = db_state(data_dir / DATABASE_NAME)
    for args in (
        ("--data-dir", "", "sessions", "remove", session_id, "--yes"),
        ("sessions", "remove", session_id, "--yes", "--data-dir", " "),
        ("plan", session_id, "--data-dir", ""),
    ):
        err = refused(maka(data_dir, *args), 2, "data_dir_invalid")
        assert "the data directory (--data-dir) is empty" in err
    assert db_state(data_dir / DATABASE_NAME) == before


def test_an_empty_maka_data_dir_is_refused_not_taken_as_the_per_user_folder(
    tmp_path: Path,
) -> None:
    """``MAKA_DATA_DIR=$UNSET maka ...``: refused, where it fell back to the per-user folder
    (here a home of the test's own, which must stay empty); ``--data-dir`` still wins, and the
    ledger tools, which open no data folder, do not mind."""
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("MAKA_")}
    env.update({"HOME": str(home), "XDG_DATA_HOME": str(home / "data"), "MAKA_DATA_DIR": " "})
    work = tmp_path / "work"
    work.mkdir()

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        command = [*maka_executable(), *args]
        return subprocess.run(
            command, env=env, cwd=tmp_path, capture_output=True, timeout=120, check=False
        )

    for args in (
        ("run", "--cwd", str(work), "list files"),
        ("sessions",),
        ("doctor",),
    ):
        err = refused(run(*args), 2, "data_dir_invalid")
        assert "MAKA_DATA_DIR is set but empty" in err, err
    assert list(home.iterdir()) == [] and list(work.iterdir()) == []
    assert sorted(path.name for path in tmp_path.iterdir()) == ["home", "work"]
    given = run("--data-dir", str(tmp_path / "data"), "sessions")
    assert given.returncode == 0, given.stderr
    ledger = tmp_path / "empty.jsonl"
    ledger.write_bytes(b"")
    checked = run("ledger", "check", str(ledger))
    assert b"data_dir_invalid" not in checked.stderr, checked.stderr
    assert list(home.iterdir()) == []


# ---- text that is not UTF-8 -------------------------------------------------------------------


def test_a_prompt_that_is_not_utf8_is_refused_before_anything_is_written(
    session: tuple[Path, str, Path], tmp_path: Path
) -> None:
    data_dir, session_id, folder = session
    before = db_state(data_dir / DATABASE_NAME)
    runs = run_count(data_dir)
    err = refused(
        maka(data_dir, "run", "--session", session_id, b"write a\xff.txt saying hi"),
        2,
        "text_not_utf8",
    )
    assert "the prompt" in err
    refused(maka(data_dir, "run", "--cwd", str(folder), b"hi \xfe"), 2, "text_not_utf8")
    odd = tmp_path / "odd"
    odd.mkdir()
    refused(maka(data_dir, "run", "--cwd", os.fsencode(odd) + b"\xff", "hi"), 2, "text_not_utf8")
    assert run_count(data_dir) == runs
    assert db_state(data_dir / DATABASE_NAME) == before


def test_an_id_or_folder_that_is_not_utf8_is_refused_with_its_code(
    session: tuple[Path, str, Path],
) -> None:
    """Bytes that are not UTF-8 in any text argument: a code, exit 2, never a traceback (a
    session id was printed or looked up and ended in ``UnicodeEncodeError``)."""
    data_dir, session_id, _ = session
    before = db_state(data_dir / DATABASE_NAME)
    for args in (
        ("branch", b"\xff"),
        ("plan", b"\xff"),
        ("timeline", b"\xff"),
        ("checkpoints", b"\xff"),
        ("settle", b"\xff", "c1", "--ran"),
        ("branch", session_id, "--at", b"e\xfe"),
        ("branch", session_id, "--at", "e1", "--to", b"/tmp/bad\xff"),
    ):
        err = refused(maka(data_dir, *args), 2, "text_not_utf8")
        assert "not UTF-8 text" in err and "Traceback" not in err, err
    assert db_state(data_dir / DATABASE_NAME) == before


def test_a_terminal_line_that_is_not_utf8_writes_no_run(session: tuple[Path, str, Path]) -> None:
    data_dir, session_id, _ = session
    runs = run_count(data_dir)
    result = maka(data_dir, "tui", "--session", session_id, stdin=b"hello \xff there\n/quit\n")
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 0, err
    assert "maka: error [text_not_utf8]" in err and "Traceback" not in err
    assert run_count(data_dir) == runs


def test_a_data_dir_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "MAKA_DATA_DIR"}
    result = subprocess.run(
        [*maka_executable(), "--data-dir", os.fsencode(tmp_path) + b"/d\xff", "sessions"],
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    refused(result, 2, "data_dir_invalid")
    assert list(tmp_path.iterdir()) == []


# ---- --cwd and --session ----------------------------------------------------------------------


def test_cwd_that_contradicts_the_session_is_refused(
    session: tuple[Path, str, Path], tmp_path: Path
) -> None:
    data_dir, session_id, folder = session
    other = tmp_path / "other"
    other.mkdir()
    runs = run_count(data_dir)
    args = ("--permission-mode", "auto", "write other.txt saying hi")
    result = maka(data_dir, "run", "--session", session_id, "--cwd", str(other), *args)
    err = refused(result, 2, "session_cwd_mismatch")
    assert str(folder.resolve()) in err and str(other) in err
    assert run_count(data_dir) == runs
    assert not (other / "other.txt").exists() and not (folder / "other.txt").exists()
    same = maka(data_dir, "run", "--session", session_id, "--cwd", str(folder), *args)
    assert same.returncode == 0, same.stderr
    assert (folder / "other.txt").exists()


# ---- import -----------------------------------------------------------------------------------


def test_an_invalid_import_creates_no_data_directory(tmp_path: Path) -> None:
    target = tmp_path / "fresh"
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    refused(maka(target, "import", str(empty)), 2, "import_structure_invalid")
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 4)
    err = refused(maka(target, "import", str(garbage)), 2, "import_line_invalid")
    assert "line 1" in err and "accept-torn-tail" not in err
    assert not target.exists()


def test_a_torn_tail_is_named_only_when_the_lines_before_it_are_an_export(
    origin: Path, tmp_path: Path
) -> None:
    export = tmp_path / "s.jsonl"
    assert maka(origin, "export", IDS.session_id, "-o", str(export)).returncode == 0
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(export.read_bytes() + b'{"half":')
    refused(maka(tmp_path / "a", "import", str(torn)), 2, "import_torn_tail")
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b"not json\n" + export.read_bytes() + b'{"half":')
    err = refused(maka(tmp_path / "b", "import", str(broken)), 2, "import_line_invalid")
    assert "line 1" in err


def test_import_refuses_a_data_directory_another_process_owns(origin: Path, tmp_path: Path) -> None:
    export = tmp_path / "s.jsonl"
    assert maka(origin, "export", IDS.session_id, "-o", str(export)).returncode == 0
    target = tmp_path / "owned"
    target.mkdir()
    lock = InstanceLock(target)
    assert lock.acquire().outcome is LockOutcome.ACQUIRED
    try:
        err = refused(maka(target, "import", str(export)), 1, "store_locked")
        assert f"pid {os.getpid()}" in err
        assert "wait for it to end" in err, "a holder that serves nothing: another command"
        assert not (target / DATABASE_NAME).exists()
    finally:
        lock.release()
    assert maka(target, "import", str(export)).returncode == 0


# ---- the database -----------------------------------------------------------------------------


def test_a_damaged_database_gives_its_code_not_a_traceback(
    session: tuple[Path, str, Path],
) -> None:
    data_dir, session_id, _ = session
    database = data_dir / DATABASE_NAME
    conn = sqlite3.connect(database)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'runs'").fetchone()
    (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    with database.open("r+b") as file:
        file.seek((root - 1) * page_size)
        file.write(b"\0" * page_size)
    for args in (("sessions",), ("sessions", "--json"), ("plan", session_id)):
        refused(maka(data_dir, *args), 1, "store_corrupt")
    doctor = maka(data_dir, "doctor")
    assert doctor.returncode == 1 and b"store_corrupt" in doctor.stdout + doctor.stderr


def test_doctor_on_an_empty_database_file_says_it_is_there(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    data_dir.mkdir(mode=0o700)
    (data_dir / DATABASE_NAME).write_bytes(b"")
    (data_dir / DATABASE_NAME).chmod(0o600)  # as Maka creates it (a wider mode is a problem)
    result = maka(data_dir, "doctor", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["present"] is True and document["ok"] is True
    text = maka(data_dir, "doctor")
    assert b"is empty: nothing to check" in text.stdout


# ---- usage ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "prog"),
    [
        (("nosuch",), "maka"),
        (("run",), "maka run"),
        (("run", "--permission-mode", "sometimes", "hi"), "maka run"),
        (("ledger",), "maka ledger"),
        (("ledger", "check"), "maka ledger check"),
        (("export", "s"), "maka export"),
    ],
)
def test_usage_mistakes_carry_a_code(tmp_path: Path, args: tuple[str, ...], prog: str) -> None:
    result = maka(tmp_path / "d", *args)
    err = result.stderr.decode()
    assert result.returncode == 2, err
    assert err.startswith("usage: ") and f"\n{prog}: error [usage_invalid]: " in err, err
    assert not (tmp_path / "d").exists()


# ---- answers through a pipe -------------------------------------------------------------------


def _popen(data_dir: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {key: value for key, value in os.environ.items() if key != "MAKA_FAILPOINT"}
    env["MAKA_DATA_DIR"] = str(data_dir)
    return subprocess.Popen(
        [*maka_executable(), *args],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_piped_answers_are_read_as_soon_as_they_are_there(tmp_path: Path) -> None:
    """Both answers are in the pipe at once and the pipe stays open: each question must take
    its line at once, not wait for more input or the end of it."""
    folder = tmp_path / "w"
    folder.mkdir()
    args = ("--permission-mode", "ask", "write a.txt saying hi, then run echo two")
    with _popen(tmp_path / "d", "run", "--cwd", str(folder), *args) as process:
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(b"y\ny\n")
            process.stdin.flush()
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()
        output = process.stdout.read()
    assert (folder / "a.txt").read_text() == "hi\n"
    assert output.count(b"[permission] allow") == 2 and b"two" in output, output


def test_the_chat_and_its_questions_share_one_reader(tmp_path: Path) -> None:
    folder = tmp_path / "w"
    folder.mkdir()
    with _popen(tmp_path / "d", "tui", "--cwd", str(folder)) as process:
        assert process.stdin is not None
        try:
            process.stdin.write(b"write e.txt saying hi\ny\n")
            process.stdin.flush()
            deadline = time.monotonic() + 30
            while not (folder / "e.txt").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert (folder / "e.txt").read_text() == "hi\n"
            process.stdin.write(b"/quit\n")
            process.stdin.flush()
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()


# ---- self-test --------------------------------------------------------------------------------


def _self_test(tmp_path: Path, **env_changes: str | None) -> dict[str, object]:
    env = {key: value for key, value in os.environ.items() if key != "MAKA_FAILPOINT"}
    env["MAKA_DATA_DIR"] = str(tmp_path / "d")
    for key, value in env_changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    completed = subprocess.run(
        [*maka_executable(), "self-test", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    report: dict[str, object] = json.loads(completed.stdout)
    assert completed.returncode == (0 if report["ok"] else 1)
    return report


def test_self_test_checks_the_platform_the_desktop_would_use(tmp_path: Path) -> None:
    unreachable = _self_test(tmp_path, QT_QPA_PLATFORM=None, WAYLAND_DISPLAY=None, DISPLAY=":987")
    assert unreachable["failures"] == ["display"]
    checks = {check["name"]: check for check in unreachable["checks"]}  # type: ignore[attr-defined]
    assert "DISPLAY=:987 names a display that does not answer" in checks["display"]["detail"]
    no_display = _self_test(tmp_path, QT_QPA_PLATFORM=None, WAYLAND_DISPLAY=None, DISPLAY=None)
    assert no_display["ok"] is True
    checks = {check["name"]: check for check in no_display["checks"]}  # type: ignore[attr-defined]
    assert checks["display"]["detail"].startswith("skipped: no DISPLAY")
    chosen = _self_test(tmp_path, QT_QPA_PLATFORM="offscreen", DISPLAY=":987")
    assert chosen["ok"] is True


def test_self_test_says_why_the_data_directory_cannot_be_made(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", "utf-8")
    report = _self_test(tmp_path, MAKA_DATA_DIR=str(blocker / "data"), QT_QPA_PLATFORM="offscreen")
    assert report["failures"] == ["data-dir"]
    checks = {check["name"]: check for check in report["checks"]}  # type: ignore[attr-defined]
    assert checks["data-dir"]["detail"] == (
        f"cannot create the data directory {blocker / 'data'}: {blocker} is a file, not a folder"
    )


# ---- --json refusals --------------------------------------------------------------------------


def test_json_refusals_are_one_json_document_with_the_same_exit_code(
    session: tuple[Path, str, Path], tmp_path: Path
) -> None:
    data_dir, _, _ = session
    cases: list[tuple[tuple[str, ...], int, str]] = [
        (("plan", "nope", "--json"), 2, "session_not_found"),
        (("resume", "nope", "--json"), 2, "session_not_found"),
        (("ledger", "plan", str(tmp_path / "missing.jsonl"), "--json"), 2, ""),
        (("plan", "--json"), 2, "usage_invalid"),
        (("sessions", "--json", "--bogus"), 2, "usage_invalid"),
        # The parsers of subcommands' own commands (argparse makes them apart) said no JSON.
        (("sessions", "rename", "--json"), 2, "usage_invalid"),
        (("sessions", "relocate", "x", "--json"), 2, "usage_invalid"),
        (("ledger", "scan", "--json"), 2, "usage_invalid"),
    ]
    for args, exit_code, code in cases:
        result = maka(data_dir, *args)
        assert result.returncode == exit_code, (args, result.stderr)
        document = json.loads(result.stdout)  # exactly one document: json.loads rejects more
        assert set(document) == {"error"}, args
        assert set(document["error"]) == {"code", "message"}, args
        assert document["error"]["message"], args
        if code:
            assert document["error"]["code"] == code, args
        assert f"[{document['error']['code']}]".encode() in result.stderr, args
        assert b"Traceback" not in result.stderr
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / DATABASE_NAME).write_bytes(b"this is not a database" * 10)
    result = maka(damaged, "sessions", "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["error"]["code"] == "store_corrupt"


def test_self_test_reports_the_workspace_checkpoint_mode(tmp_path: Path) -> None:
    with_git = _self_test(tmp_path, QT_QPA_PLATFORM="offscreen")
    checks = {check["name"]: check for check in with_git["checks"]}  # type: ignore[attr-defined]
    assert checks["git-checkpoints"]["ok"] is True
    assert "mode git_v1" in checks["git-checkpoints"]["detail"]
    empty = tmp_path / "no-git"
    empty.mkdir()
    without = _self_test(tmp_path, QT_QPA_PLATFORM="offscreen", PATH=str(empty))
    checks = {check["name"]: check for check in without["checks"]}  # type: ignore[attr-defined]
    assert checks["git-checkpoints"]["ok"] is True
    assert "unavailable (checkpoint_git_missing)" in checks["git-checkpoints"]["detail"]


@pytest.mark.parametrize(
    "args",
    [("ledger", "plan", "LEDGER", "--json"), ("ledger", "scan", "LEDGER"), ("sessions",)],
)
def test_a_reader_that_went_away_ends_the_command_quietly(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    """`maka plan S | head` and the like: output into a pipe nobody reads any more ends the
    command with the shell's SIGPIPE status, never a BrokenPipeError traceback."""
    ledger = tmp_path / "run.jsonl"
    ledger.write_bytes(to_jsonl(clean_ledger(40, ids=IDS)))
    data_dir = tmp_path / "data"
    if args == ("sessions",):
        with store_with_runs(data_dir, IDS) as store:
            commit_ledger(store, clean_ledger(3, ids=IDS))
    result, err = _into_a_closed_pipe([str(ledger) if a == "LEDGER" else a for a in args], data_dir)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert result.returncode == 141, (result.returncode, err)


@pytest.mark.parametrize(
    ("args", "code", "exit_code"),
    [
        (("plan", "nosuch", "--json"), "session_not_found", 2),
        (("ledger", "plan", "NOWHERE", "--json"), "ledger_file_unreadable", 2),
    ],
)
def test_a_refusal_whose_json_nobody_reads_still_says_its_code(
    tmp_path: Path, args: tuple[str, ...], code: str, exit_code: int
) -> None:
    """``maka plan NOPE --json | true``: the refusal's JSON document met a closed pipe and the
    command printed a BrokenPipeError traceback, exit 1, without its coded line on stderr."""
    nowhere = str(tmp_path / "nowhere.jsonl")
    result, err = _into_a_closed_pipe(
        [nowhere if a == "NOWHERE" else a for a in args], tmp_path / "data"
    )
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert f"maka: error [{code}]: " in err, err
    assert result.returncode == exit_code, (result.returncode, err)


def test_an_unknown_session_in_a_new_data_folder_creates_nothing(tmp_path: Path) -> None:
    """``maka run --session NOPE``, ``maka resume NOPE`` and ``maka tui --session NOPE`` on a
    data folder with no database yet are refused with ``session_not_found`` and leave no
    database (or folder) behind, as ``maka plan`` and ``maka settle`` already did; they opened
    the store first."""
    data = tmp_path / "data"
    for args in (
        ("run", "--session", "session_nope", "hi"),
        ("resume", "session_nope"),
        ("tui", "--session", "session_nope"),
    ):
        err = refused(maka(data, *args), 2, "session_not_found")
        assert "no session session_nope" in err, err
        assert not data.exists(), args


def test_a_damaged_settings_file_opens_no_second_ledger(tmp_path: Path) -> None:
    """A settings file that chose a PostgreSQL server, left broken by a hand edit: ``maka run``
    and ``maka sessions`` are refused with ``settings_damaged`` and create no database in the
    data folder (before, they started a new local ledger without a word)."""
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir(mode=0o700)
    work.mkdir()
    broken = '{"database": "postgresql", "database_url": "postgresql://u@127.0.0.1:1/db"'
    (data / "settings.json").write_text(broken, encoding="utf-8")
    for args in (("run", "--cwd", str(work), "list files"), ("sessions",)):
        err = refused(maka(data, *args), 1, "settings_damaged")
        assert f"{data / 'settings.json'} cannot be read as settings" in err, err
    assert not (data / DATABASE_NAME).exists()
    checked = maka(data, "self-test")  # (it said every check passed)
    out = checked.stdout.decode()
    assert checked.returncode == 1 and "FAIL  data-dir        [settings_damaged]" in out, out


def test_a_huge_argument_is_not_echoed_whole(tmp_path: Path) -> None:
    """A session id of 100,000 characters was echoed whole in the refusal, on stderr and in
    the JSON error: a 100 KB line for every command taking a session id."""
    huge = "x" * 100_000
    for args in (["plan", huge], ["timeline", huge, "--json"]):
        result = maka(tmp_path / "data", *args)
        said = refused(result, 2, "session_not_found")
        assert len(said) < 1000 and "(100000 characters)" in said, said[:300]
        assert len(result.stdout) < 1000


def test_a_data_folder_that_is_a_file_is_said_so_by_every_command(tmp_path: Path) -> None:
    """Three commands gave three answers ("Not a directory", "creating the data folder
    failed: File exists", data_dir_unavailable); the file is left as it was."""
    afile = tmp_path / "data"
    afile.write_text("mine\n")
    (tmp_path / "work").mkdir()
    for args in (
        ["--data-dir", str(afile), "sessions"],
        ["--data-dir", str(afile), "run", "--cwd", str(tmp_path / "work"), "hi"],
        ["--data-dir", str(afile), "host"],
    ):
        said = refused(maka(tmp_path / "unused", *args), 2, "data_dir_invalid")
        assert "is a file, not a folder" in said, said
    said = refused(maka(afile, "sessions"), 2, "data_dir_invalid")  # MAKA_DATA_DIR
    assert afile.read_text() == "mine\n"
    # A folder under that file, and a link that leads nowhere: said so too, naming it.
    said = refused(
        maka(afile / "sub", "run", "--cwd", str(tmp_path / "work"), "hi"), 2, "data_dir_invalid"
    )
    assert f"{afile} is a file, not a folder" in said, said
    (tmp_path / "link").symlink_to(tmp_path / "nowhere" / "x")
    said = refused(maka(tmp_path / "link", "sessions"), 2, "data_dir_invalid")
    assert "is a link that leads nowhere" in said, said
    assert not (tmp_path / "nowhere").exists()


def _into_a_closed_pipe(
    args: list[str], data_dir: Path
) -> tuple[subprocess.CompletedProcess[bytes], str]:
    """``maka ARGS`` whose standard output is a pipe whose reader is gone before the first
    byte is written (``maka ... | true``); the run and its stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {key: value for key, value in os.environ.items() if key != "MAKA_FAILPOINT"}
    env["MAKA_DATA_DIR"] = str(data_dir)
    try:
        result = subprocess.run(
            [*maka_executable(), *args],
            env=env,
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    return result, result.stderr.decode("utf-8", "replace")
