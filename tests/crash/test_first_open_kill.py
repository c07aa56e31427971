"""SIGKILL during the very first open of a new data directory: the database appears complete or
not at all, and every read-only command works afterwards.

The real ``maka run`` is killed (``MAKA_FAILPOINT``) while it creates ``runtime.sqlite``: once the
new file exists without a schema, and once with the schema committed but not yet published.
Neither leaves a ``runtime.sqlite`` at schema 0 or a rollback journal: ``sessions``, ``plan``,
``export`` and ``doctor`` answer as on a fresh directory (no ``schema_upgrade_required``, no
``store_read_only``), and the next writer starts normally and removes the abandoned file.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from storage.ledger.sqlite_connection import DATABASE_NAME
from tests.helpers.maka_run import maka

pytestmark = pytest.mark.crash


@pytest.mark.parametrize("point", ["first_open_before_migrate", "first_open_before_publish"])
def test_a_kill_during_the_first_open_leaves_no_half_made_database(
    tmp_path: Path, point: str
) -> None:
    data_dir = tmp_path / "data"
    folder = tmp_path / "work"
    folder.mkdir()
    killed = maka(
        ["run", "--cwd", str(folder), "--permission-mode", "auto", "hello"],
        data_dir,
        env={"MAKA_FAILPOINT": point},
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not (data_dir / DATABASE_NAME).exists()
    assert not (data_dir / f"{DATABASE_NAME}-journal").exists()
    leftovers = [p.name for p in data_dir.iterdir() if p.name.startswith(DATABASE_NAME)]
    assert leftovers, "the kill happened before the temporary database existed"

    sessions = maka(["sessions"], data_dir)
    assert sessions.returncode == 0, sessions.stderr
    listed = maka(["sessions", "--json"], data_dir)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["sessions"] == []
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    for args in (["plan", "nope"], ["plan", "nope", "--json"], ["export", "nope", "-o", "-"]):
        # The same answer as in a directory nothing was ever written to.
        result, expected = maka(args, data_dir), maka(args, fresh)
        assert result.returncode == expected.returncode == 2, (args, result.stderr)
        code = expected.stderr.split("]")[0]
        assert result.stderr.split("]")[0] == code, (args, result.stderr, expected.stderr)
    doctor = maka(["doctor", "--json"], data_dir)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert json.loads(doctor.stdout)["ok"] is True
    for result in (sessions, listed, doctor):
        assert "schema_upgrade_required" not in result.stderr + result.stdout
        assert "store_read_only" not in result.stderr + result.stdout
        assert "Traceback" not in result.stderr

    again = maka(["run", "--cwd", str(folder), "--permission-mode", "auto", "hello"], data_dir)
    assert again.returncode == 0, again.stderr
    names = sorted(p.name for p in data_dir.iterdir() if p.name.startswith(DATABASE_NAME))
    assert ".new-" not in " ".join(names), names
    assert json.loads(maka(["sessions", "--json"], data_dir).stdout)["sessions"]


def test_a_kill_right_after_publishing_leaves_no_second_name_for_the_database(
    tmp_path: Path,
) -> None:
    """Killed between publishing ``runtime.sqlite`` (a hard link) and removing the temporary
    name: the database is complete and every command works; the next writer removes the
    leftover name, which would otherwise stay a second, unexplained link to the live file."""
    data_dir = tmp_path / "data"
    folder = tmp_path / "work"
    folder.mkdir()
    killed = maka(
        ["run", "--cwd", str(folder), "--permission-mode", "auto", "hello"],
        data_dir,
        env={"MAKA_FAILPOINT": "first_open_after_publish"},
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (data_dir / DATABASE_NAME).exists()
    assert [p.name for p in data_dir.iterdir() if ".new-" in p.name], "nothing was left over"
    listed = maka(["sessions", "--json"], data_dir)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["sessions"] == []

    again = maka(["run", "--cwd", str(folder), "--permission-mode", "auto", "hello"], data_dir)
    assert again.returncode == 0, again.stderr
    names = sorted(p.name for p in data_dir.iterdir() if p.name.startswith(DATABASE_NAME))
    assert ".new-" not in " ".join(names), names
    assert (data_dir / DATABASE_NAME).stat().st_nlink == 1
    doctor = maka(["doctor", "--json"], data_dir)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
