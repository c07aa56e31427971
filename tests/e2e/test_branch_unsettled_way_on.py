"""Branching after a call whose outcome is unknown, end to end with the real ``maka``.

A ``bash`` command killed after it ran (P4) leaves the run's ending with no way to continue its
history. ``maka branch --at`` that ending refused with ``branch_boundary_unsettled`` and no way
forward; it now names them: ``maka settle`` the call, then branch from the result the answer
records, or branch from the latest earlier point whose history can be continued.

Once answered, the answer's result is carried with the decision and the baseline of the folder
recorded with it, so the branch's history ends past the result's own event. The listing gave
that end (``"seq": 10``) as the point's number and the branch's timeline said "event 10" while
``maka timeline`` numbers the result's row #8 (#10 is the baseline row): the listing now gives
the row's number, and the branch's header says what its number is (where its history ends). The
history the branch carries is unchanged: up to the baseline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.maka_process import start_main
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script
from tests.helpers.user_git import user_git

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


def _points(session: str, data: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    listed = maka(["branch", session, "--json"], data, env=env)
    assert listed.returncode == 0, listed.stderr
    points: list[dict[str, Any]] = json.loads(listed.stdout)["boundaries"]
    return points


def _row_numbers(session: str, data: Path, env: dict[str, str]) -> dict[str, int]:
    """Each event's number as ``maka timeline`` shows it."""
    shown = maka(["timeline", session, "--json"], data, env=env)
    assert shown.returncode == 0, shown.stderr
    return {
        event["eventId"]: event["seq"]
        for run in json.loads(shown.stdout)["runs"]
        for row in run["rows"]
        for event in row["events"]
    }


def test_a_point_after_an_unknown_outcome_names_the_ways_on(tmp_path: Path) -> None:
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    user_git(work, "init", "-q")
    call = {"id": "b1", "name": "bash", "args": {"command": "echo x >> n.txt"}}
    count = {"text": "Counting.", "toolCalls": [call]}
    env = scripted_env(
        write_script(tmp_path / "s.json", [[count, {"text": "Counted."}]]), checkpoints=True
    )
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "count"]
    assert maka(args, data, env={**env, "MAKA_FAILPOINT": "P4"}).returncode == -9
    session = committed_runs(data)[0][0].session_id
    assert maka(["plan", session], data, env=env).returncode == 3  # repairs the run

    message, ending = _points(session, data, env)
    assert (message["kind"], message["branchable"]) == ("user_message", True)
    assert (ending["kind"], ending["branchable"], ending.get("settledAt")) == (
        "run_ending",
        False,
        None,
    )
    refused = maka(["branch", session, "--at", ending["eventId"]], data, env=env)
    assert refused.returncode == 2, refused.stderr
    said = " ".join(refused.stderr.split())
    assert "[branch_boundary_unsettled]" in said
    assert "tool call bash (b1) is indeterminate" in said
    assert "nothing was done" in said
    assert f"maka settle {session} b1 --ran (or --not-run)" in said, said
    assert f"then branch from the result your answer records (maka branch {session}" in said
    assert f"branch from {message['eventId']} instead" in said, said
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("work-branch")] == []

    # The earlier point named can be branched from.
    earlier = maka(["branch", session, "--at", message["eventId"], "--json"], data, env=env)
    assert earlier.returncode == 0, earlier.stderr

    # The way on through the answer: settle, then branch from its result.
    settled = maka(["settle", session, "b1", "--ran"], data, env=env)
    assert settled.returncode == 0, settled.stderr
    points = _points(session, data, env)
    answer = next(p for p in points if p["kind"] == "tool_result")
    rows = _row_numbers(session, data, env)
    assert answer["seq"] == rows[answer["eventId"]], (answer, rows)  # #8, as the timeline
    host = start_main(data, env, "host").wait_ready()  # the desktop's listing says the same
    try:
        assert _points(session, data, env) == points
    finally:
        host.stop()
    made = maka(["branch", session, "--at", answer["eventId"], "--json"], data, env=env)
    assert made.returncode == 0, made.stderr
    branch = json.loads(made.stdout)
    # The history it carries still ends with what was written with the answer (its baseline).
    high_water = branch["branchedFrom"]["highWater"]
    assert high_water == max(rows.values()) > answer["seq"], (high_water, rows)

    header = maka(["timeline", branch["sessionId"]], data, env=env).stdout.splitlines()[0]
    assert f"at event {answer['eventId']} " in header, header
    assert f"its history up to event {high_water})" in header, header
    assert f", event {high_water})" not in header, header
