"""What ``maka resume --restore-to`` and ``maka branch`` say about the copy's repository is
read from the copy itself: a clone is called one, a copy whose clone failed is not."""

from __future__ import annotations

from pathlib import Path

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
