"""The real safety inspector behind Safe resume: marker, folder, tool catalog, background shells."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.host.safety_inspector import SafetyInspector
from runtime.continuation.lifecycle_log import LifecycleLog
from runtime.continuation.resume_service import ResumeService
from runtime.ledger.codes import DiagnosticCode, ParkReason
from runtime.tools.process_tree import BackgroundShellRegistry, ShellRecord, process_create_time
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from storage.sessions.workspace_identity import MARKER_NAME, resolve_workspace_identity
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    dispatch_event,
    user_text,
)
from tests.helpers.resume_fixtures import TOOLS, now_ms, recover, seed_interrupted_run

IDS = RunIds(session_id="sess-i", invocation_id="inv-i", run_id="run-i", turn_id="turn-i")
SECRET = "canary-SECRET-4f1c9e"


def _interrupted(tmp_path: Path, prompt: str = "write the file") -> tuple[SqliteLedgerStore, Path]:
    work = tmp_path / "work"
    work.mkdir()
    identity = resolve_workspace_identity(work).identity
    call = call_event("call-1", "write_file", {"path": "a.txt", "content": prompt}, ids=IDS, ts=2)
    events = [
        user_text(prompt, ids=IDS, marker=True),
        call,
        dispatch_event(call, recovery_mode="reconcile"),
        bound_response(call, {"written": prompt}),
    ]
    with open_store(tmp_path / "data") as store:
        seed_interrupted_run(store, IDS, events, cwd=str(work), workspace_identity=identity)
    store, _ = recover(tmp_path / "data")
    return store, work


def _service(
    store: SqliteLedgerStore,
    tmp_path: Path,
    tools: tuple[str, ...] = TOOLS,
    log: LifecycleLog | None = None,
) -> tuple[ResumeService, BackgroundShellRegistry]:
    shells = BackgroundShellRegistry(tmp_path / "data" / "background-shells.jsonl")
    inspector = SafetyInspector(lambda: tools, shells)
    return ResumeService(store, inspector, None, enabled=True, now_ms=now_ms, lifecycle=log), shells


def test_an_unchanged_workspace_continues(tmp_path: Path) -> None:
    store, _ = _interrupted(tmp_path)
    assert _service(store, tmp_path)[0].plan_latest(IDS.session_id).continues
    store.close()


def test_a_replaced_marker_is_another_workspace(tmp_path: Path) -> None:
    store, work = _interrupted(tmp_path)
    (work / MARKER_NAME).unlink()
    resolve_workspace_identity(work)  # someone else's workspace now lives here
    plan = _service(store, tmp_path)[0].plan_latest(IDS.session_id)
    assert plan.rejection_reasons == (ParkReason.WORKSPACE_IDENTITY_MISMATCH,)
    store.close()


def test_an_invalid_marker_makes_the_observation_unavailable(tmp_path: Path) -> None:
    store, work = _interrupted(tmp_path)
    (work / MARKER_NAME).write_text("{not json")
    plan = _service(store, tmp_path)[0].plan_latest(IDS.session_id)
    assert plan.rejection_reasons == (ParkReason.SAFETY_OBSERVATION_UNAVAILABLE,)
    assert (work / MARKER_NAME).read_text() == "{not json"  # never silently replaced
    store.close()


def test_a_removed_tool_parks_with_tool_catalog_mismatch(tmp_path: Path) -> None:
    store, _ = _interrupted(tmp_path)
    tools = tuple(name for name in TOOLS if name != "write_file")
    plan = _service(store, tmp_path, tools)[0].plan_latest(IDS.session_id)
    assert plan.rejection_reasons == (ParkReason.TOOL_CATALOG_MISMATCH,)
    assert plan.diagnostics[0].detail == {"unavailableToolNames": ["write_file"]}
    store.close()


def test_a_live_background_shell_parks_until_it_ends(tmp_path: Path) -> None:
    store, _ = _interrupted(tmp_path)
    service, shells = _service(store, tmp_path)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        shells.record(
            ShellRecord(
                pid=sleeper.pid,
                create_time=process_create_time(sleeper.pid),
                session_id=IDS.session_id,
                run_id=IDS.run_id,
                command="sleep 60 &",
                started_at=now_ms(),
            )
        )
        plan = service.plan_latest(IDS.session_id)
        assert plan.rejection_reasons == (ParkReason.BACKGROUND_OPERATION_PENDING,)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert service.plan_latest(IDS.session_id).continues
    store.close()


def test_a_reused_pid_is_not_our_shell(tmp_path: Path) -> None:
    store, _ = _interrupted(tmp_path)
    service, shells = _service(store, tmp_path)
    shells.record(
        ShellRecord(
            pid=os.getpid(),
            create_time=process_create_time(os.getpid()) - 1000.0,
            session_id=IDS.session_id,
            run_id=IDS.run_id,
            command="an old shell whose pid was reused",
            started_at=now_ms(),
        )
    )
    assert service.plan_latest(IDS.session_id).continues
    store.close()


def test_moving_the_folder_only_adds_workspace_location_changed(tmp_path: Path) -> None:
    store, work = _interrupted(tmp_path)
    moved = tmp_path / "moved"
    work.rename(moved)
    work.symlink_to(moved, target_is_directory=True)  # the session's path now leads elsewhere
    plan = _service(store, tmp_path)[0].plan_latest(IDS.session_id)
    assert plan.continues
    # A run without workspace checkpoints also says so (diagnostic only,
    # docs/design/workspace.md section 3).
    assert [d.code for d in plan.diagnostics] == [
        DiagnosticCode.WORKSPACE_LOCATION_CHANGED.value,
        DiagnosticCode.WORKSPACE_CHECKPOINT_UNAVAILABLE.value,
    ]
    store.close()


def test_a_missing_folder_parks_as_folder_missing_naming_it(tmp_path: Path) -> None:
    store, work = _interrupted(tmp_path)
    work.rename(tmp_path / "elsewhere")
    plan = _service(store, tmp_path)[0].plan_latest(IDS.session_id)
    assert plan.rejection_reasons == (ParkReason.WORKSPACE_FOLDER_MISSING,)
    messages = " ".join(d.message for d in plan.diagnostics)
    assert str(work) in messages and "Error" not in messages
    store.close()


@pytest.mark.parametrize("outcome", ["approved", "parked"])
def test_no_prompt_argument_or_result_reaches_the_lifecycle_log(
    tmp_path: Path, outcome: str
) -> None:
    store, work = _interrupted(tmp_path, prompt=f"use the key {SECRET} please")
    if outcome == "parked":
        (work / MARKER_NAME).unlink()
        resolve_workspace_identity(work)
    log = LifecycleLog(tmp_path / "data" / "logs" / "lifecycle.jsonl", now_ms)
    plan = _service(store, tmp_path, log=log)[0].plan_latest(IDS.session_id)
    assert plan.continues is (outcome == "approved")
    text = log.path.read_text(encoding="utf-8")
    assert SECRET not in text
    record = json.loads(text.splitlines()[0])
    assert record["event"] == f"plan_{outcome}"
    assert set(record) <= {
        "ts",
        "event",
        "automatic",
        "sessionId",
        "sourceRunId",
        "targetRunId",
        "claimId",
        "sourceRuntimeEventHighWater",
        "rejectionReasons",
        "diagnosticCodes",
    }
    store.close()
