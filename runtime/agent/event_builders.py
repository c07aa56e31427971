"""RuntimeEvent builders for one run: every event the agent runtime writes is shaped here.

Ids follow the event conventions of the design: the function_call of an operation is
``<operationId>_call``, its T1 dispatch ``<operationId>_dispatch``, its T2 response
``<operationId>_response``; a pre-T1 refusal is ``<operationId>_refusal`` and carries no
``refs.operationId`` (it is unbound: the operation never crossed T1). Ordinary events are
``<runId>_e<n>``, numbered in commit order.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Literal, cast

from runtime.base.cancel_token import STOPPED_BY_HOST
from runtime.ledger.codes import FailureClass
from runtime.ledger.event_model import (
    TOOL_BOUNDARY_PROTOCOL_V1,
    FileStateEvidence,
    RecoveryMode,
    RuntimeEvent,
)


@dataclass(frozen=True, slots=True)
class RunIdentity:
    session_id: str
    invocation_id: str
    run_id: str
    turn_id: str


class EventBuilder:
    def __init__(self, identity: RunIdentity) -> None:
        self.identity = identity
        self._counter = itertools.count(1)

    def _base(self, event_id: str, ts: int, role: str, author: str) -> dict[str, Any]:
        identity = self.identity
        return {
            "id": event_id,
            "sessionId": identity.session_id,
            "invocationId": identity.invocation_id,
            "runId": identity.run_id,
            "turnId": identity.turn_id,
            "ts": ts,
            "partial": False,
            "role": role,
            "author": author,
        }

    def next_id(self) -> str:
        return f"{self.identity.run_id}_e{next(self._counter):04d}"

    def user_message(
        self,
        text: str,
        ts: int,
        *,
        t1_marker: bool,
        checkpoint_mode: dict[str, str] | None = None,
    ) -> RuntimeEvent:
        """The run's first event; with ``checkpoint_mode`` it declares the run's workspace
        checkpoint mode (docs/design/workspace.md section 2) beside the T1 marker."""
        event = self._base(self.next_id(), ts, "user", "user")
        event["content"] = {"kind": "text", "text": text}
        if t1_marker:
            protocol: dict[str, Any] = {"toolBoundary": TOOL_BOUNDARY_PROTOCOL_V1}
            if checkpoint_mode is not None:
                protocol["workspaceCheckpoints"] = dict(checkpoint_mode)
            event["actions"] = {"runtimeProtocol": protocol}
        return cast(RuntimeEvent, event)

    def host_notice(self, text: str, ts: int, *, omitted_event_ids: list[str]) -> RuntimeEvent:
        """A host-authored message in the user's seat. ``omitted_event_ids``: events of this run
        the provider history leaves out from now on (``stateDelta.providerHistoryOmits``); the
        ledger keeps them."""
        event = self._base(self.next_id(), ts, "user", "host")
        event["content"] = {"kind": "text", "text": text}
        if omitted_event_ids:
            event["actions"] = {"stateDelta": {"providerHistoryOmits": list(omitted_event_ids)}}
        return cast(RuntimeEvent, event)

    def assistant_text(self, text: str, ts: int, usage: tuple[int, int] | None) -> RuntimeEvent:
        event = self._base(self.next_id(), ts, "model", "agent")
        event["content"] = {"kind": "text", "text": text}
        if usage is not None:
            event["actions"] = {"tokenUsage": {"input": usage[0], "output": usage[1]}}
        return cast(RuntimeEvent, event)

    def usage_only(self, usage: tuple[int, int], ts: int) -> RuntimeEvent:
        event = self._base(self.next_id(), ts, "system", "system")
        event["actions"] = {"tokenUsage": {"input": usage[0], "output": usage[1]}}
        return cast(RuntimeEvent, event)

    def thinking(self, text: str, signature: str | None, ts: int) -> RuntimeEvent:
        event = self._base(self.next_id(), ts, "model", "agent")
        content: dict[str, Any] = {"kind": "thinking", "text": text}
        if signature:
            content["signature"] = signature
        event["content"] = content
        return cast(RuntimeEvent, event)

    def function_call(
        self, operation_id: str, call_id: str, *, name: str, args: Any, step_id: str, ts: int
    ) -> RuntimeEvent:
        event = self._base(f"{operation_id}_call", ts, "model", "agent")
        event["content"] = {"kind": "function_call", "id": call_id, "name": name, "args": args}
        event["refs"] = {"toolCallId": call_id, "stepId": step_id}
        return cast(RuntimeEvent, event)

    def tool_dispatch(
        self,
        operation_id: str,
        call_id: str,
        *,
        name: str,
        args_hash: str,
        recovery_mode: RecoveryMode,
        evidence: FileStateEvidence | None,
        ts: int,
    ) -> RuntimeEvent:
        event = self._base(f"{operation_id}_dispatch", ts, "system", "system")
        dispatch: dict[str, Any] = {
            "protocol": TOOL_BOUNDARY_PROTOCOL_V1,
            "operationId": operation_id,
            "providerToolCallId": call_id,
            "toolName": name,
            "canonicalArgsHash": args_hash,
            "recoveryMode": recovery_mode,
        }
        if evidence is not None:
            dispatch["evidence"] = evidence
        event["actions"] = {"toolDispatch": dispatch}
        event["refs"] = {"operationId": operation_id, "toolCallId": call_id}
        return cast(RuntimeEvent, event)

    def bound_response(
        self,
        operation_id: str,
        call_id: str,
        *,
        name: str,
        result: Any,
        is_error: bool,
        duration_ms: int,
        ts: int,
    ) -> RuntimeEvent:
        event = self._base(f"{operation_id}_response", ts, "tool", "tool")
        content: dict[str, Any] = {
            "kind": "function_response",
            "id": call_id,
            "name": name,
            "result": result,
        }
        if is_error:
            content["isError"] = True
        event["content"] = content
        event["actions"] = {"stateDelta": {"durationMs": duration_ms}}
        event["refs"] = {"operationId": operation_id, "toolCallId": call_id}
        return cast(RuntimeEvent, event)

    def unbound_error_response(
        self, operation_id: str, call_id: str, *, name: str, result: Any, ts: int
    ) -> RuntimeEvent:
        event = self._base(f"{operation_id}_refusal", ts, "tool", "tool")
        event["content"] = {
            "kind": "function_response",
            "id": call_id,
            "name": name,
            "result": result,
            "isError": True,
        }
        event["refs"] = {"toolCallId": call_id}
        return cast(RuntimeEvent, event)

    def permission_request(
        self, request_id: str, *, tool_name: str, call_id: str, summary: str, ts: int
    ) -> RuntimeEvent:
        event = self._base(f"{request_id}_request", ts, "system", "host")
        event["actions"] = {
            "permissionRequest": {
                "requestId": request_id,
                "toolName": tool_name,
                "toolCallId": call_id,
                "summary": summary,
            }
        }
        return cast(RuntimeEvent, event)

    def permission_decision(
        self,
        request_id: str,
        decision: Literal["allow", "deny"],
        ts: int,
        *,
        author: Literal["user", "host"] = "user",
    ) -> RuntimeEvent:
        """The answer to a permission question: the user's, or the host's when the turn was
        stopped before anyone answered."""
        event = self._base(f"{request_id}_decision", ts, "system", author)
        event["actions"] = {"permissionDecision": {"requestId": request_id, "decision": decision}}
        return cast(RuntimeEvent, event)

    def terminal(
        self,
        status: Literal["completed", "failed", "cancelled"],
        ts: int,
        *,
        stop_reason: str | None = None,
        failure_class: FailureClass | None = None,
        message: str | None = None,
        reason: str | None = None,
    ) -> RuntimeEvent:
        """The run's ending; ``reason`` (default: the code) says more precisely what ended it
        (``provider_context_overflow``: the history did not fit the model's context window)."""
        event = self._base(f"{self.identity.run_id}_terminal", ts, "system", "system")
        event["status"] = status
        delta: dict[str, Any] = {}
        if stop_reason is not None:
            delta["stopReason"] = stop_reason
        if failure_class is not None:
            delta["failureClass"] = failure_class.value
        if failure_class is FailureClass.CANCELLED_BY_USER:
            # Who stopped it: the user (their cancel, or their pipeline closing its output),
            # or the host (at a question nobody could answer, or shut down).
            delta["abortSource"] = "host" if reason in STOPPED_BY_HOST else "user"
        event["actions"] = {"endInvocation": True, "stateDelta": delta}
        if message:
            code = failure_class.value if failure_class is not None else stop_reason or "run_ended"
            event["content"] = {
                "kind": "error",
                "message": message,
                "code": code,
                "reason": reason or code,
            }
        return cast(RuntimeEvent, event)
