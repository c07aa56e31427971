"""The workspace marker stays out of the user's ``git status`` (real ``git``, the real ``maka``
command): it lives in ``.maka/`` beside a ``.gitignore`` holding ``*``, so a folder with
uncommitted work shows that work and nothing of Maka's, and ``git add -A`` stages none of it. A
folder that still carries the legacy ``.maka-workspace.json`` is the same workspace: the next run
there keeps its identity and moves the marker into ``.maka``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from storage.sessions.workspace_identity import LEGACY_MARKER_NAME, MARKER_DIR, MARKER_NAME
from tests.helpers.maka_run import RunResult, committed_runs, maka
from tests.helpers.user_git import user_git

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


def _status(folder: Path) -> set[str]:
    return set(user_git(folder, "status", "--porcelain", "--untracked-files=all").splitlines())


def _repository_with_uncommitted_work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    user_git(work, "init", "-q")
    (work / "tracked.txt").write_text("committed\n")
    user_git(work, "add", "tracked.txt")
    user_git(work, "commit", "-q", "-m", "first")
    (work / "tracked.txt").write_text("edited, not committed\n")
    (work / "notes.md").write_text("my notes\n")
    assert _status(work) == {" M tracked.txt", "?? notes.md"}
    return work


def _run(work: Path, data: Path, text: str, *extra: str) -> RunResult:
    args = ["run", *extra, "--provider", "demo", "--permission-mode", "auto", text]
    done = maka(args, data, env={"MAKA_WORKSPACE_CHECKPOINTS": "on"})
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_a_run_leaves_nothing_of_the_marker_in_git_status(tmp_path: Path) -> None:
    work = _repository_with_uncommitted_work(tmp_path)
    data = tmp_path / "data"
    _run(work, data, "write a.txt saying one", "--cwd", str(work))
    assert (work / "a.txt").read_text().strip() == "one"
    assert (work / MARKER_NAME).is_file()  # the marker exists, only git does not see it
    assert _status(work) == {" M tracked.txt", "?? notes.md", "?? a.txt"}
    user_git(work, "add", "-A")
    staged = user_git(work, "diff", "--cached", "--name-only").split()
    assert sorted(staged) == ["a.txt", "notes.md", "tracked.txt"]
    [(header, _events)] = committed_runs(data)
    marker = json.loads((work / MARKER_NAME).read_text())
    assert header.workspace_identity == f"workspace:v1:{marker['workspaceId']}"


def test_a_folder_with_the_legacy_marker_is_the_same_workspace(tmp_path: Path) -> None:
    work = _repository_with_uncommitted_work(tmp_path)
    data = tmp_path / "data"
    _run(work, data, "write a.txt saying one", "--cwd", str(work))
    # The folder as an older version left it: the marker at the top, visible to git.
    marker = (work / MARKER_NAME).read_bytes()
    shutil.rmtree(work / MARKER_DIR)
    (work / LEGACY_MARKER_NAME).write_bytes(marker)
    assert f"?? {LEGACY_MARKER_NAME}" in _status(work)

    [(first, _)] = committed_runs(data)
    _run(work, data, "write b.txt saying two", "--session", first.session_id)
    runs = committed_runs(data)
    assert len(runs) == 2
    assert runs[1][0].workspace_identity == first.workspace_identity  # the same workspace
    assert (work / "b.txt").read_text().strip() == "two"
    # Moved into .maka byte for byte, and gone from git status.
    assert (work / MARKER_NAME).read_bytes() == marker
    assert not (work / LEGACY_MARKER_NAME).exists()
    assert _status(work) == {" M tracked.txt", "?? notes.md", "?? a.txt", "?? b.txt"}
