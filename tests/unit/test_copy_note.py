"""What ``maka resume --restore-to`` and ``maka branch`` say about the copy's repository is
read from the copy itself: a clone is called one, a copy whose clone failed is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.host.copy_note import copy_repository_note


def test_the_note_says_what_the_copy_holds(tmp_path: Path) -> None:
    plain, repo, worktree, copy = (tmp_path / n for n in ("plain", "repo", "worktree", "copy"))
    for folder in (plain, repo, worktree, copy):
        folder.mkdir()
    (repo / ".git").mkdir()
    (worktree / ".git").write_text("gitdir: ../repo/.git/worktrees/w\n")

    assert copy_repository_note(str(plain), str(copy)) is None
    for source in (repo, worktree):
        note = copy_repository_note(str(source), str(copy))
        assert note is not None and note.startswith("The copy has no Git repository")
    (copy / ".git").mkdir()
    note = copy_repository_note(str(worktree), str(copy))
    assert note is not None and note.startswith("The copy is a clone of your Git repository")


@pytest.mark.parametrize("cloned", [True, False])
def test_the_note_names_the_files_the_copy_holds(tmp_path: Path, cloned: bool) -> None:
    """The snapshot's files, or (a branch made with ``--current-files``) the folder's files as
    they are now."""
    source, copy = tmp_path / "source", tmp_path / "copy"
    (source / ".git").mkdir(parents=True)
    copy.mkdir()
    if cloned:
        (copy / ".git").mkdir()
    snapshot = copy_repository_note(str(source), str(copy))
    current = copy_repository_note(str(source), str(copy), current_files=True)
    assert snapshot is not None and current is not None
    assert "the snapshot's files" in snapshot and "current files" not in snapshot
    assert "your folder's current files" in current and "snapshot" not in current
    assert ("clone of your Git repository" in current) is cloned
