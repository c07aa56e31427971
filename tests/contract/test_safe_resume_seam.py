"""Startup recovery and the Safe resume seam over a real SQLite store.

Each test seeds a run the way a crashed process leaves it, plays the next start (new owner epoch,
startup recovery) and asks ``plan_latest`` / ``execute`` what the product would tell its user.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from runtime.continuation.continuation_planner import ContinuationDetails, ContinuationPlan
from runtime.continuation.lifecycle_log import LifecycleLog
from runtime.continuation.resume_service import ResumeRefused, ResumeService
from runtime.ledger.codes import DiagnosticCode, FailureClass, ParkReason, RevalidationCode
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import RunHeader, RunStatus
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    dispatch_event,
    model_text,
    terminal,
    user_text,
    with_changes,
)
from tests.helpers.resume_fixtures import (
    FakeInspector,
    now_ms,
    observation,
    recover,
    seed_interrupted_run,
)
from tests.helpers.store_tampering import edit_behind_the_back

IDS = RunIds(session_id="sess-a", invocation_id="inv-a", run_id="run-a", turn_id="turn-a")


@dataclass
class RecordingRunner:
    """Stands in for the agent loop: records what it was asked to run and ends the target."""

    store: SqliteLedgerStore
    runs: list[tuple[RunHeader, ContinuationDetails, RuntimeEvent]] = field(default_factory=list)

    def run_continuation(
        self, target: RunHeader, details: ContinuationDetails, start_event: RuntimeEvent
    ) -> RunStatus:
        self.runs.append((target, details, start_event))
        self.store.mark_run_running(target.run_id)
        ids = RunIds(target.session_id, target.invocation_id, target.run_id, target.turn_id)
        self.store.append_event(model_text("continued", event_id=f"{target.run_id}-text", ids=ids))
        self.store.commit_run_ending(
            terminal(ids, event_id=f"{target.run_id}-end"), RunStatus.COMPLETED, None
        )
        return RunStatus.COMPLETED


def tool_turn_events(ending: str) -> list[RuntimeEvent]:
    call = call_event("call-1", "bash", {"command": "echo hi >> log"}, ids=IDS, ts=2)
    dispatch = dispatch_event(call, recovery_mode="never_auto_retry")
    events = [user_text("run it", ids=IDS, marker=True), call]
    if ending in ("dispatched", "responded"):
        events.append(dispatch)
    if ending == "responded":
        events.append(bound_response(call, {"exitCode": 0}))
    return events


def service(
    store: SqliteLedgerStore,
    cwd: str,
    *,
    enabled: bool = True,
    inspector: FakeInspector | None = None,
    log: LifecycleLog | None = None,
) -> tuple[ResumeService, RecordingRunner, FakeInspector]:
    chosen = inspector or FakeInspector(observation(cwd))
    runner = RecordingRunner(store)
    return (
        ResumeService(store, chosen, runner, enabled=enabled, now_ms=now_ms, lifecycle=log),
        runner,
        chosen,
    )


def interrupted(tmp_path: Path, events: list[RuntimeEvent]) -> tuple[SqliteLedgerStore, str]:
    cwd = str(tmp_path / "work")
    with open_store(tmp_path / "data") as store:
        seed_interrupted_run(store, IDS, events, cwd=cwd)
    store, report = recover(tmp_path / "data")
    assert [r.run_id for r in report.repaired] == [IDS.run_id]
    return store, cwd


def test_recovery_ends_an_orphaned_run_failed_with_app_restarted(tmp_path: Path) -> None:
    store, _ = interrupted(tmp_path, tool_turn_events("responded"))
    header = store.read_run_header(IDS.run_id)
    assert header is not None
    assert header.status is RunStatus.FAILED
    assert header.failure_class == FailureClass.APP_RESTARTED
    last = store.read_run_events(IDS.run_id)[-1].event
    assert last["status"] == "failed"
    assert last["actions"]["stateDelta"]["failureClass"] == "app_restarted"
    # idempotent: the next start finds nothing to repair
    store.close()
    again, report = recover(tmp_path / "data")
    assert report.repaired == ()
    assert len(again.read_run_events(IDS.run_id)) == 5
    again.close()


def test_recovery_leaves_runs_of_the_live_epoch_alone(tmp_path: Path) -> None:
    cwd = str(tmp_path / "work")
    store, report = recover(tmp_path / "data")
    seed_interrupted_run(store, IDS, tool_turn_events("responded"), cwd=cwd)
    from runtime.recovery.startup_recovery import run_startup_recovery

    # a second recovery pass in another process bumps the epoch: only then is the run orphaned
    assert report.repaired == ()
    header = store.read_run_header(IDS.run_id)
    assert header is not None and header.status is RunStatus.RUNNING
    resume, _, _ = service(store, cwd)
    assert resume.plan_latest(IDS.session_id).rejection_reasons == (ParkReason.SESSION_BUSY,)
    second = run_startup_recovery(store, now_ms)
    assert [r.run_id for r in second.repaired] == [IDS.run_id]
    store.close()


def test_recovery_closes_open_permission_requests_before_the_ending(tmp_path: Path) -> None:
    call = call_event("call-1", "bash", {"command": "rm -rf build"}, ids=IDS, ts=2)
    request = user_text("x", ids=IDS, event_id="evt-perm", ts=3)
    request = with_changes(
        request,
        role="system",
        author="host",
        content={"kind": "text", "text": "permission asked"},
        actions={
            "permissionRequest": {
                "requestId": "req-1",
                "toolName": "bash",
                "toolCallId": "call-1",
                "summary": "rm -rf build",
            }
        },
    )
    store, cwd = interrupted(tmp_path, [user_text("go", ids=IDS, marker=True), call, request])
    events = [row.event for row in store.read_run_events(IDS.run_id)]
    closure = events[-2]
    assert closure["actions"] == {
        "permissionClosure": {"requestId": "req-1", "reason": "host_restarted"}
    }
    assert events[-1]["actions"]["stateDelta"]["recoveryReason"] == "stale_user_wait"
    plan = service(store, cwd)[0].plan_latest(IDS.session_id)
    # the call never crossed T1 under the marker: trimmed, and the history is resumable
    assert plan.continues, plan.to_json()
    store.close()


def test_a_settled_tool_turn_continues_with_the_committed_history(tmp_path: Path) -> None:
    store, cwd = interrupted(tmp_path, tool_turn_events("responded"))
    log = LifecycleLog(tmp_path / "data" / "logs" / "lifecycle.jsonl", now_ms)
    resume, runner, _ = service(store, cwd, log=log)
    plan = resume.plan_latest(IDS.session_id)
    assert plan.continues, plan.to_json()
    details = plan.continuation
    assert details is not None
    assert [item.kind.value for item in details.provider_items] == [
        "text",
        "tool_call",
        "tool_result",
    ]
    result = resume.execute(plan)
    assert result.status is RunStatus.COMPLETED
    target, _, start = runner.runs[0]
    stored = store.read_run_events(target.run_id)
    assert stored[0].event["id"] == start["id"]
    assert stored[0].event["actions"]["continuationStart"]["immediateSource"]["runId"] == "run-a"
    assert not any(row.event["role"] == "user" for row in stored)
    header = store.read_run_header(target.run_id)
    assert header is not None and header.continuation_source is not None
    assert header.continuation_source["sourceRunId"] == IDS.run_id
    assert header.parent_run_id == IDS.run_id
    # the same boundary again: already resumed
    again = resume.plan_latest(IDS.session_id)
    assert again.rejection_reasons == (ParkReason.CONTINUATION_ALREADY_EXISTS,)
    records = [json.loads(line) for line in log.path.read_text().splitlines()]
    assert [r["event"] for r in records] == [
        "plan_approved",
        "execution_started",
        "execution_completed",
        "plan_parked",
    ]
    store.close()


def test_a_dispatched_call_without_result_parks_with_dangling_tool_state(tmp_path: Path) -> None:
    store, cwd = interrupted(tmp_path, tool_turn_events("dispatched"))
    plan = service(store, cwd)[0].plan_latest(IDS.session_id)
    assert plan.rejection_reasons == (ParkReason.DANGLING_TOOL_STATE,)
    assert plan.diagnostics[0].tool_call_id == "call-1"
    assert plan.diagnostics[0].code == "pending_tool_result"
    store.close()


def test_an_undispatched_call_is_trimmed_from_the_replay(tmp_path: Path) -> None:
    store, cwd = interrupted(tmp_path, tool_turn_events("called"))
    plan = service(store, cwd)[0].plan_latest(IDS.session_id)
    assert plan.continues
    assert plan.continuation is not None
    replay_ids = [event["id"] for event in plan.continuation.runtime_context]
    assert "evt-user" in replay_ids
    assert not any("call" in event_id for event_id in replay_ids)
    store.close()


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"identity": "workspace:v1:other"}, ParkReason.WORKSPACE_IDENTITY_MISMATCH),
        ({"settled": False}, ParkReason.BACKGROUND_OPERATION_PENDING),
        ({"tools": ("read_file",)}, ParkReason.TOOL_CATALOG_MISMATCH),
    ],
)
def test_safety_observations_park_with_their_code(
    tmp_path: Path, kwargs: dict[str, Any], reason: ParkReason
) -> None:
    store, cwd = interrupted(tmp_path, tool_turn_events("responded"))
    inspector = FakeInspector(observation(cwd, **kwargs))
    plan = service(store, cwd, inspector=inspector)[0].plan_latest(IDS.session_id)
    assert plan.rejection_reasons == (reason,)
    assert not plan.continues
    store.close()


def test_a_moved_folder_is_only_a_diagnostic(tmp_path: Path) -> None:
    store, cwd = interrupted(tmp_path, tool_turn_events("responded"))
    inspector = FakeInspector(observation(cwd + "-moved"))
    plan = service(store, cwd, inspector=inspector)[0].plan_latest(IDS.session_id)
    assert plan.continues
    # A run without workspace checkpoints also says so (diagnostic only,
    # docs/design/workspace.md section 3).
    assert [d.code for d in plan.diagnostics] == [
        DiagnosticCode.WORKSPACE_LOCATION_CHANGED.value,
        DiagnosticCode.WORKSPACE_CHECKPOINT_UNAVAILABLE.value,
    ]
    store.close()


def test_early_parks_have_exactly_one_reason(tmp_path: Path) -> None:
    store, cwd = interrupted(tmp_path, tool_turn_events("responded"))
    assert service(store, cwd, enabled=False)[0].plan_latest(IDS.session_id).rejection_reasons == (
        ParkReason.RESUME_FEATURE_DISABLED,
    )
    no_inspector = ResumeService(store, None, None, enabled=True, now_ms=now_ms)
    assert no_inspector.plan_latest(IDS.session_id).rejection_reasons == (
        ParkReason.SAFETY_OBSERVATION_UNAVAILABLE,
    )
    failing = FakeInspector(observation(cwd), error=OSError("marker unreadable"))
    assert service(store, cwd, inspector=failing)[0].plan_latest(
        IDS.session_id
    ).rejection_reasons == (ParkReason.SAFETY_OBSERVATION_UNAVAILABLE,)
    assert service(store, cwd)[0].plan_latest("sess-none").rejection_reasons == (
        ParkReason.RESUME_CANDIDATE_MISSING,
    )
    store.close()


def test_a_run_without_workspace_identity_parks(tmp_path: Path) -> None:
    cwd = str(tmp_path / "work")
    with open_store(tmp_path / "data") as store:
        seed_interrupted_run(
            store, IDS, tool_turn_events("responded"), cwd=cwd, workspace_identity=None
        )
    store, _ = recover(tmp_path / "data")
    plan = service(store, cwd)[0].plan_latest(IDS.session_id)
    assert plan.rejection_reasons == (ParkReason.WORKSPACE_IDENTITY_MISSING,)
    store.close()


def _plan(store: SqliteLedgerStore, cwd: str) -> tuple[ResumeService, ContinuationPlan]:
    resume, _, _ = service(store, cwd)
    plan = resume.plan_latest(IDS.session_id)
    assert plan.continues
    return resume, plan


def test_execution_refuses_when_the_workspace_changed_after_planning(tmp_path: Path) -> None:
    store, cwd = interrupted(tmp_path, tool_turn_events("responded"))
    for later, code in [
        (observation(cwd, identity="workspace:v1:x"), RevalidationCode.WORKSPACE_IDENTITY_CHANGED),
        (observation(cwd, settled=False), RevalidationCode.BACKGROUND_OPERATION_STARTED),
        (observation(cwd, tools=("bash",)), RevalidationCode.TOOL_CATALOG_CHANGED),
    ]:
        inspector = FakeInspector(observation(cwd), later=[later])
        resume, runner, _ = service(store, cwd, inspector=inspector)
        plan = resume.plan_latest(IDS.session_id)
        with pytest.raises(ResumeRefused) as refused:
            resume.execute(plan)
        assert refused.value.code == code
        assert runner.runs == []
    store.close()


def test_two_executions_of_one_plan_admit_exactly_one_continuation(tmp_path: Path) -> None:
    store, cwd = interrupted(tmp_path, tool_turn_events("responded"))
    first, first_plan = _plan(store, cwd)
    second, second_plan = _plan(store, cwd)
    first.execute(first_plan)
    with pytest.raises(ResumeRefused) as refused:
        second.execute(second_plan)
    assert refused.value.code in (
        ParkReason.CONTINUATION_CLAIM_CONFLICT,
        RevalidationCode.SOURCE_REPLAY_CHANGED,
    )
    store.close()


def test_an_interrupted_continuation_resumes_as_a_second_generation(tmp_path: Path) -> None:
    store, cwd = interrupted(tmp_path, tool_turn_events("responded"))
    resume, plan = _plan(store, cwd)

    class Crashing(RecordingRunner):
        def run_continuation(
            self, target: RunHeader, details: ContinuationDetails, start_event: RuntimeEvent
        ) -> RunStatus:
            self.store.mark_run_running(target.run_id)
            return RunStatus.RUNNING  # the process "dies" here: no ending committed

    crashing = ResumeService(
        store, FakeInspector(observation(cwd)), Crashing(store), enabled=True, now_ms=now_ms
    )
    target = crashing.execute(plan).target_run_id
    store.close()
    store, report = recover(tmp_path / "data")
    assert [r.run_id for r in report.repaired] == [target]
    resume, runner, _ = service(store, cwd)
    second = resume.plan_latest(IDS.session_id)
    assert second.continues, second.to_json()
    assert second.continuation is not None
    assert second.continuation.lineage_run_ids == (IDS.run_id, target)
    resume.execute(second)
    assert len(runner.runs) == 1
    store.close()


def test_a_changed_ancestor_prefix_breaks_the_lineage(tmp_path: Path) -> None:
    store, cwd = interrupted(tmp_path, tool_turn_events("responded"))
    _resume, plan = _plan(store, cwd)

    class Crashing(RecordingRunner):
        def run_continuation(
            self, target: RunHeader, details: ContinuationDetails, start_event: RuntimeEvent
        ) -> RunStatus:
            return RunStatus.CREATED

    ResumeService(
        store, FakeInspector(observation(cwd)), Crashing(store), enabled=True, now_ms=now_ms
    ).execute(plan)
    store.close()
    store, _ = recover(tmp_path / "data")
    # someone edits the committed history of the first generation behind the store's back
    user_row = store.read_run_events(IDS.run_id)[0]
    edited = bytes(user_row.payload).replace(b'"run it"', b'"RUN IT"')
    edit_behind_the_back(
        store, "UPDATE runtime_events SET payload = ? WHERE event_id = ?", edited, "evt-user"
    )
    plan = service(store, cwd)[0].plan_latest(IDS.session_id)
    assert plan.rejection_reasons == (ParkReason.SOURCE_PREFIX_DIGEST_MISMATCH,)
    edit_behind_the_back(store, "DELETE FROM continuation_claims")
    edit_behind_the_back(
        store,
        "UPDATE runtime_events SET payload = ? WHERE event_id = ?",
        user_row.payload,
        "evt-user",
    )
    plan = service(store, cwd)[0].plan_latest(IDS.session_id)
    assert plan.rejection_reasons == (ParkReason.RUNTIME_LINEAGE_CLAIM_MISMATCH,)
    store.close()
