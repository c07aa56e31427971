"""``-m`` selects tiers by folder: every test under ``tests/<folder>`` carries that folder's marker
(``tests/conftest.py``), so ``-m "not e2e and not crash"`` leaves out every end-to-end and crash
test, marked in its module or not."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import FOLDER_MARKERS, TESTS, folder_marker

REPO = TESTS.parent


def test_a_test_module_gets_its_folders_marker() -> None:
    assert folder_marker(TESTS / "e2e" / "test_x.py") == "e2e"
    assert folder_marker(TESTS / "gui" / "deeper" / "test_x.py") == "gui"
    assert folder_marker(TESTS / "helpers" / "maka_run.py") is None
    assert folder_marker(REPO / "bench" / "test_x.py") is None


def test_every_collected_test_carries_its_folders_marker() -> None:
    """Collected with the folders' markers negated, the tier folders hold no test at all."""
    folders = [name for name in FOLDER_MARKERS if (TESTS / name).is_dir()]
    unmarked = " and ".join(f"not {FOLDER_MARKERS[name]}" for name in folders)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-m",
            unmarked,
            *(str(TESTS / name) for name in folders),
        ],
        cwd=REPO,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    # 5: every test was deselected; a test without its folder's marker would be listed
    assert done.returncode == 5, done.stdout[-3000:] + done.stderr[-3000:]
    assert "deselected" in done.stdout, done.stdout[-3000:]
