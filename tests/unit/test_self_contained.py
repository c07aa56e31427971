"""The repository stands alone: everything its code, tests and docs refer to is in the checkout.

Two checks. A scan of every tracked text file for paths outside the checkout (an absolute
``/work/`` path, a design folder above it, design documents that are not in ``docs/design/``) and
for ``docs/design/`` documents that do not exist. And a plain ``git clone`` of the checkout's HEAD
into an empty temporary folder, where the tests that read the repository's own files run: the
codes document, the import rules, the CI workflows, the ``./dev`` script, the failpoint catalog.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GIT = shutil.which("git")

OUTSIDE = re.compile(
    r"/work/|shared/spec|\.\./reference/|\.\./examples/"
    r"|(?<![/\w])(?:ARCHITECTURE|LEDGER|RECOVERY|CODES|DESKTOP|CLI|STYLE|WORKSPACE|HOSTS)\.md\b"
)
"""A reference that points outside the checkout."""

DESIGN_REFERENCE = re.compile(r"docs/design/([A-Za-z0-9_-]+\.md)")

TEXT_SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".cfg", ".ini", ".txt", ".spec", ".sh"}

CLONE_TESTS = (
    "tests/unit/test_code_text.py",
    "tests/unit/test_import_direction.py",
    "tests/unit/test_ci_workflows.py",
    "tests/unit/test_dev_script.py",
    "tests/unit/test_crash_points.py",
    "tests/unit/test_park_guidance.py",
)
"""Fast unit tests that read the repository's own files, run again in a plain clone."""


def _readable_checkout() -> bool:
    """Whether ``git`` runs here and reads the checkout (a source tree without Git history, or
    one Git refuses to read for its owner, has nothing to clone)."""
    if GIT is None or not (REPO / ".git").exists():
        return False
    done = subprocess.run(
        [GIT, "rev-parse", "HEAD"], cwd=REPO, capture_output=True, timeout=60, check=False
    )
    return done.returncode == 0


pytestmark = pytest.mark.skipif(not _readable_checkout(), reason="needs git and a git checkout")


def _git(*args: str, cwd: Path = REPO) -> str:
    assert GIT is not None
    done = subprocess.run(
        [GIT, *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=True
    )
    return done.stdout


def _tracked_text_files() -> list[Path]:
    names = _git("ls-files", "-z").split("\0")
    return [
        REPO / name
        for name in names
        if name and (Path(name).suffix in TEXT_SUFFIXES or name in ("dev", ".ci/run"))
    ]


def _problems(path: Path, text: str) -> list[str]:
    """What in ``text`` (the file ``path``) points outside the checkout or to a design document
    that does not exist, one line each."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in OUTSIDE.finditer(line):
            found.append(f"{path}:{number}: {match.group(0)!r} is outside the repository")
        for match in DESIGN_REFERENCE.finditer(line):
            if not (REPO / "docs" / "design" / match.group(1)).is_file():
                found.append(f"{path}:{number}: docs/design/{match.group(1)} does not exist")
    return found


def test_nothing_refers_outside_the_checkout() -> None:
    problems: list[str] = []
    for path in _tracked_text_files():
        if path == Path(__file__).resolve() or not path.is_file():
            continue
        problems += _problems(path.relative_to(REPO), path.read_text(encoding="utf-8"))
    assert problems == []


def test_the_scan_sees_a_reference_outside_and_a_missing_document() -> None:
    text = (
        "see RECOVERY.md section 8\n"
        "read /work/shared/spec/CODES.md\n"
        "docs/design/recovery.md section 8 and docs/design/nowhere.md\n"
    )
    problems = _problems(Path("planted.py"), text)
    assert [problem.split(": ", 1)[1] for problem in problems] == [
        "'RECOVERY.md' is outside the repository",
        "'/work/' is outside the repository",
        "'shared/spec' is outside the repository",
        "docs/design/nowhere.md does not exist",
    ]
    assert _problems(Path("fine.py"), "docs/design/recovery.md section 8\n") == []


def test_a_plain_clone_passes_the_tests_that_read_the_repository(tmp_path: Path) -> None:
    """The clone sits alone in an empty folder; its tests import the clone's packages."""
    head = _git("rev-parse", "HEAD").strip()
    clone = tmp_path / "alone" / "maka"
    _git("clone", "--quiet", "--shared", "--no-checkout", str(REPO), str(clone), cwd=tmp_path)
    _git("checkout", "--quiet", head, cwd=clone)
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    environment["PYTHONPATH"] = str(clone)
    environment["QT_QPA_PLATFORM"] = "offscreen"
    probe = subprocess.run(
        [sys.executable, "-c", "import app, tests; print(app.__file__); print(tests.__file__)"],
        cwd=clone,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert all(Path(line).is_relative_to(clone) for line in probe.stdout.split()), probe.stdout
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *CLONE_TESTS],
        cwd=clone,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and " failed" not in done.stdout
