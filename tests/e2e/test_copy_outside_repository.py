"""A restored or branched copy of a folder inside a Git repository (a package of a monorepo)
goes beside the repository, not inside its work tree, where it would be an untracked folder in
the user's ``git status``, one ``git add -A`` away from a commit (the real ``maka resume`` and
``maka branch``, the real ``git``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.e2e.test_workspace_decisions_cli import Drill
from tests.helpers.maka_run import maka
from tests.helpers.user_git import user_git

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


@pytest.mark.parametrize("layout", ["package", "nested repository"])
def test_copies_of_a_package_go_beside_the_repository(tmp_path: Path, layout: str) -> None:
    top = tmp_path / "mono"
    drill = Drill(top)  # the session folder is mono/work; its data and script beside it
    (top / ".gitignore").write_text("data/\n*.json\n*.jsonl\n")
    (top / "other").mkdir()
    (top / "other" / "o.txt").write_text("another package\n")
    if layout == "nested repository":  # a clone inside a larger checkout, as a submodule
        user_git(drill.work, "init", "-q")
        user_git(drill.work, "add", ".")
        user_git(drill.work, "commit", "-q", "-m", "inner")
    user_git(top, "init", "-q")
    user_git(top, "add", ".")
    user_git(top, "commit", "-q", "-m", "first")
    drill.run()  # the first call ran and was captured; then the provider failed
    (drill.work / "a.txt").write_text("edited by the user\n")
    status = user_git(top, "status", "--porcelain")

    listing = maka(["branch", drill.session, "--json"], drill.data, env=drill.env)
    assert listing.returncode == 0, listing.stderr
    point = json.loads(listing.stdout)["boundaries"][0]
    made = maka(["branch", drill.session, "--at", point["eventId"]], drill.data, env=drill.env)
    assert made.returncode == 0, made.stderr
    branch = tmp_path / "mono-work-branch-1"
    assert f"its folder: {branch} " in made.stdout
    assert (branch / "b.txt").read_text() == "beta\n"
    assert user_git(top, "status", "--porcelain") == status, "nothing new in the repository"

    code, parked = drill.resume()
    assert code == 3 and parked["rejectionReasons"] == ["workspace_drift"]
    copy = tmp_path / "mono-work-restored-1"
    # Every surface names the exact place (the JSON, the banner's dialog, the advice).
    place = [d for d in parked["diagnostics"] if d["code"] == "workspace_restore_place"]
    assert [d["detail"]["path"] for d in place] == [str(copy)]
    # ... and whether it is a clone: the folder of a nested repository has a .git of its own.
    cloned = layout == "nested repository"
    assert [d["detail"]["clone"] for d in place] == [cloned]
    told = maka(["resume", drill.session, "--permission-mode", "auto"], drill.data, env=drill.env)
    assert told.returncode == 3
    assert f"made in DIR or, without one, in {copy};" in told.stdout
    assert ("It is a clone of your Git repository at its current commit" in told.stdout) is cloned
    code, body = drill.resume("--restore-to")
    assert code == 0, body
    assert body["workspacePath"] == str(copy)
    assert (copy / "a.txt").read_text() == "alpha\n"
    assert user_git(top, "status", "--porcelain") == status
    if layout == "nested repository":  # the copy of a repository is a clone of it
        assert user_git(copy, "log", "--format=%s") == "inner\n"
        assert user_git(branch, "log", "--format=%s") == "inner\n"
