"""Where the data directory is: ``--data-dir`` > ``MAKA_DATA_DIR`` > the per-user data folder.

One data directory per user holds ``runtime.sqlite``, settings, logs and the background-shell
registry (docs/design/architecture.md, Data). It is created on first use, readable by the user only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

DATA_DIR_ENV = "MAKA_DATA_DIR"


def resolve_data_dir(option: str | None, environ: Mapping[str, str] | None = None) -> Path:
    """The data directory, always absolute: a relative ``--data-dir`` or ``MAKA_DATA_DIR`` is
    taken from the current folder once, here, so every part (the store, the checkpoint
    repositories, Git running in another folder) names the same place."""
    env = os.environ if environ is None else environ
    if option:
        return _absolute(Path(option).expanduser())
    if env.get(DATA_DIR_ENV):
        return _absolute(Path(env[DATA_DIR_ENV]).expanduser())
    from platformdirs import user_data_dir

    return _absolute(Path(user_data_dir("maka", appauthor=False)))


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path))


def ensure_data_dir(path: Path) -> Path:
    """The data folder, made when missing (``storage.private_files.ensure_data_dir``)."""
    from storage.private_files import ensure_data_dir as made

    return made(path)
