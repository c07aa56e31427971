"""The replay list of a run's committed events (docs/design/recovery.md section 4), in one pass.

The replay list is what a model may be shown again: no partial chunk, no hidden event, and tool
calls and responses only when paired, so that whatever happens next the model never sees half a
tool exchange. The same pass notes the visible responses that answer no projected call of their
tool (the plan's response diagnostics).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.workspace_facts import WORKSPACE_FACT_KEYS


class ResponseMismatch(NamedTuple):
    """A visible committed response and the projected call of its id: ``call_tool_name`` is
    None when there is none, and otherwise differs from the response's ``tool_name``."""

    event_id: str
    tool_call_id: str
    tool_name: str
    call_tool_name: str | None


@dataclass(frozen=True, slots=True)
class ReplayWalk:
    """What one pass over the ledger yields: the replay list, and the committed (non-partial)
    model-visible responses that answer no projected call of their tool, in ledger order."""

    replay: tuple[RuntimeEvent, ...]
    response_mismatches: tuple[ResponseMismatch, ...]


def walk_replay(
    events: Sequence[RuntimeEvent],
    call_names: Mapping[str, str] | None = None,
) -> ReplayWalk:
    """One pass: note the events left out (partial, hidden or a checkpoint fact) and where
    visible calls and responses are, then drop afterwards the ones whose id never paired; the
    replay list is the events between the dropped ones.

    Pairing walks non-partial events, hidden ones included: a response pairs a call of the same
    id and tool name seen before it (a later call with the same id replaces the earlier one).
    ``call_names``: the projected operations' tool names by call id; when given, every visible
    response is checked against them on the way (``response_mismatches``).
    """
    calls: dict[str, str] = {}
    paired: set[str] = set()
    left_out: list[int] = []
    tool_slots: list[tuple[int, str]] = []
    mismatches: list[ResponseMismatch] = []
    index = -1
    for event in cast(Sequence[Mapping[str, Any]], events):
        index += 1
        if event["partial"]:
            left_out.append(index)
            continue
        actions = event.get("actions")
        if actions is not None and not WORKSPACE_FACT_KEYS.isdisjoint(actions):
            left_out.append(index)  # a checkpoint fact is never for the model, whatever it says
            continue
        if "content" not in event:
            if "modelVisibility" in event and event["modelVisibility"] == "hidden":
                left_out.append(index)
            continue
        hidden = "modelVisibility" in event and event["modelVisibility"] == "hidden"
        if hidden:
            left_out.append(index)
        content = event["content"]
        kind = content["kind"]
        if kind == "function_call":
            call_id = content["id"]
            calls[call_id] = content["name"]
        elif kind == "function_response":
            call_id, name = content["id"], content["name"]
            if calls.get(call_id) == name:
                paired.add(call_id)
            if not hidden and call_names is not None:
                call_name = call_names.get(call_id)
                if call_name != name:
                    mismatches.append(ResponseMismatch(event["id"], call_id, name, call_name))
        else:
            continue
        if not hidden:
            tool_slots.append((index, call_id))
    left_out.extend(slot for slot, call_id in tool_slots if call_id not in paired)
    if not left_out:
        replay = tuple(events)
    else:  # usually a handful: copy the runs between them rather than test every event
        left_out.sort()
        runs: list[RuntimeEvent] = []
        start = 0
        for slot in left_out:
            runs.extend(events[start:slot])
            start = slot + 1
        runs.extend(events[start:])
        replay = tuple(runs)
    return ReplayWalk(replay, tuple(mismatches))


def replay_runtime_events(events: Sequence[RuntimeEvent]) -> tuple[RuntimeEvent, ...]:
    """The canonical replay list: no partial or hidden event, calls and responses only when
    paired (a response pairs a call of the same id and tool name seen before it), and every
    event without content kept (terminal facts, dispatches, recovery facts, permissions)."""
    return walk_replay(events).replay
