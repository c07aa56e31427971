"""The system facts recovery, reconciliation, attestation and continuation admission write, built
in one place (docs/design/ledger.md sections 4 and 6, docs/design/recovery.md sections 3,
5, 6 and 8).

Each builder returns the event exactly as its writer commits it; the writers choose the ids, the
times and the fact payloads (``ReconcileFact`` / ``DecisionFact`` of ``recovery_bundle``, the
workspace facts), and the store validates what they commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast

from runtime.ledger.codes import FailureClass

if TYPE_CHECKING:  # the pydantic event model is not needed to name the types
    from collections.abc import Mapping

    from runtime.ledger.event_model import (
        RuntimeEvent,
        RuntimeProtocol,
        WorkspaceBaseline,
        WorkspaceTransition,
    )
    from runtime.ledger.store_ports import RunHeader


class EventIdentity(NamedTuple):
    """The four ids every event of one run carries."""

    session_id: str
    invocation_id: str
    run_id: str
    turn_id: str

    @classmethod
    def of_header(cls, header: RunHeader) -> EventIdentity:
        return cls(header.session_id, header.invocation_id, header.run_id, header.turn_id)

    @classmethod
    def of_event(cls, event: RuntimeEvent) -> EventIdentity:
        return cls(event["sessionId"], event["invocationId"], event["runId"], event["turnId"])


class RecoveryFact(Protocol):
    """A reconcile or decision fact (``recovery_bundle``): the ``actions.toolRecovery`` value."""

    def to_tool_recovery(self) -> dict[str, Any]: ...


def _envelope(ids: EventIdentity, event_id: str, ts: int, role: str = "system") -> dict[str, Any]:
    return {
        "id": event_id,
        "sessionId": ids.session_id,
        "invocationId": ids.invocation_id,
        "runId": ids.run_id,
        "turnId": ids.turn_id,
        "ts": ts,
        "partial": False,
        "role": role,
        "author": role,
    }


# ---- startup recovery (docs/design/recovery.md section 3) ----


def recovered_terminal_event(header: RunHeader, reason: str, now_ms: int) -> RuntimeEvent:
    """The ending startup recovery writes for an orphaned run: ``failed``, ``app_restarted``."""
    ids = EventIdentity.of_header(header)
    event = _envelope(ids, f"{header.run_id}_recovered_terminal", now_ms)
    event["status"] = "failed"
    event["actions"] = {
        "endInvocation": True,
        "stateDelta": {
            "failureClass": FailureClass.APP_RESTARTED.value,
            "recoveryReason": reason,
            "recovered": True,
        },
    }
    return cast("RuntimeEvent", event)


def permission_closure_event(header: RunHeader, request_id: str, now_ms: int) -> RuntimeEvent:
    """Closes a permission request an orphaned run left open (``host_restarted``)."""
    event = _envelope(
        EventIdentity.of_header(header), f"{header.run_id}_{request_id}_closure", now_ms
    )
    event["actions"] = {"permissionClosure": {"requestId": request_id, "reason": "host_restarted"}}
    return cast("RuntimeEvent", event)


# ---- recovery bundles: reconcile, recovered outcome, decision (docs/design/ledger.md section 4)


def tool_recovery_event(
    ids: EventIdentity,
    event_id: str,
    ts: int,
    fact: RecoveryFact,
    *,
    operation_id: str,
    tool_call_id: str,
) -> RuntimeEvent:
    """A bundle's reconcile or decision event, bound to its operation."""
    event = _envelope(ids, event_id, ts)
    event["actions"] = {"toolRecovery": fact.to_tool_recovery()}
    event["refs"] = {"operationId": operation_id, "toolCallId": tool_call_id}
    return cast("RuntimeEvent", event)


def settled_baseline_event(
    ids: EventIdentity, event_id: str, ts: int, baseline: Mapping[str, Any]
) -> RuntimeEvent:
    """The ``workspaceBaseline`` fact a settled writing call records (docs/design/workspace.md
    section 3): a hidden system fact of the call's run."""
    event = _envelope(ids, event_id, ts)
    event["modelVisibility"] = "hidden"
    event["actions"] = {"workspaceBaseline": dict(baseline)}
    return cast("RuntimeEvent", event)


def recovered_outcome_event(
    ids: EventIdentity,
    event_id: str,
    ts: int,
    *,
    operation_id: str,
    tool_call_id: str,
    tool_name: str,
    result: Any,
    is_error: bool | None = None,
) -> RuntimeEvent:
    """A bundle's bound function_response; ``isError`` is written only when ``is_error`` is
    given (the reconciler's outcome has none, an attestation's always says it)."""
    event = _envelope(ids, event_id, ts, "tool")
    content: dict[str, Any] = {
        "kind": "function_response",
        "id": tool_call_id,
        "name": tool_name,
        "result": result,
    }
    if is_error is not None:
        content["isError"] = is_error
    event["content"] = content
    event["refs"] = {"operationId": operation_id, "toolCallId": tool_call_id}
    return cast("RuntimeEvent", event)


# ---- continuation admission (docs/design/recovery.md section 6) ----


def continuation_start_event(
    target: EventIdentity,
    event_id: str,
    ts: int,
    *,
    runtime_protocol: RuntimeProtocol,
    claim_id: str,
    boundary_digest: str,
    source: EventIdentity,
    source_high_water: int,
    source_prefix_digest: str,
    provider_replay_digest: str,
    baseline: WorkspaceBaseline | None = None,
    transition: WorkspaceTransition | None = None,
) -> RuntimeEvent:
    """The first event of an admitted continuation (``continuation_start_v2``), with the user's
    workspace decision (baseline or transition) when there is one."""
    actions: dict[str, Any] = {
        "runtimeProtocol": runtime_protocol,
        "continuationStart": {
            "protocol": "continuation_start_v2",
            "provenance": "runtime_admission",
            "claimId": claim_id,
            "boundaryDigest": boundary_digest,
            "immediateSource": {
                "sessionId": source.session_id,
                "invocationId": source.invocation_id,
                "runId": source.run_id,
                "turnId": source.turn_id,
                "highWater": source_high_water,
                "prefixDigest": source_prefix_digest,
            },
            "replayManifestDigest": boundary_digest,
            "providerProjectionVersion": 1,
            "providerReplayDigest": provider_replay_digest,
        },
    }
    if baseline is not None:
        actions["workspaceBaseline"] = baseline
    if transition is not None:
        actions["workspaceTransition"] = transition
    event = _envelope(target, event_id, ts)
    event["actions"] = actions
    return cast("RuntimeEvent", event)
