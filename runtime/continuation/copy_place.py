"""Where a restored or branched copy of a folder goes by default (docs/design/workspace.md
section 4): beside the folder, named after it, unless the folder lies inside a Git
repository's work tree (a package of a monorepo). A copy beside it would then be inside that
work tree, an untracked folder in the user's ``git status``, one ``git add -A`` away from a
commit; so it goes beside the repository instead, named after the repository and the path
inside it (``mono/packages/web`` -> ``mono-packages-web``). When the folder beside the
repository cannot be written (a repository of the user's whole home folder), it stays beside
the folder."""

from __future__ import annotations

import os


def copy_base(folder: str) -> str:
    """The path a copy's name is made from (``<base>-restored-<n>``, ``<base>-branch-<n>``)."""
    base = os.path.normpath(os.path.abspath(folder))
    if os.path.lexists(os.path.join(base, ".git")):
        return base  # a repository's own folder: its copy is a clone, beside it
    parts: list[str] = [os.path.basename(base)]
    here = os.path.dirname(base)
    while True:
        if os.path.lexists(os.path.join(here, ".git")):
            beside = os.path.dirname(here)
            if beside == here or not os.access(beside, os.W_OK):
                return base
            name = "-".join([os.path.basename(here), *reversed(parts)])
            return os.path.join(beside, name)
        parent = os.path.dirname(here)
        if parent == here:
            return base
        parts.append(os.path.basename(here))
        here = parent
