"""The real ``maka ledger timeline`` and ``maka timeline`` commands.

The example ledgers kept in ``tests/data/timeline`` give exactly their golden JSON; the text
form groups a tool call's facts and pins the plan's reasons under their rows; a stored
session reads the same beside a process that owns the data directory, and is never written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

DATA = Path(__file__).resolve().parents[1] / "data" / "timeline"
FOLDERS = sorted(path for path in DATA.iterdir() if (path / "timeline.json").is_file())


def _maka() -> list[str]:
    script = Path(sys.executable).with_name("maka")
    return [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]


def _run(
    args: Sequence[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    full.pop("MAKA_FAILPOINT", None)
    return subprocess.run(
        [*_maka(), *args],
        check=False,
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_golden_files_cover_every_kept_example() -> None:
    assert [path.name for path in FOLDERS] == [
        "g01-before-function-call",
        "g02-after-function-call",
        "g03-after-function-response",
        "g04-after-terminal-event",
        "x02-example-ledger-plan",
        "x04-example-parked-bundle-plan",
    ]


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda path: path.name)
def test_the_example_ledger_gives_its_golden_timeline(folder: Path) -> None:
    done = _run(["ledger", "timeline", "ledger.jsonl", "--json"], folder)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    golden = json.loads((folder / "timeline.json").read_text(encoding="utf-8"))
    assert json.loads(done.stdout) == golden


def test_the_parked_write_reads_as_one_parked_row_with_its_reason_under_it() -> None:
    folder = DATA / "x04-example-parked-bundle-plan"
    done = _run(["ledger", "timeline", "ledger.jsonl"], folder)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Safe resume: blocked (reasons: dangling_tool_state)"
    row = next(index for index, line in enumerate(lines) if "Write: parked" in line)
    assert "\033[" not in done.stdout  # not a terminal: no colour
    assert lines[row + 1].strip().startswith("[warn] tool_recovery_parked: ")
    facts = [line.split()[1] for line in lines[row + 2 : row + 6]]
    assert facts == ["tool_call", "tool_dispatch", "recovery", "recovery"]


def test_only_problems_keeps_the_parked_call_and_the_failed_ending() -> None:
    folder = DATA / "x04-example-parked-bundle-plan"
    done = _run(["ledger", "timeline", "ledger.jsonl", "--json", "--only-problems"], folder)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["runs"][0]["rows"]
    assert [(row["kind"], row["status"]) for row in rows] == [
        ("tool", "parked"),
        ("run_end", "failed"),
    ]


def test_an_undecodable_line_is_refused_naming_the_line(tmp_path: Path) -> None:
    ledger = tmp_path / "bad.jsonl"
    good = (DATA / "x02-example-ledger-plan" / "ledger.jsonl").read_bytes()
    ledger.write_bytes(good + b"{not json\n")
    done = _run(["ledger", "timeline", str(ledger), "--json"], tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "line 6" in done.stderr
    assert json.loads(done.stdout)["error"]["code"]


def test_the_timeline_counts_the_replay_as_the_plan_does(tmp_path: Path) -> None:
    """A file holding every line twice: ``maka ledger plan`` and ``maka ledger timeline`` say
    the same replay count (the plan said 6 events, the timeline 3); both say it is blocked."""
    ledger = tmp_path / "twice.jsonl"
    lines = (DATA / "g03-after-function-response" / "ledger.jsonl").read_bytes()
    ledger.write_bytes(lines + lines)
    plan = _run(["ledger", "plan", str(ledger)], tmp_path)
    timeline = _run(["ledger", "timeline", str(ledger)], tmp_path)
    assert "duplicate_event_id" in plan.stdout and "duplicate_event_id" in timeline.stdout
    [planned] = [line for line in plan.stdout.splitlines() if line.startswith("high-water:")]
    count = planned.rsplit("replay: ", 1)[1].removesuffix(" events")
    assert count == "6", planned
    assert f"replaying {count} events" in timeline.stdout, timeline.stdout


def _document(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    body: dict[str, Any] = json.loads(done.stdout)
    return body


# ---- maka timeline SESSION: a stored session ------------------------------------------------


def _interrupted_session(tmp_path: Path) -> tuple[Path, Path]:
    """A session whose bash call was dispatched when the process died, recovered at the next
    start (startup recovery wrote the run's failed ending)."""
    from storage.ledger.ledger_store import open_store
    from tests.helpers.ledger_builders import DEFAULT_IDS, call_event, dispatch_event, user_text
    from tests.helpers.resume_fixtures import recover, seed_interrupted_run

    data, folder = tmp_path / "data", tmp_path / "work"
    folder.mkdir()
    store = open_store(data)
    call = call_event("call-1", tool_name="bash", event_id="evt-call")
    events = [
        user_text(marker=True),
        call,
        dispatch_event(call, recovery_mode="never_auto_retry"),
    ]
    seed_interrupted_run(store, DEFAULT_IDS, events, cwd=str(folder))
    store.close()
    store, _ = recover(data)
    store.close()
    return data, folder


def test_a_stored_session_pins_the_plans_reasons_beside_a_running_owner(tmp_path: Path) -> None:
    """The unknown outcome is pinned to the bash row; the folder that is another workspace (no
    marker of the session's) sits in the outside lane; the owner keeps its lock and the
    database is not written."""
    from storage.instance_lock import InstanceLock, LockOutcome

    data, _ = _interrupted_session(tmp_path)
    env = {"MAKA_DATA_DIR": str(data), "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
    before = (data / "runtime.sqlite").read_bytes()
    lock = InstanceLock(data)
    assert lock.acquire().outcome is LockOutcome.ACQUIRED
    try:
        document = _document(_run(["timeline", "sess-1", "--json"], tmp_path, env))
        text = _run(["timeline", "sess-1"], tmp_path, env)
    finally:
        lock.release()
    assert (data / "runtime.sqlite").read_bytes() == before
    assert document["sessionId"] == "sess-1"
    run = document["runs"][0]
    assert (run["runId"], run["status"], run["failureClass"]) == (
        "run-1",
        "failed",
        "app_restarted",
    )
    tool = run["rows"][1]
    assert (tool["kind"], tool["status"], tool["toolName"]) == ("tool", "unknown", "bash")
    assert [event["kind"] for event in tool["events"]] == ["tool_call", "tool_dispatch"]
    assert tool["reasons"] == ["pending_tool_result"]
    plan = document["plan"]
    assert plan["disposition"] == "park"
    assert "dangling_tool_state" in plan["rejectionReasons"]
    assert [pin["code"] for pin in plan["pinned"]] == ["pending_tool_result"]
    assert "workspace_identity_mismatch" in [item["code"] for item in plan["outside"]]
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    row = next(index for index, line in enumerate(lines) if "bash: outcome unknown" in line)
    assert lines[row + 1].strip().startswith("[warn] pending_tool_result: ")
    assert "outside the record:" in lines


def test_a_session_or_run_that_is_not_there_is_refused_with_its_code(tmp_path: Path) -> None:
    data, _ = _interrupted_session(tmp_path)
    env = {"MAKA_DATA_DIR": str(data)}
    missing = _run(["timeline", "nope"], tmp_path, env)
    assert missing.returncode == 2
    assert "[session_not_found]" in missing.stderr and "Traceback" not in missing.stderr
    no_run = _run(["timeline", "sess-1", "--run", "run-9", "--json"], tmp_path, env)
    assert no_run.returncode == 2
    assert json.loads(no_run.stdout)["error"]["code"] == "run_not_found"
    one = _document(
        _run(["timeline", "sess-1", "--run", "run-1", "--only-problems", "--json"], tmp_path, env)
    )
    assert [row["kind"] for row in one["runs"][0]["rows"]] == ["tool", "run_end"]


def test_a_continuation_names_the_event_its_source_stopped_at(tmp_path: Path) -> None:
    """A run killed before its tool call was dispatched, continued by Safe resume: the
    continuation sits under its source and names the source's last event it continues after
    (the high-water mark its admission recorded), in the JSON and in the text."""
    from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

    script = [
        [
            {
                "text": "Counting.",
                "toolCalls": [
                    {"id": "c1", "name": "bash", "args": {"command": "echo x >> count.txt"}}
                ],
            },
            {"text": "Counted once."},
        ]
    ]
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    env = scripted_env(write_script(tmp_path / "s.json", script), tmp_path / "r.jsonl")
    killed = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "count once"],
        data,
        env={**env, "MAKA_FAILPOINT": "P5"},
    )
    assert killed.returncode == -9, killed.stderr
    session = committed_runs(data)[0][0].session_id
    flag = {**env, "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
    resumed = maka(["resume", session, "--permission-mode", "auto"], data, env=flag)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    source_events = len(committed_runs(data)[0][1])
    timeline = {"MAKA_DATA_DIR": str(data)}
    document = _document(_run(["timeline", session, "--json"], tmp_path, timeline))
    source, continuation = document["runs"]
    assert continuation["continues"] == {"runId": source["runId"], "highWater": source_events}
    text = _run(["timeline", session], tmp_path, timeline).stdout
    assert f"(continues {source['runId']} after event {source_events})" in text


def test_only_problems_says_so_under_a_run_without_any() -> None:
    """``--only-problems`` keeps every run so the lineage reads; a run without a problem was a
    bare header with nothing under it, as if its rows had been lost."""
    folder = DATA / "x02-example-ledger-plan"
    done = _run(["ledger", "timeline", "ledger.jsonl", "--only-problems"], folder)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    headers = [index for index, line in enumerate(lines) if line.lstrip().startswith("run ")]
    assert headers, done.stdout
    for index in headers:
        under = lines[index + 1] if index + 1 < len(lines) else ""
        assert under.strip() and not under.lstrip().startswith("run "), done.stdout
