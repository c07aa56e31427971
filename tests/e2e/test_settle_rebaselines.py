"""Settling a writing call's unknown outcome is one answer (docs/design/workspace.md section 3):
the real ``maka run`` killed with a real SIGKILL at P4 inside a ``bash`` call, in a Git
repository holding uncommitted work, checkpoints on; then the real ``maka settle`` and ``maka
resume``. The answer records the folder as it is now as the new baseline in the attestation's
transaction, so Safe resume continues (no stale snapshot), the model is told which files
changed, and the command is not run again. With checkpoints off nothing of that happens."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_resume_proven_writes import Drill, _codes
from tests.helpers.maka_process import maka_executable, start_main
from tests.helpers.maka_run import committed_runs, maka, write_script

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]

BASH = {"id": "b1", "name": "bash", "args": {"command": "echo once >> count.txt"}}
FLAG_NAME = "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME"
STEPS: list[dict[str, Any]] = [{"text": "Counting.", "toolCalls": [BASH]}, {"text": "Done."}]


def _baselines(data: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for _header, events in committed_runs(data):
        for event in events:
            actions = event.get("actions") or {}
            if set(actions) == {"workspaceBaseline"}:
                found.append(dict(actions["workspaceBaseline"]))
    return found


def _killed_in_bash(tmp_path: Path) -> Drill:
    drill = Drill(tmp_path, STEPS)
    drill.run("P4")  # the command ran, its outcome was never recorded
    assert (drill.work / "count.txt").read_text() == "once\n"
    return drill


def test_settled_ran_takes_the_folder_and_resume_continues_without_rerunning(
    tmp_path: Path,
) -> None:
    drill = _killed_in_bash(tmp_path)
    before = drill.plan()
    assert before["disposition"] != "continue"
    assert "workspace_checkpoint_stale" in before["rejectionReasons"]
    told = maka(["plan", drill.session], drill.data, env=drill.env)  # before the answer
    assert (
        "Answering also takes the folder as it is now as the new starting point; 1 file "
        "changed since the last snapshot: count.txt."
    ) in told.stdout, told.stdout
    assert "Safe resume can then continue from there." in told.stdout

    settled = maka(["settle", drill.session, "b1", "--ran"], drill.data, env=drill.env)
    assert settled.returncode == 0, settled.stderr
    assert "The folder as it is now is the new starting point" in settled.stdout
    assert "1 file changed since the last snapshot" in settled.stdout
    assert "count.txt" in settled.stdout
    assert f"Safe resume can now continue: maka resume {drill.session}" in settled.stdout
    [baseline] = _baselines(drill.data)
    assert baseline["changedPaths"] == [{"path": "count.txt", "change": "added"}]
    assert baseline["compared"] is True

    planned = drill.plan()
    assert planned["disposition"] == "continue", planned
    assert "workspace_verified" in _codes(planned)
    [decided] = planned["workspaceTransitions"]
    assert decided["text"] == (
        "Your answer took the folder as it was as the new starting point; 1 file changed since "
        "the last snapshot: count.txt"
    )

    code, body = drill.resume()
    assert code == 0, body
    assert body["status"] == "completed"
    assert "workspace_checkpoint_stale" not in _codes(body)
    assert (drill.work / "count.txt").read_text() == "once\n"  # not run a second time
    [request] = drill.requests()
    notices = [item for item in request["history"] if "count.txt" in json.dumps(item)]
    assert notices, request["history"]
    assert any("changed since the last snapshot" in json.dumps(item) for item in notices)


def test_settle_json_names_the_changed_files(tmp_path: Path) -> None:
    drill = _killed_in_bash(tmp_path)
    args = ["settle", drill.session, "b1", "--ran", "--json"]
    settled = maka(args, drill.data, env=drill.env)
    assert settled.returncode == 0, settled.stderr
    body = json.loads(settled.stdout)
    assert body["workspace"] == {"baselineRecorded": True, "changedPaths": ["count.txt"]}
    assert body["resume"]["continues"] is True


def test_with_checkpoints_off_settling_records_no_baseline(tmp_path: Path) -> None:
    drill = Drill(tmp_path, STEPS)
    drill.env["MAKA_WORKSPACE_CHECKPOINTS"] = "off"
    drill.run("P4")
    settled = maka(["settle", drill.session, "b1", "--ran"], drill.data, env=drill.env)
    assert settled.returncode == 0, settled.stderr
    assert "starting point" not in settled.stdout
    assert _baselines(drill.data) == []
    code, body = drill.resume()
    assert code == 0, body
    assert (drill.work / "count.txt").read_text() == "once\n"


def test_a_folder_that_cannot_be_captured_records_the_answer_and_says_the_snapshot_is_stale(
    tmp_path: Path,
) -> None:
    """``git`` gone from ``PATH`` when the user answers: the capture fails, the answer is recorded
    all the same (refusing it would help nothing), no baseline, and the answer says so."""
    drill = _killed_in_bash(tmp_path)
    maka_bin = str(Path(maka_executable()[0]).parent)
    no_git = {**drill.env, "PATH": maka_bin}
    settled = maka(["settle", drill.session, "b1", "--ran"], drill.data, env=no_git)
    assert settled.returncode == 0, settled.stderr
    assert "Recorded: you confirmed that bash b1 ran" in settled.stdout
    assert "The folder could not be taken as the new starting point" in settled.stdout
    assert f"maka resume {drill.session} --rebaseline" in settled.stdout
    assert "workspace_checkpoint_stale" in settled.stdout  # still on hold, said in words
    assert _baselines(drill.data) == []
    planned = drill.plan()
    assert "workspace_checkpoint_stale" in planned["rejectionReasons"]
    assert "dangling_tool_state" not in planned["rejectionReasons"]  # the answer stands


def test_a_settled_baseline_travels_through_export_and_import(tmp_path: Path) -> None:
    drill = _killed_in_bash(tmp_path)
    settled = maka(["settle", drill.session, "b1", "--ran"], drill.data, env=drill.env)
    assert settled.returncode == 0, settled.stderr
    exported = tmp_path / "session.jsonl"
    result = maka(["export", drill.session, "-o", str(exported)], drill.data, env=drill.env)
    assert result.returncode == 0, result.stderr
    other = tmp_path / "other"
    result = maka(["import", str(exported)], other, env=drill.env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(_baselines(other)) == 1
    doctor = json.loads(maka(["doctor", "--json"], other, env=drill.env).stdout)
    # The ledger imports whole (the baseline after the run's terminal event included); whether
    # the snapshots' Git objects travel with an export is another matter, so only their absence
    # may be reported here.
    codes = {problem["code"] for problem in doctor["problems"]}
    assert codes <= {"workspace_checkpoint_missing"}, doctor


def test_the_tui_says_it_before_the_answer_and_one_settle_resumes(tmp_path: Path) -> None:
    """``maka tui``: /resume parked on the call says that answering takes the folder as it is
    now and which file changed; /settle records the baseline too; /resume then continues and
    the command is not run again."""
    drill = _killed_in_bash(tmp_path)
    result = maka(
        ["tui", "--session", drill.session, "--permission-mode", "auto"],
        drill.data,
        env=drill.env,
        stdin="/resume\n/settle b1 ran\n/resume\n/quit\n",
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    told = out.index(
        "Answering also takes the folder as it is now as the new starting point; 1 file "
        "changed since the last snapshot: count.txt."
    )
    answered = out.index("recorded: you confirmed that bash b1 ran")
    assert told < answered
    assert "The folder as it is now is the new starting point" in out[answered:]
    # The files listed stay indented under that line, as maka settle prints them.
    assert "\n  count.txt\n" in out[answered:], out[answered:]
    assert "Done." in out[answered:]  # the second /resume continued
    assert len(_baselines(drill.data)) == 1
    assert (drill.work / "count.txt").read_text() == "once\n"


def test_a_branch_after_a_settled_call_takes_the_answer_with_its_result(tmp_path: Path) -> None:
    """The answer is three facts (what was observed, the result the model is given, the
    decision); a branch "after the result of bash" must take all three: listed as branchable,
    made, and its model is given the answer, with the folder as the answer took it."""
    drill = _killed_in_bash(tmp_path)
    write_script(tmp_path / "script.json", [STEPS, [{"text": "Branch reply."}]])
    settled = maka(["settle", drill.session, "b1", "--ran"], drill.data, env=drill.env)
    assert settled.returncode == 0, settled.stderr
    listed = maka(["branch", drill.session, "--json"], drill.data, env=drill.env)
    assert listed.returncode == 0, listed.stderr
    points = json.loads(listed.stdout)["boundaries"]
    [point] = [p for p in points if p["label"] == "result of bash"]
    assert point["branchable"] is True and point["snapshotBound"] is True, point

    copy = tmp_path / "copy"
    made = maka(
        ["branch", drill.session, "--at", point["eventId"], "--to", str(copy)],
        drill.data,
        env=drill.env,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    assert (copy / "count.txt").read_text() == "once\n"
    sessions = json.loads(maka(["sessions", "--json"], drill.data).stdout)["sessions"]
    [branched] = [s["sessionId"] for s in sessions if s["sessionId"] != drill.session]
    sent = maka(["run", "--session", branched, "go on"], drill.data, env=drill.env)
    assert sent.returncode == 0, sent.stdout + sent.stderr
    [request] = drill.requests()
    history = json.dumps(request["history"])
    assert "b1" in history and "go on" in history, history
    # The answer took the folder as it was (count.txt added): the copy holds that folder, and
    # the model is told what changed, as the source's next turn is.
    assert "changed since the last snapshot" in history and "count.txt" in history, history
    assert (drill.work / "count.txt").read_text() == "once\n"  # nothing ran again
    assert (copy / "count.txt").read_text() == "once\n"


def _no_auto_resume(drill: Drill) -> dict[str, str]:
    """The host's environment without the Safe resume variable: no automatic resume at its
    start (the answer is given while nothing runs)."""
    return {k: v for k, v in drill.env.items() if k != FLAG_NAME}


def test_settling_through_a_running_host_says_what_it_did_to_the_folder(tmp_path: Path) -> None:
    """``maka settle`` beside ``maka host``: the host records the answer and its baseline, and
    the command prints what it prints alone (the ``workspace`` document, the folder's lines)."""
    alone = _killed_in_bash(tmp_path / "alone")
    said_alone = maka(["settle", alone.session, "b1", "--ran", "--json"], alone.data, env=alone.env)
    expected = json.loads(said_alone.stdout)["workspace"]
    assert expected == {"baselineRecorded": True, "changedPaths": ["count.txt"]}

    drills = [_killed_in_bash(tmp_path / name) for name in ("beside-json", "beside-text")]
    said: list[str] = []
    for drill, extra in zip(drills, (["--json"], []), strict=True):
        host = start_main(drill.data, _no_auto_resume(drill), "host").wait_ready()
        try:
            done = maka(["settle", drill.session, "b1", "--ran", *extra], drill.data, env=drill.env)
        finally:
            host.stop()
        assert done.returncode == 0, done.stdout + done.stderr
        said.append(done.stdout)
        assert len(_baselines(drill.data)) == 1
    assert json.loads(said[0])["workspace"] == expected
    assert "The folder as it is now is the new starting point; 1 file changed" in said[1]
    assert "    count.txt" in said[1]
    assert f"Safe resume can now continue: maka resume {drills[1].session}" in said[1]

    # maka tui's /settle through the host: the same lines, its advice in the TUI's words.
    chat = _killed_in_bash(tmp_path / "beside-tui")
    host = start_main(chat.data, _no_auto_resume(chat), "host").wait_ready()
    try:
        tui = maka(
            ["tui", "--session", chat.session], chat.data, env=chat.env, stdin="/settle b1 ran\n"
        )
    finally:
        host.stop()
    assert tui.returncode == 0, tui.stdout + tui.stderr
    assert "1 file changed since the last snapshot:" in tui.stdout, tui.stdout
    assert "Safe resume can now continue: /resume" in tui.stdout, tui.stdout
    assert "maka resume" not in tui.stdout.split("Recorded:")[-1]


def test_sessions_through_a_host_says_safe_resume_as_the_host_has_it(tmp_path: Path) -> None:
    """A host started with Safe resume on (its own MAKA_RUNTIME_SAFE_BOUNDARY_RESUME) serves
    ``maka resume``; ``maka sessions`` run without the variable must not say it is off."""
    drill = _killed_in_bash(tmp_path)  # parks: the call's outcome is unknown
    assert drill.plan()["disposition"] == "park"  # (repairs the run first)
    without = {k: v for k, v in drill.env.items() if k != FLAG_NAME}
    alone = maka(["sessions"], drill.data, env=without)
    assert "Safe resume is off" in alone.stdout, alone.stdout  # the command's own setting
    host = start_main(drill.data, drill.env, "host").wait_ready()
    try:
        served = maka(["sessions"], drill.data, env=without)
        forced = maka(["sessions"], drill.data, env={**without, FLAG_NAME: "0"})
    finally:
        host.stop()
    assert served.returncode == 0, served.stderr
    assert "Safe resume is off" not in served.stdout, served.stdout
    assert f"maka resume {drill.session} continues it" in served.stdout
    assert "Safe resume is off" in forced.stdout  # the command's own variable decides


def test_plan_through_a_host_uses_the_commands_own_safe_resume_variable(tmp_path: Path) -> None:
    """``maka plan`` beside a host started with Safe resume off, run with
    MAKA_RUNTIME_SAFE_BOUNDARY_RESUME=1: the plan ``maka resume`` with that variable would make
    (it continues), not the host's park on the setting, whose advice names that very variable."""
    drill = _killed_in_bash(tmp_path)
    settled = maka(["settle", drill.session, "b1", "--ran"], drill.data, env=drill.env)
    assert settled.returncode == 0, settled.stderr
    without = {k: v for k, v in drill.env.items() if k != FLAG_NAME}
    host = start_main(drill.data, without, "host").wait_ready()
    try:
        own = maka(["plan", drill.session, "--json"], drill.data, env=drill.env)
        hosts = maka(["plan", drill.session, "--json"], drill.data, env=without)
    finally:
        host.stop()
    assert own.returncode == 0, own.stdout + own.stderr
    assert json.loads(own.stdout)["disposition"] == "continue"
    assert hosts.returncode == 3
    assert json.loads(hosts.stdout)["rejectionReasons"] == ["resume_feature_disabled"]


def test_did_not_run_with_the_files_as_in_the_snapshot_leaves_no_capture_behind(
    tmp_path: Path,
) -> None:
    """ "It did not run" when the folder is as in the snapshot records no baseline; it once
    captured the folder first and left that capture's ref behind, which ``maka doctor`` then
    called an orphan "cut off before its fact" (and the next start removed)."""
    drill = Drill(tmp_path, STEPS)
    drill.run("P3")  # killed at the tool's start: the command never ran
    assert not (drill.work / "count.txt").exists()
    settled = maka(["settle", drill.session, "b1", "--not-run"], drill.data, env=drill.env)
    assert settled.returncode == 0, settled.stderr
    assert _baselines(drill.data) == []
    doctor = maka(["doctor", "--json"], drill.data, env=drill.env)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert json.loads(doctor.stdout)["workspaceCheckpoints"]["orphans"] == []


def test_an_answer_after_the_session_moved_on_takes_nothing_of_the_folder(
    tmp_path: Path,
) -> None:
    """Killed inside its ``bash`` call, then a new message ran a turn of its own (with its own
    snapshots). An answer about the old call then took the folder as the old run's "new
    starting point", with the user's later edit and the new turn's files in it, though no
    resume of that run can come: the session moved on. It records the answer alone."""
    drill = _killed_in_bash(tmp_path)
    later = write_script(tmp_path / "later.json", [STEPS, [{"text": "Fine."}]])
    env = {**drill.env, "MAKA_SCRIPT_FILE": str(later)}
    again = ["run", "--session", drill.session, "--permission-mode", "auto", "carry on"]
    assert maka(again, drill.data, env=env).returncode == 0
    told = maka(["plan", drill.session], drill.data, env=env)
    assert "starting point" not in told.stdout, told.stdout
    with (drill.work / "a.txt").open("a") as edited:
        edited.write("edited after the new turn\n")
    settled = maka(["settle", drill.session, "b1", "--ran"], drill.data, env=env)
    assert settled.returncode == 0, settled.stderr
    assert "Recorded: you confirmed that bash b1 ran" in settled.stdout, settled.stdout
    assert "starting point" not in settled.stdout, settled.stdout
    assert _baselines(drill.data) == []
