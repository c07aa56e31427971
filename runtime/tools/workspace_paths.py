"""Workspace confinement: every path a tool touches must resolve inside the session folder.

Checked twice, before T1: lexically (``..`` that climbs out, an absolute path elsewhere) and after
resolving symlinks (a link, or a chain of links, that points outside). Paths inside the folder are
fine however they are spelled (``sub/../a.txt``, an absolute path into the folder). The app's own
``.maka`` folder at the top (the workspace identity marker ``.maka/workspace.json`` and the
``.gitignore`` that keeps it out of the user's ``git status``) and the legacy marker
``.maka-workspace.json`` are protected from writes, whatever the case of the name: replacing a
marker would silently change which workspace this is. Reading them is allowed.

Maka's own data folder (its database, settings, logs and snapshots) is out of every tool's reach
when a session folder holds it (a session in the home folder, with the default data folder
under it): no tool reads, lists or changes anything in it (``keep_out``), and no session is made
in it. One write of the agent would otherwise replace the database that records it.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from runtime.tools.tool_contract import ToolRefusal, ToolRefusalCode

# The same names as storage/sessions/workspace_identity.py (the runtime does not import storage).
APP_DIR = ".maka"
WORKSPACE_MARKER = f"{APP_DIR}/workspace.json"
LEGACY_WORKSPACE_MARKER = ".maka-workspace.json"


_KEPT_OUT: set[str] = set()
"""The real paths of the data folders this process serves (``keep_out``)."""


def keep_out(folder: str | os.PathLike[str]) -> None:
    """Keep every tool of this process out of ``folder``, a data folder it serves."""
    _KEPT_OUT.add(os.path.realpath(folder))


def kept_out(real: str) -> str | None:
    """The data folder (``keep_out``) the real path ``real`` is in or is, else None."""
    for folder in _KEPT_OUT:
        if _inside(real, folder):
            return folder
    return None


def git_directory_around(folder: str | os.PathLike[str]) -> Path | None:
    """The Git directory ``folder`` (a real path) is, or is inside: a repository's ``.git``, a
    bare repository, or a part of either (``objects``, ``hooks``...), else None. A session there
    would write Maka's marker and the agent's files among Git's own, and snapshot them."""
    for candidate in (Path(folder), *Path(folder).parents):
        if candidate.name.casefold() == ".git":
            return candidate
        if (
            (candidate / "HEAD").is_file()
            and (candidate / "objects").is_dir()
            and (candidate / "refs").is_dir()
        ):
            return candidate
    return None


def is_protected(relative: str) -> bool:
    """Whether the workspace-relative POSIX path ``relative`` is the app's own: ``.maka`` at the
    top, anything in it, or the legacy marker (compared case-insensitively, so a folder on a
    case-insensitive file system gives no way round it)."""
    key = relative.casefold()
    return key in (APP_DIR, LEGACY_WORKSPACE_MARKER) or key.startswith(APP_DIR + "/")


@dataclass(frozen=True, slots=True)
class WorkspacePath:
    absolute: Path  # symlinks resolved
    relative: str  # POSIX, relative to the workspace root; "." for the root


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def resolve_workspace_path(cwd: Path, raw: object, *, for_write: bool = False) -> WorkspacePath:
    """Resolve ``raw`` against the workspace ``cwd`` (a realpath) or refuse it."""
    if not isinstance(raw, str) or not raw.strip():
        raise ToolRefusal(ToolRefusalCode.PATH_INVALID, "the path must be a non-empty string")
    if "\x00" in raw:
        raise ToolRefusal(ToolRefusalCode.PATH_INVALID, "the path contains a NUL character")
    root = os.path.realpath(cwd)
    candidate = raw if os.path.isabs(raw) else os.path.join(root, raw)
    lexical = os.path.normpath(candidate)
    if not _inside(lexical, root):
        raise ToolRefusal(
            ToolRefusalCode.PATH_OUTSIDE_WORKSPACE,
            f"{raw!r} is outside the session folder {root}",
        )
    real = os.path.realpath(lexical)
    if not _inside(real, root):
        raise ToolRefusal(
            ToolRefusalCode.PATH_OUTSIDE_WORKSPACE,
            f"{raw!r} resolves through a symbolic link to {real}, outside the session folder",
        )
    data_dir = kept_out(real)
    if data_dir is not None:
        raise ToolRefusal(
            ToolRefusalCode.PATH_PROTECTED,
            f"{raw!r} is in Maka's data folder {data_dir} (its database, settings and "
            "snapshots); tools may not read or change it",
        )
    relative = Path(os.path.relpath(real, root)).as_posix()
    if for_write and is_protected(relative):
        raise ToolRefusal(
            ToolRefusalCode.PATH_PROTECTED,
            f"{relative} is Maka's own (the workspace identity marker and its folder "
            f"{APP_DIR}/); tools may not change it",
        )
    return WorkspacePath(Path(real), relative)


_PATH_ERRORS = {
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.ELOOP: "a folder on the path is now a symbolic link (or the links on it loop)",
    errno.ENAMETOOLONG: "a name on the path is too long for the file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "the operation is not permitted",
    errno.EISDIR: "it is a folder",
    errno.ENOENT: "it does not exist",
    errno.ENOSPC: "the disk is full",
    errno.EROFS: "the file system is read-only",
}


def path_error_sentence(error: OSError) -> str:
    """A short sentence for an OS error on a workspace path (no traceback, no absolute path
    beyond what the model already gave)."""
    known = _PATH_ERRORS.get(error.errno or -1)
    if known is not None:
        return known
    return error.strerror or type(error).__name__
