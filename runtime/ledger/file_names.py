"""File names from the user's folder, shown one a line (the changed files of a drift, in
``maka plan``, the desktop's banner and the note that tells the model which files changed)."""

from __future__ import annotations


def shown_name(path: str) -> str:
    """A file name as one line of a list: as it is when every character of it prints, else
    quoted with its newlines, tabs, escapes and invisible characters written out (Python's
    ``repr``), so a name holding a newline and then ``      deleted  a.txt`` cannot add a line
    of its own to a list of changed files, for the user or for the model."""
    return path if path.isprintable() else repr(path)
