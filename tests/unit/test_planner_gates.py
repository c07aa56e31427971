"""The continuation planner's accumulating gates (``BOUNDARY_GATES``), one table each: the
passing case and every refusing case with its exact code; their order; and how the planner
accumulates what they find."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

import pytest

from runtime.continuation.continuation_planner import (
    BOUNDARY_GATES,
    Boundary,
    Finding,
    FreshIds,
    PlannerInput,
    SafetyObservation,
    background_settled,
    history_fits,
    identity_fresh,
    ledger_not_empty,
    offset_matches,
    one_run_identity,
    pending_permissions,
    plan_continuation,
    provider_boundary,
    provider_head,
    terminal_consistent,
    tools_available,
    workspace_checkpoint,
    workspace_identity_same,
    workspace_location,
)
from runtime.continuation.continuation_replay import (
    ImmutablePrefix,
    ReplayBlocked,
    ReplayPlan,
    RunIdentity,
    SegmentBlockReason,
    SegmentIssue,
)
from runtime.continuation.lineage_reader import Lineage
from runtime.continuation.provider_replay import ItemKind, ProviderItem
from runtime.continuation.workspace_decision import WorkspaceDecision
from runtime.continuation.workspace_gate import CheckpointEvidence, WorkspaceTree
from runtime.ledger.checkpoint_ports import PathChange, TreeChange
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import RunHeader, RunStatus
from tests.helpers.ledger_builders import RunIds, terminal, user_text, with_changes

IDS = RunIds("sess-p", "inv-p", "run-p", "turn-p")
WORKSPACE = "workspace:v1:a"
HEADER = RunHeader(
    "run-p",
    "sess-p",
    "inv-p",
    "turn-p",
    RunStatus.FAILED,
    "/w",
    1,
    1,
    1,
    failure_class="app_restarted",
    workspace_identity=WORKSPACE,
)
OBSERVATION = SafetyObservation(WORKSPACE, "/w", True, ("bash",))
FRESH = FreshIds("inv-new", "run-new", "turn-new", "claim-new", "start-new")
USER = ProviderItem(ItemKind.TEXT, "user", "u1", text="go")
CALL = ProviderItem(ItemKind.TOOL_CALL, "assistant", "c1", call_id="c1", name="bash")
RESULT = ProviderItem(ItemKind.TOOL_RESULT, "tool", "r1", call_id="c1", name="bash")
ANSWER = ProviderItem(ItemKind.TEXT, "assistant", "m1", text="done")


def _ended(*events: RuntimeEvent) -> tuple[RuntimeEvent, ...]:
    end = terminal(IDS, status="failed", state_delta={"failureClass": "app_restarted"})
    return (*events, end)


GO = _ended(user_text("go", ids=IDS, marker=True))


def _boundary(
    events: Sequence[RuntimeEvent] = GO,
    items: Sequence[ProviderItem] = (USER,),
    high_water: int | None = None,
    **given: Any,
) -> Boundary:
    identity = RunIdentity(IDS.session_id, IDS.invocation_id, IDS.run_id, IDS.turn_id)
    prefix = ImmutablePrefix(
        identity, tuple(events), high_water or len(events), "sha256:" + "1" * 64
    )
    lineage = Lineage((prefix,), (HEADER,))
    fields: dict[str, Any] = {
        "session_id": IDS.session_id,
        "source": HEADER,
        "lineage": lineage,
        "existing_claim": None,
        "claim_authority_error": None,
        "observation": OBSERVATION,
        "ids": FRESH,
    }
    fields.update(given)
    replay = ReplayPlan((), "sha256:" + "2" * 64, "sha256:" + "3" * 64, (), tuple(items))
    return Boundary(PlannerInput(**fields), lineage, replay, prefix)


def _codes(findings: Sequence[Finding]) -> list[tuple[str | None, str]]:
    """(park reason, diagnostic code) of each finding, in order."""
    return [(f.reason.value if f.reason else None, f.diagnostic.code) for f in findings]


def _parks(code: str, times: int = 1) -> list[tuple[str | None, str]]:
    return [(code, code)] * times


def _request(request_id: str, event_id: str) -> RuntimeEvent:
    return with_changes(
        user_text("x", ids=IDS, event_id=event_id, ts=3),
        role="system",
        author="host",
        actions={
            "permissionRequest": {
                "requestId": request_id,
                "toolName": "bash",
                "toolCallId": "c9",
                "summary": "s",
            }
        },
    )


def _closure(request_id: str) -> RuntimeEvent:
    return with_changes(
        user_text("x", ids=IDS, event_id=f"{request_id}-closed", ts=4),
        role="system",
        author="system",
        content=None,
        actions={"permissionClosure": {"requestId": request_id, "reason": "host_restarted"}},
    )


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        (GO, []),
        (_ended(user_text("go", ids=IDS), _request("r1", "q1"), _closure("r1")), []),
        (_ended(user_text("go", ids=IDS), _request("r1", "q1")), _parks("pending_permission")),
        (
            _ended(user_text("go", ids=IDS), _request("r1", "q1"), _request("r2", "q2")),
            _parks("pending_permission", 2),  # one diagnostic per request
        ),
    ],
)
def test_pending_permissions(events: tuple[RuntimeEvent, ...], expected: list[Any]) -> None:
    findings = pending_permissions(_boundary(events))
    assert _codes(findings) == expected
    if findings:
        assert findings[0].diagnostic.detail == {"requestId": "r1"}
        assert findings[0].diagnostic.event_id == "q1"


@pytest.mark.parametrize(
    ("expected_high_water", "expected"),
    [(None, []), (2, []), (99, _parks("runtime_offset_mismatch"))],
)
def test_offset_matches(expected_high_water: int | None, expected: list[Any]) -> None:
    findings = offset_matches(_boundary(expected_high_water=expected_high_water))
    assert _codes(findings) == expected
    if findings:
        assert findings[0].diagnostic.detail == {
            "expectedRuntimeEventHighWater": 99,
            "actualRuntimeEventHighWater": 2,
        }


@pytest.mark.parametrize(("events", "expected"), [(GO, []), ((), _parks("runtime_ledger_empty"))])
def test_ledger_not_empty(events: tuple[RuntimeEvent, ...], expected: list[Any]) -> None:
    assert _codes(ledger_not_empty(_boundary(events))) == expected


OTHER_RUN = RunIds("sess-p", "inv-other", "run-other", "turn-p")
FOREIGN = user_text("x", ids=OTHER_RUN, event_id="e2", ts=2)


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        (GO, []),
        ((), []),
        (_ended(user_text("go", ids=IDS), FOREIGN), _parks("runtime_identity_mismatch")),
        (
            (FOREIGN, user_text("go", ids=IDS), user_text("again", ids=IDS, event_id="u3")),
            _parks("runtime_identity_mismatch"),  # the first event sets the identity
        ),
    ],
)
def test_one_run_identity(events: tuple[RuntimeEvent, ...], expected: list[Any]) -> None:
    findings = one_run_identity(_boundary(events))
    assert _codes(findings) == expected
    if findings:
        assert findings[0].diagnostic.event_id in ("e2", events[1]["id"])


@pytest.mark.parametrize(
    ("events", "ids", "expected"),
    [
        (GO, FRESH, []),
        ((), FreshIds("inv-p", "run-p", "turn-p", "c", "s"), []),  # judged only with events
        (GO, FreshIds("inv-p", "run-x", "t", "c", "s"), _parks("continuation_identity_reused")),
        (GO, FreshIds("i", "run-p", "t", "c", "s"), _parks("continuation_identity_reused")),
        (GO, FreshIds("i", "r", "turn-p", "c", "s"), _parks("continuation_identity_reused")),
    ],
)
def test_identity_fresh(
    events: tuple[RuntimeEvent, ...], ids: FreshIds, expected: list[Any]
) -> None:
    assert _codes(identity_fresh(_boundary(events, ids=ids))) == expected


COMPLETED = terminal(IDS, status="completed", state_delta={})


@pytest.mark.parametrize(
    ("events", "source", "expected"),
    [
        (GO, HEADER, []),
        ((*GO[:-1], COMPLETED), HEADER._replace(status=RunStatus.COMPLETED), []),
        (GO[:-1], HEADER, _parks("terminal_repair_failed")),  # no ending recorded
        (GO, HEADER._replace(status=RunStatus.RUNNING), _parks("terminal_repair_failed")),
        (GO, HEADER._replace(failure_class="provider_error"), _parks("terminal_repair_failed")),
        ((*GO[:-1], COMPLETED), HEADER, _parks("terminal_repair_failed")),
        ((*GO, COMPLETED), HEADER, _parks("terminal_repair_failed")),  # two endings
    ],
)
def test_terminal_consistent(
    events: tuple[RuntimeEvent, ...], source: RunHeader, expected: list[Any]
) -> None:
    assert _codes(terminal_consistent(_boundary(events, source=source))) == expected


@pytest.mark.parametrize(
    ("current", "expected"),
    [
        ("/w", []),
        ("/w/", []),
        ("/moved", [(None, "workspace_location_changed")]),  # a note, never a park
    ],
)
def test_workspace_location(current: str, expected: list[Any]) -> None:
    observation = replace(OBSERVATION, workspace_path=current)
    findings = workspace_location(_boundary(observation=observation))
    assert _codes(findings) == expected
    if findings:
        assert findings[0].diagnostic.detail == {"sourceCwd": "/w", "currentCwd": "/moved"}


@pytest.mark.parametrize(
    ("current", "expected"),
    [(WORKSPACE, []), ("workspace:v1:b", _parks("workspace_identity_mismatch"))],
)
def test_workspace_identity_same(current: str, expected: list[Any]) -> None:
    observation = replace(OBSERVATION, workspace_identity=current)
    assert _codes(workspace_identity_same(_boundary(observation=observation))) == expected


@pytest.mark.parametrize(
    ("settled", "detail", "expected", "message"),
    [
        (True, (), [], None),
        (False, (), _parks("background_operation_pending"), "a background command or"),
        (False, ("bash pid 9",), _parks("background_operation_pending"), "bash pid 9"),
    ],
)
def test_background_settled(
    settled: bool, detail: tuple[str, ...], expected: list[Any], message: str | None
) -> None:
    observation = replace(OBSERVATION, background_settled=settled, background_detail=detail)
    findings = background_settled(_boundary(observation=observation))
    assert _codes(findings) == expected
    if message is not None:
        assert findings[0].diagnostic.message.startswith(message)
        assert findings[0].diagnostic.detail == {"pending": list(detail)}


@pytest.mark.parametrize(
    ("items", "tools", "expected"),
    [
        ((USER, CALL, RESULT), ("bash",), []),
        ((USER,), (), []),
        ((USER, CALL, RESULT), ("read_file",), _parks("tool_catalog_mismatch")),
    ],
)
def test_tools_available(
    items: tuple[ProviderItem, ...], tools: tuple[str, ...], expected: list[Any]
) -> None:
    observation = replace(OBSERVATION, tool_names=tools)
    findings = tools_available(_boundary(items=items, observation=observation))
    assert _codes(findings) == expected
    if findings:
        assert findings[0].diagnostic.detail == {"unavailableToolNames": ["bash"]}


MIXED = _ended(user_text("go", ids=IDS), FOREIGN)


@pytest.mark.parametrize(
    ("events", "items", "expected"),
    [
        (GO, (USER, ANSWER, USER), []),
        ((), (), []),  # an empty ledger is judged by its own gate
        (MIXED, (ANSWER,), []),  # so is a mixed one
        (GO, (ANSWER, USER), _parks("provider_resume_head_unsupported")),
        (GO, (), _parks("provider_resume_head_unsupported")),
    ],
)
def test_provider_head(
    events: tuple[RuntimeEvent, ...], items: tuple[ProviderItem, ...], expected: list[Any]
) -> None:
    assert _codes(provider_head(_boundary(events, items))) == expected


@pytest.mark.parametrize(
    ("events", "items", "expected"),
    [
        (GO, (USER,), []),
        (GO, (USER, CALL, RESULT), []),
        ((), (), []),
        (MIXED, (USER, ANSWER), []),
        (GO, (USER, ANSWER), _parks("provider_resume_boundary_unsupported")),
        (GO, (), _parks("provider_resume_boundary_unsupported")),
    ],
)
def test_provider_boundary(
    events: tuple[RuntimeEvent, ...], items: tuple[ProviderItem, ...], expected: list[Any]
) -> None:
    assert _codes(provider_boundary(_boundary(events, items))) == expected


def _overflow_notice() -> RuntimeEvent:
    """The host notice a context overflow commits before the run's ending."""
    event: dict[str, Any] = IDS.envelope("notice", "user", "host", 2)
    event["content"] = {"kind": "text", "text": "Note from the host: the previous turn ..."}
    event["actions"] = {"stateDelta": {"providerHistoryOmits": ["evt-user"]}}
    return cast(RuntimeEvent, event)


def _overflow_ending(reason: str) -> RuntimeEvent:
    end = terminal(IDS, status="failed", state_delta={"failureClass": "provider_error"})
    message = "the prompt is longer than the model's context window"
    content = {"kind": "error", "message": message, "code": "provider_error", "reason": reason}
    return with_changes(end, content=content)


FIRST = user_text("go", ids=IDS, marker=True)


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        (GO, []),
        # the notice (an overflow with something to leave out), ended or killed before its end
        ((FIRST, _overflow_notice(), _overflow_ending("provider_error")), ["notice"]),
        ((FIRST, _overflow_notice()), ["notice"]),
        # an overflow with nothing to leave out: its ending says so
        ((FIRST, _overflow_ending("provider_context_overflow")), ["evt-terminal"]),
        # another failure of the model server
        ((FIRST, _overflow_ending("provider_error")), []),
    ],
)
def test_history_fits(events: tuple[RuntimeEvent, ...], expected: list[str]) -> None:
    findings = history_fits(_boundary(events))
    assert [f.diagnostic.event_id for f in findings] == expected
    assert _codes(findings) == [("provider_history_too_long", "provider_history_too_long")] * len(
        expected
    )


def test_the_overflow_reason_is_the_model_servers_code() -> None:
    from runtime.continuation.continuation_planner import CONTEXT_OVERFLOW_REASON
    from runtime.providers.provider_port import ProviderErrorCode

    assert ProviderErrorCode.CONTEXT_OVERFLOW.value == CONTEXT_OVERFLOW_REASON


def _snapshot_fact() -> RuntimeEvent:
    event: dict[str, Any] = IDS.envelope("ck1", "system", "system", 2)
    event["modelVisibility"] = "hidden"
    event["actions"] = {
        "workspaceCheckpoint": {
            "protocol": "workspace_checkpoint_v1",
            "workspaceIdentity": WORKSPACE,
            "workspaceEpoch": 1,
            "runtimeHighWater": 1,
            "runtimeDigest": "sha256:" + "0" * 64,
            "checkpointRef": "refs/maka/s/r/1",
            "commitId": "b" * 40,
            "treeId": "a" * 40,
            "policyHash": "c" * 64,
        }
    }
    return cast(RuntimeEvent, event)


def _git_v1() -> tuple[RuntimeEvent, ...]:
    first = user_text("go", ids=IDS, marker=True)
    first["actions"]["runtimeProtocol"]["workspaceCheckpoints"] = {"mode": "git_v1"}
    return _ended(first, _snapshot_fact())


DRIFT = CheckpointEvidence(True, (TreeChange("a.txt", PathChange.MODIFIED),))
REBASELINE = WorkspaceDecision.REBASELINE
RESTORE = WorkspaceDecision.RESTORE


@pytest.mark.parametrize(
    ("events", "given", "expected", "answered"),
    [
        (GO, {}, [(None, "workspace_checkpoint_unavailable")], False),
        (
            _git_v1(),
            {"checkpoint_evidence": CheckpointEvidence(True)},
            [(None, "workspace_verified")],
            False,
        ),
        (_git_v1(), {"checkpoint_evidence": DRIFT}, _parks("workspace_drift"), False),
        (_git_v1(), {"checkpoint_evidence": None}, _parks("workspace_checkpoint_missing"), False),
        (
            _git_v1(),
            {"checkpoint_evidence": CheckpointEvidence(True, problem="git failed")},
            _parks("safety_observation_unavailable"),
            False,
        ),
        # The user's decision answers the park: it stays as a diagnostic only.
        (
            _git_v1(),
            {"checkpoint_evidence": DRIFT, "decision": REBASELINE},
            [(None, "workspace_drift")],
            True,
        ),
        (
            _git_v1(),
            {"checkpoint_evidence": DRIFT, "decision": RESTORE, "restorable": True},
            [(None, "workspace_drift")],
            True,
        ),
        # A restore with no snapshot to copy answers nothing: the park stands.
        (
            _git_v1(),
            {"checkpoint_evidence": DRIFT, "decision": RESTORE},
            _parks("workspace_drift"),
            False,
        ),
    ],
)
def test_workspace_checkpoint(
    events: tuple[RuntimeEvent, ...], given: dict[str, Any], expected: list[Any], answered: bool
) -> None:
    findings = workspace_checkpoint(_boundary(events, **given))
    assert _codes(findings) == expected
    assert [f.answered for f in findings] == [answered] * len(findings)


def test_the_boundary_gates_run_in_this_order() -> None:
    assert [gate.__name__ for gate in BOUNDARY_GATES] == [
        "pending_permissions",
        "offset_matches",
        "ledger_not_empty",
        "one_run_identity",
        "identity_fresh",
        "terminal_consistent",
        "workspace_location",
        "workspace_identity_same",
        "background_settled",
        "tools_available",
        "provider_head",
        "provider_boundary",
        "history_fits",
        "workspace_checkpoint",
    ]


def test_the_planner_keeps_each_reason_once_and_every_diagnostic_in_gate_order() -> None:
    events = _ended(
        user_text("go", ids=IDS, marker=True), _request("r1", "q1"), _request("r2", "q2")
    )
    observation = replace(OBSERVATION, workspace_path="/moved", workspace_identity="workspace:v1:b")
    b = _boundary(events, expected_high_water=99, observation=observation)
    plan = plan_continuation(b.given)
    assert [r.value for r in plan.rejection_reasons] == [
        "pending_permission",
        "runtime_offset_mismatch",
        "workspace_identity_mismatch",
    ]
    assert [d.code for d in plan.diagnostics] == [
        "pending_permission",
        "pending_permission",
        "runtime_offset_mismatch",
        "workspace_location_changed",
        "workspace_identity_mismatch",
        "workspace_checkpoint_unavailable",
    ]


def test_a_continuing_plan_carries_the_verified_tree_and_the_decision() -> None:
    tree = WorkspaceTree("t" * 40)
    verified = _boundary(
        _git_v1(),
        checkpoint_evidence=CheckpointEvidence(True),
        observation=replace(OBSERVATION, workspace_tree=tree),
    )
    plan = plan_continuation(verified.given)
    assert plan.continues and plan.continuation is not None
    assert plan.continuation.workspace_tree_id == tree.tree_id
    assert plan.continuation.workspace_decision is None
    decided = _boundary(_git_v1(), checkpoint_evidence=DRIFT, decision=REBASELINE)
    plan = plan_continuation(decided.given)
    assert plan.continues and plan.continuation is not None
    assert plan.continuation.workspace_decision is REBASELINE
    assert plan.continuation.workspace_tree_id is None
    assert plan.continuation.workspace_epoch == 2


UNSETTLED = ReplayBlocked(
    SegmentBlockReason.TOOL_RECOVERY_UNSETTLED,
    0,
    (SegmentIssue("pending_tool_result", "tool call read_file (c1) is indeterminate", "e1", "c1"),),
)


def test_unsettled_tool_state_parks_with_every_other_reason_that_holds() -> None:
    """A call with an unknown outcome and changed files: both are said at once, so settling the
    call is not followed by a surprise; the files' ways forward are named for later."""
    given = _boundary(_git_v1(), checkpoint_evidence=DRIFT, restorable=True).given
    plan = plan_continuation(replace(given, replay=UNSETTLED))
    assert [r.value for r in plan.rejection_reasons] == ["dangling_tool_state", "workspace_drift"]
    assert [d.code for d in plan.diagnostics] == ["pending_tool_result", "workspace_drift"]
    assert plan.workspace_options == ()  # a decision never waives another gate
    assert plan.later_workspace_options == ("isolated_restore", "rebaseline")
    body = plan.to_json()
    assert "workspaceOptions" not in body
    assert body["laterWorkspaceOptions"] == ["isolated_restore", "rebaseline"]

    # A command of the call still running is said first, as before.
    busy = replace(OBSERVATION, background_settled=False, background_detail=("shell pid 7",))
    plan = plan_continuation(replace(given, replay=UNSETTLED, observation=busy))
    assert [r.value for r in plan.rejection_reasons] == [
        "background_operation_pending",
        "dangling_tool_state",
        "workspace_drift",
    ]
    assert plan.diagnostics[0].code == "background_operation_pending"

    # The user's decision answers the files; the call still parks, alone.
    decided = replace(given, replay=UNSETTLED, decision=REBASELINE)
    plan = plan_continuation(decided)
    assert [r.value for r in plan.rejection_reasons] == ["dangling_tool_state"]
    assert "workspace_drift" in [d.code for d in plan.diagnostics]
    assert plan.later_workspace_options == ()

    # Without checkpoints, nothing is added but the note that the files are not compared.
    plan = plan_continuation(replace(_boundary().given, replay=UNSETTLED))
    assert [r.value for r in plan.rejection_reasons] == ["dangling_tool_state"]
    assert [d.code for d in plan.diagnostics] == [
        "pending_tool_result",
        "workspace_checkpoint_unavailable",
    ]


def test_when_answering_takes_the_folder_no_decision_about_the_files_is_announced() -> None:
    """A writing call with an unknown outcome in a run that takes snapshots: settling it also
    takes the folder as it is now (``settle_baseline``), so the files' park clears with the
    answer and no later decision is announced; a read-only call's answer leaves the files'
    decision for later, as does a run without snapshots."""
    bash = ReplayBlocked(
        SegmentBlockReason.TOOL_RECOVERY_UNSETTLED,
        0,
        (SegmentIssue("pending_tool_result", "tool call bash (c1)", "e1", "c1", "bash"),),
    )
    given = _boundary(_git_v1(), checkpoint_evidence=DRIFT, restorable=True).given
    plan = plan_continuation(replace(given, replay=bash))
    assert [r.value for r in plan.rejection_reasons] == ["dangling_tool_state", "workspace_drift"]
    assert [d.code for d in plan.diagnostics] == [
        "pending_tool_result",
        "workspace_drift",
        "workspace_settle_takes_folder",
    ]
    assert plan.later_workspace_options == ()
    assert "laterWorkspaceOptions" not in plan.to_json()
    note = plan.diagnostics[-1]
    assert (note.tool_call_id, note.tool_name) == ("c1", "bash")  # pinned to the call's row

    # A write recovery parked as final (changed by someone else since): no answer is possible.
    diverged = replace(
        bash,
        issues=(
            SegmentIssue(
                "tool_recovery_parked",
                "tool call write_file (c1) is parked (reconcile_diverged)",
                "e1",
                "c1",
                "write_file",
                {"resolverReason": "reconcile_diverged"},
            ),
        ),
    )
    plan = plan_continuation(replace(given, replay=diverged))
    assert "workspace_settle_takes_folder" not in [d.code for d in plan.diagnostics]
    not_done = replace(
        diverged,
        issues=(
            replace(diverged.issues[0], detail={"resolverReason": "reconcile_matches_prior_state"}),
        ),
    )
    plan = plan_continuation(replace(given, replay=not_done))
    assert plan.diagnostics[-1].code == "workspace_settle_takes_folder"

    read = replace(bash, issues=(replace(bash.issues[0], tool_name="read_file"),))
    plan = plan_continuation(replace(given, replay=read))
    assert "workspace_settle_takes_folder" not in [d.code for d in plan.diagnostics]
    assert plan.later_workspace_options == ("isolated_restore", "rebaseline")

    # A call of an earlier generation: its answer is not the interrupted run's starting point.
    assert isinstance(given.lineage, Lineage)
    (prefix,), (header,) = given.lineage.prefixes, given.lineage.headers
    two = Lineage((prefix, prefix), (header, header))
    plan = plan_continuation(replace(given, lineage=two, replay=bash))
    assert plan.later_workspace_options == ("isolated_restore", "rebaseline")

    # Without checkpoints there is no files' reason to clear, and no note.
    plan = plan_continuation(replace(_boundary().given, replay=bash))
    assert "workspace_settle_takes_folder" not in [d.code for d in plan.diagnostics]


def test_a_snapshot_kept_by_another_host_is_said_where_it_may_be() -> None:
    """On a ledger shared by several hosts, the missing-snapshot park says where the snapshot
    may be instead (the other host's data folder), not only that it is gone here."""
    note = "a snapshot another host took is in that host's data folder"
    elsewhere = CheckpointEvidence(False, missing_note=note)
    plan = plan_continuation(_boundary(_git_v1(), checkpoint_evidence=elsewhere).given)
    (missing,) = [d for d in plan.diagnostics if d.code == "workspace_checkpoint_missing"]
    assert missing.message.endswith(f"gone from the checkpoint store ({note})")
    alone = plan_continuation(
        _boundary(_git_v1(), checkpoint_evidence=CheckpointEvidence(False)).given
    )
    (plain,) = [d for d in alone.diagnostics if d.code == "workspace_checkpoint_missing"]
    assert plain.message == "the snapshot recorded at the stop is gone from the checkpoint store"
