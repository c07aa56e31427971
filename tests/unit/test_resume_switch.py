"""Whether Safe resume is on for the commands (``app/host/resume_switch.py``): the variable when
set, else the desktop's setting, else off; read with the standard library only."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from app.bridge_contract import ProviderChoice
from app.host.desktop_settings import DesktopSettings
from app.host.host_services import SettingsChange
from app.host.resume_switch import RESUME_FLAG, resume_enabled, stored_safe_resume

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("variable", "file_text", "on"),
    [
        (None, None, False),
        ("1", None, True),
        ("0", None, False),
        ("yes", None, False),  # only the exact value 1 (docs/design/cli.md)
        ("", '{"safe_resume": "1"}', False),  # set, even empty, the variable wins
        (None, '{"safe_resume": "1"}', True),
        (None, '{"safe_resume": "0"}', False),
        ("0", '{"safe_resume": "1"}', False),
        ("1", '{"safe_resume": "0"}', True),
        (None, '{"safe_resume": 1}', False),  # not the file's text value: never set
        (None, "{not json", False),
        (None, '["safe_resume"]', False),
    ],
)
def test_the_variable_wins_then_the_desktops_setting_then_off(
    tmp_path: Path, variable: str | None, file_text: str | None, on: bool
) -> None:
    if file_text is not None:
        (tmp_path / "settings.json").write_text(file_text, encoding="utf-8")
    environ = {} if variable is None else {RESUME_FLAG: variable}
    assert resume_enabled(tmp_path, environ) is on


def test_the_setting_is_the_one_the_desktop_stores(tmp_path: Path) -> None:
    assert stored_safe_resume(tmp_path) is None
    settings = DesktopSettings(tmp_path)
    change = SettingsChange(provider=ProviderChoice.OFFLINE_DEMO)
    settings.update(replace(change, safe_resume=True))
    assert stored_safe_resume(tmp_path) is True and resume_enabled(tmp_path, {}) is True
    settings.update(replace(change, safe_resume=False))
    assert stored_safe_resume(tmp_path) is False
    assert json.loads((tmp_path / "settings.json").read_text())["safe_resume"] == "0"


def test_the_switch_imports_the_standard_library_only() -> None:
    probe = (
        "import sys; before = set(sys.modules); import app.host.resume_switch; "
        "print(sorted(m for m in set(sys.modules) - before "
        "if m.split('.')[0] in ('app', 'runtime', 'storage', 'main_process', 'pydantic')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "['app', 'app.host', 'app.host.resume_switch']"
