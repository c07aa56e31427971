"""What a restored or branched copy of a Git repository holds, said once it is made: the copy
of a folder with a ``.git`` is a clone of it (``storage/checkpoints``), unless cloning failed,
and the user is told either way (checked on the copy itself, so it is true when printed)."""

from __future__ import annotations

import os


def copy_repository_note(source: str, copy: str, *, current_files: bool = False) -> str | None:
    """None when ``source`` is not a Git repository (its copy never has one);
    ``current_files``: the copy holds the folder's files as they are now (a branch made with
    ``--current-files``), not a snapshot's."""
    if not os.path.lexists(os.path.join(source, ".git")):
        return None
    files = "your folder's current files" if current_files else "the snapshot's files"
    if os.path.isdir(os.path.join(copy, ".git")):
        return (
            f"The copy is a clone of your Git repository at its current commit with {files} on "
            "top: git status and git diff there compare them with that commit."
        )
    return (
        "The copy has no Git repository: cloning yours failed (or it has no commit yet), so "
        f"git status and git diff do not work there; its files are {files}."
    )
