"""A park on changed files still offers the user's two ways forward after a restart (the real
main process): the standing verdict of an earlier start keeps the workspace options, so the
banner shows "Continue in a restored copy…" and "Continue with my current files" again instead
of only "Try again"."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import MessageKind, ResumeLatestRequest, SessionsListRequest
from tests.helpers.crashed_session import FLAG, crashed_run, main_started
from tests.helpers.maka_process import MainProcess, start_main
from tests.helpers.maka_run import committed_runs
from tests.helpers.wire_client import WireClient

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]

WAIT_MS = 30_000


def _standing_parks(qtbot: QtBot, main: MainProcess) -> list[dict[str, Any]]:
    client = WireClient(main.socket_name)
    client.hello(main.token)
    client.send(SessionsListRequest(correlation_id="list"))
    qtbot.waitUntil(lambda: client.has(MessageKind.SESSIONS_LISTED), timeout=WAIT_MS)
    return [push.model_dump() for push in client.all(MessageKind.RESUME_PARKED)]


def test_a_drift_park_keeps_its_ways_forward_after_a_restart(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    crashed = crashed_run(tmp_path, "P8", files={"a.txt": "alpha\n"})
    (crashed.work / "a.txt").write_text("edited by the user\n")

    first = main_started(crashed, qtbot, processes)
    [parked] = _standing_parks(qtbot, first)
    assert parked["rejectionReasons"] == ("workspace_drift",)
    assert parked["workspaceOptions"] == ("isolated_restore", "rebaseline")
    assert first.terminate() == 0

    second = start_main(crashed.data, {**crashed.env, **FLAG}).wait_ready()
    processes.append(second)
    [standing] = _standing_parks(qtbot, second)
    assert standing["rejectionReasons"] == ("workspace_drift",)
    assert standing["workspaceOptions"] == ("isolated_restore", "rebaseline")
    assert second.terminate() == 0


def _parked_then_stopped(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> tuple[Path, Path, dict[str, str]]:
    """A run killed at P8, a.txt edited, a first start parked on the drift, then closed."""
    crashed = crashed_run(tmp_path, "P8", files={"a.txt": "alpha\n"})
    (crashed.work / "a.txt").write_text("edited by the user\n")
    first = main_started(crashed, qtbot, processes)
    [parked] = _standing_parks(qtbot, first)
    paths = [p["path"] for d in parked["diagnostics"] for p in d["changedPaths"]]
    assert paths == ["a.txt"]
    assert first.terminate() == 0
    return crashed.data, crashed.work, {**crashed.env, **FLAG}


def test_files_changed_back_while_closed_are_checked_again_at_start(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    data, work, env = _parked_then_stopped(tmp_path, qtbot, processes)
    (work / "a.txt").write_text("alpha\n")  # back to the snapshot while Maka was closed

    second = start_main(data, env).wait_ready()
    processes.append(second)
    assert _standing_parks(qtbot, second) == []  # no stale drift park is shown
    # Safe resume is offered as usual, and continues.
    session_id = committed_runs(data)[0][0].session_id
    client = WireClient(second.socket_name)
    client.hello(second.token)
    client.send(ResumeLatestRequest(correlation_id="r", session_id=session_id))
    qtbot.waitUntil(lambda: client.has(MessageKind.RESUME_STARTED), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: len(committed_runs(data)) == 2, timeout=WAIT_MS)
    assert second.terminate() == 0


def test_files_changed_differently_while_closed_are_listed_as_they_are_now(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    data, work, env = _parked_then_stopped(tmp_path, qtbot, processes)
    (work / "a.txt").write_text("alpha\n")
    (work / "b.txt").write_text("new while closed\n")
    (work / "n.txt").unlink()

    second = start_main(data, env).wait_ready()
    processes.append(second)
    [standing] = _standing_parks(qtbot, second)
    assert standing["rejectionReasons"] == ("workspace_drift",)
    assert standing["workspaceOptions"] == ("isolated_restore", "rebaseline")
    changed = [(p["path"], p["change"]) for d in standing["diagnostics"] for p in d["changedPaths"]]
    assert changed == [("b.txt", "added"), ("n.txt", "deleted")]
    assert len(committed_runs(data)) == 1
    assert second.terminate() == 0
