"""Which folders a renderer may make a session folder (``sessions.create``).

Why the main process checks and not only the renderer: the folder is where the agent's tools
read, write and run commands, and the request arrives from a peer. A relative path would resolve
against the main process's own working folder (wherever ``maka`` happened to start); a NUL byte
cannot name any file; the root folder and the home folder itself would give the agent the whole
disk or every project, settings and key at once. A path that resolves through ``/proc``
(``/proc/self/cwd``, ``/dev/fd/N``, a link into ``/proc``) names a running process's view of a
folder, such as the main process's own working folder, not a project folder. Each is refused
with ``invalid_cwd`` and a sentence saying why; nothing is created.
"""

from __future__ import annotations

import os

from app.host.host_services import HostServiceError
from runtime.ledger.codes import HostCode

INVALID_CWD = HostCode.INVALID_CWD
_PROC = "/proc"
_MAX_LINKS = 40


def _in_proc(path: str) -> bool:
    return path == _PROC or path.startswith(_PROC + "/")


def resolves_through_proc(path: str) -> bool:
    """Whether ``path`` (absolute) is under ``/proc`` or reaches it through a symbolic link on
    the way (each component is followed as the kernel would)."""
    pending = os.path.normpath(path).split("/")[1:]
    current = "/"
    links = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        current = os.path.dirname(current) if part == ".." else os.path.join(current, part)
        if _in_proc(current):
            return True
        if links < _MAX_LINKS and os.path.islink(current):
            links += 1
            try:
                target = os.readlink(current)
            except OSError:
                return False
            base = "/" if os.path.isabs(target) else os.path.dirname(current)
            pending = target.split("/") + pending
            current = base
    return False


def check_session_folder(cwd: str, home: str | None = None) -> str:
    """``cwd`` unchanged when acceptable, else ``HostServiceError(invalid_cwd)``."""
    if "\0" in cwd:
        raise HostServiceError(INVALID_CWD, "the folder name contains a NUL byte")
    if not os.path.isabs(cwd):
        raise HostServiceError(
            INVALID_CWD, f"the session folder must be an absolute path, not {cwd!r}"
        )
    if resolves_through_proc(cwd):
        raise HostServiceError(
            INVALID_CWD,
            "a folder under /proc is a running program's view of a folder, not a project "
            "folder; choose the project folder itself",
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
