"""One tool call's three events built as the agent runtime builds them
(``runtime/agent/tool_runtime.py``): the operation id, the ``function_call``, its T1 dispatch
with the arguments' canonical hash, and its T2 response. A bench that charges a step's CPU to
the store charges exactly what the runtime pays to make them, nothing a test helper adds."""

from __future__ import annotations

from typing import Any

from runtime.agent.event_builders import EventBuilder
from runtime.ledger.canonical_codec import canonical_args_hash, operation_id
from runtime.ledger.event_model import RecoveryMode, RuntimeEvent


def runtime_tool_call(
    builder: EventBuilder,
    call_id: str,
    name: str,
    args: dict[str, Any],
    result: Any,
    *,
    recovery_mode: RecoveryMode,
    ts: int,
) -> tuple[RuntimeEvent, RuntimeEvent, RuntimeEvent]:
    """The call, its dispatch and its response (``is_error`` false, 1 ms)."""
    op = operation_id(builder.identity.invocation_id, call_id)
    call = builder.function_call(op, call_id, name=name, args=args, step_id=f"step-{ts}", ts=ts)
    dispatch = builder.tool_dispatch(
        op,
        call_id,
        name=name,
        args_hash=canonical_args_hash(name, args),
        recovery_mode=recovery_mode,
        evidence=None,
        ts=ts,
    )
    response = builder.bound_response(
        op, call_id, name=name, result=result, is_error=False, duration_ms=1, ts=ts
    )
    return call, dispatch, response
