"""``maka doctor`` right after a ``maka run`` was killed: the run is still marked running and
no Maka process has the data folder open. The doctor said ``ok`` and nothing else while
``maka sessions`` and ``maka timeline`` said the run awaits its repair; it now says so in a
note (not a problem: nothing is damaged), and says nothing once a plan has repaired it, or while
a Maka process has the folder open (the run may be running)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from storage.instance_lock import InstanceLock, LockOutcome
from tests.e2e.test_workspace_checkpoints_cli import Drill
from tests.helpers.maka_run import committed_runs, maka

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


def _notes(drill: Drill) -> tuple[int, list[dict[str, str]], str]:
    result = maka(["doctor", "--json"], drill.data, env=drill.env)
    text = maka(["doctor"], drill.data, env=drill.env)
    assert text.returncode == result.returncode
    document = json.loads(result.stdout)
    return result.returncode, document["notes"], text.stdout


def test_a_run_killed_mid_turn_is_noted_until_it_is_repaired(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.run("P8")
    [(header, _)] = committed_runs(drill.data)
    code, notes, text = _notes(drill)
    assert code == 0, text
    assert notes == [
        {
            "code": "run_awaiting_repair",
            "sessionId": header.session_id,
            "runId": header.run_id,
            "message": f"run {header.run_id} is still marked running, but no Maka process has "
            "this data folder open: its process was stopped before it could end the run. "
            f"maka plan {header.session_id} ends it as interrupted (as the next start of the "
            "desktop or maka host does) and says whether Safe resume can continue it",
        }
    ]
    assert f"note [run_awaiting_repair] session {header.session_id}: run " in text

    lock = InstanceLock(drill.data)  # another Maka process has the folder: it may be running
    assert lock.acquire().outcome is LockOutcome.ACQUIRED
    try:
        assert _notes(drill)[1] == []
    finally:
        lock.release()

    drill.plan()  # repairs the run (ends it as interrupted)
    assert _notes(drill)[1] == []
