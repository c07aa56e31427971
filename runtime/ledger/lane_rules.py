"""Lanes: the one semantic role a physical event plays for the tool ledger
(docs/design/ledger.md section 3).

The structural decoder lets content and actions coexist; the tool ledger is narrower so that the
online writers, the projection rebuild and the resolver can never read one row two ways. This
module owns three pure rules:

- ``classify_lane``: which lane an event is on, or a ``LaneConflict`` when it carries two lane
  signals or breaks its lane's envelope (``semantic_lane_conflict``);
- ``check_generic_append``: what the generic append path may write (reserved facts belong to the
  T1/T2, recovery-bundle and continuation writers);
- ``check_transition_shape``: the lane sequence each writer accepts.

Prospective validation against the ledger (``validate_transition``) needs the scanner, which
itself classifies lanes; it lives in ``transition_validator``, above this module (the ledger's
modules import one way: ``lane_rules`` < ``tool_ledger_scanner`` < ``recovery_bundle`` <
``transition_validator``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.ledger.codes import Lane, ScanIssueCode, TransitionKind, WriterRejectionCode
from runtime.ledger.event_model import RuntimeEvent

RECONCILE_RESULT_KIND = "maka.tool.reconcile_result"
RECOVERY_DECISION_KIND = "maka.tool.recovery_decision"

# stateDelta keys a function_call may carry: display strings only, never control data.
CALL_DISPLAY_KEYS = frozenset({"activityKind", "displayName", "intent"})
_BOUND_REFS = frozenset({"operationId", "toolCallId"})
_RECOVERY_LANES = {
    RECONCILE_RESULT_KIND: Lane.RECONCILE_RESULT,
    RECOVERY_DECISION_KIND: Lane.RECOVERY_DECISION,
}


@dataclass(frozen=True, slots=True)
class LaneConflict:
    """An event that cannot be given exactly one lane. ``reason`` says which rule it broke."""

    event_id: str
    reason: str

    @property
    def code(self) -> ScanIssueCode:
        return ScanIssueCode.SEMANTIC_LANE_CONFLICT


@dataclass(frozen=True, slots=True)
class Rejection:
    """A writer-level refusal of one candidate (generic gate or transition shape)."""

    code: ScanIssueCode | WriterRejectionCode
    event_id: str
    reason: str


def _lane_signals(event: Mapping[str, Any]) -> list[Lane | None]:
    """Every lane signal on the event; ``None`` stands for a toolRecovery of unknown kind (the
    decoder refuses those, but the rule must not depend on that)."""
    signals: list[Lane | None] = []
    content = event.get("content")
    if content is not None:
        kind = content.get("kind")
        if kind == "function_call":
            signals.append(Lane.FUNCTION_CALL)
        elif kind == "function_response":
            signals.append(Lane.FUNCTION_RESPONSE)
    actions = event.get("actions")
    if actions is not None:
        if "toolDispatch" in actions:
            signals.append(Lane.TOOL_DISPATCH)
        recovery = actions.get("toolRecovery")
        if recovery is not None:
            kind = recovery.get("kind") if isinstance(recovery, Mapping) else None
            signals.append(_RECOVERY_LANES.get(kind) if isinstance(kind, str) else None)
    return signals


def _is_finite_number(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


# C901: the envelope rules in their documented order, each an early return with its message.
def _envelope_error(lane: Lane, event: Mapping[str, Any]) -> str | None:  # noqa: C901
    """The first envelope rule ``event`` breaks for ``lane`` (a tool lane), or None."""
    if event.get("partial") is not False:
        return "a tool fact is never partial"
    if "status" in event:
        return "a tool fact never carries status"
    role, author = event.get("role"), event.get("author")
    actions = event.get("actions")
    if lane is Lane.FUNCTION_CALL:
        if role != "model" or author != "agent":
            return "a function_call is role model, author agent"
        if actions is None:
            return None
        delta = actions.get("stateDelta")
        if set(actions) != {"stateDelta"} or not isinstance(delta, Mapping) or not delta:
            return "a function_call carries no actions but a non-empty display stateDelta"
        for key, value in delta.items():
            if key not in CALL_DISPLAY_KEYS or not isinstance(value, str):
                return f"function_call stateDelta key {key!r} is not a display string"
        return None
    if lane is Lane.FUNCTION_RESPONSE:
        if role != "tool" or author != "tool":
            return "a function_response is role tool, author tool"
        if actions is None:
            return None
        delta = actions.get("stateDelta")
        if (
            set(actions) != {"stateDelta"}
            or not isinstance(delta, Mapping)
            or set(delta) != {"durationMs"}
            or not _is_finite_number(delta["durationMs"])
        ):
            return "a function_response carries no actions but {stateDelta:{durationMs:N}}"
        return None
    # tool_dispatch, reconcile_result, recovery_decision: system facts without content
    if "content" in event:
        return f"a {lane} fact has no content"
    if role != "system" or author != "system":
        return f"a {lane} fact is role system, author system"
    action_key = "toolDispatch" if lane is Lane.TOOL_DISPATCH else "toolRecovery"
    if actions is None or set(actions) != {action_key}:
        return f"a {lane} fact carries exactly actions.{action_key}"
    refs = event.get("refs")
    if refs is None or set(refs) != _BOUND_REFS:
        return f"a {lane} fact carries exactly refs {{operationId, toolCallId}}"
    return None


def classify_lane(event: Mapping[str, Any]) -> Lane | LaneConflict:
    """The event's lane, or why it has none. Never raises for a decoded event."""
    signals = _lane_signals(event)
    if not signals:
        return Lane.ORDINARY
    event_id = str(event.get("id", ""))
    if len(signals) > 1:
        names = ", ".join(str(lane) for lane in signals)
        return LaneConflict(event_id, f"two lane signals on one event: {names}")
    lane = signals[0]
    if lane is None:
        return LaneConflict(event_id, "toolRecovery of unknown kind")
    error = _envelope_error(lane, event)
    if error is not None:
        return LaneConflict(event_id, error)
    return lane


def is_bound_response(event: Mapping[str, Any]) -> bool:
    """A function_response bound to a T1 operation (it names ``refs.operationId``)."""
    refs = event.get("refs")
    return refs is not None and "operationId" in refs


def check_generic_append(event: RuntimeEvent) -> Rejection | None:
    """What the generic append may write: ordinary events, function_calls and *unbound*
    function_responses. The continuation gate comes first because a continuation-start event is
    on the ordinary lane; then a lane conflict is returned as it is; then the reserved lanes."""
    event_id = event["id"]
    actions = event.get("actions")
    if actions is not None and "continuationStart" in actions:
        return Rejection(
            WriterRejectionCode.RESERVED_CONTINUATION_FACT,
            event_id,
            "continuation-start facts are written only by the continuation writer",
        )
    if actions is not None and (
        "workspaceCheckpoint" in actions
        or "workspaceCheckpointFailed" in actions
        or "workspaceBaseline" in actions
    ):
        return Rejection(
            WriterRejectionCode.RESERVED_WORKSPACE_FACT,
            event_id,
            "workspace checkpoint facts are written only by the workspace-fact writer",
        )
    lane = classify_lane(event)
    if isinstance(lane, LaneConflict):
        return Rejection(lane.code, event_id, lane.reason)
    if lane in (Lane.RECONCILE_RESULT, Lane.RECOVERY_DECISION):
        return Rejection(
            WriterRejectionCode.RESERVED_RECOVERY_FACT,
            event_id,
            "recovery facts are written only by the recovery-bundle writer",
        )
    if lane is Lane.TOOL_DISPATCH or (lane is Lane.FUNCTION_RESPONSE and is_bound_response(event)):
        return Rejection(
            WriterRejectionCode.RESERVED_TOOL_BOUNDARY_FACT,
            event_id,
            "dispatch facts and bound responses are written only by the T1/T2 writers",
        )
    return None


_SHAPES: dict[TransitionKind, tuple[tuple[Lane, ...], ...]] = {
    TransitionKind.T1_PREPARE: (
        (Lane.FUNCTION_CALL, Lane.TOOL_DISPATCH),
        (Lane.TOOL_DISPATCH,),
    ),
    TransitionKind.T2_OUTCOME: ((Lane.FUNCTION_RESPONSE,),),
    TransitionKind.RECOVERY_BUNDLE: (
        (Lane.RECONCILE_RESULT, Lane.RECOVERY_DECISION),
        (Lane.RECONCILE_RESULT, Lane.FUNCTION_RESPONSE, Lane.RECOVERY_DECISION),
    ),
}


def check_transition_shape(
    candidates: Sequence[RuntimeEvent],
    kind: TransitionKind,
    lanes: Sequence[Lane] | None = None,
) -> Rejection | None:
    """The lane sequence rule of each writer, over the candidates left after exact retries were
    dropped. An empty list is always fine (a pure exact retry). ``lanes``: the candidates'
    lanes when the caller already has them from ``classify_lane`` (a writer's prepared
    candidates), which saves classifying them again; ignored for the generic append."""
    if not candidates:
        return None
    if kind is TransitionKind.GENERIC_APPEND:
        for candidate in candidates:
            rejection = check_generic_append(candidate)
            if rejection is not None:
                return rejection
        return None
    if lanes is None:
        classified: list[Lane] = []
        for candidate in candidates:
            lane = classify_lane(candidate)
            if isinstance(lane, LaneConflict):
                return Rejection(lane.code, candidate["id"], lane.reason)
            classified.append(lane)
        lanes = classified
    first_id = candidates[0]["id"]
    if tuple(lanes) not in _SHAPES[kind]:
        shape = ", ".join(str(lane) for lane in lanes)
        return Rejection(
            WriterRejectionCode.TRANSITION_SHAPE_CONFLICT,
            first_id,
            f"{kind} does not accept [{shape}]",
        )
    if kind is TransitionKind.T2_OUTCOME and not is_bound_response(candidates[0]):
        return Rejection(
            WriterRejectionCode.TRANSITION_SHAPE_CONFLICT,
            first_id,
            "a T2 outcome is a function_response bound by refs.operationId",
        )
    return None
