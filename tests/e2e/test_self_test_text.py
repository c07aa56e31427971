"""``maka self-test`` as a person reads it: one line per check, the details in one column (the
longest check name, ``git-checkpoints``, no longer pushes its own detail out of line)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.helpers.maka_process import maka_executable


def test_the_checks_details_line_up(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "MAKA_FAILPOINT"}
    env.update({"MAKA_DATA_DIR": str(tmp_path / "d"), "QT_QPA_PLATFORM": "offscreen"})
    completed = subprocess.run(
        [*maka_executable(), "self-test"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    rows = [line for line in completed.stdout.splitlines() if line.startswith("  ")]
    names = [row.split()[1] for row in rows]
    assert "git-checkpoints" in names and "data-dir" in names, completed.stdout
    # Each detail starts right after the padded name column: the same place on every line.
    column = 4 + 2 + 2 + max(map(len, names)) + 1  # "  ok    NAME... DETAIL"
    assert all(row[column - 1] == " " and row[column] != " " for row in rows), completed.stdout


def test_the_data_dir_check_leaves_no_folder_it_created(tmp_path: Path) -> None:
    """A check of a data folder not there yet creates it as the app would, writes in it and
    removes what it created (it left an empty data folder, and its parents, behind); one that
    was there stays."""
    env = {key: value for key, value in os.environ.items() if key != "MAKA_FAILPOINT"}
    data = tmp_path / "new" / "deeper" / "data"
    env.update({"MAKA_DATA_DIR": str(data), "QT_QPA_PLATFORM": "offscreen"})
    run = [*maka_executable(), "self-test"]
    completed = subprocess.run(
        run, env=env, capture_output=True, text=True, timeout=120, check=True
    )
    assert f"writable: {data} (created for the check, then removed)" in completed.stdout
    assert not (tmp_path / "new").exists(), list(tmp_path.rglob("*"))
    data.mkdir(parents=True)
    again = subprocess.run(run, env=env, capture_output=True, text=True, timeout=120, check=True)
    assert f"writable: {data} (" in again.stdout and "then removed" not in again.stdout
    assert data.is_dir() and list(data.iterdir()) == []
