"""File names from the user's folder, shown one a line (the changed files of a drift, in
``maka plan``, the desktop's banner and the note that tells the model which files changed)."""

from __future__ import annotations

import stat


def shown_name(path: str) -> str:
    """A file name as one line of a list: as it is when every character of it prints, else
    quoted with its newlines, tabs, escapes and invisible characters written out (Python's
    ``repr``), so a name holding a newline and then ``      deleted  a.txt`` cannot add a line
    of its own to a list of changed files, for the user or for the model."""
    return path if path.isprintable() else repr(path)


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, in words, by its ``st_mode`` ("a folder", "a
    device"...), for a refusal that names what the user gave instead of a file."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"
