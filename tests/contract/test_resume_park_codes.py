"""Every park reason and revalidation code of Safe resume, produced from a real store.

Where a state cannot arise through the product's own writers (a forged lineage, a header that
disagrees with its ending, a foreign event), the test edits the database behind the store's back,
exactly as damage or tampering would.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.continuation.continuation_planner import (
    ContinuationDetails,
    ContinuationPlan,
    FreshIds,
    PlannerInput,
    plan_continuation,
)
from runtime.continuation.continuation_replay import ImmutablePrefix, RunIdentity
from runtime.continuation.lineage_reader import Lineage, LineageError
from runtime.continuation.resume_service import ResumeRefused, ResumeService
from runtime.ledger.codes import ParkReason, RevalidationCode
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import RunHeader, RunStatus
from runtime.recovery.startup_recovery import run_startup_recovery
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

IDS = RunIds("sess-p", "inv-p", "run-p", "turn-p")


def _settled_turn() -> list[RuntimeEvent]:
    call = call_event("c1", "bash", {"command": "true"}, ids=IDS, ts=2)
    return [
        user_text("go", ids=IDS, marker=True),
        call,
        dispatch_event(call, recovery_mode="never_auto_retry"),
        bound_response(call, {"exitCode": 0}),
    ]


def _setup(
    tmp_path: Path, events: list[RuntimeEvent] | None = None
) -> tuple[SqliteLedgerStore, str]:
    cwd = str(tmp_path / "work")
    with open_store(tmp_path / "data") as store:
        seed_interrupted_run(store, IDS, events or _settled_turn(), cwd=cwd)
    store, _ = recover(tmp_path / "data")
    return store, cwd


class EndingRunner:
    def __init__(self, store: SqliteLedgerStore, finish: bool = True) -> None:
        self.store = store
        self.finish = finish
        self.calls = 0

    def run_continuation(
        self, target: RunHeader, details: ContinuationDetails, start_event: RuntimeEvent
    ) -> RunStatus:
        self.calls += 1
        if not self.finish:
            return RunStatus.CREATED  # the process dies before the provider answers
        ids = RunIds(target.session_id, target.invocation_id, target.run_id, target.turn_id)
        self.store.mark_run_running(target.run_id)
        self.store.commit_run_ending(
            terminal(ids, event_id=f"{target.run_id}-end"), RunStatus.COMPLETED, None
        )
        return RunStatus.COMPLETED


def _service(
    store: SqliteLedgerStore, cwd: str, runner: EndingRunner | None = None
) -> ResumeService:
    return ResumeService(
        store,
        FakeInspector(observation(cwd)),
        runner or EndingRunner(store),
        enabled=True,
        now_ms=now_ms,
    )


def _sql(store: SqliteLedgerStore, statement: str, *args: object) -> None:
    edit_behind_the_back(store, statement, *args)


def _plan(store: SqliteLedgerStore, cwd: str) -> ContinuationPlan:
    return _service(store, cwd).plan_latest(IDS.session_id)


# ---- early single-reason parks ----------------------------------------------------------------


def test_an_unreadable_source_run_parks(tmp_path: Path) -> None:
    store, cwd = _setup(tmp_path)
    _sql(
        store, "UPDATE runs SET continuation_source = ? WHERE run_id = ?", b"{not json", IDS.run_id
    )
    plan = _plan(store, cwd)
    assert plan.rejection_reasons == (ParkReason.SOURCE_RUN_UNREADABLE,)
    store.close()


def test_a_quarantined_run_parks_as_unreadable(tmp_path: Path) -> None:
    cwd = str(tmp_path / "work")
    with open_store(tmp_path / "data") as store:
        seed_interrupted_run(store, IDS, _settled_turn(), cwd=cwd)
        _sql(
            store,
            "UPDATE runtime_events SET payload = ? WHERE event_id = ?",
            b"garbage",
            "evt-user",
        )
    store, report = recover(tmp_path / "data")
    assert [q.run_id for q in report.quarantined] == [IDS.run_id]
    header = store.read_run_header(IDS.run_id)
    assert header is not None and header.status is RunStatus.RUNNING  # never written
    assert _plan(store, cwd).rejection_reasons == (ParkReason.RUNTIME_LEDGER_UNREADABLE,)
    store.close()


# ---- lineage ---------------------------------------------------------------------------------


def _two_generations(tmp_path: Path) -> tuple[SqliteLedgerStore, str, str]:
    """Source resumed once; the continuation died before its provider answered."""
    store, cwd = _setup(tmp_path)
    service = _service(store, cwd, EndingRunner(store, finish=False))
    target = service.execute(service.plan_latest(IDS.session_id)).target_run_id
    store.close()
    store, _ = recover(tmp_path / "data")
    return store, cwd, target


def _source_json(store: SqliteLedgerStore, run_id: str) -> dict[str, object]:
    header = store.read_run_header(run_id)
    assert header is not None and header.continuation_source is not None
    return dict(header.continuation_source)


def _set_source(store: SqliteLedgerStore, run_id: str, source: dict[str, object]) -> None:
    payload = json.dumps(source, sort_keys=True, separators=(",", ":")).encode()
    _sql(store, "UPDATE runs SET continuation_source = ? WHERE run_id = ?", payload, run_id)


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda s, t: s.update(sourceRunId=t), ParkReason.RUNTIME_LINEAGE_CYCLE),
        (lambda s, t: s.update(claimId="claim-forged"), ParkReason.RUNTIME_LINEAGE_START_MISMATCH),
        (
            lambda s, t: s.update(protocol="continuation_source_v1"),
            ParkReason.RUNTIME_LINEAGE_START_MISMATCH,
        ),
    ],
)
def test_a_forged_continuation_source_breaks_the_lineage(
    tmp_path: Path, edit: Callable[[dict[str, object], str], None], reason: ParkReason
) -> None:
    store, cwd, target = _two_generations(tmp_path)
    source = _source_json(store, target)
    edit(source, target)
    if reason is ParkReason.RUNTIME_LINEAGE_CYCLE:
        # keep the start fact consistent with the forged header, so only the loop is wrong
        row = store.read_run_events(target)[0]
        start = json.loads(row.payload)
        start["actions"]["continuationStart"]["immediateSource"]["runId"] = target
        _sql(
            store,
            "UPDATE runtime_events SET payload = ? WHERE event_id = ?",
            json.dumps(start, sort_keys=True, separators=(",", ":")).encode(),
            row.event["id"],
        )
    _set_source(store, target, source)
    assert _plan(store, cwd).rejection_reasons == (reason,)
    store.close()


def test_a_missing_ancestor_breaks_the_lineage(tmp_path: Path) -> None:
    store, cwd, target = _two_generations(tmp_path)
    source = _source_json(store, target)
    source["sourceRuntimeEventHighWater"] = 99  # the ancestor has no event there
    row = store.read_run_events(target)[0]
    start = json.loads(row.payload)
    start["actions"]["continuationStart"]["immediateSource"]["highWater"] = 99
    _sql(
        store,
        "UPDATE runtime_events SET payload = ? WHERE event_id = ?",
        json.dumps(start, sort_keys=True, separators=(",", ":")).encode(),
        row.event["id"],
    )
    _set_source(store, target, source)
    assert _plan(store, cwd).rejection_reasons == (ParkReason.RUNTIME_LINEAGE_MISSING,)
    store.close()


def test_a_changed_replay_digest_breaks_the_lineage(tmp_path: Path) -> None:
    store, cwd, target = _two_generations(tmp_path)
    forged = "sha256:" + "0" * 64
    source = _source_json(store, target)
    source["providerReplayDigest"] = forged
    row = store.read_run_events(target)[0]
    start = json.loads(row.payload)
    start["actions"]["continuationStart"]["providerReplayDigest"] = forged
    _sql(
        store,
        "UPDATE runtime_events SET payload = ? WHERE event_id = ?",
        json.dumps(start, sort_keys=True, separators=(",", ":")).encode(),
        row.event["id"],
    )
    _set_source(store, target, source)
    assert _plan(store, cwd).rejection_reasons == (ParkReason.RUNTIME_LINEAGE_REPLAY_MISMATCH,)
    store.close()


def test_a_lineage_longer_than_64_generations_parks(tmp_path: Path) -> None:
    store, cwd = _setup(tmp_path)
    for _ in range(64):
        service = _service(store, cwd, EndingRunner(store, finish=False))
        plan = service.plan_latest(IDS.session_id)
        assert plan.continues, plan.to_json()
        service.execute(plan)
        run_startup_recovery(store, now_ms)  # the continuation "died"; the next start repairs it
    assert _plan(store, cwd).rejection_reasons == (ParkReason.RUNTIME_LINEAGE_DEPTH_EXCEEDED,)
    store.close()


def test_an_unreadable_claim_table_parks(tmp_path: Path) -> None:
    store, cwd = _setup(tmp_path)
    _sql(store, "ALTER TABLE continuation_claims RENAME TO claims_gone")
    assert _plan(store, cwd).rejection_reasons == (ParkReason.CONTINUATION_AUTHORITY_UNAVAILABLE,)
    store.close()


# ---- accumulating gates over the immediate source ----------------------------------------------


def test_a_header_that_disagrees_with_its_ending_parks(tmp_path: Path) -> None:
    store, cwd = _setup(tmp_path)
    _sql(store, "UPDATE runs SET failure_class = 'provider_error' WHERE run_id = ?", IDS.run_id)
    assert _plan(store, cwd).rejection_reasons == (ParkReason.TERMINAL_REPAIR_FAILED,)
    store.close()


def test_history_without_a_user_message_at_its_head_parks(tmp_path: Path) -> None:
    events = [model_text("hello", ids=IDS, event_id="evt-m", ts=1)]
    store, cwd = _setup(tmp_path, events)
    plan = _plan(store, cwd)
    assert ParkReason.PROVIDER_RESUME_HEAD_UNSUPPORTED in plan.rejection_reasons
    assert ParkReason.PROVIDER_RESUME_BOUNDARY_UNSUPPORTED in plan.rejection_reasons
    store.close()


def test_an_unanswered_call_before_later_history_is_a_gap(tmp_path: Path) -> None:
    call = call_event("c1", "bash", {"command": "true"}, ids=IDS, ts=2)
    events = [
        user_text("go", ids=IDS),  # no T1 marker: the gap is not provably undispatched...
        call,
        model_text("and more", ids=IDS, event_id="evt-more", ts=3),
    ]
    store, cwd = _setup(tmp_path, events)
    plan = _plan(store, cwd)
    # ...so the call is unsettled: the resolver's verdict comes first
    assert plan.rejection_reasons == (ParkReason.DANGLING_TOOL_STATE,)
    store.close()
    marked = [
        user_text("go", ids=IDS, marker=True),
        call,
        model_text("more", ids=IDS, event_id="m", ts=3),
    ]
    second = tmp_path / "second"
    store, cwd = _setup(second, marked)
    assert _plan(store, cwd).rejection_reasons == (ParkReason.PROVIDER_REPLAY_NON_SUFFIX_GAP,)
    store.close()


def _pure_input(events: tuple[RuntimeEvent, ...], **changes: object) -> PlannerInput:
    identity = RunIdentity(IDS.session_id, IDS.invocation_id, IDS.run_id, IDS.turn_id)
    prefix = ImmutablePrefix(identity, events, len(events), "sha256:" + "1" * 64)
    header = RunHeader(
        run_id=IDS.run_id,
        session_id=IDS.session_id,
        invocation_id=IDS.invocation_id,
        turn_id=IDS.turn_id,
        status=RunStatus.FAILED,
        cwd="/w",
        owner_epoch=1,
        created_at=1,
        updated_at=1,
        failure_class="app_restarted",
        workspace_identity="workspace:v1:a",
    )
    base: dict[str, object] = {
        "session_id": IDS.session_id,
        "source": header,
        "lineage": Lineage((prefix,), (header,)),
        "existing_claim": None,
        "claim_authority_error": None,
        "observation": observation("/w", identity="workspace:v1:a"),
        "ids": FreshIds("inv-new", "run-new", "turn-new", "claim-new", "start-new"),
    }
    base.update(changes)
    return PlannerInput(**base)  # type: ignore[arg-type]


def _ended(*events: RuntimeEvent) -> tuple[RuntimeEvent, ...]:
    end = terminal(IDS, status="failed", state_delta={"failureClass": "app_restarted"})
    return (*events, end)


def test_pure_gates_accumulate_their_reasons() -> None:
    request = with_changes(
        user_text("x", ids=IDS, event_id="evt-req", ts=3),
        role="system",
        author="host",
        actions={
            "permissionRequest": {
                "requestId": "r1",
                "toolName": "bash",
                "toolCallId": "c9",
                "summary": "s",
            }
        },
    )
    events = _ended(user_text("go", ids=IDS, marker=True), request)
    plan = plan_continuation(
        _pure_input(events, expected_high_water=99, ids=FreshIds("inv-p", "run-x", "t", "c", "s"))
    )
    assert plan.rejection_reasons == (
        ParkReason.PENDING_PERMISSION,
        ParkReason.RUNTIME_OFFSET_MISMATCH,
        ParkReason.CONTINUATION_IDENTITY_REUSED,
    )


def test_pure_gates_refuse_an_empty_or_mixed_ledger() -> None:
    empty = plan_continuation(_pure_input(()))
    assert ParkReason.RUNTIME_LEDGER_EMPTY in empty.rejection_reasons
    foreign = user_text(
        "x", ids=RunIds("sess-p", "inv-other", "run-other", "turn-p"), event_id="e2", ts=2
    )
    mixed = plan_continuation(_pure_input(_ended(user_text("go", ids=IDS), foreign)))
    assert ParkReason.RUNTIME_IDENTITY_MISMATCH in mixed.rejection_reasons


def test_a_lineage_error_parks_with_its_own_code() -> None:
    error = LineageError(ParkReason.RUNTIME_LINEAGE_MISSING, "gone", "run-z")
    plan = plan_continuation(_pure_input(_ended(user_text("go", ids=IDS)), lineage=error))
    assert plan.rejection_reasons == (ParkReason.RUNTIME_LINEAGE_MISSING,)


# ---- execution revalidation ------------------------------------------------------------------


def _continuing(
    tmp_path: Path,
) -> tuple[SqliteLedgerStore, ResumeService, ContinuationPlan, EndingRunner]:
    store, cwd = _setup(tmp_path)
    runner = EndingRunner(store)
    service = _service(store, cwd, runner)
    plan = service.plan_latest(IDS.session_id)
    assert plan.continues
    return store, service, plan, runner


def _refused(service: ResumeService, plan: ContinuationPlan) -> str:
    with pytest.raises(ResumeRefused) as refused:
        service.execute(plan)
    return str(refused.value.code)


@pytest.mark.parametrize(
    ("statement", "code"),
    [
        (
            "UPDATE runs SET turn_id = 'turn-moved' WHERE run_id = 'run-p'",
            RevalidationCode.SOURCE_IDENTITY_CHANGED,
        ),
        (
            "UPDATE runs SET status = 'cancelled' WHERE run_id = 'run-p'",
            RevalidationCode.SOURCE_TERMINAL_CHANGED,
        ),
        (
            "DELETE FROM runtime_events WHERE event_id = 'run-p_recovered_terminal'",
            RevalidationCode.SOURCE_HIGH_WATER_CHANGED,
        ),
    ],
)
def test_revalidation_refuses_a_changed_source(
    tmp_path: Path, statement: str, code: RevalidationCode
) -> None:
    store, service, plan, runner = _continuing(tmp_path)
    _sql(store, statement)
    assert _refused(service, plan) == code
    assert runner.calls == 0
    store.close()


def test_revalidation_refuses_a_foreign_event_in_the_source(tmp_path: Path) -> None:
    store, service, plan, runner = _continuing(tmp_path)
    row = store.read_run_events(IDS.run_id)[1]
    forged = json.loads(row.payload)
    forged["turnId"] = "turn-foreign"
    _sql(
        store,
        "UPDATE runtime_events SET payload = ? WHERE event_id = ?",
        json.dumps(forged, sort_keys=True, separators=(",", ":")).encode(),
        row.event["id"],
    )
    assert _refused(service, plan) == RevalidationCode.SOURCE_LEDGER_IDENTITY_CHANGED
    assert runner.calls == 0
    store.close()


def test_revalidation_refuses_a_changed_replay(tmp_path: Path) -> None:
    store, service, plan, runner = _continuing(tmp_path)
    row = store.read_run_events(IDS.run_id)[0]
    _sql(
        store,
        "UPDATE runtime_events SET payload = ? WHERE event_id = ?",
        bytes(row.payload).replace(b'"go"', b'"GO"'),
        row.event["id"],
    )
    assert _refused(service, plan) in (
        RevalidationCode.SOURCE_IDENTITY_CHANGED,
        RevalidationCode.SOURCE_REPLAY_CHANGED,
    )
    assert runner.calls == 0
    store.close()


def test_admission_refuses_an_existing_target_run(tmp_path: Path) -> None:
    store, service, plan, runner = _continuing(tmp_path)
    assert plan.continuation is not None
    seed_interrupted_run(
        store,
        RunIds(IDS.session_id, "inv-squat", plan.continuation.ids.run_id, "turn-squat"),
        [
            user_text(
                "squat",
                ids=RunIds(IDS.session_id, "inv-squat", plan.continuation.ids.run_id, "turn-squat"),
                event_id="sq",
            )
        ],
        cwd=str(tmp_path / "work"),
    )
    assert _refused(service, plan) == RevalidationCode.TARGET_RUN_CONFLICT
    assert runner.calls == 0
    store.close()


# ---- the admission holds a continuation to its source's workspace (docs/design/workspace.md
# section 4) -----


def _admitted_start(
    store: SqliteLedgerStore, cwd: str, edit: Callable[[dict[str, Any]], None]
) -> Any:
    """Plan normally, then alter what the admission writes (a forged target), and admit."""

    plan = _plan(store, cwd)
    assert plan.continuation is not None
    service = _service(store, cwd)
    original = store.admit_continuation

    def forged(claim: Any, target: Any, start: Any) -> None:
        changes: dict[str, Any] = {}
        edit({"target": changes, "start": start})
        original(claim, target._replace(**changes), start)

    store.admit_continuation = forged  # type: ignore[method-assign,assignment]
    try:
        return service.execute(plan)
    finally:
        store.admit_continuation = original  # type: ignore[method-assign]


def test_a_continuation_in_another_workspace_needs_a_transition(tmp_path: Path) -> None:
    store, cwd = _setup(tmp_path)
    other = "workspace:v1:22222222-2222-4222-8222-222222222222"

    def elsewhere(parts: dict[str, Any]) -> None:
        parts["target"].update(workspace_identity=other, cwd=str(tmp_path / "copy"))

    with pytest.raises(ResumeRefused) as refused:
        _admitted_start(store, cwd, elsewhere)
    assert refused.value.code == "identity_conflict"

    def mismatched(parts: dict[str, Any]) -> None:
        parts["target"].update(workspace_identity=other, cwd=str(tmp_path / "copy"))
        parts["start"]["actions"]["workspaceTransition"] = {
            "protocol": "workspace_transition_v1",
            "kind": "isolated_restore",
            "fromIdentity": "workspace:v1:33333333-3333-4333-8333-333333333333",  # not the source
            "toIdentity": other,
            "fromPath": cwd,
            "toPath": str(tmp_path / "copy"),
            "checkpointRef": "refs/maka/s/r/1",
            "commitId": "a" * 40,
            "treeId": "b" * 40,
            "workspaceEpoch": 2,
            "decidedBy": "local_user",
            "decidedAt": 1,
        }

    with pytest.raises(ResumeRefused) as refused:
        _admitted_start(store, cwd, mismatched)
    assert refused.value.code == "transition_shape_conflict"
    assert [r.run_id for r in store.list_session_runs(IDS.session_id)] == [IDS.run_id]
    session = store.get_session(IDS.session_id)
    assert session is not None and session.cwd == cwd  # the session did not move
    store.close()
