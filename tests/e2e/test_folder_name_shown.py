"""A session folder whose name holds a newline: ``maka sessions`` and ``maka checkpoints`` show
it quoted on its own line (``shown_name``), so a folder's name cannot split a row in two or
forge a line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers.maka_run import maka

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


def test_a_folder_name_with_a_newline_stays_on_its_row(tmp_path: Path) -> None:
    work = tmp_path / "nl\ndir"
    work.mkdir()
    data = tmp_path / "data"
    ran = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "list files"], data)
    assert ran.returncode == 0, ran.stderr
    listed = maka(["sessions"], data)
    [row] = listed.stdout.splitlines()
    assert row.endswith(repr(str(work))), row
    session = json.loads(maka(["sessions", "--json"], data).stdout)["sessions"][0]["sessionId"]
    shown = maka(["checkpoints", str(session)], data).stdout
    assert f"in {str(work)!r}: mode git_v1" in shown, shown
