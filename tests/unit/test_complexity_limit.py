"""ruff's complexity limit (C901, ``max-complexity`` in pyproject.toml) holds for the project's
config, the one ``./dev check`` and CI run: a planted function over it fails, the same function
with a justified ``noqa`` passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUFF = Path(sys.executable).with_name("ruff")

# 16 ``if`` statements: complexity 17, above the project's 15.
BRANCHES = "".join(f"    if x == {n}:\n        return {n}\n" for n in range(16))


def _ruff(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    planted = tmp_path / "planted.py"
    planted.write_text(source, encoding="utf-8")
    return subprocess.run(
        [str(RUFF), "check", "--no-cache", "--config", str(REPO / "pyproject.toml"), str(planted)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_function_over_the_limit_fails_the_lint(tmp_path: Path) -> None:
    done = _ruff(tmp_path, f"def planted(x: int) -> int:\n{BRANCHES}    return -1\n")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "C901" in done.stdout and "planted" in done.stdout


def test_a_justified_exception_passes(tmp_path: Path) -> None:
    source = (
        "# C901: a planted table of branches.\n"
        f"def planted(x: int) -> int:  # noqa: C901\n{BRANCHES}    return -1\n"
    )
    done = _ruff(tmp_path, source)
    assert done.returncode == 0, done.stdout + done.stderr
