"""Whether Safe resume is on for the commands (``maka plan``, ``maka resume``, ``maka tui``'s
``/resume``, and the hint ``maka sessions`` prints): ``MAKA_RUNTIME_SAFE_BOUNDARY_RESUME`` when
set (``1`` on, any other value off; docs/design/cli.md), else the desktop's Safe resume setting in
the data directory's ``settings.json`` (off when it was never set).

Why a module of its own, on the standard library only: ``maka sessions`` must stay a small
command (tests/e2e/test_small_command_imports.py), while the resume seam and the desktop's
settings class bring the store, the planner and pydantic. One variable and one small JSON file
decide it, so both read it here and cannot disagree.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

RESUME_FLAG = "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME"
SETTINGS_FILE = "settings.json"


def read_settings(path: Path) -> dict[str, str]:
    """The desktop's settings file as text values; a missing, unreadable or damaged file (or a
    value that is not text) reads as not set."""
    import json  # here, not at import: ``maka sessions`` reads no settings when no row is resumable

    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict):
        return {}
    return {str(k): v for k, v in raw.items() if isinstance(v, str)}


def stored_safe_resume(data_dir: Path) -> bool | None:
    """The desktop's Safe resume checkbox, or None when the user never set it."""
    value = read_settings(data_dir / SETTINGS_FILE).get("safe_resume")
    return None if value is None else value == "1"


def command_safe_resume(environ: Mapping[str, str] | None = None) -> bool | None:
    """The command's own ``MAKA_RUNTIME_SAFE_BOUNDARY_RESUME`` (``1``: on, any other value: off);
    None when unset (then the desktop's setting, or a serving host's, decides)."""
    env = os.environ if environ is None else environ
    own = env.get(RESUME_FLAG)
    return None if own is None else own == "1"


def resume_enabled(data_dir: Path, environ: Mapping[str, str] | None = None) -> bool:
    """Safe resume for the commands: the variable when set, else the desktop's setting."""
    own = command_safe_resume(environ)
    return stored_safe_resume(data_dir) is True if own is None else own
