"""With Safe resume off (the default), ``maka plan`` and ``maka resume`` of a session whose
turn completed said Safe resume was off and to turn it on, which would not help: nothing was
interrupted. They now say there is nothing to resume, as with Safe resume on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = [pytest.mark.e2e]


def test_a_completed_session_has_nothing_to_resume_with_safe_resume_off(tmp_path: Path) -> None:
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    env = scripted_env(write_script(tmp_path / "s.json", [[{"text": "Done."}]]))
    assert maka(["run", "--cwd", str(work), "hello"], data, env=env).returncode == 0
    session = committed_runs(data)[0][0].session_id
    off = {**env, "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "0"}
    for args in (["plan", session, "--json"], ["resume", session, "--json"]):
        result = maka(args, data, env=off)
        body = json.loads(result.stdout)
        assert result.returncode == 3, (args, result)
        assert body["rejectionReasons"] == ["resume_candidate_missing"], (args, body)
    said = maka(["plan", session], data, env=off).stdout
    assert "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME=1" not in said and "Turn Safe resume on" not in said
