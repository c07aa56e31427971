"""``maka resume --rebaseline`` (or ``--restore-to``) on a park that an unsettled call also
holds: the decision answers the files' question, so that reason left the printed park, and
nothing said why the command still parked; it read as the flag being ignored."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers.maka_run import committed_runs, maka
from tests.helpers.user_git import user_git

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


def test_a_decision_on_a_park_an_unsettled_call_holds_says_what_still_parks(
    tmp_path: Path,
) -> None:
    work, data = tmp_path / "repo", tmp_path / "data"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    user_git(work, "init", "-q")
    user_git(work, "add", "-A")
    user_git(work, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "first")
    flag = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
    killed = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "run echo hi > out.txt"],
        data,
        env={**flag, "MAKA_FAILPOINT": "P4"},
    )
    assert killed.returncode == -9, killed.stderr
    (work / "a.txt").write_text("a\nedited after the crash\n")
    session = committed_runs(data)[0][0].session_id
    resumed = maka(["resume", session, "--rebaseline", "--permission-mode", "auto"], data, env=flag)
    assert resumed.returncode == 3, resumed.stdout + resumed.stderr
    assert "dangling_tool_state" in resumed.stdout
    assert (
        "Your --rebaseline answers the question about the files, but Safe resume stays parked "
        "for the reasons above"
    ) in resumed.stdout, resumed.stdout
