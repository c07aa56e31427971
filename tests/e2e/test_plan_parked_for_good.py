"""A write cut off by a crash (SIGKILL after its dispatch), whose file the user then edited:
recovery parks the call for good (``reconcile_diverged``: Maka will not overwrite it) and no
answer settles it. ``maka plan`` once said to clear "the other reasons above" and then decide
about the folder, advice that could never be followed (``maka settle`` refuses both answers and
``--rebaseline`` parks again). It now says Safe resume cannot continue the run, and offers what
works: a new message, or a branch from an earlier point."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers.maka_run import committed_runs, maka
from tests.helpers.user_git import user_git

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}


def test_a_call_parked_for_good_gets_advice_that_works(tmp_path: Path) -> None:
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    user_git(work, "init", "-q")
    user_git(work, "add", "-A")
    user_git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    (work / "a.txt").write_text("uncommitted\n")
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "write hello.txt saying hi"]
    assert maka(args, data, env={"MAKA_FAILPOINT": "P4"}).returncode == -9
    session = committed_runs(data)[0][0].session_id
    (work / "hello.txt").write_text("the user's own words\n")

    planned = maka(["plan", session], data, env=FLAG)
    assert planned.returncode == 3, planned.stderr
    text = planned.stdout
    assert "parked (reconcile_diverged)" in text, text
    assert "Safe resume cannot continue this run" in text, text
    assert "once the other reasons above are cleared" not in text, text
    assert "stays parked until the reasons above change" not in text, text
    assert f"maka branch {session} lists them" in text

    # What it no longer offers really cannot be done.
    body = json.loads(maka(["plan", session, "--json"], data, env=FLAG).stdout)
    [call] = body["operations"]
    for answer in ("--ran", "--not-run"):
        refused = maka(["settle", session, call["toolCallId"], answer], data, env=FLAG)
        assert refused.returncode != 0 and "operation_settled" in refused.stderr
    resumed = maka(["resume", session, "--rebaseline", "--permission-mode", "auto"], data, env=FLAG)
    assert resumed.returncode == 3, resumed.stdout + resumed.stderr
    # What it offers does work: a new message runs, and the user's file is kept.
    again = ["run", "--session", session, "--permission-mode", "auto", "list files"]
    assert maka(again, data).returncode == 0
    assert (work / "hello.txt").read_text() == "the user's own words\n"
