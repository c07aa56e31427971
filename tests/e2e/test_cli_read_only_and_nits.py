"""The real ``maka`` command on a data folder it cannot write, on a full disk, on an emptied
database file, and with a few inputs that used to be misread.

- A read-only data folder (a backup on a read-only mount; a folder of another user): the
  commands that only read (``sessions``, ``timeline``, ``plan``, ``checkpoints``, ``export``,
  ``doctor``) read it; commands that write are refused with ``data_dir_read_only``.
- A full disk: the reading commands say ``disk_full``, as the writing ones do.
- A zero-byte ``runtime.sqlite`` whose verification stamp recorded data is a lost ledger
  (``store_corrupt``, nothing written), not a new one.
- ``maka run`` refused before its first step (its folder cannot hold the workspace marker)
  records no session.
- ``maka settle --note TEXT`` (the usage text's placeholder), ``maka sessions remove`` of a
  session that is not there, ``maka import ""`` and ``maka export`` where no database is.

The read-only mount and the full disk are real ``tmpfs`` mounts (root); elsewhere a read-only
folder is made with ``chmod`` and the full disk is skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storage.ledger.sqlite_connection import DATABASE_NAME
from tests.helpers.maka_run import RunResult, committed_runs, maka, scripted_env, write_script

pytestmark = pytest.mark.e2e

READ_COMMANDS = ("sessions", "timeline", "plan", "checkpoints", "export", "doctor")


def _refused(result: RunResult, exit_code: int, code: str) -> str:
    assert result.returncode == exit_code, (result.returncode, result.stdout, result.stderr)
    assert f"maka: error [{code}]:" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr


def _snapshot(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file under ``folder``: size, modification time, bytes."""
    found: dict[str, tuple[int, int, bytes]] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            info = path.stat()
            found[str(path.relative_to(folder))] = (
                info.st_size,
                info.st_mtime_ns,
                path.read_bytes(),
            )
    return found


def _one_session(data_dir: Path, work: Path) -> str:
    """A data folder with one finished session that wrote a file (with its snapshots)."""
    done = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "write hello.txt saying hi"],
        data_dir,
        env={"MAKA_WORKSPACE_CHECKPOINTS": "on"},
    )
    assert done.returncode == 0, done.stderr
    listed = json.loads(maka(["sessions", "--json"], data_dir).stdout)
    session_id: str = listed["sessions"][0]["sessionId"]
    for suffix in ("-wal", "-shm"):  # the last writer's clean close removed them
        (data_dir / (DATABASE_NAME + suffix)).unlink(missing_ok=True)
    return session_id


@contextlib.contextmanager
def _tmpfs(mount_point: Path, size: str) -> Iterator[bool]:
    """A ``tmpfs`` at ``mount_point`` (yields False where it cannot be mounted)."""
    mount_point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
        capture_output=True,
        check=False,
    )
    try:
        yield done.returncode == 0
    finally:
        if done.returncode == 0:
            subprocess.run(["umount", "-l", str(mount_point)], check=False)


@pytest.fixture
def read_only_copy(tmp_path: Path) -> Iterator[tuple[Path, str, Path]]:
    """A copy of a data folder that this user cannot write (a read-only mount for root, whose
    access rights ignore file modes; ``chmod -R a-w`` otherwise): its path, its session, and
    the folder the session works in."""
    work = tmp_path / "work"
    work.mkdir()
    original = tmp_path / "data"
    session_id = _one_session(original, work)
    if os.geteuid() != 0:
        copy = tmp_path / "copy"
        shutil.copytree(original, copy, symlinks=True)
        subprocess.run(["chmod", "-R", "a-w", str(copy)], check=True)
        try:
            yield copy, session_id, work
        finally:
            subprocess.run(["chmod", "-R", "u+w", str(copy)], check=False)
        return
    with _tmpfs(tmp_path / "disk", "16m") as mounted:
        if not mounted:
            pytest.skip("root cannot mount a tmpfs here (and ignores file modes)")
        copy = tmp_path / "disk" / "data"
        shutil.copytree(original, copy, symlinks=True)
        subprocess.run(["mount", "-o", "remount,ro", str(tmp_path / "disk")], check=True)
        yield copy, session_id, work


def _read(command: str, data_dir: Path, session_id: str, out: Path) -> RunResult:
    args = {
        "sessions": ["sessions", "--json"],
        "doctor": ["doctor"],
        "export": ["export", session_id, "-o", str(out)],
    }.get(command, [command, session_id])
    return maka(args, data_dir)


def test_the_read_commands_read_a_data_folder_they_cannot_write(
    read_only_copy: tuple[Path, str, Path], tmp_path: Path
) -> None:
    data_dir, session_id, work = read_only_copy
    before = _snapshot(data_dir)
    out = tmp_path / "out.jsonl"
    for command in READ_COMMANDS:
        result = _read(command, data_dir, session_id, out)
        assert "maka: error" not in result.stderr, (command, result.stderr)
        assert "Traceback" not in result.stderr, (command, result.stderr)
        # plan: exit 3, Safe resume is off (the session has nothing to resume anyway)
        assert result.returncode in ((0, 3) if command == "plan" else (0,)), (command, result)
    assert (
        json.loads(_read("sessions", data_dir, session_id, out).stdout)["sessions"][0]["sessionId"]
        == session_id
    )
    timeline = _read("timeline", data_dir, session_id, out).stdout
    assert "write_file: done" in timeline, timeline
    assert "present" in _read("checkpoints", data_dir, session_id, out).stdout
    assert out.read_bytes().count(b"\n") > 3
    assert (tmp_path / "out.jsonl.bundle").is_file()  # the snapshots came along
    assert _read("doctor", data_dir, session_id, out).stdout.rstrip().endswith("ok")
    # A command that writes is refused with its own code, and nothing changed.
    written = maka(["run", "--session", session_id, "hello again"], data_dir)
    _refused(written, 1, "data_dir_read_only")
    assert _snapshot(data_dir) == before
    assert "hello.txt" in {path.name for path in work.iterdir()}


def test_a_write_ahead_log_that_cannot_be_read_there_is_data_dir_read_only(
    tmp_path: Path,
) -> None:
    """A copy made while a writer held changes in ``-wal`` (and without ``-shm``): reading the
    database file alone would leave them out, so the read is refused, saying what to do."""
    if os.geteuid() != 0:
        pytest.skip("needs a read-only mount (root)")
    work = tmp_path / "work"
    work.mkdir()
    original = tmp_path / "data"
    session_id = _one_session(original, work)
    writer = sqlite3.connect(original / DATABASE_NAME, isolation_level=None)
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        # a row added and removed in one transaction: pages in the log, nothing changed
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("INSERT INTO meta (key, value) VALUES ('test_scratch', 1)")
        writer.execute("DELETE FROM meta WHERE key = 'test_scratch'")
        writer.execute("COMMIT")
        with _tmpfs(tmp_path / "disk", "16m") as mounted:
            if not mounted:
                pytest.skip("cannot mount a tmpfs here")
            copy = tmp_path / "disk" / "data"
            copy.mkdir()
            for name in (DATABASE_NAME, DATABASE_NAME + "-wal"):
                shutil.copy2(original / name, copy / name)
            assert (copy / (DATABASE_NAME + "-wal")).stat().st_size > 0
            subprocess.run(["mount", "-o", "remount,ro", str(tmp_path / "disk")], check=True)
            for command in ("sessions", "timeline"):
                said = _refused(
                    _read(command, copy, session_id, tmp_path / "x.jsonl"),
                    1,
                    "data_dir_read_only",
                )
                assert "--data-dir" in said, said
    finally:
        writer.close()


def test_the_read_commands_say_disk_full_on_a_full_disk(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with _tmpfs(tmp_path / "disk", "2m") as mounted:
        if not mounted:
            pytest.skip("cannot mount a tmpfs here")
        data_dir = tmp_path / "disk" / "data"
        session_id = _one_session(data_dir, work)
        fd = os.open(tmp_path / "disk" / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * 4096)
        finally:
            os.close(fd)
        for command in ("sessions", "timeline", "checkpoints", "export"):
            _refused(_read(command, data_dir, session_id, tmp_path / "x.jsonl"), 1, "disk_full")
        doctor = _read("doctor", data_dir, session_id, tmp_path / "x.jsonl")
        assert doctor.returncode == 1
        assert "PROBLEM [disk_full]" in doctor.stdout, doctor.stdout
        assert not (tmp_path / "x.jsonl").exists()


# ---- B: an emptied database file -----------------------------------------------------------


def test_an_emptied_database_the_stamp_says_held_data_is_refused_untouched(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    data_dir = tmp_path / "data"
    session_id = _one_session(data_dir, work)
    assert (data_dir / (DATABASE_NAME + ".verified")).is_file()
    (data_dir / DATABASE_NAME).write_bytes(b"")
    before = _snapshot(data_dir)
    for args in (["sessions"], ["timeline", session_id], ["plan", session_id]):
        said = _refused(maka(args, data_dir), 1, "store_corrupt")
        assert "runtime.sqlite.verified" in said and "backup" in said, said
    _refused(maka(["run", "--cwd", str(work), "hi"], data_dir), 1, "store_corrupt")
    _refused(
        maka(["export", session_id, "-o", str(tmp_path / "x.jsonl")], data_dir), 1, "store_corrupt"
    )
    doctor = maka(["doctor"], data_dir)
    assert doctor.returncode == 1
    assert "PROBLEM [store_corrupt]" in doctor.stdout, doctor.stdout
    assert _snapshot(data_dir) == before
    assert (data_dir / DATABASE_NAME).stat().st_size == 0


def test_an_empty_database_file_without_a_stamp_is_a_new_one(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o700)
    (data_dir / DATABASE_NAME).write_bytes(b"")
    (data_dir / DATABASE_NAME).chmod(0o600)
    listed = maka(["sessions"], data_dir)
    assert listed.returncode == 0, listed.stderr
    assert "no sessions yet" in listed.stdout
    timeline = _refused(maka(["timeline", "session_x"], data_dir), 1, "store_not_found")
    assert "is empty" in timeline and "no database at" not in timeline, timeline
    work = tmp_path / "work"
    work.mkdir()
    assert maka(["run", "--cwd", str(work), "hi"], data_dir).returncode == 0
    assert len(committed_runs(data_dir)) == 1


# ---- C: a run refused before its first step ------------------------------------------------


@pytest.mark.parametrize("where", ["proc", "marker_in_the_way"])
def test_a_run_refused_before_its_first_step_records_no_session(tmp_path: Path, where: str) -> None:
    data_dir = tmp_path / "data"
    if where == "proc":
        if not Path("/proc/self").is_dir():
            pytest.skip("no /proc here")
        folder, code = Path("/proc"), "workspace_marker_write_failed"
    else:
        folder = tmp_path / "work"
        folder.mkdir()
        (folder / ".maka").write_text("not Maka's folder\n")  # a file where the folder goes
        code = "workspace_marker_not_file"
    _refused(maka(["run", "--cwd", str(folder), "hi"], data_dir, stdin=""), 1, code)
    listed = maka(["sessions", "--json"], data_dir)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["sessions"] == []


# ---- D: nits -------------------------------------------------------------------------------

SETTLE_SCRIPT: list[list[dict[str, Any]]] = [
    [
        {
            "text": "Counting.",
            "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "echo x >> count.txt"}}],
        },
        {"text": "Counted once."},
    ],
]


def test_settle_refuses_the_usage_texts_placeholder_as_a_note(tmp_path: Path) -> None:
    data_dir, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    env = scripted_env(write_script(tmp_path / "script.json", SETTLE_SCRIPT))
    crashed = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "count once"],
        data_dir,
        env={**env, "MAKA_FAILPOINT": "P4"},
    )
    assert crashed.returncode == -9
    session_id = committed_runs(data_dir)[0][0].session_id
    maka(["plan", session_id], data_dir, env=env)  # repairs the interrupted run
    events = len(committed_runs(data_dir)[0][1])
    for note in ("TEXT", "[TEXT]", "[NOTE]", "(or --not-run)", "[--note TEXT]", " TEXT "):
        said = _refused(
            maka(["settle", session_id, "c1", "--ran", "--note", note], data_dir, env=env),
            2,
            "invalid_argument",
        )
        assert "placeholder" in said, said
        assert len(committed_runs(data_dir)[0][1]) == events
    settled = maka(
        ["settle", session_id, "c1", "--ran", "--note", "one TEXT line"], data_dir, env=env
    )
    assert settled.returncode == 0, settled.stderr
    assert "Your note: one TEXT line" in settled.stdout


def test_sessions_remove_of_a_session_that_is_not_there_says_so(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    data_dir = tmp_path / "data"
    session_id = _one_session(data_dir, work)
    said = _refused(maka(["sessions", "remove", "nope"], data_dir), 2, "session_not_found")
    assert "export" not in said, said
    _refused(maka(["sessions", "remove", "nope"], tmp_path / "none"), 2, "session_not_found")
    assert not (tmp_path / "none").exists()
    _refused(maka(["sessions", "remove", session_id], data_dir), 2, "confirmation_required")
    assert len(committed_runs(data_dir)) == 1


def test_import_of_an_empty_file_name_says_no_file_was_named(tmp_path: Path) -> None:
    said = _refused(maka(["import", ""], tmp_path / "data"), 2, "import_file_unreadable")
    assert "no file was named" in said and "folder" not in said, said
    assert not (tmp_path / "data").exists()


def test_export_where_no_database_is_says_the_session_is_not_there(tmp_path: Path) -> None:
    target = tmp_path / "x.jsonl"
    _refused(maka(["export", "nope", "-o", str(target)], tmp_path / "data"), 2, "session_not_found")
    assert not target.exists()
    assert not (tmp_path / "data").exists()
