"""Settling an unknown outcome, as a user does it with the real ``maka`` command
(docs/design/recovery.md section 8): a ``bash`` call killed inside its command
(``MAKA_FAILPOINT=P4``: the side effect happened, its result was never recorded) parks Safe resume;
the user checks, runs ``maka settle SESSION c1 --ran``; ``maka resume`` then continues once, the
command never runs again, and the provider receives the attested result. Every refusal has its code,
and doctor stays clean."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from app.commands.tui_cmd import TUI_PARK_NOTE
from runtime.ledger.attestation import Attestation, attestation_result
from tests.helpers.maka_run import RunResult, committed_runs, maka, scripted_env, write_script

pytestmark = pytest.mark.e2e

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
SCRIPT: list[list[dict[str, Any]]] = [
    [
        {
            "text": "Counting.",
            "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "echo x >> count.txt"}}],
        },
        {"text": "Counted once."},
    ],
    [{"text": "Noted."}],
]
NOTE = "count.txt has one line"


class Drill:
    def __init__(self, tmp_path: Path) -> None:
        self.data = tmp_path / "data"
        self.work = tmp_path / "work"
        self.work.mkdir()
        self.record = tmp_path / "requests.jsonl"
        self.env = scripted_env(write_script(tmp_path / "script.json", SCRIPT), self.record)

    def maka(self, *args: str, env: dict[str, str] | None = None) -> RunResult:
        return maka(list(args), self.data, env={**self.env, **FLAG, **(env or {})})

    def crash_inside_bash(self) -> None:
        args = ["run", "--cwd", str(self.work), "--permission-mode", "auto", "count once"]
        assert self.maka(*args, env={"MAKA_FAILPOINT": "P4"}).returncode == -9
        assert self.count() == 1

    @property
    def session(self) -> str:
        return committed_runs(self.data)[0][0].session_id

    def count(self) -> int:
        path = self.work / "count.txt"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.record.read_text().splitlines()]

    def doctor_clean(self) -> None:
        result = self.maka("doctor")
        assert result.returncode == 0, result.stdout + result.stderr

    def attestation(self) -> tuple[bool, Attestation]:
        events = committed_runs(self.data)[0][1]
        payload = next(
            event["actions"]["toolRecovery"]["payload"]
            for event in events
            if "toolRecovery" in (event.get("actions") or {})
            and "attestedAt" in event["actions"]["toolRecovery"]["payload"]
        )
        ran = payload["observation"] == "user_attested_ran"
        return ran, Attestation(payload["attestedAt"], payload["ownerEpoch"], payload.get("note"))


def test_crash_park_settle_resume_continues_once_with_the_attested_result(
    tmp_path: Path,
) -> None:
    drill = Drill(tmp_path)
    drill.crash_inside_bash()
    planned = drill.maka("plan", drill.session)
    assert planned.returncode == 3
    assert "dangling_tool_state" in planned.stdout
    assert f"maka settle {drill.session} c1 --ran" in planned.stdout
    # maka resume parks with the same way forward (not only "send a new message").
    parked = drill.maka("resume", drill.session, "--permission-mode", "auto")
    assert parked.returncode == 3
    assert f"maka settle {drill.session} c1 --ran" in parked.stdout
    assert "bash c1: indeterminate" in parked.stdout
    drill.doctor_clean()

    settled = drill.maka("settle", drill.session, "c1", "--ran", "--note", NOTE)
    assert settled.returncode == 0, settled.stderr
    assert "Recorded: you confirmed that bash c1 ran" in settled.stdout
    assert f"Safe resume can now continue: maka resume {drill.session}" in settled.stdout
    drill.doctor_clean()

    planned = drill.maka("plan", drill.session)
    assert planned.returncode == 0, planned.stdout
    line = next(text for text in planned.stdout.splitlines() if "bash c1" in text)
    assert "completed (user_attested_ran)" in line
    assert "You confirmed that this tool call ran on" in line and NOTE in line
    as_json = json.loads(drill.maka("plan", drill.session, "--json").stdout)
    (operation,) = as_json["operations"]
    assert operation["settlementOrigin"] == "user_attestation"
    assert operation["attestation"]["note"] == NOTE

    resumed = drill.maka("resume", drill.session, "--json", "--permission-mode", "auto")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    body = json.loads(resumed.stdout)
    assert body["started"] is True and body["status"] == "completed"
    assert drill.count() == 1  # the command never ran again

    ran, attestation = drill.attestation()
    assert ran and attestation.note == NOTE
    requests = drill.requests()
    assert len(requests) == 2  # the crashed turn's first step, then the continuation
    assert requests[-1]["history"] == [
        {"type": "user", "text": "count once"},
        {"type": "assistant", "text": "Counting."},
        {
            "type": "tool_call",
            "id": "c1",
            "name": "bash",
            "args": {"command": "echo x >> count.txt"},
        },
        {
            "type": "tool_result",
            "id": "c1",
            "name": "bash",
            "result": attestation_result(True, attestation),
            "isError": False,
        },
    ]
    message = requests[-1]["history"][-1]["result"]["message"]
    assert "the user confirmed that it ran" in message and "No output was recorded" in message
    assert NOTE in message
    again = drill.maka("resume", drill.session, "--json", "--permission-mode", "auto")
    assert again.returncode == 3
    assert json.loads(again.stdout)["rejectionReasons"] == ["continuation_already_exists"]
    # The same answer again: already recorded, and nothing waits for it (not "on hold").
    repeated = drill.maka("settle", drill.session, "c1", "--ran", "--note", NOTE)
    assert repeated.returncode == 0, repeated.stderr
    assert "Already recorded" in repeated.stdout
    assert "already continued this run with that answer" in repeated.stdout
    assert "on hold" not in repeated.stdout
    drill.doctor_clean()


def test_a_new_turn_after_settling_carries_the_attested_result(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.crash_inside_bash()
    assert drill.maka("settle", drill.session, "c1", "--not-run").returncode == 0
    args = ["run", "--session", drill.session, "--cwd", str(drill.work), "what now"]
    turn = drill.maka(*args, "--permission-mode", "auto")
    assert turn.returncode == 0, turn.stderr
    history = drill.requests()[-1]["history"]
    ran, attestation = drill.attestation()
    assert not ran
    assert {
        "type": "tool_result",
        "id": "c1",
        "name": "bash",
        "result": attestation_result(False, attestation),
        "isError": True,
    } in history
    assert not any("outcome is unknown" in str(item.get("text", "")) for item in history)
    assert drill.count() == 1


def _code(result: RunResult) -> str:
    assert "Traceback" not in result.stderr
    return result.stderr.split("[", 1)[1].split("]", 1)[0] if "[" in result.stderr else ""


def test_every_refusal_has_its_code_and_changes_nothing(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.crash_inside_bash()
    session = drill.session

    missing = drill.maka("settle", session, "nope", "--ran")
    assert (missing.returncode, _code(missing)) == (2, "operation_not_found")
    long_note = drill.maka("settle", session, "c1", "--ran", "--note", "x" * 501)
    assert (long_note.returncode, _code(long_note)) == (2, "attestation_note_too_long")
    empty_note = drill.maka("settle", session, "c1", "--ran", "--note", " ")
    assert (empty_note.returncode, _code(empty_note)) == (2, "attestation_note_empty")
    unknown_session = drill.maka("settle", "sess-nope", "c1", "--ran")
    assert (unknown_session.returncode, _code(unknown_session)) == (2, "session_not_found")
    neither = drill.maka("settle", session, "c1")
    assert neither.returncode == 2
    drill.doctor_clean()
    assert len(committed_runs(drill.data)[0][1]) == 5  # user, text, call, dispatch, terminal

    assert drill.maka("settle", session, "c1", "--ran").returncode == 0
    same = drill.maka("settle", session, "c1", "--ran", "--json")
    assert same.returncode == 0 and json.loads(same.stdout)["created"] is False
    other = drill.maka("settle", session, "c1", "--not-run")
    assert (other.returncode, _code(other)) == (1, "operation_settled")
    drill.doctor_clean()
    assert drill.attestation()[0] is True


def test_settle_in_the_tui_uses_the_same_seam(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.crash_inside_bash()
    result = maka(
        ["tui", "--session", drill.session, "--permission-mode", "auto"],
        drill.data,
        env={**drill.env, **FLAG},
        stdin="/transcript\n/settle c1 maybe\n/settle c9 ran\n/settle c1 ran "
        + NOTE
        + "\n/transcript\n/resume\n/quit\n",
    )
    assert result.returncode == 0, result.stderr
    assert "outcome unknown; if you know: /settle c1 ran|not-run" in result.stdout
    assert "usage: /settle CALL ran|not-run [NOTE]" in result.stdout
    assert "confirmed by you: it ran" in result.stdout and f"your note: {NOTE}" in result.stdout
    assert "not recorded [operation_not_found]" in result.stdout
    assert "recorded: you confirmed that bash c1 ran" in result.stdout
    assert "Counted once." in result.stdout  # /resume continued from the settled call
    assert drill.count() == 1
    assert drill.attestation()[1].note == NOTE


def test_export_and_import_carry_the_attestation(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.crash_inside_bash()
    assert drill.maka("settle", drill.session, "c1", "--ran", "--note", NOTE).returncode == 0
    exported = tmp_path / "session.jsonl"
    assert drill.maka("export", drill.session, "-o", str(exported)).returncode == 0
    other = tmp_path / "other"
    imported = maka(["import", str(exported)], other, env=drill.env)
    assert imported.returncode == 0, imported.stderr
    assert maka(["doctor"], other, env=drill.env).returncode == 0
    planned = maka(["plan", drill.session, "--json"], other, env={**drill.env, **FLAG})
    assert planned.returncode == 0, planned.stdout + planned.stderr
    (operation,) = json.loads(planned.stdout)["operations"]
    assert operation["settlementOrigin"] == "user_attestation"
    assert operation["attestation"]["note"] == NOTE


def test_refusals_name_the_call_as_maka_plan_shows_it(tmp_path: Path) -> None:
    """The user names the call ``c1`` (as ``maka plan`` lists it): a refusal names it the same
    way, never by the ledger's internal operation id."""
    (tmp_path / "settled").mkdir()
    (tmp_path / "recorded").mkdir()
    settled = Drill(tmp_path / "settled")
    settled.crash_inside_bash()
    assert settled.maka("settle", settled.session, "c1", "--ran").returncode == 0
    other = settled.maka("settle", settled.session, "c1", "--not-run")
    assert (other.returncode, _code(other)) == (1, "operation_settled")
    assert "bash c1 is already settled" in other.stderr and "toolop_" not in other.stderr

    recorded = Drill(tmp_path / "recorded")
    args = ["run", "--cwd", str(recorded.work), "--permission-mode", "auto", "count once"]
    assert recorded.maka(*args, env={"MAKA_FAILPOINT": "P6"}).returncode == -9
    refused = recorded.maka("settle", recorded.session, "c1", "--ran")
    assert (refused.returncode, _code(refused)) == (1, "attestation_not_applicable")
    assert "bash c1" in refused.stderr and "toolop_" not in refused.stderr
    recorded.doctor_clean()


def test_a_park_after_settling_does_not_speak_of_unsettled_calls(tmp_path: Path) -> None:
    """With workspace snapshots on, settling the call also takes the folder as the new starting
    point (docs/design/workspace.md section 3), so the answer alone lifts the park; a file
    changed afterwards parks again on drift, and the plan's advice must not tell the user that
    the model will hear about unsettled calls when none is left."""
    drill = Drill(tmp_path)
    snapshots = {"MAKA_WORKSPACE_CHECKPOINTS": "on"}
    args = ["run", "--cwd", str(drill.work), "--permission-mode", "auto", "count once"]
    assert drill.maka(*args, env={"MAKA_FAILPOINT": "P4", **snapshots}).returncode == -9
    before = drill.maka("plan", drill.session, env=snapshots)
    assert before.returncode == 3 and "dangling_tool_state" in before.stdout
    assert "workspace_checkpoint_stale" in before.stdout
    assert "the model is told which calls are unsettled" in before.stdout
    settled = drill.maka("settle", drill.session, "c1", "--ran", env=snapshots)
    assert settled.returncode == 0, settled.stderr
    assert "The folder as it is now is the new starting point" in settled.stdout
    assert f"Safe resume can now continue: maka resume {drill.session}" in settled.stdout
    (drill.work / "later.txt").write_text("written after the answer\n")
    after = drill.maka("plan", drill.session, env=snapshots)
    assert after.returncode == 3, after.stdout + after.stderr
    assert "workspace_drift" in after.stdout
    assert "workspace_checkpoint_stale" not in after.stdout
    assert "bash c1: completed (user_attested_ran)" in after.stdout
    assert "unsettled" not in after.stdout
    drill.doctor_clean()


def test_settling_while_the_folder_is_moved_sends_the_user_to_relocate_first(
    tmp_path: Path,
) -> None:
    """The folder moved after the crash: the answer is recorded but the folder cannot be taken
    as the new starting point. The settle advised ``maka resume S --rebaseline``, which parks
    on the missing folder; it now says to point the session at the folder first, and that
    works: relocate, then the resume continues."""
    drill = Drill(tmp_path)
    snapshots = {"MAKA_WORKSPACE_CHECKPOINTS": "on"}
    args = ["run", "--cwd", str(drill.work), "--permission-mode", "auto", "count once"]
    assert drill.maka(*args, env={"MAKA_FAILPOINT": "P4", **snapshots}).returncode == -9
    moved = tmp_path / "moved"
    drill.work.rename(moved)
    settled = drill.maka("settle", drill.session, "c1", "--ran", env=snapshots)
    assert settled.returncode == 0, settled.stderr
    assert "--rebaseline" not in settled.stdout, settled.stdout
    assert f"maka sessions relocate {drill.session} NEW_FOLDER" in settled.stdout
    assert "workspace_folder_missing" in settled.stdout
    relocated = drill.maka("sessions", "relocate", drill.session, str(moved))
    assert relocated.returncode == 0, relocated.stderr
    resumed = drill.maka(
        "resume", drill.session, "--permission-mode", "auto", "--rebaseline", env=snapshots
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr


def test_settling_after_a_new_message_carried_the_session_on_says_so(tmp_path: Path) -> None:
    """The user carried on with a new message first and answers afterwards: nothing is left to
    resume, so the answer reaches the model with the next message; settle says that instead
    of 'still parked' and a bare code."""
    drill = Drill(tmp_path)
    drill.crash_inside_bash()
    args = ["run", "--session", drill.session, "--cwd", str(drill.work), "carry on"]
    assert drill.maka(*args, "--permission-mode", "auto").returncode == 0
    settled = drill.maka("settle", drill.session, "c1", "--ran")
    assert settled.returncode == 0, settled.stderr
    assert "resume_candidate_missing" not in settled.stdout
    assert "still parked" not in settled.stdout
    assert (
        "Nothing in this session is left to resume (its latest turn finished): the model is "
        f"told your answer with your next message (maka run --session {drill.session} MESSAGE"
    ) in settled.stdout


def test_a_park_in_the_tui_names_its_own_settle_command(tmp_path: Path) -> None:
    """/resume parked on the unknown outcome says how to answer in the TUI (/settle), not with
    maka settle, which the TUI's own hold on the data folder would refuse."""
    drill = Drill(tmp_path)
    drill.crash_inside_bash()
    result = maka(
        ["tui", "--session", drill.session, "--permission-mode", "auto"],
        drill.data,
        env={**drill.env, **FLAG},
        stdin="/resume\n/quit\n",
    )
    assert result.returncode == 0, result.stderr
    assert "dangling_tool_state" in result.stdout
    assert "say so on the record: one of these lines" in result.stdout, result.stdout
    assert "\n  /settle c1 ran\n" in result.stdout and "\n  /settle c1 not-run\n" in result.stdout
    assert "maka settle" not in result.stdout
    # The other ways forward are maka commands: the TUI holds the data folder they need.
    assert TUI_PARK_NOTE in result.stdout


def test_a_read_only_plan_says_the_commands_it_names_wait_for_the_owner(tmp_path: Path) -> None:
    """While another Maka process owns the data folder (the desktop, say), maka plan reads it
    read-only: the commands its advice names would be refused, and it says so."""
    from storage.instance_lock import InstanceLock, LockOutcome

    drill = Drill(tmp_path)
    drill.crash_inside_bash()
    assert drill.maka("plan", drill.session).returncode == 3  # repaired, parked
    lock = InstanceLock(drill.data)
    assert lock.acquire().outcome is LockOutcome.ACQUIRED
    try:
        planned = drill.maka("plan", drill.session)
        assert planned.returncode == 3
        assert f"maka settle {drill.session} c1 --ran" in planned.stdout
        assert "maka run, maka resume and maka settle are refused (store_locked)" in (
            planned.stderr
        )
        settled = drill.maka("settle", drill.session, "c1", "--ran")
        assert settled.returncode == 1 and "[store_locked]" in settled.stderr
    finally:
        lock.release()


def test_a_notice_is_announced_until_the_model_has_answered_it(tmp_path: Path) -> None:
    """With snapshots on, settling a command also takes the folder as it is now, and the model
    is told so with the next message: ``maka run`` says that once. Once the model has answered
    a turn after it, the notice stays in the history but is not news, and the next ``maka run``
    no longer announces it. An unknown outcome, told again every turn, is announced every turn."""
    more = [[{"text": "Again."}], [{"text": "Once more."}], [{"text": "And again."}]]
    told = "note: with your next message the model is told: "
    folder = re.escape(told) + "“[^”]*The user chose to continue with the files as they are now"

    def crashed(name: str) -> tuple[Drill, tuple[str, ...]]:
        (tmp_path / name).mkdir()
        drill = Drill(tmp_path / name)
        script = write_script(tmp_path / name / "more.json", [*SCRIPT, *more])
        drill.env = scripted_env(script, drill.record, checkpoints=True)
        drill.crash_inside_bash()
        return drill, ("run", "--session", drill.session, "--permission-mode", "auto")

    # Answered before the session moved on: the folder is taken, told once.
    drill, args = crashed("answered")
    assert drill.maka("settle", drill.session, "c1", "--ran").returncode == 0
    first = drill.maka(*args, "and now?")
    assert first.returncode == 0, first.stderr
    assert re.search(folder, first.stderr), first.stderr
    assert "An earlier turn was interrupted" not in first.stderr  # settled
    second = drill.maka(*args, "again")
    assert second.returncode == 0, second.stderr
    assert told not in second.stderr, second.stderr

    # Unanswered, the unknown outcome is told every turn until the answer; an answer once a
    # new turn ran takes nothing of the folder (that turn's snapshots describe it).
    drill, args = crashed("moved-on")
    unsettled = drill.maka(*args, "hello", env={"MAKA_DATA_DIR": str(drill.data)})
    assert f"{told}“An earlier turn was interrupted while calling bash" in unsettled.stderr
    assert drill.maka("settle", drill.session, "c1", "--ran").returncode == 0
    after = drill.maka(*args, "and now?")
    assert after.returncode == 0, after.stderr
    assert "An earlier turn was interrupted" not in after.stderr  # settled
    assert not re.search(folder, after.stderr), after.stderr


def test_a_refused_note_leaves_no_snapshot_behind(tmp_path: Path) -> None:
    """With snapshots on, an answer refused for its note captured the folder first: a ref no
    fact names, which ``maka doctor`` then blamed on a capture cut off."""
    drill = Drill(tmp_path)
    on = {"MAKA_WORKSPACE_CHECKPOINTS": "on"}
    args = ["run", "--cwd", str(drill.work), "--permission-mode", "auto", "count once"]
    assert drill.maka(*args, env={**on, "MAKA_FAILPOINT": "P4"}).returncode == -9

    def refs() -> list[str]:
        return sorted(
            line
            for store in (drill.data / "checkpoints").glob("*.git")
            for line in subprocess.run(
                ["git", "--git-dir", str(store), "for-each-ref", "--format=%(refname)"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
        )

    before = refs()
    assert before
    for note in ("x" * 501, " "):
        refused = drill.maka("settle", drill.session, "c1", "--ran", "--note", note, env=on)
        assert refused.returncode == 2, refused.stderr
    assert refs() == before
    doctor = drill.maka("doctor", env=on)
    assert doctor.returncode == 0 and " 0 orphan refs" in doctor.stdout, doctor.stdout
