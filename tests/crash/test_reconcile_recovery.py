"""Reconciling interrupted file writes with the real command: ``maka run`` writing a file through
``write_file`` is SIGKILLed at P3 (temp file complete, target untouched) or P4 (file replaced, no
T2), then the next start (``maka plan`` / ``maka resume``) runs startup recovery with the file
reconciler. Also killed at P10, right after a recovery bundle commits, and started again."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from app.host.plan_report import recovery_sentence
from runtime.ledger.canonical_codec import canonical_json_bytes
from runtime.ledger.event_model import RuntimeEvent
from storage.sessions.workspace_identity import marker_bytes
from tests.helpers.maka_run import RunResult, committed_runs, maka, scripted_env, write_script

pytestmark = pytest.mark.crash

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
CONTENT = "hello, recovered world\n"
SCRIPT = [
    [
        {
            "text": "Writing the file.",
            "toolCalls": [
                {"id": "w1", "name": "write_file", "args": {"path": "out.txt", "content": CONTENT}}
            ],
        },
        {"text": "The file is written."},
    ]
]


class Drill:
    """One session writing ``out.txt`` in its own folder, driven through the real command."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.data = root / "data"
        self.work = root / "work"
        self.work.mkdir()
        self.record = root / "requests.jsonl"
        self.env = scripted_env(write_script(root / "script.json", SCRIPT), self.record)
        self.target = self.work / "out.txt"

    def run(self, failpoint: str | None) -> RunResult:
        env = dict(self.env)
        if failpoint:
            env["MAKA_FAILPOINT"] = failpoint
        args = ["run", "--cwd", str(self.work), "--permission-mode", "auto", "write the file"]
        return maka(args, self.data, env=env)

    @property
    def session(self) -> str:
        return committed_runs(self.data)[0][0].session_id

    def plan(self, *, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
        result = maka(["plan", self.session, "--json"], self.data, env={**self.env, **(env or {})})
        assert result.stdout.strip(), result.stderr
        return result.returncode, json.loads(result.stdout)

    def plan_text(self) -> RunResult:
        return maka(["plan", self.session], self.data, env=self.env)

    def resume(self) -> tuple[int, dict[str, Any]]:
        result = maka(
            ["resume", self.session, "--json", "--permission-mode", "auto"],
            self.data,
            env={**self.env, **FLAG},
        )
        assert result.stdout.strip(), result.stderr
        return result.returncode, json.loads(result.stdout)

    def source_events(self) -> list[RuntimeEvent]:
        return committed_runs(self.data)[0][1]

    def file_identity(self) -> tuple[bytes, int, int]:
        """Bytes, inode and mtime: a second write (even of the same bytes) changes the last two."""
        info = os.lstat(self.target)
        return self.target.read_bytes(), info.st_ino, info.st_mtime_ns


def _sentence(code: str) -> str:
    """The user-facing sentence for ``code`` (worded once, in the renderer's table)."""
    sentence = recovery_sentence(code)
    assert sentence is not None
    return sentence


def _response(events: list[RuntimeEvent]) -> RuntimeEvent:
    responses = [
        e
        for e in events
        if (c := e.get("content")) is not None and c["kind"] == "function_response"
    ]
    assert len(responses) == 1
    return responses[0]


def _recovery_kinds(events: list[RuntimeEvent]) -> list[str]:
    return [
        str(actions["toolRecovery"]["kind"])
        for e in events
        if "toolRecovery" in (actions := e.get("actions") or {})
    ]


def _only_operation(body: dict[str, Any]) -> dict[str, Any]:
    operations = body["operations"]
    assert len(operations) == 1
    return dict(operations[0])


def test_killed_at_p4_the_write_is_completed_by_recovery_and_safe_resume_continues(
    tmp_path: Path,
) -> None:
    drill = Drill(tmp_path / "crash")
    assert drill.run("P4").returncode == -9
    written = drill.file_identity()
    assert written[0] == CONTENT.encode()
    code, body = drill.resume()
    assert code == 0, body
    assert body["started"] is True and body["status"] == "completed"
    assert drill.file_identity() == written  # written exactly once: recovery never rewrote it
    events = drill.source_events()
    assert _recovery_kinds(events) == ["maka.tool.reconcile_result", "maka.tool.recovery_decision"]
    decision = [e for e in events if "toolRecovery" in (e.get("actions") or {})][-1]
    payload = decision["actions"]["toolRecovery"]["payload"]
    assert (payload["disposition"], payload["reasonCode"]) == (
        "completed",
        "reconcile_matches_expected_state",
    )
    recovered = _response(events)
    # the same write, run normally to its end in another session: the result is the same bytes
    normal = Drill(tmp_path / "normal")
    assert normal.run(None).returncode == 0
    normal_response = _response(normal.source_events())
    recovered_content, normal_content = recovered.get("content"), normal_response.get("content")
    assert recovered_content is not None and normal_content is not None
    assert recovered_content["kind"] == normal_content["kind"] == "function_response"
    assert canonical_json_bytes(recovered_content["result"]) == canonical_json_bytes(
        normal_content["result"]
    )
    assert "isError" not in recovered_content
    # the continuation handed the model the recovered result, and the user message only once
    last = [json.loads(line) for line in drill.record.read_text().splitlines()][-1]
    kinds = [item["type"] for item in last["history"]]
    assert kinds.count("user") == 1 and kinds[-2:] == ["tool_call", "tool_result"]
    code, body = drill.plan(env=FLAG)
    assert body["rejectionReasons"] == ["continuation_already_exists"]
    assert _only_operation(body)["status"] == "completed"
    assert _only_operation(body)["reason"] == "recovery_bundle_completed"


def test_killed_at_p3_the_untouched_file_parks_as_prior_state(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    assert drill.run("P3").returncode == -9
    assert not drill.target.exists()
    before = sorted(p.name for p in drill.work.iterdir())
    (temp,) = [name for name in before if name.startswith(".out.txt.maka-")]
    assert (drill.work / temp).read_text() == CONTENT
    code, body = drill.plan()
    assert code == 3
    operation = _only_operation(body)
    assert (operation["toolName"], operation["toolCallId"]) == ("write_file", "w1")
    assert (operation["status"], operation["reason"]) == ("parked", "reconcile_matches_prior_state")
    assert "temporaryFiles" not in operation
    assert body["rejectionReasons"] == ["resume_feature_disabled"]
    assert not drill.target.exists()  # never redone
    # Maka's own temporary file, holding exactly the bytes it was writing, is gone; nothing
    # else in the folder was touched.
    after = sorted(p.name for p in drill.work.iterdir())
    assert after == [name for name in before if name != temp]
    text = drill.plan_text()
    assert text.returncode == 3
    assert "write_file w1: parked (reconcile_matches_prior_state)" in text.stdout
    assert _sentence("reconcile_matches_prior_state") in text.stdout
    code, body = drill.resume()
    assert code == 3
    assert body["rejectionReasons"] == ["dangling_tool_state"]
    parked = [d for d in body["diagnostics"] if d["code"] == "tool_recovery_parked"]
    assert [d.get("toolCallId") for d in parked] == ["w1"]
    assert "reconcile_matches_prior_state" in parked[0]["message"]
    assert not drill.target.exists()


def test_a_temporary_file_that_is_not_what_maka_was_writing_is_kept_and_named(
    tmp_path: Path,
) -> None:
    drill = Drill(tmp_path)
    assert drill.run("P3").returncode == -9
    (temp,) = [p for p in drill.work.iterdir() if p.name.startswith(".out.txt.maka-")]
    temp.write_text(CONTENT + "someone added this\n")
    code, body = drill.plan()
    assert code == 3
    operation = _only_operation(body)
    assert operation["reason"] == "reconcile_matches_prior_state"
    assert operation["temporaryFiles"] == [temp.name]
    assert temp.read_text() == CONTENT + "someone added this\n", "never removed"
    text = drill.plan_text()
    assert f"{temp.name} is still in the folder" in text.stdout


def test_a_file_edited_between_crash_and_restart_parks_as_diverged_and_is_kept(
    tmp_path: Path,
) -> None:
    drill = Drill(tmp_path)
    assert drill.run("P4").returncode == -9
    drill.target.write_bytes(b"my own words\r\nnot Maka's\n")
    kept = drill.file_identity()
    code, body = drill.plan()
    assert code == 3
    assert (_only_operation(body)["status"], _only_operation(body)["reason"]) == (
        "parked",
        "reconcile_diverged",
    )
    assert drill.file_identity() == kept  # preserved byte for byte, never rewritten
    text = drill.plan_text()
    assert _sentence("reconcile_diverged") in text.stdout
    code, _ = drill.resume()
    assert code == 3
    assert drill.file_identity() == kept


@pytest.mark.parametrize("legacy", [False, True], ids=["marker", "legacy-marker"])
def test_a_marker_that_changed_identity_parks_as_unreadable(tmp_path: Path, legacy: bool) -> None:
    drill = Drill(tmp_path)
    assert drill.run("P4").returncode == -9
    marker = drill.work / ".maka" / "workspace.json"
    marker.unlink()
    if legacy:  # the folder as an older version would mark another workspace
        marker.parent.joinpath(".gitignore").unlink()
        marker.parent.rmdir()
        marker = drill.work / ".maka-workspace.json"
    marker.write_bytes(marker_bytes(str(uuid.uuid4()), 1))  # another workspace, same folder
    code, body = drill.plan()
    assert code == 3
    assert (_only_operation(body)["status"], _only_operation(body)["reason"]) == (
        "parked",
        "reconcile_unreadable",
    )
    assert _sentence("reconcile_unreadable") in drill.plan_text().stdout
    assert drill.target.read_bytes() == CONTENT.encode()


def test_a_folder_with_only_the_legacy_marker_recovers_as_the_same_workspace(
    tmp_path: Path,
) -> None:
    """Killed at P4, then the folder carries its identity the way older versions kept it: the
    write is still recognised as done in this workspace, and the marker moves into ``.maka``."""
    drill = Drill(tmp_path)
    assert drill.run("P4").returncode == -9
    written = drill.file_identity()
    marker = drill.work / ".maka" / "workspace.json"
    data = marker.read_bytes()
    marker.unlink()
    marker.parent.joinpath(".gitignore").unlink()
    marker.parent.rmdir()
    (drill.work / ".maka-workspace.json").write_bytes(data)
    code, body = drill.resume()
    assert code == 0, body
    assert body["started"] is True and body["status"] == "completed"
    assert drill.file_identity() == written  # never rewritten
    decision = [e for e in drill.source_events() if "toolRecovery" in (e.get("actions") or {})]
    payload = decision[-1]["actions"]["toolRecovery"]["payload"]
    assert payload["reasonCode"] == "reconcile_matches_expected_state"
    assert marker.read_bytes() == data
    assert not (drill.work / ".maka-workspace.json").exists()


@pytest.mark.parametrize("point", ["bundle_after_outcome_insert", "P10"])
def test_recovery_killed_around_the_bundle_commit_settles_it_once(
    tmp_path: Path, point: str
) -> None:
    """Inside the bundle transaction nothing is kept and the next start observes again; at P10
    (after ``COMMIT``) the bundle is kept and the next start skips the settled operation."""
    drill = Drill(tmp_path)
    assert drill.run("P4").returncode == -9
    written = drill.file_identity()
    session = drill.session
    killed = maka(
        ["plan", session, "--json"], drill.data, env={**drill.env, "MAKA_FAILPOINT": point}
    )
    assert killed.returncode == -9
    header, events = committed_runs(drill.data)[0]
    assert header.status == "running"  # killed before the run's ending was repaired
    expected = (
        ["maka.tool.reconcile_result", "maka.tool.recovery_decision"] if point == "P10" else []
    )
    assert _recovery_kinds(events) == expected
    assert not any(e.get("status") for e in events)
    code, body = drill.resume()
    assert code == 0, body
    header, events = committed_runs(drill.data)[0]
    assert header.status == "failed" and header.failure_class == "app_restarted"
    ids = [e["id"] for e in events]
    assert len(ids) == len(set(ids))
    assert _recovery_kinds(events) == ["maka.tool.reconcile_result", "maka.tool.recovery_decision"]
    assert len([e for e in events if e.get("status")]) == 1
    _response(events)  # exactly one outcome for the operation
    assert drill.file_identity() == written  # nothing written twice


def test_a_temporary_file_holding_what_the_parked_write_was_writing_is_said_to(
    tmp_path: Path,
) -> None:
    """A write parked with its own temporary file beside the target (its bytes exactly the
    write's): the plan said the file's content "is not what Maka was writing". It now says
    the file holds what the write was writing, and what the user may do with it."""
    drill = Drill(tmp_path)
    assert drill.run("P3").returncode == -9
    (temp,) = [p for p in drill.work.iterdir() if p.name.startswith(".out.txt.maka-")]
    assert temp.read_text() == CONTENT
    marker = drill.work / ".maka" / "workspace.json"
    marker.write_bytes(marker_bytes(str(uuid.uuid4()), 1))  # the folder cannot be proven
    code, body = drill.plan()
    assert code == 3
    operation = _only_operation(body)
    assert operation["reason"] == "reconcile_unreadable", operation
    assert operation["temporaryFiles"] == [temp.name]
    text = drill.plan_text().stdout
    assert (
        f"{temp.name} is still in the folder: a temporary file of this write holding exactly "
        "the bytes it was writing to out.txt"
    ) in text, text
    assert "not what Maka was writing" not in text
