"""A damaged record of the tool history parks Safe resume, and the real ``maka plan`` / ``maka
resume`` say what is wrong in words, with the ledger check's code and where it is, instead of
``ledger issue CODE``: a real ``maka run`` killed with SIGKILL after its tool call, its export
imported into another data directory (whose first command repairs the run), and then the saved
tool result damaged in the SQLite file behind Maka's back. (``maka import`` itself refuses such
a record, which the test checks first.)"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from app.code_text import describe
from app.park_guidance import DAMAGED_RECORD_REASON, LEDGER_DAMAGED
from storage.ledger.sqlite_connection import DATABASE_NAME
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = pytest.mark.e2e

READ = {"id": "c1", "name": "read_file", "args": {"path": "a.txt"}}


def _orphan(response: dict[str, Any]) -> None:
    """The result answers a call id no call has: an orphan response."""
    response["refs"]["toolCallId"] = response["content"]["id"] = "c9"


def _wrong_side(response: dict[str, Any]) -> None:
    """The tool's result recorded as the model's: a lane conflict."""
    response["role"] = "model"


def _canonical(event: dict[str, Any]) -> str:
    return json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _damaged_session(tmp_path: Path, damage: Any) -> tuple[Path, str, str, dict[str, str]]:
    """A data directory whose interrupted session has a damaged tool result, the session's id,
    the result's event id, and the environment to run ``maka`` in."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    script = write_script(tmp_path / "script.json", [[{"text": "Working.", "toolCalls": [READ]}]])
    env = {**scripted_env(script), "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
    origin = tmp_path / "origin"
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "go"]
    killed = maka(args, origin, env={**env, "MAKA_FAILPOINT": "P6"})
    assert killed.returncode == -9, killed.stderr  # SIGKILL after the tool's result
    session = committed_runs(origin)[0][0].session_id
    exported = tmp_path / "session.jsonl"
    done = maka(["export", session, "-o", str(exported)], origin, env=env)
    assert done.returncode == 0, done.stderr

    # The export with the damage in it does not import: the import checks the tool history.
    lines = exported.read_text(encoding="utf-8").splitlines()
    [at] = [n for n, line in enumerate(lines) if '"kind":"function_response"' in line]
    response = json.loads(lines[at])
    damage(response)
    refused = tmp_path / "refused.jsonl"
    refused.write_text("\n".join([*lines[:at], _canonical(response), *lines[at + 1 :]]) + "\n")
    rejected = maka(["import", str(refused)], tmp_path / "elsewhere", env=env)
    assert rejected.returncode != 0 and "imported" not in rejected.stdout, rejected.stdout

    data = tmp_path / "data"
    imported = maka(["import", str(exported)], data, env=env)
    assert imported.returncode == 0, imported.stderr
    first = maka(["plan", session], data, env=env)  # repairs the run at start-up
    assert first.returncode == 0 and "can continue" in first.stdout, first.stdout + first.stderr
    with closing(sqlite3.connect(data / DATABASE_NAME, isolation_level=None)) as conn:
        changed = conn.execute(
            "UPDATE runtime_events SET payload = ? WHERE event_id = ?",
            (_canonical(response).encode(), response["id"]),
        ).rowcount
    assert changed == 1
    return data, session, response["id"], env


@pytest.mark.parametrize(
    ("damage", "lines", "calls"),
    [
        (
            _orphan,
            [
                ("tool_recovery_corruption [orphan_response] (read_file c9)", "orphan_response"),
                ("tool_ledger_corruption [orphan_response] (event {event})", "orphan_response"),
            ],
            [("  read_file c9: corruption (orphan_response)", "orphan_response")],
        ),
        (
            _wrong_side,
            [
                (
                    "tool_ledger_corruption [semantic_lane_conflict] (event {event})",
                    "semantic_lane_conflict",
                )
            ],
            [],
        ),
    ],
    ids=["orphan_response", "semantic_lane_conflict"],
)
def test_plan_and_resume_say_what_is_damaged_in_words(
    tmp_path: Path, damage: Any, lines: list[tuple[str, str]], calls: list[tuple[str, str]]
) -> None:
    data, session, event, env = _damaged_session(tmp_path, damage)
    for command in ("plan", "resume"):
        shown = maka([command, session], data, env=env)
        assert shown.returncode == 3, shown.stdout + shown.stderr
        # The reason says the record is damaged, at the severity of a damaged ledger; the code
        # stays the same.
        assert f"  [error] dangling_tool_state: {DAMAGED_RECORD_REASON}" in shown.stdout
        assert "[warn]" not in shown.stdout
        assert describe("dangling_tool_state").sentence not in shown.stdout
        for head, code in lines:
            sentence = f"{describe(code).sentence} {LEDGER_DAMAGED}"
            assert f"    - {head.format(event=event)}: {sentence}" in shown.stdout, shown.stdout
        assert "ledger issue" not in shown.stdout, "a code is not a reason a person can read"
        assert "corrupt ledger facts" not in shown.stdout
        # Saying whether a call ran cannot lift a damaged record: no settle advice.
        assert "maka settle" not in shown.stdout
        assert "maka doctor lists every damaged record" in shown.stdout
        assert "backup of the data folder from before the damage" in shown.stdout
        # A new message does carry the session on (checked below); waiting for the reasons to
        # change does not.
        assert "carry on with a new message" in shown.stdout
        assert "until the reasons above change" not in shown.stdout
        assert "Traceback" not in shown.stderr
    # The tool calls list says what is wrong with a damaged call too.
    shown = maka(["plan", session], data, env=env)
    for head, code in calls:
        assert f"{head}: {describe(code).sentence} {LEDGER_DAMAGED}" in shown.stdout.splitlines()

    # The JSON keeps its fields; the ledger check's code is also a field of its own (tools and
    # the banner read that, never the message).
    parked = json.loads(maka(["plan", session, "--json"], data, env=env).stdout)
    [ledger] = [d for d in parked["diagnostics"] if d["code"] == "tool_ledger_corruption"]
    assert ledger == {
        "code": "tool_ledger_corruption",
        "message": f"generation 1: ledger issue {lines[-1][1]}",
        "eventId": event,
        "detail": {"issueCode": lines[-1][1]},
    }
    assert parked["rejectionReasons"] == ["dangling_tool_state"]
    assert len(committed_runs(data)) == 1  # nothing was started

    # maka doctor, which the advice names, says the same words at the run and the event.
    checked = maka(["doctor"], data, env=env)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    code = lines[-1][1]
    run = committed_runs(data)[0][0].run_id
    problem = f"PROBLEM [{code}] run {run} event {event}: {describe(code).sentence}"
    assert problem in checked.stdout.splitlines(), checked.stdout
    assert "tool ledger issue" not in checked.stdout

    # And the way on the advice names works: a new message carries the session on.
    more = write_script(tmp_path / "more.json", [[{"text": "unused"}], [{"text": "Carrying on."}]])
    carried = maka(
        ["run", "--session", session, "--permission-mode", "auto", "go on"],
        data,
        env={**env, **scripted_env(more)},
    )
    assert carried.returncode == 0, carried.stdout + carried.stderr
    assert "Carrying on." in carried.stdout
