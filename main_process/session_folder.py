"""Which folders a renderer may make a session folder (``sessions.create``).

Why the main process checks and not only the renderer: the folder is where the agent's tools
read, write and run commands, and the request arrives from a peer. A relative path would resolve
against the main process's own working folder (wherever ``maka`` happened to start); a NUL byte
cannot name any file; the root folder and the home folder itself would give the agent the whole
disk or every project, settings and key at once. Each is refused with ``invalid_cwd`` and a
sentence saying why; nothing is created.
"""

from __future__ import annotations

import os

from app.host.host_services import HostServiceError
from runtime.ledger.codes import HostCode

INVALID_CWD = HostCode.INVALID_CWD


def check_session_folder(cwd: str, home: str | None = None) -> str:
    """``cwd`` unchanged when acceptable, else ``HostServiceError(invalid_cwd)``."""
    if "\0" in cwd:
        raise HostServiceError(INVALID_CWD, "the folder name contains a NUL byte")
    if not os.path.isabs(cwd):
        raise HostServiceError(
            INVALID_CWD, f"the session folder must be an absolute path, not {cwd!r}"
        )
    resolved = os.path.realpath(cwd)
    if os.path.dirname(resolved) == resolved:
        raise HostServiceError(
            INVALID_CWD, "the root folder cannot be a session folder; choose a project folder"
        )
    home_dir = home if home is not None else os.path.expanduser("~")
    if os.path.isabs(home_dir) and resolved == os.path.realpath(home_dir):
        raise HostServiceError(
            INVALID_CWD,
            "your home folder itself cannot be a session folder; choose a project folder in it",
        )
    return cwd
