"""Safe resume with checkpoints on, after the everyday crashes (docs/design/workspace.md section 3,
"the expected tree"): the real ``maka run`` killed with a real SIGKILL at a failpoint, in a Git
repository holding uncommitted work, then the real ``maka plan`` / ``maka resume`` (scripted
provider, real tools, real store, the real ``git``).

A write the ledger proves (its T2 committed, or the reconciler finalized it) rolls the snapshot
taken before it forward, so the resume verifies instead of parking on a stale snapshot; a change
of anyone else's still parks. A run killed before its first snapshot with nothing written is not a
park at all."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from runtime.ledger.event_model import RuntimeEvent
from tests.helpers.maka_process import maka_executable
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script
from tests.helpers.user_git import user_git

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
WRITE = {"id": "c1", "name": "write_file", "args": {"path": "a.txt", "content": "one\n"}}
EDIT = {
    "id": "c2",
    "name": "edit_file",
    "args": {"path": "notes.txt", "old_string": "draft", "new_string": "final"},
}


class Drill:
    """A Git repository with a commit and uncommitted work (an edited tracked file, a new
    untracked one), and a scripted session working in it."""

    def __init__(self, tmp_path: Path, steps: list[dict[str, Any]]) -> None:
        self.data = tmp_path / "data"
        self.work = tmp_path / "work"
        self.work.mkdir(parents=True)
        (self.work / "a.txt").write_text("alpha\n")
        (self.work / "notes.txt").write_text("a draft\n")
        user_git(self.work, "init", "-q")
        user_git(self.work, "add", ".")
        user_git(self.work, "commit", "-q", "-m", "start")
        (self.work / "notes.txt").write_text("a draft, edited and not committed\n")
        (self.work / "untracked.txt").write_text("not in Git\n")
        self.record = tmp_path / "requests.jsonl"
        script = write_script(tmp_path / "script.json", [steps])
        self.env = {**scripted_env(script, self.record, checkpoints=True), **FLAG}

    def run(self, failpoint: str) -> None:
        args = ["run", "--cwd", str(self.work), "--permission-mode", "auto", "do the work"]
        result = maka(args, self.data, env={**self.env, "MAKA_FAILPOINT": failpoint})
        assert result.returncode == -9, result.stderr
        self.record.unlink(missing_ok=True)

    @property
    def session(self) -> str:
        return committed_runs(self.data)[0][0].session_id

    def plan(self) -> dict[str, Any]:
        result = maka(["plan", self.session, "--json"], self.data, env=self.env)
        assert result.stdout.strip(), result.stderr
        body: dict[str, Any] = json.loads(result.stdout)
        return body

    def resume(self) -> tuple[int, dict[str, Any]]:
        args = ["resume", self.session, "--json", "--permission-mode", "auto"]
        result = maka(args, self.data, env=self.env)
        assert result.stdout.strip(), result.stderr
        return result.returncode, json.loads(result.stdout)

    def requests(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]


def _codes(body: dict[str, Any]) -> list[str]:
    return [d["code"] for d in body["diagnostics"]]


def _diagnostic(body: dict[str, Any], code: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [d for d in body["diagnostics"] if d["code"] == code]
    assert found, body["diagnostics"]
    return found[0]


def _snapshots(events: Sequence[RuntimeEvent]) -> int:
    return sum(1 for e in events if "workspaceCheckpoint" in (e.get("actions") or {}))


@pytest.mark.parametrize("failpoint", ["P5", "P6", "P7"])
def test_a_completed_write_killed_before_its_snapshot_resumes_verified(
    tmp_path: Path, failpoint: str
) -> None:
    drill = Drill(tmp_path, [{"text": "Writing.", "toolCalls": [WRITE]}, {"text": "Done."}])
    drill.run(failpoint)  # T2 committed; the snapshot after it never taken
    source = committed_runs(drill.data)[0][1]
    assert _snapshots(source) == 1  # only the one taken at the run's start
    assert (drill.work / "a.txt").read_text() == "one\n"

    planned = drill.plan()
    assert planned["disposition"] == "continue", planned
    assert "workspace_checkpoint_stale" not in _codes(planned)
    verified = _diagnostic(planned, "workspace_verified")
    assert verified["detail"]["rolledForward"] == [
        {"toolName": "write_file", "toolCallId": "c1", "how": "completed", "path": "a.txt"}
    ]
    assert "the write_file call c1 (a.txt)" in verified["message"]

    code, body = drill.resume()
    assert code == 0, body
    assert body["status"] == "completed"
    assert "workspace_verified" in _codes(body)
    requests = drill.requests()
    assert len(requests) == 1  # the model is asked once more, after the write's result
    history = [item["type"] for item in requests[0]["history"]]
    assert history == ["user", "assistant", "tool_call", "tool_result"]
    assert (drill.work / "a.txt").read_text() == "one\n"  # never written twice
    runs = committed_runs(drill.data)
    assert len(runs) == 2
    assert _snapshots(runs[1][1]) >= 1  # the continuation took its own


def test_a_proven_write_changed_again_by_someone_else_parks_with_drift(tmp_path: Path) -> None:
    drill = Drill(tmp_path, [{"text": "Writing.", "toolCalls": [WRITE]}, {"text": "Done."}])
    drill.run("P6")
    (drill.work / "a.txt").write_text("changed by the user after the crash\n")
    (drill.work / "untracked.txt").write_text("also changed\n")
    planned = drill.plan()
    assert planned["rejectionReasons"] == ["workspace_drift"]
    drift = _diagnostic(planned, "workspace_drift")
    assert drift["detail"]["changedPaths"] == [
        {"path": "a.txt", "change": "modified"},
        {"path": "untracked.txt", "change": "modified"},
    ]
    assert "the write_file call c1 (a.txt)" in drift["message"]
    code, body = drill.resume()
    assert code == 3 and body["rejectionReasons"] == ["workspace_drift"]
    assert drill.requests() == []


def test_a_rebaseline_tells_the_model_the_files_the_plan_names_not_its_own_write(
    tmp_path: Path,
) -> None:
    """A proven write, then a file the user added after the crash: the plan's drift is rolled
    forward over the write (one file changed), and the rebaseline tells the model that same
    file, not its own write as a change (the counts once differed by the write)."""
    drill = Drill(tmp_path, [{"text": "Writing.", "toolCalls": [WRITE]}, {"text": "Done."}])
    drill.run("P6")
    (drill.work / "added.txt").write_text("the user's\n")
    planned = drill.plan()
    drift = _diagnostic(planned, "workspace_drift")
    assert drift["detail"]["changedPaths"] == [{"path": "added.txt", "change": "added"}]
    args = ["resume", drill.session, "--json", "--permission-mode", "auto", "--rebaseline"]
    result = maka(args, drill.data, env=drill.env)
    assert result.returncode == 0, result.stdout + result.stderr
    baselines = [
        event["actions"]["workspaceBaseline"]
        for _header, events in committed_runs(drill.data)
        for event in events
        if "workspaceBaseline" in (event.get("actions") or {})
    ]
    assert [b["changedPaths"] for b in baselines] == [[{"path": "added.txt", "change": "added"}]]
    [request] = drill.requests()
    told = json.dumps(request["history"])
    assert "added.txt (added)" in told and "- a.txt (" not in told, told


@pytest.mark.parametrize("excluded", [True, False])
def test_an_editors_files_the_users_excludes_file_ignores_are_no_drift(
    tmp_path: Path, excluded: bool
) -> None:
    """An editor left a swap file and an IDE folder after the crash: ignored by the user's own
    excludes file (``~/.config/git/ignore``, where such files usually are), they are nothing to
    ``git status`` and nothing to Safe resume; without that file they are drift."""
    drill = Drill(tmp_path, [{"text": "Writing.", "toolCalls": [WRITE]}, {"text": "Done."}])
    config = tmp_path / "config"
    (config / "git").mkdir(parents=True)
    if excluded:
        (config / "git" / "ignore").write_text(".*.swp\n.idea/\n")
    drill.env["XDG_CONFIG_HOME"] = str(config)
    drill.run("P6")
    (drill.work / ".notes.txt.swp").write_text("swap\n")
    (drill.work / ".idea").mkdir()
    (drill.work / ".idea" / "workspace.xml").write_text("<project/>\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["XDG_CONFIG_HOME"] = str(config)
    status = subprocess.run(
        ["git", "status", "--porcelain", "--ignored"],
        cwd=drill.work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert ("!! .notes.txt.swp" in status) == excluded  # what the user's Git says of it
    planned = drill.plan()
    if not excluded:
        drift = _diagnostic(planned, "workspace_drift")
        assert drift["detail"]["changedPaths"] == [
            {"path": ".idea/workspace.xml", "change": "added"},
            {"path": ".notes.txt.swp", "change": "added"},
        ]
        return
    assert planned["disposition"] == "continue", planned
    assert "workspace_drift" not in _codes(planned)
    code, body = drill.resume()
    assert code == 0, body
    assert body["status"] == "completed"


def test_a_write_killed_after_its_effect_is_finalized_and_resumes(tmp_path: Path) -> None:
    drill = Drill(tmp_path, [{"text": "Writing.", "toolCalls": [WRITE]}, {"text": "Done."}])
    drill.run("P4")  # written, its outcome not recorded
    planned = drill.plan()  # startup recovery's reconciler finalizes the write first
    assert planned["disposition"] == "continue", planned
    verified = _diagnostic(planned, "workspace_verified")
    assert verified["detail"]["rolledForward"] == [
        {"toolName": "write_file", "toolCallId": "c1", "how": "finalized", "path": "a.txt"}
    ]
    code, body = drill.resume()
    assert code == 0, body
    assert body["status"] == "completed"
    assert len(drill.requests()) == 1
    assert (drill.work / "a.txt").read_text() == "one\n"


def test_an_edit_in_a_later_turn_rolls_forward_and_resumes(tmp_path: Path) -> None:
    drill = Drill(tmp_path, [])
    turns = [
        [{"text": "Writing.", "toolCalls": [WRITE]}, {"text": "Written."}],
        [{"text": "Editing.", "toolCalls": [EDIT]}, {"text": "Edited."}],
    ]
    drill.env["MAKA_SCRIPT_FILE"] = str(write_script(tmp_path / "turns.json", turns))
    args = ["run", "--cwd", str(drill.work), "--permission-mode", "auto", "write it"]
    first = maka(args, drill.data, env=drill.env)
    assert first.returncode == 0, first.stderr
    args = ["run", "--session", drill.session, "--permission-mode", "auto", "now edit it"]
    killed = maka(args, drill.data, env={**drill.env, "MAKA_FAILPOINT": "P6"})
    assert killed.returncode == -9, killed.stderr
    drill.record.unlink(missing_ok=True)
    assert (drill.work / "notes.txt").read_text() == "a final, edited and not committed\n"

    planned = drill.plan()
    assert planned["disposition"] == "continue", planned
    verified = _diagnostic(planned, "workspace_verified")
    assert verified["detail"]["rolledForward"] == [
        {"toolName": "edit_file", "toolCallId": "c2", "how": "completed", "path": "notes.txt"}
    ]
    code, body = drill.resume()
    assert code == 0, body
    assert body["status"] == "completed"
    assert len(drill.requests()) == 1


def test_a_bash_call_killed_before_its_snapshot_still_parks_stale(tmp_path: Path) -> None:
    bash = {"id": "c1", "name": "bash", "args": {"command": "echo x >> count.txt"}}
    drill = Drill(tmp_path, [{"text": "Counting.", "toolCalls": [bash]}, {"text": "Done."}])
    drill.run("P6")
    planned = drill.plan()
    assert planned["rejectionReasons"] == ["workspace_checkpoint_stale"]
    stale = _diagnostic(planned, "workspace_checkpoint_stale")
    assert stale["message"].startswith('the command "echo x >> count.txt" may have changed')


def test_a_run_killed_before_its_first_snapshot_with_nothing_written_continues(
    tmp_path: Path,
) -> None:
    drill = Drill(tmp_path, [{"text": "Writing.", "toolCalls": [WRITE]}, {"text": "Done."}])
    # The first snapshot's Git objects and ref exist, its fact never committed; no model call.
    drill.run("after_checkpoint_artifact")
    source = committed_runs(drill.data)[0][1]
    assert _snapshots(source) == 0

    planned = drill.plan()
    assert planned["disposition"] == "continue", planned
    assert "workspace_checkpoint_stale" not in _codes(planned)
    unavailable = _diagnostic(planned, "workspace_checkpoint_unavailable")
    assert "nothing the agent ran could have changed files" in unavailable["message"]
    # A snapshot was captured (its ref is there: maka doctor lists it as an orphan), but never
    # recorded: the plan and the timeline say "recorded", not "taken".
    assert unavailable["message"].startswith("no snapshot was recorded before the stop;")
    doctor = maka(["doctor", "--json"], drill.data, env=drill.env)
    assert json.loads(doctor.stdout)["workspaceCheckpoints"]["orphans"], doctor.stdout
    timeline = maka(["timeline", drill.session], drill.data, env=drill.env).stdout
    assert "the run stopped before its first one was recorded, with nothing written" in timeline
    assert "taken" not in timeline, timeline

    code, body = drill.resume()
    assert code == 0, body
    assert body["status"] == "completed"
    runs = committed_runs(drill.data)
    assert len(runs) == 2
    assert _snapshots(runs[1][1]) >= 1  # the continuation captured the first snapshot
    assert (drill.work / "a.txt").read_text() == "one\n"  # the write ran once, in it


def test_two_processes_resuming_at_once_make_exactly_one_continuation(tmp_path: Path) -> None:
    for round_index in range(3):
        folder = tmp_path / f"round-{round_index}"
        drill = Drill(folder, [{"text": "Writing.", "toolCalls": [WRITE]}, {"text": "Done."}])
        drill.run("P6")  # checkpoints on: the snapshot after the write was never taken
        assert drill.plan()["disposition"] == "continue"
        args = ["resume", drill.session, "--json", "--permission-mode", "auto"]
        environment = {**os.environ, **drill.env, "MAKA_DATA_DIR": str(drill.data)}
        environment.pop("MAKA_FAILPOINT", None)
        racers = [
            subprocess.Popen(
                [*maka_executable(), *args],
                env=environment,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        codes = [racer.wait(timeout=120) for racer in racers]
        for racer in racers:
            assert racer.stdout is not None and racer.stderr is not None
            racer.stdout.close()
            racer.stderr.close()
        runs = committed_runs(drill.data)
        assert len(runs) == 2, (codes, [r[0].run_id for r in runs])  # one continuation
        assert sorted(codes)[0] == 0 and sorted(codes)[1] != 0, codes
        assert len(drill.requests()) == 1  # the provider was called by one of them only
        assert (drill.work / "a.txt").read_text() == "one\n"


def _doctor_clean(drill: Drill) -> None:
    doctor = maka(["doctor", "--json"], drill.data, env=drill.env)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert json.loads(doctor.stdout)["ok"] is True


def test_a_write_recovery_found_not_done_is_confirmed_in_one_answer(tmp_path: Path) -> None:
    drill = Drill(tmp_path, [{"text": "Writing.", "toolCalls": [WRITE]}, {"text": "Done."}])
    drill.run("P3")  # inside the tool, the target untouched
    planned = drill.plan()  # the reconciler finds a.txt as it was and parks the call
    assert planned["rejectionReasons"] == ["dangling_tool_state"]
    text = maka(["plan", drill.session], drill.data, env=drill.env).stdout
    lines = text.splitlines()
    # One way first (confirming, which lets Safe resume go on), then the other (a new message);
    # no advice to check what the call may have changed: recovery checked the file.
    confirm = next(n for n, line in enumerate(lines) if line.startswith("What next: "))
    assert lines[confirm].startswith(
        "What next: recovery found the file of write_file c1 as it was before the write, so "
        "the write did not happen. Confirm that on the record (the model is then told so): "
        f"maka settle {drill.session} c1 --not-run [--note TEXT]. Safe resume can then "
        "continue from there."
    ), text
    assert lines[confirm + 1].startswith("Answering also takes the folder as it is now"), text
    assert lines[confirm + 2].startswith(
        f"Or carry on with a new message (maka run --session {drill.session} MESSAGE, or the "
        "desktop), and ask for that write again if you still want it"
    ), text
    assert "check what the interrupted calls may have changed" not in text
    assert "already settled" not in text
    # Before any answer, what is known is what recovery found, not that the call did not run.
    verified = _diagnostic(planned, "workspace_verified")["message"]
    assert "the write_file call c1 (recovery found a.txt as it was before the write)" in verified
    assert verified.endswith(", as the saved history records"), verified
    assert "did not run" not in verified and "proves" not in verified

    ran = maka(["settle", drill.session, "c1", "--ran"], drill.data, env=drill.env)
    assert ran.returncode == 1
    assert "[attestation_not_applicable]" in ran.stderr
    assert "only 'it did not run' can be confirmed" in ran.stderr
    assert "Traceback" not in ran.stderr
    assert drill.plan()["rejectionReasons"] == ["dangling_tool_state"]  # nothing recorded

    args = ["settle", drill.session, "c1", "--not-run", "--json", "--note", "a.txt unchanged"]
    confirmed = maka(args, drill.data, env=drill.env)
    assert confirmed.returncode == 0, confirmed.stderr
    body = json.loads(confirmed.stdout)
    assert body["attestation"] == "not_run" and body["created"] is True
    again = maka(args, drill.data, env=drill.env)
    assert again.returncode == 0 and json.loads(again.stdout)["created"] is False
    _doctor_clean(drill)

    planned = drill.plan()
    assert planned["disposition"] == "continue", planned
    rolled = _diagnostic(planned, "workspace_verified")["detail"]["rolledForward"]
    assert rolled == [{"toolName": "write_file", "toolCallId": "c1", "how": "not_run"}]
    verified = _diagnostic(planned, "workspace_verified")["message"]
    assert "the write_file call c1 (you confirmed it did not run)" in verified, verified
    code, resumed = drill.resume()
    assert code == 0, resumed
    assert resumed["status"] == "completed"
    history = drill.requests()[0]["history"]
    assert [item["type"] for item in history] == ["user", "assistant", "tool_call", "tool_result"]
    told = json.dumps(history[-1])
    assert "the write did not happen" in told and "a.txt unchanged" in told
    assert (drill.work / "a.txt").read_text() == "alpha\n"  # never written
    _doctor_clean(drill)


def test_the_tui_confirms_a_write_recovery_found_not_done(tmp_path: Path) -> None:
    drill = Drill(tmp_path, [{"text": "Writing.", "toolCalls": [WRITE]}, {"text": "Done."}])
    drill.run("P3")
    result = maka(
        ["tui", "--session", drill.session, "--permission-mode", "auto"],
        drill.data,
        env=drill.env,
        stdin="/resume\n/settle c1 ran\n/settle c1 not-run\n/resume\n/quit\n",
    )
    assert result.returncode == 0, result.stderr
    assert "say so on the record" not in result.stdout
    assert "\n  /settle c1 not-run" in result.stdout, result.stdout
    assert "not recorded [attestation_not_applicable]" in result.stdout
    assert "recorded: you confirmed that write_file c1 did not run" in result.stdout
    assert "Done." in result.stdout  # the second /resume continued
    assert (drill.work / "a.txt").read_text() == "alpha\n"


@pytest.mark.parametrize(
    "failpoint",
    [
        "bundle_after_reconcile_insert",
        "bundle_after_outcome_insert",
        "bundle_after_decision_insert",
        "attestation_after_commit",
    ],
)
def test_confirming_a_write_not_done_is_all_or_nothing(tmp_path: Path, failpoint: str) -> None:
    drill = Drill(tmp_path, [{"text": "Writing.", "toolCalls": [WRITE]}, {"text": "Done."}])
    drill.run("P3")
    assert drill.plan()["rejectionReasons"] == ["dangling_tool_state"]
    args = ["settle", drill.session, "c1", "--not-run", "--json"]
    killed = maka(args, drill.data, env={**drill.env, "MAKA_FAILPOINT": failpoint})
    assert killed.returncode == -9, killed.stderr
    _doctor_clean(drill)
    committed = failpoint == "attestation_after_commit"
    planned = drill.plan()
    assert planned["disposition"] == ("continue" if committed else "park"), planned
    again = maka(args, drill.data, env=drill.env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["created"] is not committed
    assert drill.plan()["disposition"] == "continue"
    _doctor_clean(drill)


def test_a_continuation_killed_before_its_first_snapshot_uses_the_rolled_forward_source(
    tmp_path: Path,
) -> None:
    drill = Drill(tmp_path, [{"text": "Writing.", "toolCalls": [WRITE]}, {"text": "Done."}])
    drill.run("P6")  # the write proven, its snapshot never taken
    args = ["resume", drill.session, "--json", "--permission-mode", "auto"]
    failpoint = "after_continuation_admission_committed"
    killed = maka(args, drill.data, env={**drill.env, "MAKA_FAILPOINT": failpoint})
    assert killed.returncode == -9, killed.stderr
    assert len(committed_runs(drill.data)) == 2  # admitted, no snapshot of its own
    planned = drill.plan()
    assert planned["disposition"] == "continue", planned
    verified = _diagnostic(planned, "workspace_verified")
    assert verified["detail"]["basis"] == "parent"
    assert verified["detail"]["rolledForward"] == [
        {"toolName": "write_file", "toolCallId": "c1", "how": "completed", "path": "a.txt"}
    ]
    (drill.work / "a.txt").write_text("changed by the user\n")
    assert drill.plan()["rejectionReasons"] == ["workspace_drift"]
    (drill.work / "a.txt").write_text("one\n")
    code, body = drill.resume()
    assert code == 0, body
    assert body["status"] == "completed"
    assert len(committed_runs(drill.data)) == 3
