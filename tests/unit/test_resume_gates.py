"""The resume seam's named gates (``runtime.continuation.resume_gates``), one table each: the
passing case and every refusing case with its exact code; and the order they run in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, cast

import pytest

from runtime.continuation.continuation_planner import (
    ContinuationDetails,
    ContinuationPlan,
    FreshIds,
    SafetyObservation,
    SessionFolderMissing,
)
from runtime.continuation.resume_gates import (
    ADMISSION_GATES,
    PLAN_GATES,
    LatestRun,
    PlanGate,
    Refusal,
    baseline_capturable,
    feature_enabled,
    first_park,
    first_refusal,
    inspector_available,
    latest_interrupted,
    latest_not_running,
    restore_snapshot_present,
    runs_listed,
    source_readable,
    workspace_observed,
    workspace_recorded,
)
from runtime.continuation.workspace_decision import WorkspaceDecision
from runtime.ledger.checkpoint_ports import CheckpointCarrier
from runtime.ledger.codes import ParkReason, StoreCode
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import RunHeader, RunStatus

OBSERVATION = SafetyObservation("ws", "/w", True, ("bash",))
UNREADABLE = LedgerError(StoreCode.STORE_CORRUPT, "the store cannot be read")


def _header(run_id: str = "run-1", **changes: Any) -> RunHeader:
    header = RunHeader(
        run_id, "sess-1", "inv-1", "turn-1", RunStatus.FAILED, "/w", 1, 5, 6,
        workspace_identity="ws",
    )  # fmt: skip
    return header._replace(**changes)


class _Store:
    """The reads the gates make; a LedgerError in place of a value is raised."""

    def __init__(
        self,
        runs: Sequence[RunHeader] | LedgerError = (),
        header: RunHeader | LedgerError | None = None,
        epoch: int = 1,
    ) -> None:
        self.runs, self.header, self.epoch = runs, header, epoch
        self.reads: list[str] = []

    def list_session_runs(self, session_id: str) -> Sequence[RunHeader]:
        self.reads.append("runs")
        if isinstance(self.runs, LedgerError):
            raise self.runs
        return self.runs

    def read_owner_epoch(self) -> int:
        return self.epoch

    def read_run_header(self, run_id: str) -> RunHeader | None:
        self.reads.append(f"header {run_id}")
        if isinstance(self.header, LedgerError):
            raise self.header
        return self.header


class _Inspector:
    def __init__(self, answer: SafetyObservation | BaseException = OBSERVATION) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str]] = []

    def observe(self, session_id: str, cwd: str) -> SafetyObservation:
        self.asked.append((session_id, cwd))
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def _run(
    store: _Store | None = None,
    inspector: _Inspector | None = None,
    *,
    enabled: bool = True,
    **read: Any,
) -> LatestRun:
    run = LatestRun(
        "sess-1",
        store or _Store(),
        inspector,
        enabled,
        lambda header: f"{header.cwd}-now",
    )
    for name, value in read.items():
        setattr(run, name, value)
    return run


def _code(plan: ContinuationPlan | None) -> str | None:
    if plan is None:
        return None
    assert len(plan.rejection_reasons) == 1 and not plan.continues
    assert plan.diagnostics[0].code == plan.rejection_reasons[0].value
    return plan.rejection_reasons[0].value


@pytest.mark.parametrize(("enabled", "code"), [(True, None), (False, "resume_feature_disabled")])
def test_feature_enabled(enabled: bool, code: str | None) -> None:
    interrupted = _Store(runs=[_header()])
    assert _code(feature_enabled(_run(interrupted, enabled=enabled))) == code


@pytest.mark.parametrize(
    ("runs", "code"),
    [
        ((), "resume_candidate_missing"),
        ((_header(status=RunStatus.COMPLETED),), "resume_candidate_missing"),
        ((_header(status=RunStatus.RUNNING),), "resume_feature_disabled"),
    ],
)
def test_safe_resume_off_says_so_only_where_there_is_something_to_resume(
    runs: tuple[RunHeader, ...], code: str
) -> None:
    """Off, a session whose latest run finished normally (or with no run) parks as having
    nothing to resume: the advice to turn Safe resume on would not help it."""
    assert _code(feature_enabled(_run(_Store(runs=runs), enabled=False))) == code


@pytest.mark.parametrize(
    ("inspector", "code"),
    [(_Inspector(), None), (None, "safety_observation_unavailable")],
)
def test_inspector_available(inspector: _Inspector | None, code: str | None) -> None:
    assert _code(inspector_available(_run(inspector=inspector))) == code


NEWER = _header("run-b", created_at=9)
SAME_TIME = _header("run-c", created_at=9)


@pytest.mark.parametrize(
    ("runs", "code", "latest"),
    [
        ([_header(), NEWER], None, NEWER),
        ([SAME_TIME, _header(), NEWER], None, SAME_TIME),  # a tie goes to the larger run id
        (UNREADABLE, "source_run_unreadable", None),
        ([], "resume_candidate_missing", None),
    ],
)
def test_runs_listed_picks_the_newest_run(
    runs: Sequence[RunHeader] | LedgerError, code: str | None, latest: RunHeader | None
) -> None:
    run = _run(_Store(runs=runs))
    assert _code(runs_listed(run)) == code
    assert run.latest == latest


@pytest.mark.parametrize(
    ("status", "owner_epoch", "code"),
    [
        (RunStatus.FAILED, 1, None),
        (RunStatus.COMPLETED, 1, None),
        (RunStatus.CANCELLED, 1, None),
        (RunStatus.RUNNING, 1, "runtime_ledger_unreadable"),  # an older owner: quarantined
        (RunStatus.CREATED, 1, "runtime_ledger_unreadable"),
        (RunStatus.RUNNING, 2, "session_busy"),
        (RunStatus.CREATED, 2, "session_busy"),
    ],
)
def test_latest_not_running(status: RunStatus, owner_epoch: int, code: str | None) -> None:
    latest = _header(status=status, owner_epoch=owner_epoch)
    plan = latest_not_running(_run(_Store(epoch=2), latest=latest))
    assert _code(plan) == code
    if plan is not None:
        assert plan.source_run_id == "run-1"


CONTINUATION = {"sourceRunId": "run-0", "claimId": "claim-0"}


@pytest.mark.parametrize(
    ("status", "continuation_source", "code", "source_run_id"),
    [
        (RunStatus.FAILED, None, None, None),
        (RunStatus.CANCELLED, CONTINUATION, None, None),
        (RunStatus.COMPLETED, CONTINUATION, "continuation_already_exists", "run-0"),
        (RunStatus.COMPLETED, {"claimId": "claim-0"}, "continuation_already_exists", "run-1"),
        (RunStatus.COMPLETED, None, "resume_candidate_missing", "run-1"),
    ],
)
def test_latest_interrupted(
    status: RunStatus,
    continuation_source: dict[str, str] | None,
    code: str | None,
    source_run_id: str | None,
) -> None:
    latest = _header(status=status, continuation_source=continuation_source)
    plan = latest_interrupted(_run(latest=latest))
    assert _code(plan) == code
    if plan is not None:
        assert plan.source_run_id == source_run_id
    if code == "continuation_already_exists":
        assert plan is not None
        assert plan.diagnostics[0].detail == {
            "continuationClaimId": "claim-0",
            "continuationRunId": "run-1",
        }


@pytest.mark.parametrize(
    ("header", "code", "message"),
    [
        (_header(), None, None),
        (UNREADABLE, "source_run_unreadable", "store_corrupt: the store cannot be read"),
        (None, "source_run_unreadable", "header missing"),
    ],
)
def test_source_readable(
    header: RunHeader | LedgerError | None, code: str | None, message: str | None
) -> None:
    store = _Store(header=header)
    run = _run(store, latest=_header())
    plan = source_readable(run)
    assert _code(plan) == code
    assert store.reads == ["header run-1"]
    if plan is None:
        assert run.source == header
    else:
        assert plan.diagnostics[0].message == message


@pytest.mark.parametrize(
    ("identity", "code"),
    [("ws", None), (None, "workspace_identity_missing"), ("", "workspace_identity_missing")],
)
def test_workspace_recorded(identity: str | None, code: str | None) -> None:
    run = _run(source=_header(workspace_identity=identity))
    assert _code(workspace_recorded(run)) == code


class _Unreadable(LedgerError):
    pass


@pytest.mark.parametrize(
    ("answer", "code", "message"),
    [
        (OBSERVATION, None, None),
        (
            SessionFolderMissing("/w-now"),
            "workspace_folder_missing",
            "the session folder /w-now no longer exists",
        ),
        (
            _Unreadable(StoreCode.STORE_CORRUPT, "no tools"),
            "safety_observation_unavailable",
            "store_corrupt: no tools",
        ),
        (OSError("disk gone"), "safety_observation_unavailable", "disk gone"),
    ],
)
def test_workspace_observed(
    answer: SafetyObservation | BaseException, code: str | None, message: str | None
) -> None:
    inspector = _Inspector(answer)
    run = _run(inspector=inspector, source=_header())
    plan = workspace_observed(run)
    assert _code(plan) == code
    assert inspector.asked == [("sess-1", "/w-now")]  # the session's folder, where it lives now
    if plan is None:
        assert run.observation == OBSERVATION
    else:
        assert plan.diagnostics[0].message == message


def test_the_plan_gates_run_in_this_order() -> None:
    assert [gate.__name__ for gate in PLAN_GATES] == [
        "feature_enabled",
        "inspector_available",
        "runs_listed",
        "latest_not_running",
        "latest_interrupted",
        "source_readable",
        "workspace_recorded",
        "workspace_observed",
    ]


def test_the_first_refusing_gate_decides_and_nothing_after_it_reads() -> None:
    store = _Store(runs=[_header()], header=_header())
    inspector = _Inspector()
    assert _code(first_park(_run(store, inspector, enabled=False))) == "resume_feature_disabled"
    assert store.reads == ["runs"] and inspector.asked == []  # (is there anything to resume?)
    missing = _Store(runs=[_header()], header=None)
    assert _code(first_park(_run(missing, inspector))) == "source_run_unreadable"
    assert missing.reads == ["runs", "header run-1"] and inspector.asked == []
    run = _run(store, inspector)
    assert first_park(run) is None
    assert run.source == _header() and run.observation == OBSERVATION


def test_first_park_stops_at_the_first_refusal() -> None:
    called: list[str] = []

    def gate(name: str, parks: bool) -> PlanGate:
        def check(run: LatestRun) -> ContinuationPlan | None:
            called.append(name)
            return feature_enabled(_run(_Store(runs=[_header()]), enabled=False)) if parks else None

        return check

    gates = (gate("a", False), gate("b", True), gate("c", True))
    assert _code(first_park(_run(), gates)) == "resume_feature_disabled"
    assert called == ["a", "b"]


# ---- admission ---------------------------------------------------------------------------------

CHECKPOINTS = cast(CheckpointCarrier, object())
DETAILS = ContinuationDetails(
    ids=FreshIds("inv-2", "run-2", "turn-2", "claim-2", "evt-start-2"),
    source=_header(),
    source_high_water=7,
    source_prefix_digest="sha256:" + "5" * 64,
    source_terminal_event_id="run-1_terminal",
    boundary_digest="sha256:" + "6" * 64,
    provider_replay_digest="sha256:" + "7" * 64,
    runtime_context=(),
    provider_items=(),
    lineage_run_ids=("run-1",),
    lineage_high_waters=(7,),
    lineage_digests=("sha256:" + "5" * 64,),
    workspace_identity="ws",
    tool_names=("bash",),
)
SNAPSHOT = {"checkpointRef": "refs/maka/x"}
MISSING = ParkReason.WORKSPACE_CHECKPOINT_MISSING


def _details(decision: WorkspaceDecision | None, snapshot: Any = None) -> ContinuationDetails:
    return replace(DETAILS, workspace_decision=decision, restore_checkpoint=snapshot)


@pytest.mark.parametrize(
    ("details", "checkpoints", "refusal"),
    [
        (_details(None), None, None),
        (_details(WorkspaceDecision.REBASELINE), CHECKPOINTS, None),
        (_details(WorkspaceDecision.RESTORE), None, None),  # the restore gate's business
        (
            _details(WorkspaceDecision.REBASELINE),
            None,
            Refusal(MISSING, "no checkpoint store to capture the files"),
        ),
    ],
)
def test_baseline_capturable(
    details: ContinuationDetails, checkpoints: CheckpointCarrier | None, refusal: Refusal | None
) -> None:
    assert baseline_capturable(details, checkpoints) == refusal


NO_SNAPSHOT = Refusal(MISSING, "no snapshot to restore a copy from")


@pytest.mark.parametrize(
    ("details", "checkpoints", "refusal"),
    [
        (_details(None), None, None),
        (_details(WorkspaceDecision.RESTORE, SNAPSHOT), CHECKPOINTS, None),
        (_details(WorkspaceDecision.REBASELINE), None, None),  # the baseline gate's business
        (_details(WorkspaceDecision.RESTORE, SNAPSHOT), None, NO_SNAPSHOT),
        (_details(WorkspaceDecision.RESTORE), CHECKPOINTS, NO_SNAPSHOT),
        (_details(WorkspaceDecision.RESTORE), None, NO_SNAPSHOT),
    ],
)
def test_restore_snapshot_present(
    details: ContinuationDetails, checkpoints: CheckpointCarrier | None, refusal: Refusal | None
) -> None:
    assert restore_snapshot_present(details, checkpoints) == refusal


def test_the_admission_gates_run_in_this_order() -> None:
    names: list[str] = [gate.__name__ for gate in ADMISSION_GATES]
    assert names == ["baseline_capturable", "restore_snapshot_present"]
    assert first_refusal(_details(WorkspaceDecision.REBASELINE), CHECKPOINTS) is None
    refused = first_refusal(_details(WorkspaceDecision.REBASELINE), None)
    assert refused == Refusal(MISSING, "no checkpoint store to capture the files")
    gates: Sequence[Callable[..., Refusal | None]] = (
        lambda d, c: None,
        lambda d, c: Refusal(MISSING, "first"),
        lambda d, c: Refusal(MISSING, "second"),
    )
    assert first_refusal(DETAILS, None, gates) == Refusal(MISSING, "first")


def test_a_lease_held_by_a_gone_process_of_this_computer_is_said_so() -> None:
    """On a shared ledger a killed ``maka run`` keeps its lease until it runs out: the plan
    said a turn was "still running" there, and to wait for it to end."""
    import os
    import socket
    import subprocess
    import sys

    from app.host.plan_report import plan_summary

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(30)
    gone = f"{socket.gethostname()}:{child.pid}:0123456789ab"

    class _Leased(_Store):
        def __init__(self, holder: str) -> None:
            super().__init__(epoch=2)
            self.holder = holder

        def live_lease_holders(self) -> dict[str, str]:
            return {"sess-1": self.holder}

    latest = _header(status=RunStatus.RUNNING, owner_epoch=2)
    plan = latest_not_running(_run(_Leased(gone), latest=latest))
    assert _code(plan) == "session_busy" and plan is not None
    assert plan.diagnostics[0].detail == {"holder": gone, "holderGone": True}
    said = "\n".join(plan_summary(plan))
    assert "is gone" in said and "still running" not in said, said
    assert "wait for the gone process's lease to run out" in said, said
    alive = f"{socket.gethostname()}:{os.getppid()}:0123456789ab"
    plan = latest_not_running(_run(_Leased(alive), latest=latest))
    assert plan is not None and not plan.diagnostics[0].detail
    assert "still running" in "\n".join(plan_summary(plan))
