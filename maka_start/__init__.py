"""The ``maka`` command's first step: Maka's own packages ahead of any folder that would hide them.

A console script imports ``app.cli`` through the import path, which starts with the folders in
``PYTHONPATH``. A user working on a Python project often points ``PYTHONPATH`` at it, and a
project holding an ``app.py``, ``app/``, ``runtime/`` or ``storage/`` of its own (a Flask app, say)
then hid Maka's package of that name: every ``maka`` command failed with an import error. This
package's name is Maka's own; it moves the folder holding Maka's packages ahead of the first
folder on the path that holds one of those names, then starts the command. Nothing else on the
path moves (the standard library keeps its place), and the environment is left as it is: the
tools the agent runs see the user's ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import sys

OWN_PACKAGES = ("app", "main_process", "renderer", "runtime", "storage")
"""The top-level packages of Maka's one distribution (beside this one)."""


def _holds_own_name(folder: str) -> bool:
    where = folder or os.getcwd()  # ("" on the path: the current folder)
    try:
        return any(
            os.path.isdir(os.path.join(where, name))
            or os.path.isfile(os.path.join(where, name + ".py"))
            for name in OWN_PACKAGES
        )
    except (OSError, ValueError):
        return False


def own_packages_first(path: list[str] | None = None) -> None:
    """Move the folder that holds this package (and beside it ``app``) ahead of the first
    other folder on ``path`` (``sys.path``) that holds a module or folder of one of Maka's
    package names."""
    path = sys.path if path is None else path
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    roots = {root, os.path.normcase(os.path.realpath(root))}
    for index, folder in enumerate(path):
        absolute = os.path.normcase(os.path.realpath(folder or os.getcwd()))
        if folder in roots or absolute in roots:
            return  # Maka's own folder comes first already
        if _holds_own_name(folder):
            if root in path:
                path.remove(root)
            path.insert(index, root)
            return


def main() -> None:
    """The ``maka`` console script."""
    own_packages_first()
    from app.cli import run_main

    run_main()
