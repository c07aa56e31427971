"""Lane classification, lane envelopes, the generic-append gate and writer shapes
(docs/design/ledger.md s3)."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.ledger.codes import Lane, ScanIssueCode, TransitionKind, WriterRejectionCode
from runtime.ledger.event_model import RuntimeEvent, decode_event
from runtime.ledger.lane_rules import (
    LaneConflict,
    check_generic_append,
    check_transition_shape,
    classify_lane,
)
from tests.helpers.ledger_builders import (
    DIGEST_A,
    DROP,
    bound_response,
    call_event,
    decision_event,
    dispatch_event,
    model_text,
    reconcile_event,
    response_event,
    terminal,
    user_text,
    with_changes,
)

CALL = call_event()
DISPATCH = dispatch_event(CALL)
BOUND = bound_response(CALL)
UNBOUND = response_event(CALL)
RECONCILE = reconcile_event(CALL)
DECISION = decision_event(CALL, DISPATCH, RECONCILE)
CONTINUATION = {
    "protocol": "continuation_start_v2",
    "provenance": "runtime_admission",
    "claimId": "claim-1",
    "boundaryDigest": DIGEST_A,
    "immediateSource": {
        "sessionId": "s",
        "invocationId": "i",
        "runId": "r",
        "turnId": "t",
        "highWater": 3,
        "prefixDigest": DIGEST_A,
    },
    "replayManifestDigest": DIGEST_A,
    "providerProjectionVersion": 1,
    "providerReplayDigest": DIGEST_A,
}


def decoded(event: RuntimeEvent, **changes: Any) -> RuntimeEvent:
    """``event`` with ``changes``, still a decodable event (lane rules are narrower)."""
    return decode_event(with_changes(event, **changes))


def conflict(event: RuntimeEvent) -> LaneConflict:
    lane = classify_lane(event)
    assert isinstance(lane, LaneConflict), lane
    assert lane.event_id == event["id"]
    assert lane.code is ScanIssueCode.SEMANTIC_LANE_CONFLICT
    return lane


# ---- classification ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "lane"),
    [
        (user_text(marker=True), Lane.ORDINARY),
        (model_text(partial=True), Lane.ORDINARY),
        (terminal(), Lane.ORDINARY),
        (decoded(user_text(), actions={"continuationStart": CONTINUATION}), Lane.ORDINARY),
        (CALL, Lane.FUNCTION_CALL),
        (DISPATCH, Lane.TOOL_DISPATCH),
        (BOUND, Lane.FUNCTION_RESPONSE),
        (UNBOUND, Lane.FUNCTION_RESPONSE),
        (RECONCILE, Lane.RECONCILE_RESULT),
        (DECISION, Lane.RECOVERY_DECISION),
    ],
)
def test_each_event_kind_gets_its_lane(event: RuntimeEvent, lane: Lane) -> None:
    assert classify_lane(event) is lane


@pytest.mark.parametrize(
    "event",
    [
        decoded(CALL, actions={"toolDispatch": DISPATCH["actions"]["toolDispatch"]}),
        decoded(DISPATCH, content=BOUND["content"]),
        decoded(RECONCILE, content=CALL["content"]),
        decoded(
            DISPATCH,
            actions={"toolRecovery": RECONCILE["actions"]["toolRecovery"]},
        ),
    ],
    ids=["call+dispatch", "dispatch+response", "reconcile+call", "dispatch+recovery"],
)
def test_two_lane_signals_on_one_event_conflict(event: RuntimeEvent) -> None:
    assert "two lane signals" in conflict(event).reason


# ---- envelopes common to every tool lane ------------------------------------------------------

TOOL_EVENTS = [CALL, DISPATCH, BOUND, RECONCILE, DECISION]
TOOL_IDS = ["call", "dispatch", "response", "reconcile", "decision"]


@pytest.mark.parametrize("event", TOOL_EVENTS, ids=TOOL_IDS)
def test_a_tool_fact_is_never_partial(event: RuntimeEvent) -> None:
    assert "partial" in conflict(decoded(event, partial=True)).reason


@pytest.mark.parametrize("event", TOOL_EVENTS, ids=TOOL_IDS)
@pytest.mark.parametrize("status", ["streaming", "completed"])
def test_a_tool_fact_never_carries_status(event: RuntimeEvent, status: str) -> None:
    assert "status" in conflict(decoded(event, status=status)).reason


# ---- function_call ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "author"), [("user", "agent"), ("model", "host"), ("tool", "tool")]
)
def test_a_call_is_role_model_author_agent(role: str, author: str) -> None:
    conflict(decoded(CALL, role=role, author=author))


@pytest.mark.parametrize(
    "delta",
    [{"displayName": "Write file"}, {"activityKind": "edit", "displayName": "x", "intent": "y"}],
)
def test_a_call_may_carry_display_strings(delta: dict[str, str]) -> None:
    assert classify_lane(decoded(CALL, actions={"stateDelta": delta})) is Lane.FUNCTION_CALL


def test_a_call_may_carry_any_refs() -> None:
    event = decoded(CALL, refs={"operationId": "toolop_x", "stepId": "s", "toolCallId": "call-1"})
    assert classify_lane(event) is Lane.FUNCTION_CALL


@pytest.mark.parametrize(
    "actions",
    [
        {},
        {"stateDelta": {}},
        {"stateDelta": {"durationMs": "1"}},
        {"stateDelta": {"displayName": 3}},
        {"stateDelta": {"displayName": "x"}, "endInvocation": False},
        {"endInvocation": True},
        {"tokenUsage": {"input": 1, "output": 2}},
    ],
    ids=["empty", "empty-delta", "foreign-key", "non-string", "extra-action", "end", "usage"],
)
def test_a_call_carries_nothing_but_display_strings(actions: dict[str, Any]) -> None:
    conflict(decoded(CALL, actions=actions))


# ---- function_response ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "author"), [("model", "tool"), ("tool", "agent"), ("system", "system")]
)
def test_a_response_is_role_tool_author_tool(role: str, author: str) -> None:
    conflict(decoded(BOUND, role=role, author=author))


@pytest.mark.parametrize("duration", [0, 42, 1.5])
def test_a_response_may_carry_its_duration(duration: float) -> None:
    event = decoded(UNBOUND, actions={"stateDelta": {"durationMs": duration}})
    assert classify_lane(event) is Lane.FUNCTION_RESPONSE


@pytest.mark.parametrize(
    "actions",
    [
        {},
        {"stateDelta": {}},
        {"stateDelta": {"durationMs": "42"}},
        {"stateDelta": {"durationMs": True}},
        {"stateDelta": {"durationMs": 1, "continuationStart": True}},
        {"stateDelta": {"durationMs": 1}, "endInvocation": True},
        {"endInvocation": True},
    ],
    ids=["empty", "empty-delta", "string", "bool", "extra-key", "extra-action", "end"],
)
def test_a_response_carries_nothing_but_its_duration(actions: dict[str, Any]) -> None:
    conflict(decoded(UNBOUND, actions=actions))  # UNBOUND carries no actions to merge into


# ---- tool_dispatch and recovery facts ---------------------------------------------------------

SYSTEM_FACTS = [DISPATCH, RECONCILE, DECISION]
SYSTEM_IDS = ["dispatch", "reconcile", "decision"]


@pytest.mark.parametrize("event", SYSTEM_FACTS, ids=SYSTEM_IDS)
def test_a_system_fact_has_no_content(event: RuntimeEvent) -> None:
    assert "no content" in conflict(decoded(event, content={"kind": "text", "text": "hi"})).reason


@pytest.mark.parametrize("event", SYSTEM_FACTS, ids=SYSTEM_IDS)
@pytest.mark.parametrize(("role", "author"), [("model", "system"), ("system", "agent")])
def test_a_system_fact_is_role_and_author_system(
    event: RuntimeEvent, role: str, author: str
) -> None:
    conflict(decoded(event, role=role, author=author))


@pytest.mark.parametrize("event", SYSTEM_FACTS, ids=SYSTEM_IDS)
@pytest.mark.parametrize(
    "extra",
    [
        {"endInvocation": True},
        {"stateDelta": {"x": 1}},
        {"runtimeProtocol": {"toolBoundary": "t1_after_preflight_v1"}},
    ],
    ids=["end", "delta", "marker"],
)
def test_a_system_fact_carries_exactly_its_action(
    event: RuntimeEvent, extra: dict[str, Any]
) -> None:
    assert "exactly actions" in conflict(decoded(event, actions=extra)).reason


@pytest.mark.parametrize("event", SYSTEM_FACTS, ids=SYSTEM_IDS)
@pytest.mark.parametrize(
    "refs",
    [
        DROP,
        {"toolCallId": DROP},
        {"operationId": DROP},
        {"stepId": "step-1"},
    ],
    ids=["no-refs", "no-tool-call", "no-operation", "extra-step"],
)
def test_a_system_fact_carries_exactly_operation_and_tool_call_refs(
    event: RuntimeEvent, refs: Any
) -> None:
    assert "exactly refs" in conflict(decoded(event, refs=refs)).reason


# ---- generic append ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "event",
    [
        user_text(marker=True),
        model_text(),
        terminal(),
        CALL,
        UNBOUND,
        decoded(CALL, refs={"operationId": "toolop_x"}),
    ],
    ids=["user", "model", "terminal", "call", "unbound-response", "bound-call"],
)
def test_the_generic_append_accepts_ordinary_events_calls_and_unbound_responses(
    event: RuntimeEvent,
) -> None:
    assert check_generic_append(event) is None


@pytest.mark.parametrize(
    ("event", "code"),
    [
        (DISPATCH, WriterRejectionCode.RESERVED_TOOL_BOUNDARY_FACT),
        (BOUND, WriterRejectionCode.RESERVED_TOOL_BOUNDARY_FACT),
        (RECONCILE, WriterRejectionCode.RESERVED_RECOVERY_FACT),
        (DECISION, WriterRejectionCode.RESERVED_RECOVERY_FACT),
        (
            decoded(
                user_text(),
                role="system",
                author="system",
                content=DROP,
                actions={"continuationStart": CONTINUATION},
            ),
            WriterRejectionCode.RESERVED_CONTINUATION_FACT,
        ),
        (decoded(CALL, status="completed"), ScanIssueCode.SEMANTIC_LANE_CONFLICT),
    ],
    ids=["dispatch", "bound-response", "reconcile", "decision", "continuation", "lane-conflict"],
)
def test_the_generic_append_refuses_reserved_facts(event: RuntimeEvent, code: str) -> None:
    rejection = check_generic_append(event)
    assert rejection is not None
    assert (rejection.code, rejection.event_id) == (code, event["id"])


# ---- transition shapes ------------------------------------------------------------------------

K = TransitionKind
OK_SHAPES = [
    (K.T1_PREPARE, [CALL, DISPATCH]),
    (K.T1_PREPARE, [DISPATCH]),
    (K.T2_OUTCOME, [BOUND]),
    (K.RECOVERY_BUNDLE, [RECONCILE, DECISION]),
    (K.RECOVERY_BUNDLE, [RECONCILE, BOUND, DECISION]),
    (K.GENERIC_APPEND, [user_text(), CALL, UNBOUND]),
    *[(kind, []) for kind in K],
]


@pytest.mark.parametrize(("kind", "candidates"), OK_SHAPES)
def test_each_writer_accepts_its_shapes(
    kind: TransitionKind, candidates: list[RuntimeEvent]
) -> None:
    assert check_transition_shape(candidates, kind) is None


BAD_SHAPES = [
    (K.T1_PREPARE, [CALL]),
    (K.T1_PREPARE, [DISPATCH, CALL]),
    (K.T1_PREPARE, [CALL, DISPATCH, BOUND]),
    (K.T1_PREPARE, [user_text(), DISPATCH]),
    (K.T2_OUTCOME, [UNBOUND]),
    (K.T2_OUTCOME, [BOUND, BOUND]),
    (K.T2_OUTCOME, [DISPATCH]),
    (K.RECOVERY_BUNDLE, [DECISION, RECONCILE]),
    (K.RECOVERY_BUNDLE, [RECONCILE]),
    (K.RECOVERY_BUNDLE, [RECONCILE, DECISION, BOUND]),
    (K.RECOVERY_BUNDLE, [RECONCILE, CALL, DECISION]),
]


@pytest.mark.parametrize(("kind", "candidates"), BAD_SHAPES)
def test_any_other_shape_is_a_transition_shape_conflict(
    kind: TransitionKind, candidates: list[RuntimeEvent]
) -> None:
    rejection = check_transition_shape(candidates, kind)
    assert rejection is not None
    assert rejection.code is WriterRejectionCode.TRANSITION_SHAPE_CONFLICT
    assert rejection.event_id == candidates[0]["id"]


def test_a_lane_conflict_in_a_writer_batch_is_reported_as_such() -> None:
    bad = decoded(DISPATCH, status="completed")
    rejection = check_transition_shape([CALL, bad], K.T1_PREPARE)
    assert rejection is not None
    assert (rejection.code, rejection.event_id) == (ScanIssueCode.SEMANTIC_LANE_CONFLICT, bad["id"])


def test_the_generic_append_checks_every_candidate() -> None:
    rejection = check_transition_shape([user_text(), CALL, DISPATCH], K.GENERIC_APPEND)
    assert rejection is not None
    assert (rejection.code, rejection.event_id) == (
        WriterRejectionCode.RESERVED_TOOL_BOUNDARY_FACT,
        DISPATCH["id"],
    )
