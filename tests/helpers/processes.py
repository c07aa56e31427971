"""Whether a process still runs, for tests that kill processes and check what is left."""

from __future__ import annotations

import psutil


def pid_running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting to be reaped does not)."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
