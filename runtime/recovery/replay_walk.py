"""The replay list of a resume plan, walked over a run's events in one or more consecutive parts.

The replay list keeps every non-partial, non-hidden event, except calls and responses whose id
never paired: a response pairs a call of the same id and tool name seen before it (a later call
with the same id replaces the earlier one), and pairing looks at hidden events too. The rule reads
the whole run in order, yet it splits: a part records what pairing it could decide alone, the
responses whose call must come from an earlier part (``deferred``) and the calls it leaves open
for later parts; ``merge_walks`` finishes the pairing across parts. Walking the whole run as one
part is the plain walk, so a run planned in parts replays exactly what it replays planned whole.

A part's kept items are its events, or anything that stands for them in the same order (the
event ids a part walked in another process sends back); merging never looks inside them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from runtime.ledger.event_model import RuntimeEvent

ResponseFact = tuple[str, str, str]
"""(event id, call id, tool name) of a visible committed response."""


@dataclass(frozen=True, slots=True)
class WalkPart:
    kept: tuple[Any, ...]
    """The part's non-partial, non-hidden events (or what stands for them), in order."""
    tool_slots: tuple[tuple[int, str], ...]
    """(index in ``kept``, call id) of every kept call and response."""
    calls: Mapping[str, str]
    """Call id -> tool name of the last call of each id in the part."""
    paired: frozenset[str]
    """Call ids a response of this part paired with a call of this part."""
    deferred: tuple[tuple[str, str], ...]
    """(call id, tool name) of responses whose id no earlier call of this part had."""
    visible_responses: tuple[ResponseFact, ...]
    """The part's non-partial, non-hidden responses, in order."""
    visible_response_events: tuple[RuntimeEvent, ...]
    """The same responses as events (empty once the part is reduced to plain data)."""


def walk_part(events: Sequence[RuntimeEvent]) -> WalkPart:
    """Walk one part of a run's events (the whole run being one part)."""
    calls: dict[str, str] = {}
    paired: set[str] = set()
    deferred: list[tuple[str, str]] = []
    kept: list[Mapping[str, Any]] = []
    keep = kept.append
    tool_slots: list[tuple[int, str]] = []
    visible: list[Mapping[str, Any]] = []
    for event in cast(Sequence[Mapping[str, Any]], events):
        if event["partial"]:
            continue
        hidden = "modelVisibility" in event and event["modelVisibility"] == "hidden"
        if "content" in event:
            content = event["content"]
            kind = content["kind"]
            if kind == "function_call":
                calls[content["id"]] = content["name"]
                if not hidden:
                    tool_slots.append((len(kept), content["id"]))
            elif kind == "function_response":
                call_id = content["id"]
                name = calls.get(call_id)
                if name is None:
                    deferred.append((call_id, content["name"]))
                elif name == content["name"]:
                    paired.add(call_id)
                if not hidden:
                    visible.append(event)
                    tool_slots.append((len(kept), call_id))
        if not hidden:
            keep(event)
    return WalkPart(
        tuple(kept),
        tuple(tool_slots),
        calls,
        frozenset(paired),
        tuple(deferred),
        tuple((event["id"], event["content"]["id"], event["content"]["name"]) for event in visible),
        cast(tuple[RuntimeEvent, ...], tuple(visible)),
    )


def as_plain_data(part: WalkPart) -> tuple[Any, ...]:
    """The part with its kept events replaced by their ids, as ``marshal`` can carry it."""
    return (
        [event["id"] for event in part.kept],
        [list(slot) for slot in part.tool_slots],
        dict(part.calls),
        list(part.paired),
        [list(item) for item in part.deferred],
        [list(item) for item in part.visible_responses],
    )


def from_plain_data(data: Any) -> WalkPart:
    kept, slots, calls, paired, deferred, responses = data
    return WalkPart(
        tuple(kept),
        tuple((int(index), str(call_id)) for index, call_id in slots),
        dict(calls),
        frozenset(paired),
        tuple((str(call_id), str(name)) for call_id, name in deferred),
        tuple((str(event_id), str(call_id), str(name)) for event_id, call_id, name in responses),
        (),
    )


def merge_walks(parts: Sequence[WalkPart]) -> tuple[Any, ...]:
    """The replay list of the parts' run: every part's kept items, in order, without the calls
    and responses whose id never paired anywhere in the run."""
    paired: set[str] = set()
    calls: dict[str, str] = {}
    for part in parts:
        paired |= part.paired
        paired.update(call_id for call_id, name in part.deferred if calls.get(call_id) == name)
        calls.update(part.calls)
    replay: list[Any] = []
    for part in parts:
        unpaired = sorted(slot for slot, call_id in part.tool_slots if call_id not in paired)
        if not unpaired:
            replay.extend(part.kept)
            continue
        # Usually a handful: copy the runs between them rather than test every slot.
        start = 0
        for slot in unpaired:
            replay.extend(part.kept[start:slot])
            start = slot + 1
        replay.extend(part.kept[start:])
    return tuple(replay)
