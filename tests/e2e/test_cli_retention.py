"""Retention of workspace checkpoints for a user of the terminal commands alone: it ran only when
a host (the desktop or ``maka host``) started, so with ``maka run`` alone every snapshot ever
taken stayed. A command that ran turns now runs it too, at most once a day per data folder
(``app/commands/cli_session_host.py``), with the real ``maka`` and the real ``git``."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.helpers.maka_run import maka
from tests.helpers.user_git import user_git

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


def _refs(data: Path) -> int:
    return sum(
        len(user_git(store, "for-each-ref", "--format=%(refname)").split())
        for store in (data / "checkpoints").glob("*.git")
    )


def _turn(data: Path, work: Path, text: str, session: str | None) -> str:
    where = ["--session", session] if session else ["--cwd", str(work)]
    result = maka(["run", *where, "--permission-mode", "auto", text], data)
    assert result.returncode == 0, result.stderr
    listed = json.loads(maka(["sessions", "--json"], data).stdout)
    return str(listed["sessions"][0]["sessionId"])


def test_the_terminal_commands_trim_checkpoints_once_a_day(tmp_path: Path) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    session = None
    for n in range(4):
        session = _turn(data, work, f"write notes{n}.md saying {n}", session)
    stamp = data / "checkpoints" / "retention.stamp"
    assert stamp.is_file()  # the first command started the clock and trimmed nothing
    before = _refs(data)
    assert before >= 8, before  # a snapshot before and after each write
    # Not due yet: the command neither trims nor moves the clock on (it did, so a user with a
    # turn a day never had retention at all).
    nearly = time.time() - 23 * 3600
    os.utime(stamp, (nearly, nearly))
    session = _turn(data, work, "write notes9.md saying 9", session)
    assert abs(stamp.stat().st_mtime - nearly) < 5
    before = _refs(data)
    # A day later: the next command trims what the two latest runs do not need.
    old = time.time() - 2 * 24 * 3600
    os.utime(stamp, (old, old))
    result = maka(
        ["run", "--session", session, "--permission-mode", "auto", "write l.md saying 5"], data
    )
    assert result.returncode == 0, result.stderr
    assert "trimming workspace snapshots no longer needed" in result.stderr
    after = _refs(data)
    assert after < before + 2, (before, after)
    assert stamp.stat().st_mtime > old + 24 * 3600
    checked = maka(["doctor", "--verify-snapshots"], data)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # A day later still, the trimmed snapshots' objects are pruned: what retention removed on
    # purpose is said so, not called missing (the doctor failed on each of them).
    for path in (data / "checkpoints").rglob("objects/*/*"):
        os.utime(path, (old, old))
    os.utime(stamp, (old, old))
    _turn(data, work, "write last.md saying 6", session)
    checked = maka(["doctor"], data)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "removed by retention (no longer needed)" in checked.stdout, checked.stdout
    listed = maka(["checkpoints", session], data).stdout
    assert "removed by retention (no longer needed)" in listed, listed
    assert "MISSING" not in listed, listed


def test_a_failed_retention_is_said_once(tmp_path: Path) -> None:
    """A store retention cannot read is named once, with ``maka:`` before it; the log's
    last-resort handler printed it a second time, bare."""
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    session = _turn(data, work, "write a.md saying 1", None)
    broken = data / "checkpoints" / "broken.git"
    broken.mkdir()
    (broken / "HEAD").write_text("not a ref\n")
    stamp = data / "checkpoints" / "retention.stamp"
    old = time.time() - 2 * 24 * 3600
    os.utime(stamp, (old, old))
    result = maka(
        ["run", "--session", session, "--permission-mode", "auto", "write b.md saying 2"], data
    )
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if "broken.git" in line]
    assert len(said) == 1, result.stderr
    assert said[0].startswith("maka: workspace checkpoint retention: "), said
