"""How a ``maka`` command Maka suggests to the user is worded: the one function every suggestion
to paste is built with (``maka resume S --rebaseline``, ``maka settle S CALL --ran``...).

A suggestion is run from the user's shell, which knows nothing of this process's command line:
a process started with ``--data-dir DIR`` (``maka --data-dir ./work plan S``, ``maka host
--data-dir DIR``, the desktop's ``maka gui --data-dir DIR``) words every suggestion with
``--data-dir`` and that folder, absolute and quoted for the user's shell (``shell_quoted``),
right after ``maka``, so the pasted command works on the same sessions from any folder
(docs/design/cli.md, "Commands Maka suggests"). A folder that came from ``MAKA_DATA_DIR``
(which the pasted command inherits) or the per-user default adds nothing.

The entry point says which folder once (``suggest_data_dir``); the rest only words commands.
Here, in the ledger contract on the standard library alone, so the runtime, the store and the
app may all use it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar

_given_data_dir: str | None = None
"""The data folder this process was given on its command line (absolute), or None."""

_for_this_request: ContextVar[tuple[str | None] | None] = ContextVar(
    "maka_suggested_data_dir", default=None
)
"""What one request's suggestions name instead (``wording_for``): a host answering a terminal
words them as that terminal would alone. None: the process's own setting."""


@contextlib.contextmanager
def wording_for(folder: str | None) -> Iterator[None]:
    """Word the suggestions made inside the block (and in work started from it with a copy of
    its context) with ``folder`` (absolute; None: no folder), whatever this process was given:
    a host answering a terminal names the folder that terminal was given, or none when it
    came from MAKA_DATA_DIR or the default, so its answers read as the command's own."""
    token = _for_this_request.set((folder,))
    try:
        yield
    finally:
        _for_this_request.reset(token)


def suggest_data_dir(folder: str | os.PathLike[str] | None) -> str | None:
    """Word this process's suggestions for ``folder``, the data folder given on the command line
    (made absolute here when it is not), or without one (None); returns the folder said before,
    so a caller can put it back."""
    global _given_data_dir  # noqa: PLW0603 (one setting for the whole process, by design)
    before = _given_data_dir
    _given_data_dir = None if folder is None else os.path.abspath(os.fspath(folder))
    return before


def suggested_data_dir() -> str | None:
    """The data folder suggestions carry (absolute), or None when they carry none."""
    override = _for_this_request.get()
    return override[0] if override is not None else _given_data_dir


def maka_command(words: str = "") -> str:
    """``maka`` followed by ``words`` (the command as the user types it: ``"plan S"``,
    ``"settle S CALL --ran (or --not-run) [--note TEXT]"``), with ``--data-dir FOLDER`` between
    them when this process was given its data folder on its command line."""
    parts = ["maka"]
    folder = suggested_data_dir()
    if folder is not None:
        parts += ["--data-dir", shell_quoted(folder)]
    if words:
        parts.append(words)
    return " ".join(parts)


def shell_quoted(folder: str, *, windows: bool | None = None) -> str:
    """``folder`` as the user's shell takes it back as one word: POSIX quoting (``shlex``), or
    on Windows, double quotes around a folder holding anything but letters, digits and
    ``_-.:\\/`` (a Windows path cannot hold ``"``; ``cmd.exe``, PowerShell and the C runtime's
    argument parsing all take it so; a backslash before the closing quote is doubled). In
    PowerShell a ``$`` or a backtick in the name is still expanded inside double quotes: such a
    folder is given best as ``MAKA_DATA_DIR``, which suggestions never need to name."""
    if windows if windows is not None else os.name == "nt":
        import re

        if re.fullmatch(r"[\w\-.:\\/]+", folder):
            return folder
        return '"' + re.sub(r"(\\+)$", r"\1\1", folder) + '"'
    import shlex  # only when there is a folder to quote: ``maka sessions`` stays small

    return shlex.quote(folder)
