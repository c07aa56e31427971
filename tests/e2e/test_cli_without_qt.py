"""``maka plan`` and ``maka sessions`` print their sentences without loading Qt: the code table
and the data-directory lock are Qt-free (a real ``maka run`` killed at a failpoint, then the real
command in a child that reports which modules it loaded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_safe_resume_cli import FLAG, Drill

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
from app.cli import main
code = main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'shiboken6', 'renderer'))
print(json.dumps({"code": code, "qt": loaded}), file=sys.stderr)
"""


def _probe(args: list[str], data: Path, env: dict[str, str]) -> tuple[str, dict[str, object]]:
    environment = {**os.environ, **env, "MAKA_DATA_DIR": str(data)}
    environment.pop("MAKA_FAILPOINT", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return done.stdout, report


def test_plan_and_sessions_print_their_sentences_without_loading_qt(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    assert drill.run("P4").returncode == -9
    stdout, report = _probe(["plan", drill.session], drill.data, {**drill.env, **FLAG})
    assert report["code"] == 3
    assert report["qt"] == [], "maka plan loaded Qt"
    assert "dangling_tool_state" in stdout
    assert "resuming could repeat or hide its side effect" in stdout
    stdout, report = _probe(["sessions"], drill.data, drill.env)
    assert report["code"] == 0 and report["qt"] == []
    assert drill.session in stdout


def test_plan_follows_the_desktop_setting_unless_the_environment_decides(tmp_path: Path) -> None:
    from tests.helpers.maka_run import maka

    drill = Drill(tmp_path)
    assert drill.run("P6").returncode == -9
    env = {k: v for k, v in drill.env.items() if k != "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME"}
    off = maka(["plan", drill.session, "--json"], drill.data, env=env)
    assert json.loads(off.stdout)["rejectionReasons"] == ["resume_feature_disabled"]
    (drill.data / "settings.json").write_text(json.dumps({"safe_resume": "1"}))
    on = maka(["plan", drill.session, "--json"], drill.data, env=env)
    assert on.returncode == 0, on.stdout
    forced_off = maka(
        ["plan", drill.session, "--json"],
        drill.data,
        env={**env, "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "0"},
    )
    assert json.loads(forced_off.stdout)["rejectionReasons"] == ["resume_feature_disabled"]
