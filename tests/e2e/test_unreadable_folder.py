"""A folder inside the session's folder that Maka cannot open (``chmod 000``): Git lists the
rest and only warns, so a snapshot once left that folder out and was still called whole; a
plan then said ``workspace_verified`` after the folder was deleted, and a restored copy said it
held the folder as it was. The capture now fails with ``checkpoint_folder_unreadable`` naming
the folder, and the plan says what to do. Runs the real ``maka`` without the permission
override root has (``setpriv``), so the folder is really unreadable to it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.maka_process import maka_executable
from tests.helpers.user_git import user_git

NO_OVERRIDE = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("git") is None, reason="git"),
    pytest.mark.skipif(
        os.geteuid() == 0 and shutil.which("setpriv") is None, reason="root needs setpriv"
    ),
]


def _maka(args: list[str], data: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "MAKA_DATA_DIR": str(data), **env}
    environment.pop("MAKA_PROVIDER", None)
    environment.setdefault("MAKA_RUNTIME_SAFE_BOUNDARY_RESUME", "1")
    prefix = NO_OVERRIDE if os.geteuid() == 0 else []
    return subprocess.run(
        [*prefix, *maka_executable(), *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _crash_after_write(work: Path, data: Path, said: list[str] | None = None) -> str:
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "write hello.txt saying hi"]
    result = _maka(args, data, MAKA_FAILPOINT="P8")
    assert result.returncode == -9, result.stderr
    if said is not None:
        said.append(result.stdout)
    listed = json.loads(_maka(["sessions", "--json"], data).stdout)
    return str(listed["sessions"][0]["sessionId"])


def test_an_unreadable_folder_fails_the_capture_instead_of_leaving_it_out(
    tmp_path: Path,
) -> None:
    work, data = tmp_path / "work", tmp_path / "data"
    (work / "secret").mkdir(parents=True)
    (work / "secret" / "data.txt").write_text("precious\n")
    (work / "a.txt").write_text("a\n")
    (work / "secret").chmod(0)
    try:
        said: list[str] = []
        session = _crash_after_write(work, data, said)
        # The run's own line names the folder, not only the code.
        assert "not taken [checkpoint_folder_unreadable]" in said[0], said
        assert "the folder 'secret' cannot be read" in said[0], said
        listed = json.loads(_maka(["checkpoints", session, "--json"], data).stdout)
        [run] = listed["runs"]
        assert run["checkpoints"], run
        for row in run["checkpoints"]:
            assert row["kind"] == "failed", row
            assert row["reasonCode"] == "checkpoint_folder_unreadable", row
            assert "'secret' cannot be read" in row["message"], row
    finally:
        (work / "secret").chmod(0o755)
    shutil.rmtree(work / "secret")  # gone now: nothing may call the folder as it was
    planned = json.loads(_maka(["plan", session, "--json"], data).stdout)
    codes = [d["code"] for d in planned["diagnostics"]]
    assert "workspace_verified" not in codes, planned
    assert planned["disposition"] != "continue", planned


def test_a_captured_folder_made_unreadable_is_named_with_what_to_do(tmp_path: Path) -> None:
    work, data = tmp_path / "work", tmp_path / "data"
    (work / "sub" / "dir").mkdir(parents=True)
    (work / "sub" / "dir" / "f.txt").write_text("s\n")
    (work / "a.txt").write_text("a\n")
    user_git(work, "init", "-q")
    user_git(work, "add", "-A")
    user_git(work, "commit", "-qm", "first")
    (work / "a.txt").write_text("uncommitted\n")
    session = _crash_after_write(work, data)
    (work / "sub").chmod(0)
    try:
        planned = _maka(["plan", session], data)
    finally:
        (work / "sub").chmod(0o755)
    assert planned.returncode == 3, planned.stderr
    assert "checkpoint_folder_unreadable: the folder 'sub' cannot be read" in planned.stdout
    assert "empty folder" not in planned.stdout, planned.stdout
    assert "Give it back the permissions it had" in planned.stdout, planned.stdout
    # Readable again: the folder is what the snapshot recorded.
    again = json.loads(_maka(["plan", session, "--json"], data).stdout)
    assert "workspace_verified" in [d["code"] for d in again["diagnostics"]], again


def test_a_data_folder_maka_cannot_open_gets_a_code_from_every_command(tmp_path: Path) -> None:
    """A data folder made unreadable (``chmod 000``): every command that reads or writes the
    ledger says so with a code (``store_io_failed``, ``data_dir_read_only``), never a
    traceback, and ``maka self-test`` says why in words; nothing in the folder changes."""
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    session = _crash_after_write(work, data)
    before = sorted((path.relative_to(data), path.stat().st_mtime_ns) for path in data.rglob("*"))
    data.chmod(0)
    try:
        for args in (
            ["plan", session],
            ["timeline", session],
            ["checkpoints", session],
            ["branch", session],
            ["settle", session, "call", "--ran"],
            ["sessions", "rename", session, "new title"],
            ["sessions", "remove", session, "--yes"],
            ["sessions"],
            ["export", session, "-o", str(tmp_path / "out.jsonl")],
        ):
            result = _maka(args, data)
            said = result.stdout + result.stderr
            assert result.returncode == 1, (args, said)
            assert "Traceback" not in said, (args, said)
            assert "maka: error [store_io_failed]" in said or (
                "maka: error [data_dir_read_only]" in said
            ), (args, said)
        checked = _maka(["self-test"], data)
        assert f"cannot write in {data}: Permission denied" in checked.stdout, checked.stdout
        assert "PermissionError" not in checked.stdout + checked.stderr
    finally:
        data.chmod(0o700)
    after = sorted((path.relative_to(data), path.stat().st_mtime_ns) for path in data.rglob("*"))
    assert after == before


def test_a_settings_file_maka_cannot_read_is_refused_not_read_as_the_default(
    tmp_path: Path,
) -> None:
    """A settings.json that chose a PostgreSQL server and that Maka cannot read (its mode, or
    a folder of that name): read as the default, a second, empty ledger was started in the
    data folder. It is refused with ``settings_damaged``, and nothing is created."""
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir(mode=0o700)
    work.mkdir()
    settings = data / "settings.json"
    settings.write_text('{"database": "postgresql", "database_url": "postgresql://u@h/x"}')
    settings.chmod(0)
    try:
        for args in (["run", "--cwd", str(work), "list files"], ["sessions"], ["doctor"]):
            result = _maka(args, data)
            said = result.stdout + result.stderr
            assert result.returncode == 1, (args, said)
            assert "[settings_damaged]" in said and "it cannot be read" in said, (args, said)
    finally:
        settings.chmod(0o600)
    settings.unlink()
    settings.mkdir()
    result = _maka(["sessions"], data)
    assert result.returncode == 1 and "it is a folder, not a file" in result.stderr, result.stderr
    assert not (data / "runtime.sqlite").exists()


def test_an_unreadable_file_fails_the_capture_naming_it(tmp_path: Path) -> None:
    """A file Maka cannot open (``chmod 000``): Git's own failure was reported
    (``checkpoint_git_failed``: "Unable to process path"), as if Git were at fault."""
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    (work / "private.key").write_text("secret\n")
    (work / "private.key").chmod(0)
    try:
        said: list[str] = []
        _crash_after_write(work, data, said)
        assert "not taken [checkpoint_folder_unreadable]" in said[0], said
        assert "the file 'private.key' cannot be read (Permission denied)" in said[0], said
        assert "checkpoint_git_failed" not in said[0], said
    finally:
        (work / "private.key").chmod(0o600)
