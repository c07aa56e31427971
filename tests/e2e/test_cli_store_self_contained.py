"""A `maka run` in a folder that is a Git repository leaves its snapshot store self-contained
when it exits (app/commands/cli_session_host.py): the store's first capture borrowed the
user's objects, and the copy that ends the borrowing runs in the background; a command whose
turn ends at once would otherwise cut it short every time."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers.maka_run import maka
from tests.helpers.user_git import user_git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def test_a_run_in_a_git_repository_leaves_its_store_self_contained(tmp_path: Path) -> None:
    work = tmp_path / "work"
    for n in range(400):
        folder = work / f"pkg{n % 8}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n}.txt").write_text(f"file {n}\n" * 400)
    user_git(work, "init", "-q")
    user_git(work, "add", "-A")
    user_git(work, "commit", "-qm", "first")
    (work / "pkg1" / "f1.txt").write_text("uncommitted work\n")
    data = tmp_path / "data"
    result = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "list files"], data)
    assert result.returncode == 0, result.stderr
    [store] = (data / "checkpoints").glob("*.git")
    assert not (store / "objects" / "info" / "alternates").exists(), "still borrows"
    assert not (store / "trees.scratch").exists()
    doctor = maka(["doctor"], data)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
