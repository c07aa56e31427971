"""Provider history from committed RuntimeEvents.

The input is a *replay* list (partial and hidden events dropped, only paired tool calls and
responses kept: the Phase 0 replay does exactly that). This projection still refuses to emit an
unpaired call on its own, so a caller that forgets the replay step cannot hand the model a
half-paired history: a call without a later response of the same id and name is dropped, and so
is a response without an earlier call.

Text written by the system (terminal events carry none) and ``error`` content never reach the
model. Events named by a later host notice's ``stateDelta.providerHistoryOmits`` (a turn that did
not fit the model's context window) are left out; the notice itself is kept, and the ledger keeps
everything.
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


def omitted_event_ids(events: Iterable[RuntimeEvent]) -> set[str]:
    """Ids that host notices in ``events`` leave out of the provider history."""
    omitted: set[str] = set()
    for event in events:
        if event["author"] != "host" or event["partial"]:
            continue
        delta = (event.get("actions") or {}).get("stateDelta") or {}
        ids = delta.get("providerHistoryOmits")
        if isinstance(ids, list):
            omitted.update(item for item in ids if isinstance(item, str))
    return omitted


def history_from_events(events: Iterable[RuntimeEvent]) -> tuple[HistoryItem, ...]:
    events = list(events)
    omitted = omitted_event_ids(events)
    visible = [
        event
        for event in events
        if not event["partial"]
        and event.get("modelVisibility") != "hidden"
        and event["id"] not in omitted
    ]
    paired = _paired_call_ids(visible)
    emitted_calls: set[str] = set()
    tagged: list[tuple[HistoryItem, str | None]] = []
    for event in visible:
        content = event.get("content")
        if content is None:
            continue
        if content["kind"] == "text":
            text = content["text"]
            if not text:
                continue
            if event["role"] == "user":
                item: HistoryItem = (
                    HostNotice(text) if event["author"] == "host" else UserText(text)
                )
                tagged.append((item, None))
            elif event["role"] == "model":
                tagged.append((AssistantText(text), None))
        elif content["kind"] == "thinking":
            tagged.append((Thinking(content["text"], content.get("signature")), None))
        elif content["kind"] == "function_call":
            if content["id"] in paired and content["id"] not in emitted_calls:
                emitted_calls.add(content["id"])
                step = event.get("refs", {}).get("stepId")
                tagged.append((ToolCall(content["id"], content["name"], content["args"]), step))
        elif content["kind"] == "function_response" and content["id"] in emitted_calls:
            emitted_calls.discard(content["id"])
            result = ToolResult(
                content["id"], content["name"], content["result"], content.get("isError", False)
            )
            tagged.append((result, None))
    return _regroup_steps(tagged)


def _regroup_steps(tagged: list[tuple[HistoryItem, str | None]]) -> tuple[HistoryItem, ...]:
    """Calls the model made in one step (same ``refs.stepId``) are settled one after another, so
    the ledger interleaves them with their results; a provider expects the step's calls together,
    followed by their results. Regroup, keeping every other item in place."""
    step_of_call: dict[str, str] = {}
    members: dict[str, list[int]] = {}
    for index, (item, step) in enumerate(tagged):
        if isinstance(item, ToolCall) and step is not None:
            step_of_call[item.call_id] = step
            members.setdefault(step, []).append(index)
    for index, (item, _) in enumerate(tagged):
        if isinstance(item, ToolResult) and item.call_id in step_of_call:
            members[step_of_call[item.call_id]].append(index)
    out: list[HistoryItem] = []
    done: set[int] = set()
    for index, (item, step) in enumerate(tagged):
        if index in done:
            continue
        if isinstance(item, ToolCall) and step is not None:
            group = members[step]
            calls = [i for i in group if isinstance(tagged[i][0], ToolCall)]
            results = [i for i in group if isinstance(tagged[i][0], ToolResult)]
            for position in (*calls, *results):
                out.append(tagged[position][0])
                done.add(position)
            continue
        out.append(item)
        done.add(index)
    return tuple(out)


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
