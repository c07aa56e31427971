"""The projection decides most events without calling the gates one by one
(``provider_replay._let_through``); on generated segments of every shape the gates judge, it
gives exactly what running every gate in order on every event gives: the same items at the same
positions, the same diagnostics in the same order, the same unanswered calls."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.continuation.provider_replay import (
    CONTENT_GATES,
    EVENT_GATES,
    CallBook,
    ItemKind,
    LeftOut,
    ReplayDiagnostic,
    ReplayDiagnosticCode,
    project_provider_items,
    unsupported_content,
)
from runtime.ledger.event_model import RuntimeEvent, decode_event

_UNMATCHED = ReplayDiagnosticCode.UNMATCHED_TOOL_CALL
_KINDS = {
    "text": ItemKind.TEXT,
    "thinking": ItemKind.THINKING,
    "function_call": ItemKind.TOOL_CALL,
    "function_response": ItemKind.TOOL_RESULT,
}
_AUTHOR = {"user": "user", "model": "agent", "tool": "tool", "system": "system"}
_CALL_IDS = st.sampled_from(["c1", "c2"])
_NAMES = st.sampled_from(["bash", "bash", "write_file"])
# The role an event of each content kind normally has (drawn half the time).
_NATURAL = {
    None: "system",
    "text": "user",
    "thinking": "model",
    "function_call": "model",
    "function_response": "tool",
    "error": "model",
}
_CALL = st.builds(
    lambda call_id, name: {"kind": "function_call", "id": call_id, "name": name, "args": {}},
    _CALL_IDS,
    _NAMES,
)
_RESULT = st.builds(
    lambda call_id, name, error: {
        "kind": "function_response",
        "id": call_id,
        "name": name,
        "result": {"ok": not error},
        **({"isError": True} if error else {}),
    },
    _CALL_IDS,
    _NAMES,
    st.booleans(),
)
# Calls and results drawn more often than the rest: the pairing is where segments differ most.
_CONTENT = st.one_of(
    st.none(),
    st.builds(lambda text: {"kind": "text", "text": text}, st.sampled_from(["", "hi"])),
    st.builds(
        lambda text, signature: {"kind": "thinking", "text": text, **signature},
        st.sampled_from(["", "hm"]),
        st.sampled_from([{}, {"signature": "sig"}]),
    ),
    _CALL,
    _CALL,
    _RESULT,
    _RESULT,
    _RESULT,
    st.just({"kind": "error", "message": "m", "code": "c"}),
)
_EXTRAS: st.SearchStrategy[dict[str, Any]] = st.sampled_from(
    [
        {},
        {},
        {},
        {},
        {"partial": True},
        {"modelVisibility": "hidden"},
        {"modelVisibility": "visible"},
        {"status": "failed", "actions": {"endInvocation": True}},
    ]
)


@st.composite
def _segments(draw: st.DrawFn) -> tuple[RuntimeEvent, ...]:
    events: list[RuntimeEvent] = []
    for index in range(draw(st.integers(0, 14))):
        content = draw(_CONTENT)
        natural = _NATURAL[None if content is None else content["kind"]]
        role = draw(st.one_of(st.just(natural), st.sampled_from(sorted(_AUTHOR))))
        extras: dict[str, Any] = draw(_EXTRAS)
        body: dict[str, Any] = {
            "id": f"e{index}",
            "sessionId": "s",
            "invocationId": "i",
            "runId": "r",
            "turnId": "t",
            "ts": index + 1,
            "partial": False,
            "role": role,
            "author": _AUTHOR[role],
            **extras,
        }
        if content is not None:
            body["content"] = content
        elif "actions" not in body:
            body["actions"] = {"tokenUsage": {"input": 1, "output": 2}}
        events.append(decode_event(body))
    return tuple(events)


def _by_the_gates(events: tuple[RuntimeEvent, ...]) -> dict[str, Any]:
    """Every gate in order on every event (the definition), then the pairing of calls and
    results: what the projection must give."""
    calls = CallBook()
    diagnostics: list[ReplayDiagnostic] = []
    kept: list[tuple[int, RuntimeEvent]] = []
    for position, event in enumerate(events):
        said: LeftOut | None = None
        for gate in EVENT_GATES:
            said = gate(event, calls)
            if said is not None:
                break
        if said is None:
            content: Any = event.get("content")
            for gate in CONTENT_GATES.get(content["kind"], (unsupported_content,)):
                said = gate(event, calls)
                if said is not None:
                    break
        if said is not None:
            diagnostics.extend(said)
            continue
        content = event.get("content")
        if content["kind"] == "function_call":
            calls.pending[content["id"]] = (len(kept), content["name"])
        elif content["kind"] == "function_response":
            calls.answered.add(content["id"])
        kept.append((position, event))
    unanswered = {i for call_id, (i, _) in calls.pending.items() if call_id not in calls.answered}
    unmatched: list[tuple[str, int]] = []
    positions: list[int] = []
    for index, (position, event) in enumerate(kept):
        content = event.get("content")
        if index in unanswered:
            diagnostics.append(ReplayDiagnostic(_UNMATCHED, event["id"], content["id"]))
            unmatched.append((content["id"], position))
        else:
            positions.append(position)
    return {
        "diagnostics": tuple(diagnostics),
        "unmatched_calls": tuple(unmatched),
        "item_positions": tuple(positions),
        "items": tuple((events[p]["id"], _kind(events[p])) for p in positions),
    }


def _kind(event: RuntimeEvent) -> ItemKind:
    content: Any = event.get("content")
    return _KINDS[content["kind"]]


@settings(max_examples=600, deadline=None)
@given(_segments())
def test_the_projection_is_the_gates_verdict_on_every_event(
    events: tuple[RuntimeEvent, ...],
) -> None:
    projected = project_provider_items(events)
    assert {
        "diagnostics": projected.diagnostics,
        "unmatched_calls": projected.unmatched_calls,
        "item_positions": projected.item_positions,
        "items": tuple((item.event_id, item.kind) for item in projected.items),
    } == _by_the_gates(events)
