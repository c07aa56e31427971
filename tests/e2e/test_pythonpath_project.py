"""A user's ``PYTHONPATH`` naming a project that holds modules named like Maka's packages (an
``app.py``, a ``storage/`` folder: a Flask app, say) no longer hides Maka's own: every ``maka``
command failed with ``No module named 'app.cli'; 'app' is not a package``. The tools the agent
runs still see the user's ``PYTHONPATH``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from maka_start import own_packages_first
from tests.helpers.maka_run import maka

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "flask-project"
    (project / "storage").mkdir(parents=True)
    (project / "app.py").write_text("raise SystemExit('the user project was imported')\n")
    (project / "storage" / "__init__.py").write_text("raise SystemExit('user storage')\n")
    (project / "runtime.py").write_text("raise SystemExit('user runtime')\n")
    return project


def test_maka_runs_with_pythonpath_naming_a_project_with_an_app_module(tmp_path: Path) -> None:
    project = _project(tmp_path)
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    env = {"PYTHONPATH": str(project)}
    result = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "write hello.txt saying hi"],
        data,
        env=env,
        cwd=project,
    )
    assert result.returncode == 0, result.stderr
    assert "is not a package" not in result.stderr
    assert (work / "hello.txt").exists(), result.stdout
    listed = maka(["sessions"], data, env=env, cwd=project)
    assert listed.returncode == 0, listed.stderr
    assert str(work) in listed.stdout


def test_own_packages_go_ahead_of_the_first_folder_that_would_hide_them(tmp_path: Path) -> None:
    project = _project(tmp_path)
    plain = tmp_path / "plain"
    plain.mkdir()
    stdlib = tmp_path / "stdlib"
    (stdlib / "json").mkdir(parents=True)
    path = [str(plain), str(project), str(stdlib), str(ROOT)]
    own_packages_first(path)
    assert path == [str(plain), str(ROOT), str(project), str(stdlib)]
    untouched = [str(plain), str(stdlib), str(ROOT), str(project)]
    own_packages_first(untouched)  # Maka's folder comes first already: nothing moves
    assert untouched == [str(plain), str(stdlib), str(ROOT), str(project)]


def test_the_tools_still_see_the_users_pythonpath(tmp_path: Path) -> None:
    """What the process changes is its own import path, not the environment its tools get."""
    project = _project(tmp_path)
    code = (
        "import os, sys, maka_start; maka_start.own_packages_first(); "
        "import app.cli; print(os.environ['PYTHONPATH'])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(project)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(project)
