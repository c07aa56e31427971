"""Safe resume end to end: a real ``maka run`` killed at a failpoint, then ``maka plan`` /
``maka resume`` (scripted provider, real tools, real store)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.maka_run import RunResult, committed_runs, maka, scripted_env, write_script

pytestmark = pytest.mark.e2e

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
GIT = pytest.mark.skipif(shutil.which("git") is None, reason="git")
SCRIPT = [
    [
        {
            "text": "Counting.",
            "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "echo x >> count.txt"}}],
        },
        {"text": "Counted once."},
    ]
]


# The drill matrix: the key drills also run with workspace checkpoints on (a folder where Git
# is found; docs/design/workspace.md section 3), where a bash call's result committed without the
# snapshot after it is the one window that still parks (workspace_checkpoint_stale).
MATRIX = pytest.mark.parametrize(
    "checkpoints",
    [False, pytest.param(True, marks=GIT)],
    ids=["checkpoints-off", "checkpoints-on"],
)


class Drill:
    """One session in a temporary data directory, driven through the real command."""

    def __init__(self, tmp_path: Path, *, checkpoints: bool = False) -> None:
        self.data = tmp_path / "data"
        self.work = tmp_path / "work"
        self.work.mkdir()
        self.record = tmp_path / "requests.jsonl"
        script = write_script(tmp_path / "script.json", SCRIPT)
        self.env = scripted_env(script, self.record, checkpoints=checkpoints)

    def run(self, failpoint: str | None, mode: str = "auto", stdin: str = "") -> RunResult:
        env = dict(self.env)
        if failpoint:
            env["MAKA_FAILPOINT"] = failpoint
        args = ["run", "--cwd", str(self.work), "--permission-mode", mode, "count once"]
        return maka(args, self.data, env=env, stdin=stdin)

    @property
    def session(self) -> str:
        return committed_runs(self.data)[0][0].session_id

    def resume(self, *extra: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
        result = maka(
            ["resume", self.session, "--json", "--permission-mode", "auto", *extra],
            self.data,
            env={**self.env, **FLAG, **(env or {})},
        )
        assert result.stdout.strip(), result.stderr
        return result.returncode, json.loads(result.stdout)

    def count(self) -> int:
        path = self.work / "count.txt"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.record.read_text().splitlines()]


@MATRIX
@pytest.mark.parametrize("failpoint", ["P5", "P6", "P7", "P8", "P9"])
def test_a_run_killed_after_its_tool_result_resumes_as_a_new_run(
    tmp_path: Path, failpoint: str, checkpoints: bool
) -> None:
    drill = Drill(tmp_path, checkpoints=checkpoints)
    assert drill.run(failpoint).returncode == -9
    assert drill.count() == 1
    code, body = drill.resume()
    if checkpoints and failpoint in ("P5", "P6", "P7"):
        # The bash call's result committed, the snapshot after it never taken: what the
        # command changed is not proven, so this one window parks.
        assert code == 3
        assert body["rejectionReasons"] == ["workspace_checkpoint_stale"]
        assert drill.count() == 1
        return
    if checkpoints and failpoint == "P8":
        assert "workspace_verified" in [d["code"] for d in body["diagnostics"]]
    if failpoint == "P9":
        # the run's ending was committed before the crash: nothing was interrupted
        assert code == 3
        assert body["rejectionReasons"] == ["resume_candidate_missing"]
        return
    assert code == 0, body
    assert body["started"] is True and body["status"] == "completed"
    assert drill.count() == 1  # the completed tool never ran again
    runs = committed_runs(drill.data)
    source, target = runs[0], runs[-1]
    assert source[0].failure_class == "app_restarted"
    assert target[0].continuation_source is not None
    assert target[0].continuation_source["sourceRunId"] == source[0].run_id
    assert "continuationStart" in target[1][0]["actions"]
    assert not any(event["role"] == "user" for event in target[1])
    last_request = drill.requests()[-1]
    users = [item for item in last_request["history"] if item["type"] == "user"]
    assert [item["text"] for item in users] == ["count once"]  # no duplicated user message
    assert [item["type"] for item in last_request["history"]][-2:] == ["tool_call", "tool_result"]
    again, body = drill.resume()
    assert again == 3
    assert body["rejectionReasons"] == ["continuation_already_exists"]


@MATRIX
@pytest.mark.parametrize("failpoint", ["P2", "P3", "P4"])
def test_a_bash_call_interrupted_after_dispatch_parks(
    tmp_path: Path, failpoint: str, checkpoints: bool
) -> None:
    drill = Drill(tmp_path, checkpoints=checkpoints)
    assert drill.run(failpoint).returncode == -9
    code, body = drill.resume()
    assert code == 3
    # With checkpoints on, the unsettled command also leaves the snapshot stale.
    stale = ["workspace_checkpoint_stale"] if checkpoints else []
    assert body["rejectionReasons"] == ["dangling_tool_state", *stale]
    assert any(d.get("toolCallId") == "c1" for d in body["diagnostics"])
    assert drill.count() == (1 if failpoint == "P4" else 0)  # never retried


def test_after_a_park_the_user_learns_what_to_do_and_what_is_unsettled(tmp_path: Path) -> None:
    """The text forms: a parked resume says how to carry on; the next turn in the session tells
    the user (not only the model) which earlier call has an unknown outcome."""
    drill = Drill(tmp_path)
    assert drill.run("P4").returncode == -9
    parked = maka(
        ["resume", drill.session, "--permission-mode", "auto"],
        drill.data,
        env={**drill.env, **FLAG},
    )
    assert parked.returncode == 3
    assert f"maka run --session {drill.session} MESSAGE" in parked.stdout
    turn = maka(
        ["run", "--session", drill.session, "--permission-mode", "auto", "count once"],
        drill.data,
        env=drill.env,
    )
    notes = [line for line in turn.stderr.splitlines() if line.startswith("note: ")]
    auto_mode = [line for line in notes if "--permission-mode auto" in line]
    notes = [line for line in notes if line not in auto_mode]
    assert len(auto_mode) == 1 and len(notes) == 1, turn.stderr
    assert "interrupted while calling bash" in notes[0] and "outcome is unknown" in notes[0]


@MATRIX
@pytest.mark.parametrize(("failpoint", "mode", "stdin"), [("P0", "auto", ""), ("P1", "ask", "y\n")])
def test_an_undispatched_call_is_trimmed_and_runs_once_after_resume(
    tmp_path: Path, failpoint: str, mode: str, stdin: str, checkpoints: bool
) -> None:
    drill = Drill(tmp_path, checkpoints=checkpoints)
    assert drill.run(failpoint, mode, stdin).returncode == -9
    assert drill.count() == 0
    code, body = drill.resume()
    assert code == 0, body
    assert drill.count() == 1
    source_events = committed_runs(drill.data)[0][1]
    replayed = body["continuation"]["replayRuntimeEventIds"]
    calls = [
        event["id"]
        for event in source_events
        if "content" in event and event["content"]["kind"] == "function_call"
    ]
    assert not set(calls) & set(replayed)


def test_an_interrupted_continuation_is_repaired_and_resumed_again(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    assert drill.run("P6").returncode == -9
    result = maka(
        ["resume", drill.session, "--permission-mode", "auto"],
        drill.data,
        env={**drill.env, **FLAG, "MAKA_FAILPOINT": "after_continuation_admission_committed"},
    )
    assert result.returncode == -9
    runs = committed_runs(drill.data)
    assert len(runs) == 2 and runs[1][0].status == "created"
    code, body = drill.resume()  # the next start repairs the continuation, then resumes it
    assert code == 0, body
    assert body["continuation"]["lineageRunIds"] == [runs[0][0].run_id, runs[1][0].run_id]
    runs = committed_runs(drill.data)
    assert runs[1][0].failure_class == "app_restarted"
    assert runs[2][0].continuation_source is not None
    assert runs[2][0].continuation_source["sourceRunId"] == runs[1][0].run_id
    assert drill.count() == 1


def test_a_crash_while_the_continuation_run_is_created_leaves_nothing(tmp_path: Path) -> None:
    """P11 (continuation run creation): killed inside the admission transaction, with the claim,
    the continuation run and its start event inserted but not committed. Nothing of them may
    stay; the next resume continues once, and the command still ran once."""
    drill = Drill(tmp_path)
    assert drill.run("P6").returncode == -9
    before = committed_runs(drill.data)
    result = maka(
        ["resume", drill.session, "--permission-mode", "auto"],
        drill.data,
        env={**drill.env, **FLAG, "MAKA_FAILPOINT": "P11"},
    )
    assert result.returncode == -9
    runs = committed_runs(drill.data)
    assert [run.run_id for run, _ in runs] == [run.run_id for run, _ in before]
    code, body = drill.resume()
    assert code == 0, body
    runs = committed_runs(drill.data)
    assert len(runs) == 2 and runs[1][0].continuation_source is not None
    assert drill.count() == 1


def test_plan_explains_without_executing(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.run("P6")
    off = maka(["plan", drill.session], drill.data, env=drill.env)
    assert off.returncode == 3
    assert "resume_feature_disabled" in off.stdout
    on = maka(["plan", drill.session, "--json"], drill.data, env={**drill.env, **FLAG})
    assert on.returncode == 0, on.stderr
    assert json.loads(on.stdout)["disposition"] == "continue"
    assert len(committed_runs(drill.data)) == 1
    missing = maka(["plan", "session-nope"], drill.data, env={**drill.env, **FLAG})
    assert missing.returncode == 2
    assert "session_not_found" in missing.stderr and "Traceback" not in missing.stderr


def test_resume_in_the_tui_uses_the_same_seam(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    assert drill.run("P6").returncode == -9
    result = maka(
        ["tui", "--session", drill.session, "--permission-mode", "auto"],
        drill.data,
        env={**drill.env, **FLAG},
        stdin="/resume\n/resume\n/quit\n",
    )
    assert result.returncode == 0, result.stderr
    assert "Counted once." in result.stdout
    assert "continuation_already_exists" in result.stdout  # the second /resume
    assert drill.count() == 1
    runs = committed_runs(drill.data)
    assert len(runs) == 2 and runs[1][0].continuation_source is not None


def test_a_continuation_killed_after_its_ending_is_not_resumed_twice(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    assert drill.run("P6").returncode == -9
    killed = maka(
        ["resume", drill.session, "--permission-mode", "auto"],
        drill.data,
        env={**drill.env, **FLAG, "MAKA_FAILPOINT": "after_continuation_terminal_committed"},
    )
    assert killed.returncode == -9
    code, body = drill.resume()
    assert code == 3
    assert body["rejectionReasons"] == ["continuation_already_exists"]
    runs = committed_runs(drill.data)
    assert [run[0].status for run in runs] == ["failed", "completed"]
    assert drill.count() == 1


def test_sessions_marks_a_crashed_run_until_the_next_start_repairs_it(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    assert drill.run("P6").returncode == -9
    listed = json.loads(maka(["sessions", "--json"], drill.data).stdout)["sessions"][0]
    assert listed["lastRunStatus"] == "running"
    assert listed["interrupted"] is True and listed["awaitingRepair"] is True
    assert maka(["plan", drill.session], drill.data, env=drill.env).returncode == 3  # repairs
    listed = json.loads(maka(["sessions", "--json"], drill.data).stdout)["sessions"][0]
    assert listed["lastRunStatus"] == "failed" and listed["failureClass"] == "app_restarted"
    assert listed["interrupted"] is True and "awaitingRepair" not in listed


@pytest.mark.parametrize("flag", ["0", None])
def test_the_tui_does_not_offer_resume_when_safe_resume_is_off(
    tmp_path: Path, flag: str | None
) -> None:
    """Off by the variable or by the (never set) setting: /resume would only park with
    resume_feature_disabled, so opening the session says Safe resume is off instead."""
    drill = Drill(tmp_path)
    assert drill.run("P6").returncode == -9
    env = dict(drill.env)
    if flag is not None:
        env["MAKA_RUNTIME_SAFE_BOUNDARY_RESUME"] = flag
    opened = maka(
        ["tui", "--session", drill.session, "--permission-mode", "auto"],
        drill.data,
        env=env,
        stdin="/quit\n",
    )
    assert opened.returncode == 0, opened.stderr
    line = opened.stdout.split("This session was interrupted", 1)[1].split("\n")[0]
    assert "Safe resume is turned off" in line
    assert "type /resume" not in line


def test_the_tui_says_a_session_was_interrupted_and_marks_the_continuation(
    tmp_path: Path,
) -> None:
    drill = Drill(tmp_path)
    assert drill.run("P6").returncode == -9
    opened = maka(
        ["tui", "--session", drill.session, "--permission-mode", "auto"],
        drill.data,
        env={**drill.env, **FLAG},
        stdin="/quit\n",
    )
    assert opened.returncode == 0, opened.stderr
    assert "This session was interrupted" in opened.stdout
    assert "/resume" in opened.stdout.split("This session was interrupted", 1)[1].split("\n")[0]
    resumed = maka(
        ["tui", "--session", drill.session, "--permission-mode", "auto"],
        drill.data,
        env={**drill.env, **FLAG},
        stdin="/resume\n/transcript\n/quit\n",
    )
    assert resumed.returncode == 0, resumed.stderr
    transcript = resumed.stdout.split("continuation run", 1)[1]
    marker = "--- Continued with Safe resume after Maka stopped ---"
    assert marker in transcript
    # the marker stands between the interrupted run and the continuation's reply
    assert transcript.index("you> count once") < transcript.index(marker)
    assert transcript.index(marker) < transcript.index("Counted once.")
    again = maka(
        ["tui", "--session", drill.session, "--permission-mode", "auto"],
        drill.data,
        env={**drill.env, **FLAG},
        stdin="/quit\n",
    )
    assert "This session was interrupted" not in again.stdout


def test_plan_on_a_finished_turn_says_there_is_nothing_to_check(tmp_path: Path) -> None:
    """The latest turn completed: ``maka plan`` parks (nothing to resume) and says to carry on
    with a new message, without asking to check what "interrupted calls" changed."""
    drill = Drill(tmp_path)
    assert drill.run(None).returncode == 0
    plan = maka(["plan", drill.session], drill.data, env={**drill.env, **FLAG})
    assert plan.returncode == 3, plan.stderr
    assert "resume_candidate_missing" in plan.stdout
    assert plan.stdout.startswith(f"Nothing to resume in session {drill.session}:")
    assert "parked" not in plan.stdout
    assert "interrupted calls" not in plan.stdout
    assert f"What next: carry on with a new message (maka run --session {drill.session}" in (
        plan.stdout
    )
    assert drill.count() == 1


@pytest.mark.parametrize("command", ["tui", "run"])
def test_the_notice_for_the_model_is_quoted_not_said_to_the_user(
    tmp_path: Path, command: str
) -> None:
    """A call killed inside its command has an unknown outcome; the next turn's model is told
    "Do not retry it blindly…". The terminal says that is what the model is told, instead of
    printing the model's instructions as if they were the user's."""
    drill = Drill(tmp_path)
    assert drill.run("P3").returncode == -9
    args = (
        ["tui", "--session", drill.session, "--permission-mode", "auto"]
        if command == "tui"
        else ["run", "--session", drill.session, "--permission-mode", "auto", "hello"]
    )
    result = maka(args, drill.data, env=drill.env, stdin="/quit\n")
    lines = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    told = [line for line in lines if "Do not retry it blindly" in line]
    assert told, result.stderr
    assert all(
        line.startswith("note: with your next message the model is told: “An earlier turn")
        for line in told
    ), told


def test_plan_after_the_interruption_was_resumed_says_there_is_nothing_to_resume(
    tmp_path: Path,
) -> None:
    """Once Safe resume continued the interrupted turn, ``maka plan`` says there is nothing
    to resume (it said Safe resume "is parked")."""
    drill = Drill(tmp_path)
    drill.run("P5")
    code, body = drill.resume()
    assert code == 0, body
    plan = maka(["plan", drill.session], drill.data, env={**drill.env, **FLAG})
    assert plan.returncode == 3, plan.stderr
    assert plan.stdout.startswith(f"Nothing to resume in session {drill.session}:"), plan.stdout
    assert "continuation_already_exists" in plan.stdout and "parked" not in plan.stdout
    assert drill.count() == 1
