"""Workspace checkpoints end to end (docs/design/workspace.md section 3): a real ``maka run`` killed
at a failpoint, then ``maka plan`` / ``maka resume`` compare the folder with the boundary checkpoint
(scripted provider, real tools, real store, the real ``git``)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
SCRIPT = [
    [
        {
            "text": "Counting.",
            "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "echo x >> count.txt"}}],
        },
        {"text": "Counted once."},
        {"text": "Carried on."},
    ]
]


class Drill:
    def __init__(self, tmp_path: Path, **env: str) -> None:
        self.data = tmp_path / "data"
        self.work = tmp_path / "work"
        self.work.mkdir(parents=True)
        (self.work / "a.txt").write_text("alpha\n")
        (self.work / "b.txt").write_text("beta\n")
        self.env = {
            **scripted_env(write_script(tmp_path / "script.json", SCRIPT), checkpoints=True),
            **env,
        }

    def run(self, failpoint: str) -> str:
        args = ["run", "--cwd", str(self.work), "--permission-mode", "auto", "count once"]
        result = maka(args, self.data, env={**self.env, "MAKA_FAILPOINT": failpoint})
        assert result.returncode == -9, result.stderr
        return result.stdout

    @property
    def session(self) -> str:
        return committed_runs(self.data)[0][0].session_id

    def plan(self) -> tuple[int, dict[str, Any]]:
        result = maka(["plan", self.session, "--json"], self.data, env={**self.env, **FLAG})
        assert result.stdout.strip(), result.stderr
        return result.returncode, json.loads(result.stdout)

    def resume(self) -> tuple[int, dict[str, Any]]:
        result = maka(
            ["resume", self.session, "--json", "--permission-mode", "auto"],
            self.data,
            env={**self.env, **FLAG},
        )
        assert result.stdout.strip(), result.stderr
        return result.returncode, json.loads(result.stdout)


def _diagnostic(body: dict[str, Any], code: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [d for d in body["diagnostics"] if d["code"] == code]
    assert found, body["diagnostics"]
    return found[0]


def test_no_edit_after_the_crash_continues_verified(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.run("P8")
    code, body = drill.resume()
    assert code == 0, body
    assert body["status"] == "completed"
    assert _diagnostic(body, "workspace_verified")
    runs = committed_runs(drill.data)
    # The continuation declared its mode and captured at its start.
    start = runs[-1][1][0]
    assert start["actions"]["runtimeProtocol"]["workspaceCheckpoints"] == {"mode": "git_v1"}
    assert any("workspaceCheckpoint" in e.get("actions", {}) for e in runs[-1][1])


def test_an_edit_after_the_crash_parks_with_workspace_drift_naming_it(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.run("P8")
    (drill.work / "count.txt").write_text("edited by the user\n")
    (drill.work / "new.txt").write_text("new\n")
    (drill.work / "b.txt").unlink()
    code, body = drill.plan()
    assert code == 3
    assert body["rejectionReasons"] == ["workspace_drift"]
    drift = _diagnostic(body, "workspace_drift")
    assert drift["detail"]["changedPaths"] == [
        {"path": "b.txt", "change": "deleted"},
        {"path": "count.txt", "change": "modified"},
        {"path": "new.txt", "change": "added"},
    ]
    text = maka(["plan", drill.session], drill.data, env={**drill.env, **FLAG}).stdout
    assert "count.txt" in text and "new.txt" in text
    code, body = drill.resume()
    assert code == 3 and body["rejectionReasons"] == ["workspace_drift"]
    assert len(committed_runs(drill.data)) == 1  # nothing was started


@pytest.mark.parametrize("failpoint", ["P5", "P6", "P7"])
def test_a_write_after_its_t2_but_before_the_capture_is_stale(
    tmp_path: Path, failpoint: str
) -> None:
    drill = Drill(tmp_path)
    drill.run(failpoint)  # T2 committed; the capture that follows it never ran
    code, body = drill.plan()
    assert code == 3
    assert body["rejectionReasons"] == ["workspace_checkpoint_stale"]
    stale = _diagnostic(body, "workspace_checkpoint_stale")
    # The command is named by what it ran, and the file it changed since the snapshot listed.
    assert stale["message"].startswith('the command "echo x >> count.txt" may have changed')
    assert {"path": "count.txt", "change": "added"} in stale["detail"]["changedPaths"]


def test_a_deleted_checkpoint_store_fails_closed(tmp_path: Path) -> None:
    """With the store deleted, an unchanged folder is still proven by its tree (the one the
    ledger recorded); a changed one cannot be compared and fails closed."""
    drill = Drill(tmp_path)
    drill.run("P8")
    shutil.rmtree(drill.data / "checkpoints")
    code, body = drill.plan()
    assert code == 0, body
    assert _diagnostic(body, "workspace_verified")["detail"]["comparedBy"] == "treeId"
    assert not (drill.data / "checkpoints").exists()  # (looking made no store again)
    (drill.work / "b.txt").write_text("edited while the store was gone\n")
    code, body = drill.plan()
    assert code == 3
    assert body["rejectionReasons"] == ["workspace_checkpoint_missing"]


def test_without_git_the_session_resumes_as_before(tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("sh", "bash"):
        found = shutil.which(name)
        assert found is not None
        os.symlink(found, tools / name)
    drill = Drill(tmp_path, PATH=str(tools))
    said = drill.run("P8")
    assert "[checkpoints] off for this run [checkpoint_git_missing]" in said
    [(_, events)] = committed_runs(drill.data)
    assert events[0]["actions"]["runtimeProtocol"]["workspaceCheckpoints"] == {
        "mode": "unavailable",
        "reasonCode": "checkpoint_git_missing",
    }
    (drill.work / "count.txt").write_text("edited, and nobody can tell\n")
    code, body = drill.resume()
    assert code == 0, body
    unavailable = _diagnostic(body, "workspace_checkpoint_unavailable")
    assert unavailable["detail"] == {"reasonCode": "checkpoint_git_missing"}


def test_checkpoints_and_doctor_list_facts_refs_orphans_and_missing(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.run("after_checkpoint_artifact")  # the run's first capture: a ref without its fact
    listed = maka(["checkpoints", drill.session, "--json"], drill.data, env=drill.env)
    assert listed.returncode == 0, listed.stderr
    [run] = json.loads(listed.stdout)["runs"]
    assert run["mode"] == {"mode": "git_v1"} and run["checkpoints"] == []
    doctor = maka(["doctor", "--json"], drill.data, env=drill.env)
    report = json.loads(doctor.stdout)["workspaceCheckpoints"]
    assert report["facts"] == 0 and report["refs"] == 1 and len(report["orphans"]) == 1
    assert doctor.returncode == 0  # an orphan is not a problem

    second = Drill(tmp_path / "second")
    second.run("P8")
    listed = maka(["checkpoints", second.session], second.data, env=second.env)
    assert listed.returncode == 0 and "mode git_v1" in listed.stdout
    assert listed.stdout.count("present") == 2
    body = json.loads(maka(["checkpoints", second.session, "--json"], second.data).stdout)
    refs = [c["checkpointRef"] for c in body["runs"][0]["checkpoints"]]
    assert len(refs) == 2 and all(c["present"] for c in body["runs"][0]["checkpoints"])
    shutil.rmtree(second.data / "checkpoints")
    doctor = maka(["doctor", "--json"], second.data, env=second.env)
    assert doctor.returncode == 1
    codes = [p["code"] for p in json.loads(doctor.stdout)["problems"]]
    assert codes == ["workspace_checkpoint_missing", "workspace_checkpoint_missing"]
    missing = maka(["checkpoints", "nope"], second.data)
    assert missing.returncode == 2 and "session_not_found" in missing.stderr


class _Runner:
    def __init__(self) -> None:
        self.runs = 0

    def run_continuation(self, target: Any, details: Any, start_event: Any) -> Any:
        self.runs += 1
        raise AssertionError("the provider must not be reached")


def test_a_file_changed_between_plan_and_execution_refuses_before_the_provider(
    tmp_path: Path,
) -> None:
    from app.host.resume_seam import resume_service
    from runtime.continuation.resume_service import ResumeRefused
    from runtime.tools.tool_catalog import default_catalog
    from storage.checkpoints.checkpoint_store import GitCheckpointStore
    from storage.ledger.ledger_store import open_store

    drill = Drill(tmp_path)
    drill.run("P8")
    code, body = drill.plan()  # repairs the run (startup recovery) and finds it verified
    assert code == 0 and _diagnostic(body, "workspace_verified")
    runner = _Runner()
    with open_store(drill.data) as store:
        service = resume_service(
            store,
            default_catalog().names,
            None,
            enabled=True,
            clock=lambda: 1,
            lifecycle=None,
            runner=runner,
            checkpoints=GitCheckpointStore(drill.data),
        )
        plan = service.plan_latest(drill.session)
        assert plan.continues
        (drill.work / "a.txt").write_text("changed after the plan\n")
        with pytest.raises(ResumeRefused) as refused:
            service.execute(plan)
        assert refused.value.code == "workspace_tree_changed"
    assert runner.runs == 0
    assert len(committed_runs(drill.data)) == 1  # nothing admitted


def test_a_file_name_with_a_newline_stays_on_its_line_of_the_plan(tmp_path: Path) -> None:
    """A file added after the crash whose name holds a newline and a fake entry: ``maka plan``
    shows it quoted on one line, so the folder seems to have lost no file it still has."""
    drill = Drill(tmp_path)
    drill.run("P8")
    (drill.work / "notes.txt\n      deleted  a.txt").write_text("x\n")
    result = maka(["plan", drill.session], drill.data, env={**drill.env, **FLAG})
    assert result.returncode == 3, result.stderr
    assert "      added    'notes.txt\\n      deleted  a.txt'" in result.stdout, result.stdout
    assert not any(line.strip().startswith("deleted") for line in result.stdout.splitlines())


def test_a_file_newly_ignored_is_left_out_not_deleted(tmp_path: Path) -> None:
    """A file the folder still has, which an ignore rule added after the crash leaves out of
    the next snapshot: the drift list says "left out", not "deleted" (it is still there)."""
    drill = Drill(tmp_path)
    drill.run("P8")
    (drill.work / ".gitignore").write_text("b.txt\n")
    result = maka(["plan", drill.session], drill.data, env={**drill.env, **FLAG})
    assert result.returncode == 3, result.stderr
    assert "      left out b.txt" in result.stdout, result.stdout
    assert "deleted  b.txt" not in result.stdout
    assert "still in the folder, but snapshots leave it out now" in result.stdout
    # Among the reasons it says: Git no longer tracking it (it named only the rule and size).
    assert "or Git no longer tracks it (git rm --cached)" in result.stdout, result.stdout
    _, body = drill.plan()
    drift = _diagnostic(body, "workspace_drift")
    assert drift["detail"]["leftOutPaths"] == ["b.txt"], drift
    assert {"path": "b.txt", "change": "deleted"} in drift["detail"]["changedPaths"]


def test_lost_snapshots_a_rebaseline_took_the_place_of_are_a_note_not_a_problem(
    tmp_path: Path,
) -> None:
    """The checkpoint store deleted after a crash: ``maka doctor`` names the lost snapshots as
    problems and says the way on; once ``resume --rebaseline`` has taken a snapshot of its own,
    no resume depends on them and doctor notes them instead. Doctor stayed at two problems
    (exit 1) for good, with no command that could clear them."""
    drill = Drill(tmp_path)
    drill.run("P8")
    shutil.rmtree(drill.data / "checkpoints")
    (drill.work / "b.txt").write_text("edited while the store was gone\n")
    before = maka(["doctor", "--json"], drill.data, env=drill.env)
    assert before.returncode == 1, before.stdout
    problems = [
        p
        for p in json.loads(before.stdout)["problems"]
        if p["code"] == "workspace_checkpoint_missing"
    ]
    assert len(problems) == 2, problems
    assert f"resume {drill.session} --rebaseline" in problems[-1]["message"], problems
    resumed = maka(
        ["resume", drill.session, "--rebaseline", "--permission-mode", "auto"],
        drill.data,
        env={**drill.env, **FLAG},
    )
    assert resumed.returncode == 0, resumed.stderr
    after = maka(["doctor", "--json"], drill.data, env=drill.env)
    document = json.loads(after.stdout)
    assert after.returncode == 0, document["problems"]
    [note] = [n for n in document["notes"] if n["code"] == "workspace_checkpoint_missing"]
    assert note["sessionId"] == drill.session, note
    assert (
        note["message"].startswith("2 earlier snapshot(s)")
        and "resume is unaffected" in (note["message"])
    )
    assert len(document["workspaceCheckpoints"]["superseded"]) == 2
    text = maka(["doctor"], drill.data, env=drill.env).stdout
    assert f"note [workspace_checkpoint_missing] session {drill.session}: 2 earlier" in text, text
