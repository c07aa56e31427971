"""A run read as still marked running, then ended by its process before the look at the data
folder's lock (a turn finishing while ``maka timeline``, ``maka sessions`` or ``maka doctor``
reads): it is not said to await repair. They said "no Maka process has this data folder open:
the process that ran it is gone" of runs that had completed normally; a run is now said to
await repair only when it is still marked once nobody was seen owning the folder.

Real processes: ``maka run`` killed with SIGKILL mid-turn leaves a run marked running; the
moment between the read and the look is made by ``maka plan`` (which ends the run) run from
inside the look, before it answers that nobody owns the folder."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from app import cli
from app.host import session_rows
from tests.e2e.test_workspace_checkpoints_cli import Drill

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


def _ended_during_the_look(drill: Drill, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The look at the lock ends the run first (once), as a process finishing its turn would."""
    looks: list[int] = []
    real: Callable[[object], bool] = session_rows.nobody_owns

    def look(data_dir: object) -> bool:
        if not looks:
            drill.plan()
        looks.append(1)
        return real(data_dir)

    monkeypatch.setattr(session_rows, "nobody_owns", look)
    from app.commands import sessions_cmd

    monkeypatch.setattr(sessions_cmd, "nobody_owns", look)
    return looks


@pytest.mark.parametrize("command", ["timeline", "sessions", "doctor"])
def test_a_run_that_ends_while_it_is_read_is_not_said_to_await_repair(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
) -> None:
    drill = Drill(tmp_path)
    drill.run("P8")
    session = drill.session
    for name, value in drill.env.items():
        monkeypatch.setenv(name, value)
    looks = _ended_during_the_look(drill, monkeypatch)
    argv = {"timeline": ["timeline", session, "--json"], "sessions": ["sessions", "--json"]}
    code = cli.main(["--data-dir", str(drill.data), *argv.get(command, ["doctor", "--json"])])
    document = json.loads(capsys.readouterr().out)
    assert looks, "the lock was looked at: the run was read as still marked running"
    assert code == 0
    if command == "timeline":
        assert "awaitingRepair" not in document, document
    elif command == "sessions":
        [row] = document["sessions"]
        assert "awaitingRepair" not in row, row
    else:
        assert document["notes"] == [], document["notes"]
