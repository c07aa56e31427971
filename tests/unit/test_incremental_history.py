"""``IncrementalHistory`` gives, after every appended event, exactly what ``history_from_events``
gives for all events so far (property test over random turns: steps with several calls,
responses in any order or missing, reused call and step ids, name mismatches, partial and hidden
events, host notices that leave events out)."""

from __future__ import annotations

from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.ledger.event_model import RuntimeEvent
from runtime.providers.history_projection import IncrementalHistory, history_from_events
from runtime.providers.provider_port import ToolCall, ToolResult


def _event(index: int, role: str, author: str, **fields: Any) -> RuntimeEvent:
    event: dict[str, Any] = {"id": f"e{index}", "role": role, "author": author, "partial": False}
    event.update(fields)
    return cast(RuntimeEvent, event)


@st.composite
def turns(draw: st.DrawFn) -> list[RuntimeEvent]:
    events: list[RuntimeEvent] = []
    counter = iter(range(10_000))
    events.append(_event(next(counter), "user", "user", content={"kind": "text", "text": "go"}))
    late: list[tuple[str, str]] = []  # calls answered only in a later step
    for step in range(draw(st.integers(0, 8))):
        step_id = f"s{draw(st.integers(0, step + 1))}"  # sometimes reused
        if draw(st.booleans()):
            text = draw(st.sampled_from(["", "ok", "more"]))
            events.append(
                _event(next(counter), "model", "agent", content={"kind": "text", "text": text})
            )
        if draw(st.integers(0, 5)) == 0:
            events.append(
                _event(
                    next(counter),
                    "model",
                    "agent",
                    content={"kind": "thinking", "text": "hm", "signature": None},
                )
            )
        calls = list(late)
        late = []
        for _ in range(draw(st.integers(0, 3))):
            call_id = f"c{draw(st.integers(0, 12))}"
            name = draw(st.sampled_from(["read_file", "list_dir"]))
            extra: dict[str, Any] = {}
            if draw(st.integers(0, 9)) == 0:
                extra["partial"] = True
            if draw(st.integers(0, 9)) == 0:
                extra["modelVisibility"] = "hidden"
            call = _event(
                next(counter),
                "model",
                "agent",
                content={"kind": "function_call", "id": call_id, "name": name, "args": {}},
                refs={"toolCallId": call_id, "stepId": step_id},
            )
            cast(dict[str, Any], call).update(extra)
            events.append(call)
            calls.append((call_id, name))
        for call_id, name in draw(st.permutations(calls)):
            if draw(st.integers(0, 7)) == 0:
                if draw(st.booleans()):
                    late.append((call_id, name))
                continue  # not answered in this step
            answered = "bash" if draw(st.integers(0, 9)) == 0 else name  # or another tool
            response = _event(
                next(counter),
                "tool",
                "tool",
                content={
                    "kind": "function_response",
                    "id": call_id,
                    "name": answered,
                    "result": {"ok": True},
                },
                refs={"toolCallId": call_id},
            )
            if draw(st.integers(0, 9)) == 0:
                cast(dict[str, Any], response)["partial"] = True
            if draw(st.integers(0, 9)) == 0:
                cast(dict[str, Any], response)["modelVisibility"] = "hidden"
            events.append(response)
        if draw(st.integers(0, 15)) == 0:
            omitted = [e["id"] for e in events if draw(st.integers(0, 3)) == 0]
            events.append(
                _event(
                    next(counter),
                    "user",
                    "host",
                    content={"kind": "text", "text": "left out"},
                    actions={"stateDelta": {"providerHistoryOmits": omitted}},
                )
            )
    return events


@settings(max_examples=400, deadline=None)
@given(turns(), st.data())
def test_the_kept_history_equals_the_projection_of_all_events(
    events: list[RuntimeEvent], data: st.DataObject
) -> None:
    history = IncrementalHistory()
    for index, event in enumerate(events):
        history.append(event)
        if data.draw(st.booleans(), label=f"ask after {index}"):
            assert history.items() == history_from_events(events[: index + 1])
    assert history.items() == history_from_events(events)


def test_a_long_clean_turn_is_folded_step_by_step() -> None:
    """The run loop's case: each step's calls are answered before the next request, so each
    request projects only the newest step."""
    events: list[RuntimeEvent] = [_event(0, "user", "user", content={"kind": "text", "text": "go"})]
    history = IncrementalHistory(events)
    history.items()
    for step in range(1, 200):
        call_id = f"c{step}"
        new = [
            _event(
                2 * step,
                "model",
                "agent",
                content={"kind": "function_call", "id": call_id, "name": "list_dir", "args": {}},
                refs={"toolCallId": call_id, "stepId": f"s{step}"},
            ),
            _event(
                2 * step + 1,
                "tool",
                "tool",
                content={
                    "kind": "function_response",
                    "id": call_id,
                    "name": "list_dir",
                    "result": [],
                },
                refs={"toolCallId": call_id},
            ),
        ]
        for event in new:
            history.append(event)
            events.append(event)
        items = history.items()
        assert history._folded == len(events), "each answered step is folded"
        assert items[-2:] == (
            ToolCall(call_id, "list_dir", {}),
            ToolResult(call_id, "list_dir", []),
        )
    assert history.items() == history_from_events(events)
