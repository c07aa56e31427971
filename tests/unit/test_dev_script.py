"""``./dev``: what it installs for each command, and the README's list of Debian packages.

The real script runs under bash in a scratch folder holding a copy of it, a ``pyproject.toml``
and a ``.venv`` whose ``python`` records its arguments instead of running pip (the one part that
would need the network); ``ruff``, ``mypy`` and ``maka`` there succeed without doing anything.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAKE_TOOL = '#!/usr/bin/env bash\necho "$(basename "$0") $*" >>"$DEV_TEST_LOG"\n'
FAILING_PIP = (
    "#!/usr/bin/env bash\n"
    'echo "$(basename "$0") $*" >>"$DEV_TEST_LOG"\n'
    'if [ "$2" = pip ]; then echo "no network" ; exit 1; fi\n'
)

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="./dev is a bash script")


def _tree(root: Path, python: str = FAKE_TOOL) -> Path:
    shutil.copy2(REPO / "dev", root / "dev")
    (root / "pyproject.toml").write_text("[project]\nname = 'scratch'\n", encoding="utf-8")
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in [("python", python), ("ruff", FAKE_TOOL), ("mypy", FAKE_TOOL)]:
        (bin_dir / name).write_text(text, encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    (bin_dir / "maka").write_text(FAKE_TOOL, encoding="utf-8")
    (bin_dir / "maka").chmod(0o755)
    return root


def _dev(root: Path, *args: str) -> tuple[int, list[str]]:
    """Run ``./dev ARGS``; the exit status and the pip installs it made."""
    log = root / "calls.log"
    log.write_text("", encoding="utf-8")
    env = {**os.environ, "DEV_TEST_LOG": str(log)}
    done = subprocess.run(
        ["bash", str(root / "dev"), *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    calls = log.read_text(encoding="utf-8").splitlines()
    return done.returncode, [call for call in calls if call.startswith("python -m pip ")]


def _stamp(root: Path) -> str | None:
    stamp = root / ".venv" / ".maka-installed"
    return stamp.read_text(encoding="utf-8").strip() if stamp.exists() else None


def _touch_pyproject_later(root: Path) -> None:
    stamp = (root / ".venv" / ".maka-installed").stat().st_mtime
    os.utime(root / "pyproject.toml", (stamp + 10, stamp + 10))


RUN_ONLY = "python -m pip install -e ."
WITH_TESTS = "python -m pip install -e .[test]"


def test_run_installs_only_the_runtime_dependencies_once(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    assert _dev(root, "run", "--version") == (0, [RUN_ONLY])
    assert _stamp(root) == "run"
    assert _dev(root, "run") == (0, [])


def test_test_and_check_add_the_test_extras_to_a_run_only_venv(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    _dev(root, "run")
    assert _dev(root, "test", "-q") == (0, [WITH_TESTS])
    assert _stamp(root) == "test"
    # Once the extras are in, no command installs again.
    assert _dev(root, "check") == (0, [])
    assert _dev(root, "run") == (0, [])
    assert _dev(root, "test") == (0, [])


def test_check_alone_installs_the_test_extras(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    assert _dev(root, "check") == (0, [WITH_TESTS])
    assert _dev(root, "test") == (0, [])


def test_a_changed_pyproject_reinstalls_at_the_level_asked_for(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    _dev(root, "test")
    _touch_pyproject_later(root)
    assert _dev(root, "run") == (0, [RUN_ONLY])
    assert _stamp(root) == "run"
    # The run install alone does not stand for the test extras of the new pyproject.toml.
    assert _dev(root, "test") == (0, [WITH_TESTS])


def test_a_stamp_from_before_the_two_levels_counts_as_the_test_extras(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / ".venv" / ".maka-installed").write_text("", encoding="utf-8")
    assert _dev(root, "test") == (0, [])
    assert _dev(root, "run") == (0, [])


def test_a_failed_install_leaves_no_stamp_and_shows_pips_output(tmp_path: Path) -> None:
    root = _tree(tmp_path, python=FAILING_PIP)
    status, installs = _dev(root, "run")
    assert (status, installs) == (1, [RUN_ONLY])
    assert _stamp(root) is None
    assert "no network" in (root / ".venv" / "pip.log").read_text(encoding="utf-8")


def _ci_packages() -> list[str]:
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    match = re.search(r"^pkgs=\((.*?)\)", script, re.S | re.M)
    assert match is not None
    return match.group(1).split()


def test_the_readme_names_the_desktops_debian_packages_in_one_line() -> None:
    """The line a user copies holds Python with venv and every package CI installs for Qt,
    without the tools only the tests use (Xvfb and friends, binutils for the packaging tests,
    PostgreSQL for the ledger's PostgreSQL engine tests)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    lines = [line for line in readme.splitlines() if line.startswith("sudo apt-get install ")]
    assert len(lines) == 1
    words = lines[0].split()[3:]
    options = [word for word in words if word.startswith("-")]
    named = [word for word in words if not word.startswith("-")]
    assert options == ["--no-install-recommends"]
    test_tools = {"xvfb", "xauth", "x11-utils", "binutils", "postgresql"}
    assert named == ["python3", "python3-venv"] + [
        name for name in _ci_packages() if name not in test_tools
    ]
