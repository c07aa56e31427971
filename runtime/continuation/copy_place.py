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


def copy_base(folder: str) -> str:
    """The path a copy's name is made from (``<base>-restored-<n>``, ``<base>-branch-<n>``)."""
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
