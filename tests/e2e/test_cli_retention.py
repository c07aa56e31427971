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
    # A day later: the next command trims what the two latest runs do not need.
    old = time.time() - 2 * 24 * 3600
    os.utime(stamp, (old, old))
    _turn(data, work, "write later.md saying 5", session)
    after = _refs(data)
    assert after < before + 2, (before, after)
    assert stamp.stat().st_mtime > old + 24 * 3600
    checked = maka(["doctor", "--verify-snapshots"], data)
    assert checked.returncode == 0, checked.stdout + checked.stderr
