"""The user's ways forward after a workspace park (docs/design/workspace.md section 4), end to end:
a real ``maka run`` killed at a failpoint, the folder changed, then ``maka resume --rebaseline``
(scripted provider recording its requests, real tools, real store, the real ``git``)."""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
FIRST_STEP = {
    "text": "Counting.",
    "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "echo x >> count.txt"}}],
}
# The interrupted run: its first call runs and is captured, then the provider fails.
INTERRUPTED = [[FIRST_STEP, {"error": {"message": "the service went away"}}]]
# The continuation picks up at the second step.
SCRIPT = [
    [
        {
            "text": "Counting.",
            "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "echo x >> count.txt"}}],
        },
        {
            "text": "Writing the report.",
            "toolCalls": [
                {
                    "id": "c2",
                    "name": "write_file",
                    "args": {"path": "report.txt", "content": "done\n"},
                }
            ],
        },
        {"text": "Finished."},
    ]
]


class Drill:
    def __init__(self, tmp_path: Path) -> None:
        self.data = tmp_path / "data"
        self.work = tmp_path / "work"
        self.work.mkdir(parents=True)
        (self.work / "a.txt").write_text("alpha\n")
        (self.work / "b.txt").write_text("beta\n")
        self.record = tmp_path / "requests.jsonl"
        script = write_script(tmp_path / "script.json", SCRIPT)
        self.interrupted = write_script(tmp_path / "interrupted.json", INTERRUPTED)
        self.env = {**scripted_env(script, self.record, checkpoints=True), **FLAG}

    def run(self, failpoint: str | None = None) -> None:
        """The interrupted run: killed at ``failpoint``, or ended by the provider's failure."""
        args = ["run", "--cwd", str(self.work), "--permission-mode", "auto", "count once"]
        env = {**self.env, "MAKA_SCRIPT_FILE": str(self.interrupted)}
        if failpoint is not None:
            env["MAKA_FAILPOINT"] = failpoint
        result = maka(args, self.data, env=env)
        assert result.returncode == (-9 if failpoint else 1), result.stderr
        self.record.unlink(missing_ok=True)

    @property
    def session(self) -> str:
        return committed_runs(self.data)[0][0].session_id

    def resume(self, *extra: str) -> tuple[int, dict[str, Any]]:
        args = ["resume", self.session, "--json", "--permission-mode", "auto", *extra]
        result = maka(args, self.data, env=self.env)
        assert result.stdout.strip(), result.stderr
        return result.returncode, json.loads(result.stdout)

    def requests(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]


def test_rebaseline_continues_with_the_current_files_and_tells_the_model(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.run()  # the first call ran and was captured; then the provider failed
    (drill.work / "count.txt").write_text("edited by the user\n")
    (drill.work / "new.txt").write_text("new\n")
    (drill.work / "b.txt").unlink()

    code, parked = drill.resume()
    assert code == 3 and parked["rejectionReasons"] == ["workspace_drift"]
    assert parked["workspaceOptions"] == ["isolated_restore", "rebaseline"]
    assert "workspace_rebaseline_uncompared" not in [d["code"] for d in parked["diagnostics"]]
    text = maka(["plan", drill.session], drill.data, env=drill.env).stdout
    assert f"maka resume {drill.session} --rebaseline" in text
    assert "the model is told which files changed and to re-read them" in text
    assert drill.requests() == []

    args = ["resume", drill.session, "--json", "--permission-mode", "auto", "--rebaseline"]
    result = maka(args, drill.data, env=drill.env)
    code, body = result.returncode, json.loads(result.stdout)
    assert code == 0, body
    assert body["status"] == "completed"
    assert body["continuation"]["workspaceDecision"] == "rebaseline"
    # The transcript marks it (on standard error with --json).
    assert (
        "[workspace] Continued with your current files; 3 files changed: b.txt, count.txt, "
        "new.txt." in result.stderr
    )
    # The drift stays on the record as a diagnostic of the plan the user decided on.
    assert [d["code"] for d in body["diagnostics"]].count("workspace_drift") == 1

    # The exact first request: the replayed history, no new user message, then the notice.
    first = drill.requests()[0]["history"]
    assert [item["type"] for item in first] == [
        "user",
        "assistant",
        "tool_call",
        "tool_result",
        "host_notice",
    ]
    assert first[0] == {"type": "user", "text": "count once"}
    assert first[-1]["text"] == (
        "Note from the host: 3 files in the folder changed since the last snapshot of it, "
        "taken before this session stopped. Your own calls after that snapshot may have made "
        "some of these changes; the others were made outside your view:\n"
        "- b.txt (deleted)\n- count.txt (modified)\n- new.txt (added)\n"
        "The user chose to continue with the files as they are now. Re-read these files "
        "before you rely on what you saw of them earlier."
    )
    # Every later request of the continuation keeps the notice, once.
    requests = drill.requests()
    assert len(requests) == 2
    assert [[i["type"] for i in r["history"]].count("host_notice") for r in requests] == [1, 1]
    # The continuation carried on where it stopped and its write landed in the folder.
    assert (drill.work / "report.txt").read_text() == "done\n"
    assert (drill.work / "count.txt").read_text() == "edited by the user\n"

    runs = committed_runs(drill.data)
    assert len(runs) == 2
    start = runs[1][1][0]
    baseline = start["actions"]["workspaceBaseline"]
    first_checkpoint = runs[0][1]
    source_refs = [
        e["actions"]["workspaceCheckpoint"]["checkpointRef"]
        for e in first_checkpoint
        if "workspaceCheckpoint" in e.get("actions", {})
    ]
    assert baseline["protocol"] == "workspace_baseline_v1"
    assert baseline["workspaceEpoch"] == 2
    assert baseline["previousCheckpointRef"] == source_refs[-1]
    assert baseline["compared"] is True and baseline["decidedBy"] == "local_user"
    assert baseline["changedPaths"] == [
        {"path": "b.txt", "change": "deleted"},
        {"path": "count.txt", "change": "modified"},
        {"path": "new.txt", "change": "added"},
    ]
    # The continuation's own checkpoints carry the new epoch.
    epochs = {
        e["actions"]["workspaceCheckpoint"]["workspaceEpoch"]
        for e in runs[1][1]
        if "workspaceCheckpoint" in e.get("actions", {})
    }
    assert epochs == {2}
    listed = json.loads(maka(["checkpoints", drill.session, "--json"], drill.data).stdout)
    assert all(c["present"] for run in listed["runs"] for c in run["checkpoints"])

    # Once: a second resume (with or without the decision) starts nothing.
    code, again = drill.resume("--rebaseline")
    assert code == 3 and again["rejectionReasons"] == ["continuation_already_exists"]
    assert len(committed_runs(drill.data)) == 2


def test_rebaseline_answers_a_stale_snapshot(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.run("P6")  # the bash call's T2 committed; the capture after it never ran
    code, parked = drill.resume()
    assert code == 3 and parked["rejectionReasons"] == ["workspace_checkpoint_stale"]
    assert parked["workspaceOptions"] == ["isolated_restore", "rebaseline"]
    code, body = drill.resume("--rebaseline")
    assert code == 0, body
    notice = drill.requests()[0]["history"][-1]
    assert notice["type"] == "host_notice"
    assert "- count.txt (added)" in notice["text"]


def test_rebaseline_answers_a_missing_snapshot_without_naming_files(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.run()
    shutil.rmtree(drill.data / "checkpoints")
    (drill.work / "b.txt").write_text("edited while the store was gone\n")  # not the tree
    code, parked = drill.resume()
    assert code == 3 and parked["rejectionReasons"] == ["workspace_checkpoint_missing"]
    assert parked["workspaceOptions"] == ["rebaseline"]  # no snapshot left to copy
    # The offer does not promise to tell the model which files changed: nothing can tell.
    codes = [d["code"] for d in parked["diagnostics"]]
    assert codes.count("workspace_rebaseline_uncompared") == 1
    text = maka(["plan", drill.session], drill.data, env=drill.env).stdout
    assert "the model is told which files changed" not in text
    assert "the model is told that files may have changed, with no snapshot to tell which" in text
    code, refused = drill.resume("--restore-to")
    assert code == 3 and refused["rejectionReasons"] == ["workspace_checkpoint_missing"]
    code, body = drill.resume("--rebaseline")
    assert code == 0, body
    notice = drill.requests()[0]["history"][-1]
    assert notice["type"] == "host_notice"
    assert "there is no snapshot to tell which" in notice["text"]
    start = committed_runs(drill.data)[1][1][0]
    assert start["actions"]["workspaceBaseline"]["compared"] is False
    assert "previousCheckpointRef" in start["actions"]["workspaceBaseline"]


def test_rebaseline_never_waives_another_reason(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.run("P3")  # the call's outcome is unknown: a reason the files cannot answer
    (drill.work / "a.txt").write_text("changed\n")
    code, body = drill.resume("--rebaseline")
    assert code == 3
    assert body["rejectionReasons"] == ["dangling_tool_state"], body
    assert "workspaceOptions" not in body
    assert len(committed_runs(drill.data)) == 1
    assert drill.requests() == []


def _plan(drill: Drill) -> tuple[int, dict[str, Any]]:
    result = maka(["plan", drill.session, "--json"], drill.data, env=drill.env)
    return result.returncode, json.loads(result.stdout)


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def _drifted(tmp_path: Path) -> tuple[Drill, dict[str, bytes]]:
    drill = Drill(tmp_path)
    drill.run()
    (drill.work / "count.txt").write_text("edited by the user\n")
    (drill.work / "new.txt").write_text("new\n")
    (drill.work / "b.txt").unlink()
    return drill, _files(drill.work)


def test_restore_continues_in_a_copy_and_leaves_the_folder_alone(tmp_path: Path) -> None:
    drill, before = _drifted(tmp_path)
    code, body = drill.resume("--restore-to")
    assert code == 0, body
    assert body["continuation"]["workspaceDecision"] == "isolated_restore"
    copy = tmp_path / "work-restored-1"
    assert body["workspacePath"] == str(copy)
    # The user's folder is byte for byte as the user left it.
    assert _files(drill.work) == before
    # The copy is the folder at the stop, and the continuation's write landed there.
    files = _files(copy)
    marker = json.loads(files.pop(".maka/workspace.json"))
    assert files.pop(".maka/.gitignore") == b"*\n"  # the copy's marker stays out of git status
    assert files == {
        "a.txt": b"alpha\n",
        "b.txt": b"beta\n",
        "count.txt": b"x\n",
        "report.txt": b"done\n",
    }
    original = json.loads((drill.work / ".maka" / "workspace.json").read_text())
    assert marker["workspaceId"] != original["workspaceId"]
    # No notice: the model continues exactly where it left off.
    first = drill.requests()[0]["history"]
    assert [item["type"] for item in first] == ["user", "assistant", "tool_call", "tool_result"]

    runs = committed_runs(drill.data)
    assert len(runs) == 2
    header, events = runs[1]
    transition = events[0]["actions"]["workspaceTransition"]
    assert transition["kind"] == "isolated_restore"
    assert transition["toPath"] == str(copy) == header.cwd
    assert transition["fromPath"] == str(drill.work)
    assert transition["toIdentity"] == header.workspace_identity != runs[0][0].workspace_identity
    assert transition["workspaceEpoch"] == 2 and transition["decidedBy"] == "local_user"
    assert events[0]["actions"]["runtimeProtocol"]["workspaceCheckpoints"] == {"mode": "git_v1"}
    checkpoints = [
        e["actions"]["workspaceCheckpoint"]
        for e in events
        if "workspaceCheckpoint" in e.get("actions", {})
    ]
    assert checkpoints and {c["workspaceEpoch"] for c in checkpoints} == {2}
    assert {c["workspaceIdentity"] for c in checkpoints} == {header.workspace_identity}
    # The session lives in the copy now.
    listed = json.loads(maka(["sessions", "--json"], drill.data).stdout)
    [session] = [s for s in listed["sessions"] if s["sessionId"] == drill.session]
    assert session["cwd"] == str(copy)
    code, again = drill.resume("--restore-to")
    assert code == 3 and again["rejectionReasons"] == ["continuation_already_exists"]
    assert not (tmp_path / "work-restored-2").exists()
    # The plan of the resumed interruption still says where the session went.
    code, planned = _plan(drill)
    assert [t["text"] for t in planned["workspaceTransitions"]] == [
        f"Continued in a restored copy at {copy}"
    ]
    text = maka(["plan", drill.session], drill.data, env=drill.env).stdout
    assert f"run {runs[1][0].run_id}: Continued in a restored copy at {copy}" in text


def test_restore_refuses_a_folder_that_is_not_empty(tmp_path: Path) -> None:
    drill, before = _drifted(tmp_path)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine\n")
    code, body = drill.resume("--restore-to", str(busy))
    assert code == 3
    assert body["disposition"] == "refused"
    assert body["code"] == "workspace_restore_target_not_empty"
    assert _files(busy) == {"keep.txt": b"mine\n"}
    assert _files(drill.work) == before
    assert len(committed_runs(drill.data)) == 1 and drill.requests() == []


def test_an_empty_folder_name_is_a_usage_error_not_the_default_place(tmp_path: Path) -> None:
    """``--restore-to "$DIR"`` with DIR unset: refused, nothing made, nothing run (a bare
    ``--restore-to`` is what asks for the default place)."""
    drill, before = _drifted(tmp_path)
    args = ["resume", drill.session, "--permission-mode", "auto", "--restore-to", ""]
    refused = maka(args, drill.data, env=drill.env)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "[invalid_argument]" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "work-restored-1").exists()
    assert _files(drill.work) == before
    assert len(committed_runs(drill.data)) == 1 and drill.requests() == []


def test_a_copy_left_by_a_killed_restore_is_named_and_never_reused(tmp_path: Path) -> None:
    drill, before = _drifted(tmp_path)
    args = ["resume", drill.session, "--json", "--permission-mode", "auto", "--restore-to"]
    killed = maka(
        args, drill.data, env={**drill.env, "MAKA_FAILPOINT": "after_restore_materialized"}
    )
    assert killed.returncode == -9, killed.stderr
    left = tmp_path / "work-restored-1"
    assert (left / "count.txt").read_text() == "x\n"
    assert len(committed_runs(drill.data)) == 1 and drill.requests() == []
    assert _files(drill.work) == before

    code, parked = drill.resume()
    assert code == 3 and parked["rejectionReasons"] == ["workspace_drift"]
    abandoned = [d for d in parked["diagnostics"] if d["code"] == "workspace_restore_abandoned"]
    assert [d["detail"]["path"] for d in abandoned] == [str(left)]
    text = maka(["plan", drill.session], drill.data, env=drill.env).stdout
    assert str(left) in text

    code, body = drill.resume("--restore-to")
    assert code == 0, body
    assert body["workspacePath"] == str(tmp_path / "work-restored-2")
    assert not (left / "report.txt").exists()  # the abandoned copy was not used
    assert (tmp_path / "work-restored-2" / "report.txt").read_text() == "done\n"


def test_a_continuation_in_a_restored_copy_can_itself_be_resumed(tmp_path: Path) -> None:
    drill, before = _drifted(tmp_path)
    args = ["resume", drill.session, "--json", "--permission-mode", "auto", "--restore-to"]
    killed = maka(args, drill.data, env={**drill.env, "MAKA_FAILPOINT": "P8"})
    assert killed.returncode == -9, killed.stderr  # the continuation, before its ending
    runs = committed_runs(drill.data)
    assert len(runs) == 2
    copy = tmp_path / "work-restored-1"
    assert (copy / "report.txt").read_text() == "done\n"
    drill.record.unlink(missing_ok=True)

    code, planned = _plan(drill)
    second_run = committed_runs(drill.data)[1][0].run_id
    assert planned["workspaceTransitions"] == [
        {
            "runId": second_run,
            "kind": "isolated_restore",
            "workspaceEpoch": 2,
            "decidedAt": planned["workspaceTransitions"][0]["decidedAt"],
            "text": f"Continued in a restored copy at {copy}",
        }
    ]
    text = maka(["plan", drill.session], drill.data, env=drill.env).stdout
    assert f"run {second_run}: Continued in a restored copy at {copy}" in text
    code, body = drill.resume()
    assert code == 0, body
    assert body["status"] == "completed"
    assert any(d["code"] == "workspace_verified" for d in body["diagnostics"])
    # The desktop's transcript marks where the session moved.
    from runtime.agent.transcript_projection import transcript_of_run

    marks = [
        entry.text
        for _, events in committed_runs(drill.data)
        for entry in transcript_of_run(events)
        if entry.type == "notice" and entry.text.startswith("Continued")
    ]
    assert marks == [f"Continued in a restored copy at {copy}."]
    runs = committed_runs(drill.data)
    assert len(runs) == 3
    third_header, third = runs[2]
    assert third_header.cwd == str(copy)
    assert third_header.workspace_identity == runs[1][0].workspace_identity
    assert "workspaceTransition" not in third[0].get("actions", {})
    epochs = {
        e["actions"]["workspaceCheckpoint"]["workspaceEpoch"]
        for e in third
        if "workspaceCheckpoint" in e.get("actions", {})
    }
    assert epochs == {2}
    assert _files(drill.work) == before


@pytest.mark.parametrize("decision", [["--restore-to"], ["--rebaseline"]])
def test_two_racing_decisions_make_exactly_one_continuation(
    tmp_path: Path, decision: list[str]
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    drill, before = _drifted(tmp_path)
    args = ["resume", drill.session, "--json", "--permission-mode", "auto", *decision]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: maka(args, drill.data, env=drill.env), range(2)))
    assert [r.returncode for r in results].count(0) == 1, [r.stderr for r in results]
    [loser] = [r for r in results if r.returncode != 0]
    # The loser waited and found the continuation (parked), or found the data folder held by
    # the winner (refused with its code): never a second continuation.
    if loser.returncode == 3:
        assert json.loads(loser.stdout)["rejectionReasons"] == ["continuation_already_exists"]
    else:
        assert loser.returncode == 1 and "store_locked" in loser.stderr, loser.stderr
    runs = committed_runs(drill.data)
    assert len(runs) == 2
    assert len(drill.requests()) == 2  # one continuation: its two model steps
    assert _files(drill.work) == before or decision == ["--rebaseline"]
    if decision == ["--restore-to"]:
        winner = runs[1][0].cwd  # where the one continuation runs
        copies = sorted(p for p in tmp_path.iterdir() if p.name.startswith("work-restored-"))
        # A loser that got as far as its copy leaves it, and the next plan names it.
        _, planned = _plan(drill)
        named = [
            d["detail"]["path"]
            for d in planned["diagnostics"]
            if d["code"] == "workspace_restore_abandoned"
        ]
        assert sorted([winner, *named]) == [str(p) for p in copies]


class _CountingRunner:
    def __init__(self) -> None:
        self.targets: list[Any] = []

    def run_continuation(self, target: Any, details: Any, start_event: Any) -> Any:
        from runtime.ledger.store_ports import RunStatus

        self.targets.append(target)
        return RunStatus.COMPLETED


def test_two_restores_planned_together_make_one_continuation(tmp_path: Path) -> None:
    """Both plans continue (planned before either executes); one continuation is admitted and
    the other is refused before any copy or provider call: the session already moved."""
    from app.host.resume_seam import resume_service
    from runtime.continuation.resume_service import ResumeRefused
    from runtime.continuation.workspace_decision import WorkspaceDecision
    from runtime.tools.tool_catalog import default_catalog
    from storage.checkpoints.checkpoint_store import GitCheckpointStore
    from storage.ledger.ledger_store import open_store

    drill, before = _drifted(tmp_path)
    code, _ = _plan(drill)  # startup recovery has run; the plan parks on the drift
    assert code == 3
    runner = _CountingRunner()
    with open_store(drill.data) as store:

        def service() -> Any:
            return resume_service(
                store,
                default_catalog().names,
                None,
                enabled=True,
                clock=lambda: 1,
                lifecycle=None,
                runner=runner,
                checkpoints=GitCheckpointStore(drill.data),
            )

        first, second = service(), service()
        restore = WorkspaceDecision.RESTORE
        plans = [s.plan_latest(drill.session, decision=restore) for s in (first, second)]
        assert all(plan.continues for plan in plans)
        first.execute(plans[0])
        with pytest.raises(ResumeRefused) as refused:
            second.execute(plans[1])
        assert refused.value.code == "workspace_identity_changed"
    assert [t.cwd for t in runner.targets] == [str(tmp_path / "work-restored-1")]
    assert len(committed_runs(drill.data)) == 2
    assert _files(drill.work) == before
    assert not (tmp_path / "work-restored-2").exists()


def test_the_notice_stays_in_the_history_of_later_generations(tmp_path: Path) -> None:
    drill, _ = _drifted(tmp_path)
    args = ["resume", drill.session, "--json", "--permission-mode", "auto", "--rebaseline"]
    killed = maka(args, drill.data, env={**drill.env, "MAKA_FAILPOINT": "P8"})
    assert killed.returncode == -9, killed.stderr
    drill.record.unlink(missing_ok=True)
    code, body = drill.resume()
    assert code == 0, body
    history = drill.requests()[0]["history"]
    notices = [item for item in history if item["type"] == "host_notice"]
    assert len(notices) == 1 and "- count.txt (modified)" in notices[0]["text"]
    # Where it was told: after the replayed first step, before the continuation's own step.
    kinds = [item["type"] for item in history]
    assert kinds.index("host_notice") == 4 and kinds[:4] == [
        "user",
        "assistant",
        "tool_call",
        "tool_result",
    ]
    runs = committed_runs(drill.data)
    assert len(runs) == 3
    assert "workspaceBaseline" not in runs[2][1][0].get("actions", {})


def test_the_copy_the_session_lives_in_is_not_called_abandoned_after_a_new_message(
    tmp_path: Path,
) -> None:
    """A new message in the restored copy starts a new lineage; the copy it runs in was made by
    a resume that did start, so the plan never calls it abandoned."""
    drill, before = _drifted(tmp_path)
    code, body = drill.resume("--restore-to")
    assert code == 0, body
    copy = tmp_path / "work-restored-1"
    second_turn = [{"text": "Again.", "toolCalls": [FIRST_STEP["toolCalls"][0]]}]
    script = write_script(
        tmp_path / "second.json", [SCRIPT[0], [*second_turn, {"error": {"message": "gone"}}]]
    )
    args = ["run", "--session", drill.session, "--permission-mode", "auto", "once more"]
    ran = maka(args, drill.data, env={**drill.env, "MAKA_SCRIPT_FILE": str(script)})
    assert ran.returncode == 1, ran.stderr  # the provider failed after the call ran
    assert (copy / "count.txt").read_text() == "x\nx\n"

    code, planned = _plan(drill)
    assert planned["sourceRunId"] == committed_runs(drill.data)[2][0].run_id
    assert not [d for d in planned["diagnostics"] if d["code"] == "workspace_restore_abandoned"]
    text = maka(["plan", drill.session], drill.data, env=drill.env).stdout
    assert "did not start" not in text
    assert _files(drill.work) == before


def test_the_restore_offer_says_what_snapshots_leave_out(tmp_path: Path) -> None:
    """A restored copy lacks what the snapshots' policy leaves out (docs/design/workspace.md section
    1): paths the folder's .gitignore ignores and files over 50 MiB. The offer says so, naming the
    big files of the snapshot it would copy, instead of claiming the folder as it was."""
    drill = Drill(tmp_path)
    (drill.work / ".gitignore").write_text("*.log\n")
    (drill.work / "build.log").write_text("ignored\n")
    with (drill.work / "data.bin").open("wb") as big:
        big.truncate(51 * 1024 * 1024)  # sparse: over the limit, nothing written
    drill.run()
    (drill.work / "a.txt").write_text("changed\n")

    text = maka(["plan", drill.session], drill.data, env=drill.env).stdout
    assert (
        "Snapshots leave out paths Git ignores in the folder (its .gitignore files, "
        ".git/info/exclude, your excludes file) unless it tracks them, and files over 50 MiB "
        "(here: data.bin), so "
        "the copy does not have them." in text
    ), text
    code, body = drill.resume("--restore-to")
    assert code == 0, body
    copy = tmp_path / "work-restored-1"
    assert (copy / "a.txt").read_text() == "alpha\n"
    assert not (copy / "build.log").exists() and not (copy / "data.bin").exists()


def test_the_rebaseline_summary_counts_the_changed_files_in_words(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.run()
    (drill.work / "a.txt").write_text("changed\n")
    args = ["resume", drill.session, "--permission-mode", "auto", "--rebaseline"]
    result = maka(args, drill.data, env=drill.env)
    assert result.returncode == 0, result.stderr
    assert "Continuing with your current files (1 file changed);" in result.stdout, result.stdout
    assert "file(s)" not in result.stdout


def test_a_refused_restore_folder_is_said_without_claiming_resume_can_continue(
    tmp_path: Path,
) -> None:
    drill, before = _drifted(tmp_path)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine\n")
    resume = ["resume", drill.session, "--permission-mode", "auto", "--restore-to"]
    for target, code in (
        (busy, "workspace_restore_target_not_empty"),
        (drill.work / "inside", "workspace_restore_target_inside"),
    ):
        result = maka([*resume, str(target)], drill.data, env=drill.env)
        assert result.returncode == 3, result.stdout + result.stderr
        assert "can continue" not in result.stdout, result.stdout
        assert "Continuing in a restored copy" not in result.stdout, result.stdout
        assert f"Safe resume refused before the provider was called: [{code}]" in result.stdout
        assert "Nothing was changed and nothing continued." in result.stdout
        assert f"maka resume {drill.session} --restore-to DIR" in result.stdout
        assert "Traceback" not in result.stderr
    assert _files(busy) == {"keep.txt": b"mine\n"}
    assert _files(drill.work) == before
    assert len(committed_runs(drill.data)) == 1 and drill.requests() == []

    # When it goes ahead, the plan's summary is still printed first.
    result = maka([*resume, str(tmp_path / "copy")], drill.data, env=drill.env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"Safe resume can continue session {drill.session}")
    assert "Continuing in a restored copy" in result.stdout


def test_doctor_notes_a_copy_left_by_a_killed_restore(tmp_path: Path) -> None:
    drill, _ = _drifted(tmp_path)
    args = ["resume", drill.session, "--json", "--permission-mode", "auto", "--restore-to"]
    killed = maka(
        args, drill.data, env={**drill.env, "MAKA_FAILPOINT": "after_restore_materialized"}
    )
    assert killed.returncode == -9, killed.stderr
    left = tmp_path / "work-restored-1"
    assert left.is_dir()

    result = maka(["doctor"], drill.data, env=drill.env)
    assert result.returncode == 0, result.stdout + result.stderr  # a note, not a problem
    [line] = [ln for ln in result.stdout.splitlines() if "workspace_restore_abandoned" in ln]
    assert line.startswith(f"note [workspace_restore_abandoned] session {drill.session}: ")
    assert f"a restored copy at {left} was made by a resume that did not start" in line
    assert "Maka will not use it" in line and "you may remove that folder" in line
    assert result.stdout.splitlines()[-1] == "ok"
    body = json.loads(maka(["doctor", "--json"], drill.data, env=drill.env).stdout)
    assert body["ok"] is True
    assert [(n["code"], n["sessionId"], n["path"]) for n in body["notes"]] == [
        ("workspace_restore_abandoned", drill.session, str(left))
    ]

    # Once a continuation moved to a copy, that copy is no note; the abandoned one still is.
    code, moved = drill.resume("--restore-to")
    assert code == 0, moved
    body = json.loads(maka(["doctor", "--json"], drill.data, env=drill.env).stdout)
    assert [n["path"] for n in body["notes"]] == [str(left)]


def test_a_folder_that_changed_type_while_stopped_is_drift_with_both_ways_forward(
    tmp_path: Path,
) -> None:
    drill = Drill(tmp_path)
    (drill.work / "lib").mkdir()
    (drill.work / "lib" / "mod.py").write_text("x = 1\n")
    (drill.work / "shared").mkdir()
    (drill.work / "shared" / "mod.py").write_text("x = 2\n")
    drill.run()
    shutil.rmtree(drill.work / "lib")
    (drill.work / "lib").symlink_to("shared")  # rm -r lib && ln -s shared lib
    (drill.work / "b.txt").unlink()
    (drill.work / "b.txt").mkdir()  # rm b.txt && mkdir b.txt && echo i > b.txt/i
    (drill.work / "b.txt" / "i").write_text("i\n")

    code, parked = _plan(drill)
    assert parked["rejectionReasons"] == ["workspace_drift"], parked
    assert parked["workspaceOptions"] == ["isolated_restore", "rebaseline"]
    code, body = drill.resume("--rebaseline")
    assert code == 0, body
    notice = drill.requests()[0]["history"][-1]["text"]
    for line in (
        "- b.txt (deleted)",
        "- b.txt/i (added)",
        "- lib (added)",
        "- lib/mod.py (deleted)",
    ):
        assert line in notice


def test_a_damaged_snapshot_is_refused_by_restore_and_found_by_doctor(tmp_path: Path) -> None:
    from tests.unit.test_checkpoint_verify import swap_blob

    drill, before = _drifted(tmp_path)
    runs = committed_runs(drill.data)
    checkpoint = [
        e["actions"]["workspaceCheckpoint"]
        for e in runs[0][1]
        if "workspaceCheckpoint" in e.get("actions", {})
    ][-1]
    from storage.checkpoints.checkpoint_store import GitCheckpointStore

    git_dir = GitCheckpointStore(drill.data).git_dir(checkpoint["workspaceIdentity"])
    import subprocess

    blob = subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-parse", f"{checkpoint['treeId']}:a.txt"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    doctor = maka(["doctor", "--json", "--verify-snapshots"], drill.data)
    assert doctor.returncode == 0, doctor.stdout
    swap_blob(git_dir, blob, b"planted\n")

    code, body = drill.resume("--restore-to")
    assert code != 0
    assert "workspace_restore_snapshot_damaged" in json.dumps(body), body
    assert not (tmp_path / "work-restored-1").exists()
    # The damaged object is kept aside, out of the store (a later capture of a folder still
    # holding its bytes writes it again: tests/e2e/test_cli_damaged_snapshot_aside.py).
    assert (git_dir / "maka-damaged" / blob).is_file()
    # Damaged again, with other bytes of the same size (a capture's own look at a blob it
    # stages finds a wrong size): in words, the refusal names the way on, the current files.
    loose = git_dir / "objects" / blob[:2] / blob[2:]
    loose.parent.mkdir(exist_ok=True)
    loose.write_bytes(zlib.compress(b"blob 6\0omega\n"))
    said = maka(
        ["resume", drill.session, "--permission-mode", "auto", "--restore-to"],
        drill.data,
        env={**drill.env, **FLAG},
    )
    assert "[workspace_restore_snapshot_damaged]" in said.stdout, said.stdout + said.stderr
    assert f"maka resume {drill.session} --rebaseline" in said.stdout, said.stdout
    assert "trying again can make the copy" in said.stdout, said.stdout
    # Or, the folder no longer holding those bytes, from an earlier snapshot: said before.
    assert "Otherwise the copy is made from an earlier snapshot that is whole" in said.stdout
    assert "your folder and the record are as they were" in said.stdout, said.stdout
    assert not (tmp_path / "work-restored-1").exists()
    assert _files(drill.work) == before
    assert len(committed_runs(drill.data)) == 1
    # A folder the user named for the copy: the retry names it too (it dropped it, and
    # would have made the copy in the default folder).
    loose.parent.mkdir(exist_ok=True)
    loose.write_bytes(zlib.compress(b"blob 6\0sigma\n"))
    named = tmp_path / "my copy"
    said = maka(
        ["resume", drill.session, "--permission-mode", "auto", "--restore-to", str(named)],
        drill.data,
        env={**drill.env, **FLAG},
    )
    assert "[workspace_restore_snapshot_damaged]" in said.stdout, said.stdout + said.stderr
    assert f"maka resume {drill.session} --restore-to '{named}'." in said.stdout, said.stdout
    assert not named.exists()

    # Set aside by the refusal: the plain doctor, which re-hashes nothing, says so too.
    plain = maka(["doctor", "--json"], drill.data)
    assert plain.returncode == 1, plain.stdout
    assert "workspace_checkpoint_damaged" in [
        p["code"] for p in json.loads(plain.stdout)["problems"]
    ]
    doctor = maka(["doctor", "--json", "--verify-snapshots"], drill.data)
    assert doctor.returncode == 1
    report = json.loads(doctor.stdout)
    codes = [problem["code"] for problem in report["problems"]]
    assert "workspace_checkpoint_damaged" in codes
    assert report["workspaceCheckpoints"]["damaged"] >= 1
    text = maka(["doctor", "--verify-snapshots"], drill.data).stdout
    assert "a.txt" in text and "workspace_checkpoint_damaged" in text


@pytest.mark.parametrize("command", ["/rebaseline", "/restore"])
def test_the_tui_answers_a_park_on_changed_files_itself(tmp_path: Path, command: str) -> None:
    """After a park on changed files the TUI names its own ways forward, and /rebaseline or
    /restore [DIR] continues as maka resume --rebaseline / --restore-to would."""
    drill, before = _drifted(tmp_path)
    copy = tmp_path / "the-copy"
    typed = command if command == "/rebaseline" else f"{command} {copy}"
    result = maka(
        ["tui", "--session", drill.session, "--permission-mode", "auto"],
        drill.data,
        env=drill.env,
        stdin=f"/resume\n{typed}\n/quit\n",
    )
    assert result.returncode == 0, result.stderr
    assert "workspace_drift" in result.stdout
    assert "/rebaseline or /restore [DIR]" in result.stdout, "the park names the TUI's answers"
    assert "Finished." in result.stdout, "the continuation ran"
    runs = committed_runs(drill.data)
    assert len(runs) == 2 and runs[1][0].continuation_source is not None
    start = runs[1][1][0]["actions"]
    if command == "/rebaseline":
        assert "workspaceBaseline" in start
        assert "Continued with your current files; 3 files changed: b.txt, count.txt, new.txt." in (
            result.stdout
        )
        assert (drill.work / "report.txt").read_text() == "done\n"
    else:
        transition = start["workspaceTransition"]
        assert transition["kind"] == "isolated_restore" and transition["toPath"] == str(copy)
        assert _files(drill.work) == before, "the user's folder is left as it is"
        assert (copy / "report.txt").read_text() == "done\n"


def test_the_tui_says_how_to_use_its_decision_commands(tmp_path: Path) -> None:
    drill, _before = _drifted(tmp_path)
    result = maka(
        ["tui", "--session", drill.session, "--permission-mode", "auto"],
        drill.data,
        env=drill.env,
        stdin="/rebaseline now\n/help\n/quit\n",
    )
    assert result.returncode == 0, result.stderr
    assert "usage: /rebaseline" in result.stdout
    assert "/restore [DIR]" in result.stdout
    assert len(committed_runs(drill.data)) == 1, "nothing continued"


def test_a_rebaseline_records_the_files_its_snapshot_left_out(tmp_path: Path) -> None:
    """A file over the size limit is left out of a rebaseline's snapshot as out of any: its
    fact names it (``skippedPaths``), ``maka checkpoints`` lists it, and a later resume from
    that snapshot says it was not compared. The fact did not carry it, so the plan claimed
    "the files are as they were at the stop" for a file it never looked at."""
    drill = Drill(tmp_path)
    drill.run()
    (drill.work / "count.txt").write_text("edited by the user\n")  # the drift decided on
    with open(drill.work / "big.bin", "wb") as big:  # sparse: over 50 MiB on no disk
        big.truncate(51 * 1024 * 1024)
    # Killed once the continuation is admitted: the baseline is its newest snapshot.
    env = {**drill.env, "MAKA_FAILPOINT": "after_continuation_admission_committed"}
    args = ["resume", drill.session, "--permission-mode", "auto", "--rebaseline"]
    continued = maka(args, drill.data, env=env)
    assert continued.returncode == -9, continued.stderr
    runs = committed_runs(drill.data)
    assert len(runs) == 2
    baseline = runs[1][1][0]["actions"]["workspaceBaseline"]
    assert baseline["skippedPaths"] == ["big.bin"], baseline
    assert not [e for e in runs[1][1] if "workspaceCheckpoint" in e.get("actions", {})]
    listed = json.loads(maka(["checkpoints", drill.session, "--json"], drill.data).stdout)
    rows = [row for run in listed["runs"] for row in run["checkpoints"]]
    assert rows[-1]["decision"] == "rebaseline" and rows[-1]["skippedPaths"] == ["big.bin"]
    plan = maka(["plan", drill.session, "--json"], drill.data, env=drill.env)
    verified = [
        d for d in json.loads(plan.stdout)["diagnostics"] if d["code"] == "workspace_verified"
    ]
    assert len(verified) == 1, plan.stdout
    assert verified[0]["message"] == (
        # as when the user chose to continue with them, not as at the stop (big.bin and the
        # edit to count.txt came after the stop)
        "the files are as they were when you decided about them after the stop, except 1 "
        "file over 50 MiB, not compared: big.bin"
    ), verified
