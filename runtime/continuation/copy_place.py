"""Where a restored or branched copy of a folder goes by default (docs/design/workspace.md
section 4): beside the folder, named after it, unless the folder lies inside a Git
repository's work tree (a package of a monorepo, or a repository of its own nested in another:
a submodule, a clone inside a larger checkout). A copy beside it would then be inside that
work tree, an untracked folder in the user's ``git status``, one ``git add -A`` away from a
commit; so it goes beside the outermost such repository instead, named after it and the path
inside it (``mono/packages/web`` -> ``mono-packages-web``, the submodule ``app/libs/core`` ->
``app-libs-core``). A repository of the user's whole home folder (or of a folder above it) is
never stepped out of: a copy beside the home folder would be outside every folder the user
keeps (and, for the superuser, at the top of the file system); nor is one whose parent folder
cannot be written. The copy then stays at the last place found before it: inside that
repository, as without it."""

from __future__ import annotations

import os

from runtime.ledger.checkpoint_ports import CheckpointError
from runtime.ledger.codes import RestoreCode

# The longest name a copy's is made from, in bytes: with ``-restored-<n>`` after it, it fits
# the 255 bytes file systems allow a name (a folder named near that limit had a default copy
# place no folder could be made at).
MAX_BASE_NAME_BYTES = 200


def copy_base(folder: str) -> str:
    """The path a copy's name is made from (``<base>-restored-<n>``, ``<base>-branch-<n>``)."""
    chosen = _beside(folder)
    name = os.path.basename(chosen)
    if len(os.fsencode(name)) <= MAX_BASE_NAME_BYTES:
        return chosen
    while len(os.fsencode(name)) > MAX_BASE_NAME_BYTES:
        name = name[:-1]
    return os.path.join(os.path.dirname(chosen), name)


def _beside(folder: str) -> str:
    base = os.path.normpath(os.path.abspath(folder))
    chosen = base
    parts: list[str] = [os.path.basename(base)]
    here = os.path.dirname(base)
    home = os.path.normpath(os.path.expanduser("~"))
    while here != os.path.dirname(here):
        if os.path.lexists(os.path.join(here, ".git")):
            beside = os.path.dirname(here)
            if _holds(here, home) or not os.access(beside, os.W_OK):
                return chosen
            chosen = os.path.join(beside, "-".join([os.path.basename(here), *reversed(parts)]))
        parts.append(os.path.basename(here))
        here = os.path.dirname(here)
    return chosen


def _holds(folder: str, inner: str) -> bool:
    """Whether ``folder`` is ``inner`` or a folder above it."""
    return inner == folder or inner.startswith(folder.rstrip(os.sep) + os.sep)


def place_refusal(target: os.PathLike[str] | str) -> CheckpointError | None:
    """Why no copy can be made at ``target`` (absolute), asked before anything is written
    (a branch of the current files would otherwise capture them first and leave a ref behind);
    None when it looks free: a new folder, or an empty one (a link to one counts). The copy
    itself checks again, exclusively, when it makes the folder."""
    path = os.fspath(target)
    try:
        if os.path.isdir(path):
            if os.listdir(path):
                return CheckpointError(
                    RestoreCode.WORKSPACE_RESTORE_TARGET_NOT_EMPTY,
                    f"{path} is not an empty folder; a copy needs a new or empty folder",
                )
            return None
        if os.path.lexists(path):
            what = "is a link that leads to no folder" if os.path.islink(path) else "is a file"
            return CheckpointError(
                RestoreCode.WORKSPACE_RESTORE_TARGET_NOT_EMPTY,
                f"{path} {what}, not a folder; a copy needs a new or empty folder",
            )
        os.lstat(path)  # a name too long for the file system says so here
    except (FileNotFoundError, NotADirectoryError):
        pass  # what stands above it is named below
    except OSError as error:
        return CheckpointError(
            RestoreCode.WORKSPACE_RESTORE_FAILED, f"cannot make {path}: {error.strerror}"
        )
    above = os.path.dirname(path)
    while above != os.path.dirname(above) and not os.path.lexists(above):
        above = os.path.dirname(above)
    if not os.path.isdir(above):
        what = "is a link that leads to no folder" if os.path.islink(above) else "is a file"
        return CheckpointError(
            RestoreCode.WORKSPACE_RESTORE_FAILED,
            f"cannot make {path}: {above} {what}, not a folder",
        )
    return None
