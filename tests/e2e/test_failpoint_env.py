"""The real ``maka`` command with a ``MAKA_FAILPOINT`` that names no crash point: refused before
anything happens (a crash drill with a misspelt point would otherwise run to the end and prove
nothing), with the closest point named; a real point still kills the run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.maka_process import maka_executable

pytestmark = pytest.mark.e2e


def _maka(data_dir: Path, failpoint: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MAKA_FAILPOINT": failpoint, "QT_QPA_PLATFORM": "offscreen"}
    return subprocess.run(
        [*maka_executable(), "--data-dir", str(data_dir), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "failpoint", "hint"),
    [
        (
            ("run", "--provider", "demo", "--permission-mode", "auto", "write a.txt saying hi"),
            "P12",
            None,
        ),
        (
            ("run", "--provider", "demo", "--permission-mode", "auto", "write a.txt saying hi"),
            "t1_after_comit",
            "t1_after_commit",
        ),
        (
            ("resume", "session_x"),
            "after_continuation_admission_commited",
            "after_continuation_admission_committed",
        ),
        ((), "p3", "P3"),  # the desktop
    ],
)
def test_an_unknown_failpoint_is_refused_before_anything_happens(
    tmp_path: Path, args: tuple[str, ...], failpoint: str, hint: str | None
) -> None:
    data_dir = tmp_path / "data"
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    cwd_args = ("--cwd", str(workspace)) if args[:1] == ("run",) else ()
    done = _maka(data_dir, failpoint, *args, *cwd_args)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith(
        f"maka: error [failpoint_unknown]: MAKA_FAILPOINT={failpoint!r} names no crash point"
    ), done.stderr
    if hint is not None:
        assert f"did you mean {hint!r}?" in done.stderr
    assert "Traceback" not in done.stderr
    assert not data_dir.exists()
    assert list(workspace.iterdir()) == []


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL exit status is POSIX")
def test_a_crash_point_spelt_right_still_kills_the_run(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    done = _maka(
        tmp_path / "data",
        "t1_after_commit",
        "run",
        "--cwd",
        str(workspace),
        "--provider",
        "demo",
        "--permission-mode",
        "auto",
        "write a.txt saying hi",
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert "failpoint_unknown" not in done.stderr
    assert not (workspace / "a.txt").exists()
