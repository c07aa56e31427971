"""The user's own ``git``, run by tests that build a repository as a user would (a commit, a
``.gitignore``, a clone), apart from the configuration of the machine the tests run on."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

IDENTITY = {
    "GIT_AUTHOR_NAME": "U",
    "GIT_AUTHOR_EMAIL": "u@x",
    "GIT_COMMITTER_NAME": "U",
    "GIT_COMMITTER_EMAIL": "u@x",
}


def user_git(folder: Path, *args: str, check: bool = True, stdin: bytes | None = None) -> str:
    """``git args`` in ``folder``; its standard output (undecodable bytes escaped). No system
    or global configuration of this machine is read: ``HOME`` is the folder's parent (where a
    test may write a ``.gitconfig`` of the user's), no ``GIT_`` variable of the environment
    leaks in, and commits carry a fixed identity."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(IDENTITY, HOME=str(folder.parent), GIT_CONFIG_NOSYSTEM="1")
    env.pop("XDG_CONFIG_HOME", None)
    done = subprocess.run(
        ["git", *args],
        cwd=folder,
        env=env,
        input=stdin if stdin is not None else b"",
        capture_output=True,
        check=check,
    )
    return done.stdout.decode("utf-8", "surrogateescape")
