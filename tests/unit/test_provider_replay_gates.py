"""The provider replay projection's named gates (``runtime.continuation.provider_replay``), one
table each: the passing case and every case that leaves the event out, with its exact code;
their order; and the projection built from them."""

from __future__ import annotations

from typing import Any, cast

import pytest

from runtime.continuation.provider_replay import (
    CONTENT_GATES,
    EVENT_GATES,
    CallBook,
    EventGate,
    ItemKind,
    LeftOut,
    call_from_model,
    error_content,
    final,
    has_content,
    model_visible,
    project_provider_items,
    result_answers_a_call,
    result_from_tool,
    result_names_the_calls_tool,
    text_not_empty,
    text_not_system,
    text_not_tool,
    thinking_from_model,
    unsupported_content,
)
from runtime.ledger.event_model import RuntimeEvent, decode_event

_counter = iter(range(1, 10_000))


def _event(role: str, content: dict[str, Any] | None = None, **fields: Any) -> RuntimeEvent:
    """A decoded event of one run (the gates only ever see decoded events)."""
    author = {"user": "user", "model": "agent", "tool": "tool", "system": "system"}[role]
    body: dict[str, Any] = {
        "id": f"e{next(_counter)}",
        "sessionId": "s",
        "invocationId": "i",
        "runId": "r",
        "turnId": "t",
        "ts": 1,
        "partial": False,
        "role": role,
        "author": author,
        **fields,
    }
    if content is not None:
        body["content"] = content
    return decode_event(body)


def _text(role: str, text: str = "hi", **fields: Any) -> RuntimeEvent:
    return _event(role, {"kind": "text", "text": text}, **fields)


def _call(call_id: str = "c1", name: str = "bash", role: str = "model") -> RuntimeEvent:
    return _event(role, {"kind": "function_call", "id": call_id, "name": name, "args": {}})


def _result(call_id: str = "c1", name: str = "bash", role: str = "tool") -> RuntimeEvent:
    content = {"kind": "function_response", "id": call_id, "name": name, "result": {"ok": True}}
    return _event(role, content)


def _verdict(gate: EventGate, event: RuntimeEvent, calls: CallBook | None = None) -> Any:
    """None (passes), or the codes and tool call ids it leaves the event out with."""
    said: LeftOut | None = gate(event, calls or CallBook())
    if said is None:
        return None
    for diagnostic in said:
        assert diagnostic.event_id == event["id"]
    return [(d.code.value, d.tool_call_id) for d in said]


def _left(code: str, call_id: str | None = None) -> list[tuple[str, str | None]]:
    return [(code, call_id)]


TERMINAL = _event("system", status="failed", actions={"endInvocation": True})


@pytest.mark.parametrize(
    ("event", "expected"),
    [(_text("user"), None), (_text("model", partial=True), _left("partial_skipped"))],
)
def test_final(event: RuntimeEvent, expected: Any) -> None:
    assert _verdict(final, event) == expected


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (_text("model"), None),
        (_text("model", modelVisibility="visible"), None),
        (_text("model", modelVisibility="hidden"), _left("model_hidden_skipped")),
    ],
)
def test_model_visible(event: RuntimeEvent, expected: Any) -> None:
    assert _verdict(model_visible, event) == expected


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (_text("user"), None),
        (TERMINAL, _left("terminal_fact_diagnostic_only")),
        (_event("system", actions={"tokenUsage": {"input": 1, "output": 2}}), []),  # silently
    ],
)
def test_has_content(event: RuntimeEvent, expected: Any) -> None:
    assert _verdict(has_content, event) == expected


def test_error_content() -> None:
    error = _event("model", {"kind": "error", "message": "m", "code": "c"})
    assert _verdict(error_content, error) == _left("error_content_diagnostic_only")


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (_text("user"), None),
        (_text("model"), None),
        (_text("system"), _left("system_runtime_fact_diagnostic_only")),
    ],
)
def test_text_not_system(event: RuntimeEvent, expected: Any) -> None:
    assert _verdict(text_not_system, event) == expected


@pytest.mark.parametrize(
    ("event", "expected"),
    [(_text("user"), None), (_text("tool"), _left("unsupported_role"))],
)
def test_text_not_tool(event: RuntimeEvent, expected: Any) -> None:
    assert _verdict(text_not_tool, event) == expected


@pytest.mark.parametrize(
    ("event", "expected"),
    [(_text("user", "go"), None), (_text("model", ""), _left("empty_text_skipped"))],
)
def test_text_not_empty(event: RuntimeEvent, expected: Any) -> None:
    assert _verdict(text_not_empty, event) == expected


@pytest.mark.parametrize(
    ("role", "expected"),
    [("model", None), ("user", _left("unsupported_role")), ("tool", _left("unsupported_role"))],
)
def test_thinking_from_model(role: str, expected: Any) -> None:
    thinking = _event(role, {"kind": "thinking", "text": "hm"})
    assert _verdict(thinking_from_model, thinking) == expected


@pytest.mark.parametrize(
    ("role", "expected"),
    [("model", None), ("user", _left("unsupported_role", "c1"))],
)
def test_call_from_model(role: str, expected: Any) -> None:
    assert _verdict(call_from_model, _call(role=role)) == expected


@pytest.mark.parametrize(
    ("role", "expected"),
    [("tool", None), ("model", _left("unsupported_role", "c1"))],
)
def test_result_from_tool(role: str, expected: Any) -> None:
    assert _verdict(result_from_tool, _result(role=role)) == expected


@pytest.mark.parametrize(
    ("pending", "answered", "expected"),
    [
        ({"c1": (0, "bash")}, set(), None),
        ({}, set(), _left("unmatched_tool_result", "c1")),  # no such call
        ({"c2": (0, "bash")}, set(), _left("unmatched_tool_result", "c1")),
        ({"c1": (0, "bash")}, {"c1"}, _left("unmatched_tool_result", "c1")),  # answered already
    ],
)
def test_result_answers_a_call(
    pending: dict[str, tuple[int, str]], answered: set[str], expected: Any
) -> None:
    calls = CallBook(dict(pending), set(answered))
    assert _verdict(result_answers_a_call, _result(), calls) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [("bash", None), ("write_file", _left("tool_id_mismatch", "c1"))],
)
def test_result_names_the_calls_tool(name: str, expected: Any) -> None:
    calls = CallBook({"c1": (0, "bash")})
    assert _verdict(result_names_the_calls_tool, _result(name=name), calls) == expected


def test_unsupported_content() -> None:
    # The decoder admits no other kind: the gate is the projection's last word on one anyway.
    odd = cast(RuntimeEvent, {**_text("user"), "content": {"kind": "image"}})
    assert _verdict(unsupported_content, odd) == _left("unsupported_content")


def test_the_gates_run_in_this_order() -> None:
    assert [gate.__name__ for gate in EVENT_GATES] == ["final", "model_visible", "has_content"]
    assert {kind: [gate.__name__ for gate in gates] for kind, gates in CONTENT_GATES.items()} == {
        "error": ["error_content"],
        "text": ["text_not_system", "text_not_tool", "text_not_empty"],
        "thinking": ["thinking_from_model"],
        "function_call": ["call_from_model"],
        "function_response": [
            "result_from_tool",
            "result_answers_a_call",
            "result_names_the_calls_tool",
        ],
    }


def test_the_first_gate_that_leaves_an_event_out_names_it() -> None:
    hidden_partial = _text("system", "", partial=True, modelVisibility="hidden")
    unmatched_from_model = _result("c9", role="model")
    projection = project_provider_items((hidden_partial, unmatched_from_model))
    assert [(d.code.value, d.tool_call_id) for d in projection.diagnostics] == [
        ("partial_skipped", None),
        ("unsupported_role", "c9"),
    ]
    assert projection.items == ()


def test_the_projection_pairs_calls_and_results_and_drops_unanswered_calls() -> None:
    events = (
        _text("user", "go"),
        _call("c1"),
        _result("c1"),
        _call("c2", "write_file"),
        _result("c1"),  # a second answer to c1
        _text("model", "done"),
    )
    projection = project_provider_items(events)
    assert [(item.kind, item.role) for item in projection.items] == [
        (ItemKind.TEXT, "user"),
        (ItemKind.TOOL_CALL, "assistant"),
        (ItemKind.TOOL_RESULT, "tool"),
        (ItemKind.TEXT, "assistant"),
    ]
    assert projection.item_positions == (0, 1, 2, 5)
    assert projection.unmatched_calls == (("c2", 3),)
    assert [(d.code.value, d.event_id) for d in projection.diagnostics] == [
        ("unmatched_tool_result", events[4]["id"]),
        ("unmatched_tool_call", events[3]["id"]),
    ]
    assert [d.code.value for d in projection.blocking] == ["unmatched_tool_result"]
