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
from runtime.ledger.restore_point_words import restore_notice
from runtime.ledger.workspace_facts import (
    baseline_notice,
    is_decision_fact,
    is_workspace_fact,
    uncaptured_decision,
)
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


def history_from_events(
    events: Iterable[RuntimeEvent], also_omit: frozenset[str] = frozenset()
) -> tuple[HistoryItem, ...]:
    """``also_omit``: ids that notices of *other* runs leave out (an overflow notice may name an
    earlier turn's message; see ``runtime.agent.context_overflow``)."""
    events = list(events)
    omitted = omitted_event_ids(events) | also_omit
    visible = [
        event
        for event in events
        if not event["partial"]
        and (event.get("modelVisibility") != "hidden" or is_decision_fact(event))
        and event["id"] not in omitted
        # A workspace fact is never for the model, whatever it says; a settled call's baseline
        # (or a decision to continue with files that could not be snapshotted) becomes the
        # host's notice below, never the fact itself.
        and (not is_workspace_fact(event) or is_decision_fact(event))
    ]
    paired = _paired_call_ids(visible)
    emitted_calls: set[str] = set()
    tagged: list[tuple[HistoryItem, str | None]] = []
    for event in visible:
        content = event.get("content")
        baseline = (event.get("actions") or {}).get("workspaceBaseline")
        if baseline is not None:
            # The user chose to go on with the files as they are (docs/design/workspace.md section
            # 4): every later request keeps telling the model which files changed outside its view.
            tagged.append((HostNotice(baseline_notice(baseline)), None))
        elif uncaptured_decision(event.get("actions")) is not None:
            # The same decision, its capture refused for what the folder holds (a nested
            # repository): no snapshot tells which files changed, so the model re-reads them.
            tagged.append((HostNotice(baseline_notice({"compared": False})), None))
        transition = (event.get("actions") or {}).get("workspaceTransition")
        restored = restore_notice(transition) if transition is not None else None
        if restored is not None:
            # A copy that is not the folder the model last saw (a stale, failed or lost
            # snapshot): every later request tells the model which changes are not in it.
            tagged.append((HostNotice(restored), None))
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


class IncrementalHistory:
    """The provider history of a growing list of events, kept as the events arrive.

    ``items()`` equals ``history_from_events`` of every event appended so far, always; it costs
    the projection of the events since the last *fold* instead of the whole list. Events are
    folded into the kept items once they form a self-contained stretch: every call in it has its
    response in it, its step ids and call ids are new, and no host notice anywhere leaves events
    out (``providerHistoryOmits``). Then, by the projection's own rules, the projection of the
    whole list is the kept items followed by the projection of the stretch: pairing, regrouping
    by step and dropping unpaired items never reach across the fold. Anything else (an open
    call, a reused id, an omission notice) is projected from all events, as before.

    The run loop appends each committed event and asks for the items before every provider call:
    a step costs the projection of its own few events, not of the whole turn."""

    def __init__(self, events: Iterable[RuntimeEvent] = ()) -> None:
        self._events: list[RuntimeEvent] = []
        self._items: list[HistoryItem] = []
        self._folded = 0
        self._step_ids: set[str] = set()
        self._call_ids: set[str] = set()
        self._omissions = False
        self.folded = True
        """Whether the last ``items()`` were all folded (each stretch self-contained, so every
        call in them is followed by its result): then only the newly folded items need the
        caller's pairing check."""
        for event in events:
            self.append(event)

    def append(self, event: RuntimeEvent) -> None:
        self._events.append(event)
        if event["author"] == "host" and not event["partial"]:
            delta = (event.get("actions") or {}).get("stateDelta") or {}
            if "providerHistoryOmits" in delta:
                self._omissions = True

    def items(self) -> tuple[HistoryItem, ...]:
        self.folded = False
        if self._omissions:
            return history_from_events(self._events)
        stretch = self._events[self._folded :]
        if not stretch:
            self.folded = True
            return tuple(self._items)
        calls = self._self_contained(stretch)
        if calls is None:
            return history_from_events(self._events)
        self.folded = True
        projected = history_from_events(stretch)
        self._items.extend(projected)
        self._folded = len(self._events)
        self._call_ids.update(calls[0])
        self._step_ids.update(calls[1])
        return tuple(self._items)

    def _self_contained(self, stretch: list[RuntimeEvent]) -> tuple[set[str], set[str]] | None:
        """(call ids, step ids) of ``stretch`` when it can be folded, else None."""
        open_calls: dict[str, str] = {}
        call_ids: set[str] = set()
        step_ids: set[str] = set()
        for event in stretch:
            content = event.get("content")
            if content is None or event["partial"] or event.get("modelVisibility") == "hidden":
                continue  # never projected (omission notices are handled apart)
            if content["kind"] == "function_call":
                call_id = content["id"]
                if call_id in self._call_ids or call_id in call_ids:
                    return None
                call_ids.add(call_id)
                open_calls[call_id] = content["name"]
                step = event.get("refs", {}).get("stepId")
                if step is not None:
                    if step in self._step_ids:
                        return None
                    step_ids.add(step)
            elif content["kind"] == "function_response":
                call_id = content["id"]
                if call_id in self._call_ids:
                    return None
                if open_calls.get(call_id) == content["name"]:
                    del open_calls[call_id]
        if open_calls:
            return None
        return call_ids, step_ids


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
