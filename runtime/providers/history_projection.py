"""Provider history from committed RuntimeEvents.

The input is a *replay* list (partial and hidden events dropped, only paired tool calls and
responses kept: the Phase 0 replay does exactly that). This projection still refuses to emit an
unpaired call on its own, so a caller that forgets the replay step cannot hand the model a
half-paired history: a call without a later response of the same id and name is dropped, and so
is a response without an earlier call.

Text written by the system (terminal events carry none) and ``error`` content never reach the
model.
"""

from __future__ import annotations

from collections.abc import Iterable

from runtime.ledger.event_model import RuntimeEvent
from runtime.providers.provider_port import (
    AssistantText,
    HistoryItem,
    HostNotice,
    Thinking,
    ToolCall,
    ToolResult,
    UserText,
)


def _paired_call_ids(events: list[RuntimeEvent]) -> set[str]:
    calls: dict[str, str] = {}
    paired: set[str] = set()
    for event in events:
        content = event.get("content")
        if content is None:
            continue
        if content["kind"] == "function_call":
            calls[content["id"]] = content["name"]
        elif content["kind"] == "function_response" and calls.get(content["id"]) == content["name"]:
            paired.add(content["id"])
    return paired


def history_from_events(events: Iterable[RuntimeEvent]) -> tuple[HistoryItem, ...]:
    visible = [
        event
        for event in events
        if not event["partial"] and event.get("modelVisibility") != "hidden"
    ]
    paired = _paired_call_ids(visible)
    emitted_calls: set[str] = set()
    items: list[HistoryItem] = []
    for event in visible:
        content = event.get("content")
        if content is None:
            continue
        if content["kind"] == "text":
            text = content["text"]
            if not text:
                continue
            if event["role"] == "user":
                if event["author"] == "host":
                    items.append(HostNotice(text))
                else:
                    items.append(UserText(text))
            elif event["role"] == "model":
                items.append(AssistantText(text))
        elif content["kind"] == "thinking":
            items.append(Thinking(content["text"], content.get("signature")))
        elif content["kind"] == "function_call":
            if content["id"] in paired and content["id"] not in emitted_calls:
                emitted_calls.add(content["id"])
                items.append(ToolCall(content["id"], content["name"], content["args"]))
        elif content["kind"] == "function_response" and content["id"] in emitted_calls:
            emitted_calls.discard(content["id"])
            items.append(
                ToolResult(
                    content["id"],
                    content["name"],
                    content["result"],
                    content.get("isError", False),
                )
            )
    return tuple(items)


def unpaired_tool_calls(items: Iterable[HistoryItem]) -> list[str]:
    """Call ids in ``items`` without a later result (or results without an earlier call).

    Used as an assertion before every provider request and by tests over recorded requests.
    """
    open_calls: dict[str, int] = {}
    problems: list[str] = []
    for item in items:
        if isinstance(item, ToolCall):
            open_calls[item.call_id] = open_calls.get(item.call_id, 0) + 1
        elif isinstance(item, ToolResult):
            if open_calls.get(item.call_id, 0) == 0:
                problems.append(item.call_id)
            else:
                open_calls[item.call_id] -= 1
    problems.extend(call_id for call_id, count in open_calls.items() if count)
    return problems
