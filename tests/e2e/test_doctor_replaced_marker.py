"""``maka doctor`` on a folder whose workspace marker was replaced after a run there (a marker
copied in from another folder, or another folder now at the path): the runs recorded another
workspace, so Safe resume refuses to continue there (``workspace_identity_mismatch``). The
doctor says so instead of calling the marker valid."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from storage.sessions.workspace_identity import MARKER_NAME, resolve_workspace_identity
from tests.e2e.test_workspace_checkpoints_cli import Drill
from tests.helpers.maka_run import maka

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


def test_a_replaced_marker_is_named_with_both_identities(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.run("P8")  # an interrupted run in the folder, under its own workspace
    recorded = resolve_workspace_identity(drill.work).identity
    _, planned = drill.plan()
    assert planned["disposition"] == "continue", planned

    other = tmp_path / "other"
    other.mkdir()
    foreign = resolve_workspace_identity(other).identity
    (drill.work / MARKER_NAME).write_bytes((other / MARKER_NAME).read_bytes())

    result = maka(["doctor", "--json"], drill.data, env=drill.env)
    assert result.returncode == 0, result.stderr
    [entry] = json.loads(result.stdout)["workspaces"]
    assert entry == {
        "cwd": str(drill.work),
        "marker": "replaced",
        "identity": foreign,
        "recordedIdentity": recorded,
    }
    human = maka(["doctor"], drill.data, env=drill.env)
    assert f"workspace {drill.work}: marker replaced (it names {foreign}" in human.stdout
    assert "Safe resume does not continue an interrupted run there" in human.stdout

    # What the doctor says is what the plan does.
    _, planned = drill.plan()
    assert "workspace_identity_mismatch" in planned["rejectionReasons"], planned
