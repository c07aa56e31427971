"""The data directory is private: the folder 0700, every file in it 0600.

Why: it holds every transcript (prompts, file contents, command output), the settings (an API
key) and the logs. Other local users must not read any of it, whatever the umask, on every path
that creates something there (desktop and CLI alike). Files are created with mode 0600 from the
start where the program opens them itself (``private_opener``; the log's
``PrivateRotatingFileHandler`` in ``storage/private_log.py``); files another library creates
(SQLite's database, ``-wal`` and ``-shm``) are tightened right after (``tighten``); SQLite
then gives any later ``-wal``/``-shm`` the database file's mode.

An existing folder or file that is wider (made by an earlier version) is tightened when the
program next creates or opens it, if it belongs to this user; ``wider_modes`` lists what is still
wider for ``maka doctor``.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
_OTHERS = 0o077
_CHECKED_FOLDERS = ("", "logs", "ipc")


def _posix() -> bool:
    return sys.platform != "win32"


def tighten(path: Path | str) -> None:
    """Remove group and other permissions from ``path`` when it is ours; links are left alone.
    Best effort: a failure here must never stop the program (``maka doctor`` reports it)."""
    if not _posix():
        return
    with contextlib.suppress(OSError):
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid():
            return
        mode = stat.S_IMODE(info.st_mode)
        if mode & _OTHERS:
            os.chmod(path, mode & ~_OTHERS)


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) like ``mkdir -p``; the folder itself ends up 0700."""
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    tighten(path)
    return path


def ensure_data_dir(path: Path) -> Path:
    """The data folder, made private like ``ensure_private_dir``. One this call makes inside a
    Git work tree (``MAKA_DATA_DIR=data`` in a project) gets a ``.gitignore`` holding ``*``, as
    a virtualenv does: the ledger (the user's prompts, the tools' output) showed as ``??
    data/`` in the user's ``git status``, one ``git add -A`` away from a commit. A folder that
    was there already is never written into (it may be the project itself)."""
    existed = os.path.lexists(path)
    ensure_private_dir(path)
    if not existed and _in_a_work_tree(path):
        ignore = path / ".gitignore"
        with (
            contextlib.suppress(OSError),
            open(ignore, "x", encoding="utf-8", opener=private_opener) as handle,
        ):
            handle.write("*\n")
    return path


def _in_a_work_tree(path: Path) -> bool:
    """Whether a folder above ``path`` holds a ``.git`` (a repository, a linked worktree)."""
    here = Path(os.path.abspath(path)).parent
    while True:
        if os.path.lexists(here / ".git"):
            return True
        if here.parent == here:
            return False
        here = here.parent


def private_opener(path: str, flags: int) -> int:
    """``open(..., opener=private_opener)``: a new file is created 0600 (before any byte)."""
    fd = os.open(path, flags, FILE_MODE)
    if _posix():
        with contextlib.suppress(OSError):
            info = os.fstat(fd)
            if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & _OTHERS:
                os.fchmod(fd, stat.S_IMODE(info.st_mode) & ~_OTHERS)
    return fd


def wider_modes(data_dir: Path) -> list[tuple[Path, int]]:
    """Folders and files of the data directory that others may read or enter (its top level,
    ``logs`` and ``ipc``), with their modes. Empty on Windows (ACLs, not modes)."""
    if not _posix():
        return []
    found: list[tuple[Path, int]] = []
    for name in _CHECKED_FOLDERS:
        folder = data_dir / name if name else data_dir
        try:
            info = os.lstat(folder)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            continue
        if stat.S_IMODE(info.st_mode) & _OTHERS:
            found.append((folder, stat.S_IMODE(info.st_mode)))
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False) or entry.is_symlink():
                    continue
                mode = stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode)
                if mode & _OTHERS:
                    found.append((Path(entry.path), mode))
    return sorted(found)
