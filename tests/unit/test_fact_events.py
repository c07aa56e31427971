"""The system-fact builders (``runtime.ledger.fact_events``): every event they build is exactly
the event its writer committed before they existed, and passes the ledger's own checks: the
strict decoder, the canonical codec, the lane rules and, for a bundle, the bundle rules."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.agent.event_builders import EventBuilder, RunIdentity
from runtime.ledger.attestation import Attestation, attestation_result
from runtime.ledger.canonical_codec import canonical_args_hash, canonical_bytes
from runtime.ledger.codes import (
    Lane,
    ReconcileObservation,
    RecoveryDisposition,
    RecoveryReasonCode,
    TransitionKind,
    WriterRejectionCode,
)
from runtime.ledger.event_model import (
    TERMINAL_STATUSES,
    RecoveryMode,
    RuntimeEvent,
    RuntimeProtocol,
    WorkspaceBaseline,
    WorkspaceTransition,
    decode_event,
    decode_event_json,
    is_terminal,
)
from runtime.ledger.fact_events import (
    EventIdentity,
    continuation_start_event,
    permission_closure_event,
    recovered_outcome_event,
    recovered_terminal_event,
    tool_recovery_event,
)
from runtime.ledger.lane_rules import check_generic_append, check_transition_shape, classify_lane
from runtime.ledger.permission_facts import open_permission_requests
from runtime.ledger.recovery_bundle import (
    DecisionFact,
    OperationIdentity,
    ReconcileFact,
    validate_recovery_bundle,
)
from runtime.ledger.store_ports import (
    EVENT_STATUS_TO_RUN,
    RUN_STATUS_TO_EVENT,
    TERMINAL_RUN_STATUSES,
    RunHeader,
    RunStatus,
)

IDS = EventIdentity("sess-1", "inv-1", "run-1", "turn-1")
HEADER = RunHeader("run-1", "sess-1", "inv-1", "turn-1", RunStatus.RUNNING, "/w", 1, 5, 6)
DIGEST = "sha256:" + "1" * 64
ENVELOPE = {
    "sessionId": "sess-1",
    "invocationId": "inv-1",
    "runId": "run-1",
    "turnId": "turn-1",
    "partial": False,
}


def _ledger_checks(event: RuntimeEvent) -> Lane:
    """The event decodes strictly as itself, its canonical bytes decode back to it, and it has
    exactly one lane (returned)."""
    assert decode_event(event) == event
    assert decode_event_json(canonical_bytes(event)) == event
    lane = classify_lane(event)
    assert isinstance(lane, Lane), lane
    return lane


def test_identity_of_a_header_and_of_an_event() -> None:
    assert EventIdentity.of_header(HEADER) == IDS
    event = recovered_terminal_event(HEADER, "run_interrupted", 1)
    assert EventIdentity.of_event(event) == IDS


def test_recovered_terminal_event_is_the_failed_app_restarted_ending() -> None:
    event = recovered_terminal_event(HEADER, "tool_interrupted", 77)
    assert event == {
        "id": "run-1_recovered_terminal",
        **ENVELOPE,
        "ts": 77,
        "role": "system",
        "author": "system",
        "status": "failed",
        "actions": {
            "endInvocation": True,
            "stateDelta": {
                "failureClass": "app_restarted",
                "recoveryReason": "tool_interrupted",
                "recovered": True,
            },
        },
    }
    assert _ledger_checks(event) is Lane.ORDINARY
    assert is_terminal(event)
    assert EVENT_STATUS_TO_RUN[event["status"]] is RunStatus.FAILED


def test_permission_closure_event_closes_the_open_request() -> None:
    builder = EventBuilder(RunIdentity("sess-1", "inv-1", "run-1", "turn-1"))
    request = builder.permission_request(
        "req-9", tool_name="bash", call_id="c1", summary="run ls", ts=3
    )
    closure = permission_closure_event(HEADER, "req-9", 78)
    assert closure == {
        "id": "run-1_req-9_closure",
        **ENVELOPE,
        "ts": 78,
        "role": "system",
        "author": "system",
        "actions": {"permissionClosure": {"requestId": "req-9", "reason": "host_restarted"}},
    }
    assert _ledger_checks(closure) is Lane.ORDINARY
    assert check_generic_append(closure) is None
    assert open_permission_requests([request]) == [("req-9_request", "req-9")]
    assert open_permission_requests([request, closure]) == []


class _Operation:
    """One dispatched write: its call and T1 dispatch, built by the agent's own builder."""

    def __init__(self, recovery_mode: RecoveryMode = "reconcile") -> None:
        builder = EventBuilder(RunIdentity("sess-1", "inv-1", "run-1", "turn-1"))
        args = {"path": "a.txt", "content": "abc"}
        self.call = builder.function_call(
            "op1", "c1", name="write_file", args=args, step_id="s1", ts=2
        )
        self.dispatch = builder.tool_dispatch(
            "op1",
            "c1",
            name="write_file",
            args_hash=canonical_args_hash("write_file", args),
            recovery_mode=recovery_mode,
            evidence=None,
            ts=3,
        )
        identity = OperationIdentity.from_dispatch(self.call, self.dispatch)
        assert identity is not None
        self.identity = identity

    def reconcile(self, observation: ReconcileObservation) -> RuntimeEvent:
        fact = ReconcileFact("op1", observation, DIGEST)
        return tool_recovery_event(
            IDS, "op1_reconcile", 9, fact, operation_id="op1", tool_call_id="c1"
        )

    def decision(self, fact: DecisionFact) -> RuntimeEvent:
        return tool_recovery_event(
            IDS, "op1_decision", 9, fact, operation_id="op1", tool_call_id="c1"
        )


def test_reconcile_event_carries_the_fact_bound_to_its_operation() -> None:
    reconcile = _Operation().reconcile(ReconcileObservation.DIVERGED)
    assert reconcile == {
        "id": "op1_reconcile",
        **ENVELOPE,
        "ts": 9,
        "role": "system",
        "author": "system",
        "actions": {
            "toolRecovery": ReconcileFact(
                "op1", ReconcileObservation.DIVERGED, DIGEST
            ).to_tool_recovery()
        },
        "refs": {"operationId": "op1", "toolCallId": "c1"},
    }
    assert _ledger_checks(reconcile) is Lane.RECONCILE_RESULT
    rejection = check_generic_append(reconcile)
    assert rejection is not None
    assert rejection.code is WriterRejectionCode.RESERVED_RECOVERY_FACT


@pytest.mark.parametrize("is_error", [None, True, False])
def test_recovered_outcome_writes_is_error_only_when_given(is_error: bool | None) -> None:
    outcome = recovered_outcome_event(
        IDS,
        "op1_response",
        9,
        operation_id="op1",
        tool_call_id="c1",
        tool_name="write_file",
        result={"path": "a.txt"},
        is_error=is_error,
    )
    content: dict[str, Any] = {
        "kind": "function_response",
        "id": "c1",
        "name": "write_file",
        "result": {"path": "a.txt"},
    }
    if is_error is not None:
        content["isError"] = is_error
    assert outcome == {
        "id": "op1_response",
        **ENVELOPE,
        "ts": 9,
        "role": "tool",
        "author": "tool",
        "content": content,
        "refs": {"operationId": "op1", "toolCallId": "c1"},
    }
    assert list(outcome["content"]) == list(content)  # the same key order as before
    assert _ledger_checks(outcome) is Lane.FUNCTION_RESPONSE


def test_a_parked_bundle_passes_the_bundle_rules() -> None:
    op = _Operation()
    reconcile = op.reconcile(ReconcileObservation.DIVERGED)
    decision = op.decision(
        DecisionFact(
            "op1",
            RecoveryDisposition.PARKED,
            RecoveryReasonCode.RECONCILE_DIVERGED,
            ("op1_call", "op1_dispatch", "op1_reconcile"),
        )
    )
    assert _ledger_checks(decision) is Lane.RECOVERY_DECISION
    assert check_transition_shape([reconcile, decision], TransitionKind.RECOVERY_BUNDLE) is None
    verdict = validate_recovery_bundle(op.identity, op.call, op.dispatch, reconcile, None, decision)
    assert verdict.ok, verdict


def test_an_attested_completed_bundle_passes_the_bundle_rules() -> None:
    op = _Operation("never_auto_retry")
    attestation = Attestation(123, 4, "checked")
    fact = ReconcileFact.attested("op1", True, attestation)
    reconcile = tool_recovery_event(
        IDS, "op1_reconcile", 9, fact, operation_id="op1", tool_call_id="c1"
    )
    outcome = recovered_outcome_event(
        IDS,
        "op1_response",
        9,
        operation_id="op1",
        tool_call_id="c1",
        tool_name="write_file",
        result=attestation_result(True, attestation),
        is_error=False,
    )
    decision = op.decision(
        DecisionFact(
            "op1",
            RecoveryDisposition.COMPLETED,
            RecoveryReasonCode.USER_ATTESTED_RAN,
            ("op1_call", "op1_dispatch", "op1_reconcile", "op1_response"),
            "op1_response",
        )
    )
    bundle = [reconcile, outcome, decision]
    assert [_ledger_checks(event) for event in bundle] == [
        Lane.RECONCILE_RESULT,
        Lane.FUNCTION_RESPONSE,
        Lane.RECOVERY_DECISION,
    ]
    assert check_transition_shape(bundle, TransitionKind.RECOVERY_BUNDLE) is None
    verdict = validate_recovery_bundle(
        op.identity, op.call, op.dispatch, reconcile, outcome, decision
    )
    assert verdict.ok, verdict


PROTOCOL: RuntimeProtocol = {"toolBoundary": "t1_after_preflight_v1"}
TARGET = EventIdentity("sess-1", "inv-2", "run-2", "turn-2")
SOURCE = EventIdentity("sess-1", "inv-1", "run-1", "turn-1")
COMMIT = "a" * 40
BASELINE: WorkspaceBaseline = {
    "protocol": "workspace_baseline_v1",
    "workspaceIdentity": "ws",
    "workspaceEpoch": 2,
    "checkpointRef": "refs/maka/b",
    "commitId": COMMIT,
    "treeId": COMMIT,
    "policyHash": "0" * 64,
    "changedPaths": [{"path": "a.txt", "change": "modified"}],
    "moreChangedPaths": 0,
    "compared": True,
    "decidedBy": "local_user",
    "decidedAt": 40,
}
TRANSITION: WorkspaceTransition = {
    "protocol": "workspace_transition_v1",
    "kind": "isolated_restore",
    "fromIdentity": "ws",
    "toIdentity": "ws-copy",
    "fromPath": "/w",
    "toPath": "/w-restored",
    "checkpointRef": "refs/maka/c",
    "commitId": COMMIT,
    "treeId": COMMIT,
    "workspaceEpoch": 2,
    "decidedBy": "local_user",
    "decidedAt": 40,
}


def _start(**workspace: Any) -> RuntimeEvent:
    return continuation_start_event(
        TARGET,
        "evt-start-2",
        4242,
        runtime_protocol=PROTOCOL,
        claim_id="claim-2",
        boundary_digest="sha256:" + "6" * 64,
        source=SOURCE,
        source_high_water=7,
        source_prefix_digest="sha256:" + "5" * 64,
        provider_replay_digest="sha256:" + "7" * 64,
        **workspace,
    )


def test_continuation_start_event_is_the_v2_start_fact() -> None:
    event = _start()
    assert event == {
        "id": "evt-start-2",
        "sessionId": "sess-1",
        "invocationId": "inv-2",
        "runId": "run-2",
        "turnId": "turn-2",
        "ts": 4242,
        "partial": False,
        "role": "system",
        "author": "system",
        "actions": {
            "runtimeProtocol": {"toolBoundary": "t1_after_preflight_v1"},
            "continuationStart": {
                "protocol": "continuation_start_v2",
                "provenance": "runtime_admission",
                "claimId": "claim-2",
                "boundaryDigest": "sha256:" + "6" * 64,
                "immediateSource": {
                    "sessionId": "sess-1",
                    "invocationId": "inv-1",
                    "runId": "run-1",
                    "turnId": "turn-1",
                    "highWater": 7,
                    "prefixDigest": "sha256:" + "5" * 64,
                },
                "replayManifestDigest": "sha256:" + "6" * 64,
                "providerProjectionVersion": 1,
                "providerReplayDigest": "sha256:" + "7" * 64,
            },
        },
    }
    assert _ledger_checks(event) is Lane.ORDINARY
    # Written only by the continuation writer, in the admission transaction.
    rejection = check_generic_append(event)
    assert rejection is not None
    assert rejection.code is WriterRejectionCode.RESERVED_CONTINUATION_FACT


@pytest.mark.parametrize(
    ("workspace", "keys"),
    [
        ({}, ["runtimeProtocol", "continuationStart"]),
        ({"baseline": BASELINE}, ["runtimeProtocol", "continuationStart", "workspaceBaseline"]),
        (
            {"transition": TRANSITION},
            ["runtimeProtocol", "continuationStart", "workspaceTransition"],
        ),
    ],
)
def test_continuation_start_carries_the_users_workspace_decision(
    workspace: dict[str, Any], keys: list[str]
) -> None:
    event = _start(**workspace)
    assert list(event["actions"]) == keys
    if "baseline" in workspace:
        assert event["actions"]["workspaceBaseline"] == BASELINE
    if "transition" in workspace:
        assert event["actions"]["workspaceTransition"] == TRANSITION
    assert _ledger_checks(event) is Lane.ORDINARY


def test_the_event_status_map_covers_every_terminal_status_and_inverts_for_writes() -> None:
    assert set(EVENT_STATUS_TO_RUN) == TERMINAL_STATUSES
    assert set(EVENT_STATUS_TO_RUN.values()) == TERMINAL_RUN_STATUSES
    assert dict(RUN_STATUS_TO_EVENT) == {
        RunStatus.COMPLETED: "completed",
        RunStatus.FAILED: "failed",
        RunStatus.CANCELLED: "cancelled",
    }
    for run_status, event_status in RUN_STATUS_TO_EVENT.items():
        assert EVENT_STATUS_TO_RUN[event_status] is run_status
    assert EVENT_STATUS_TO_RUN["aborted"] is RunStatus.CANCELLED
