"""Provider history from committed events never holds an unpaired tool call."""

from __future__ import annotations

from typing import Any

from runtime.ledger.event_model import RuntimeEvent, decode_event
from runtime.providers.history_projection import history_from_events, unpaired_tool_calls
from runtime.providers.provider_port import (
    AssistantText,
    HostNotice,
    Thinking,
    ToolCall,
    ToolResult,
    UserText,
)


def _event(event_id: str, role: str, author: str, **extra: Any) -> RuntimeEvent:
    base = {
        "id": event_id,
        "sessionId": "s",
        "invocationId": "i",
        "runId": "r",
        "turnId": "t",
        "ts": 1,
        "partial": False,
        "role": role,
        "author": author,
    }
    base.update(extra)
    return decode_event(base)


def test_history_keeps_paired_calls_and_drops_the_rest() -> None:
    events = [
        _event("u", "user", "user", content={"kind": "text", "text": "go"}),
        _event("p", "model", "agent", partial=True, content={"kind": "text", "text": "par"}),
        _event("th", "model", "agent", content={"kind": "thinking", "text": "hmm"}),
        _event("a", "model", "agent", content={"kind": "text", "text": "ok"}),
        _event(
            "h",
            "model",
            "agent",
            modelVisibility="hidden",
            content={"kind": "text", "text": "secret"},
        ),
        _event(
            "c1",
            "model",
            "agent",
            content={"kind": "function_call", "id": "x", "name": "bash", "args": {}},
        ),
        _event(
            "c2",
            "model",
            "agent",
            content={"kind": "function_call", "id": "y", "name": "bash", "args": {}},
        ),
        _event(
            "r1",
            "tool",
            "tool",
            content={"kind": "function_response", "id": "x", "name": "bash", "result": 1},
        ),
        _event(
            "r3",
            "tool",
            "tool",
            content={"kind": "function_response", "id": "z", "name": "bash", "result": 1},
        ),
        _event("e", "system", "system", content={"kind": "error", "message": "boom"}),
        _event("n", "user", "host", content={"kind": "text", "text": "outcome unknown"}),
        _event("end", "system", "system", status="completed", actions={"endInvocation": True}),
    ]
    history = history_from_events(events)
    assert history == (
        UserText("go"),
        Thinking("hmm"),
        AssistantText("ok"),
        ToolCall("x", "bash", {}),
        ToolResult("x", "bash", 1),
        HostNotice("outcome unknown"),
    )
    assert unpaired_tool_calls(history) == []


def test_unpaired_detection() -> None:
    assert unpaired_tool_calls([ToolCall("a", "n", {})]) == ["a"]
    assert unpaired_tool_calls([ToolResult("b", "n", 1)]) == ["b"]
