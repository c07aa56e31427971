"""The shortcuts that make ``maka ledger plan`` fast give exactly the answers of the full rules:
the scanner's inline lane recognition agrees with ``classify_lane``, and events read while the
strict decoding runs in a child process equal the strictly decoded ones (a bad line still fails
with the serial reader's error)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.ledger.lane_rules import classify_lane
from runtime.ledger.ledger_file import (
    read_ledger_bytes,
    read_ledger_events,
)
from runtime.ledger.tool_ledger_scanner import plain_lane
from tests.helpers.ledger_builders import ENDINGS, clean_ledger, to_jsonl

LEDGER = clean_ledger(len(ENDINGS) * 3)


def _is_tool_fact(event: dict[str, Any]) -> bool:
    content: dict[str, Any] = event.get("content") or {}
    return "toolDispatch" in (event.get("actions") or {}) or content.get("kind") in (
        "function_call",
        "function_response",
    )


EVENTS: list[dict[str, Any]] = [dict(event) for event in LEDGER]
TOOL_FACTS = [event for event in EVENTS if _is_tool_fact(event)]

_ABSENT = object()
_VALUES: list[Any] = [
    _ABSENT,
    None,
    True,
    False,
    "system",
    "model",
    "tool",
    "agent",
    "completed",
    1,
    1.5,
    {},
    {"durationMs": 3},
    {"durationMs": 2.5},
    {"durationMs": True},
    {"durationMs": 3, "x": 1},
    {"stateDelta": {"durationMs": 3}},
    {"stateDelta": {"durationMs": 3}, "endInvocation": True},
    {"stateDelta": {"intent": "read"}},
    {"operationId": "op", "toolCallId": "c"},
    {"operationId": "op"},
    {"toolDispatch": {}},
    {"toolDispatch": {}, "stateDelta": {}},
    {"toolRecovery": {"kind": "maka.tool.reconcile_result"}},
    {"kind": "function_call", "id": "c", "name": "Write", "args": {}},
    {"kind": "function_response", "id": "c", "name": "Write", "result": 1},
    {"kind": "text", "text": "x"},
]
_PATHS = [
    ("partial",),
    ("status",),
    ("role",),
    ("author",),
    ("content",),
    ("content", "kind"),
    ("actions",),
    ("actions", "stateDelta"),
    ("actions", "toolDispatch"),
    ("actions", "toolRecovery"),
    ("refs",),
    ("refs", "operationId"),
    ("refs", "extra"),
]


def _mutate(event: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    target = event
    for key in path[:-1]:
        child = target.get(key)
        if not isinstance(child, dict):
            child = target[key] = {}
        target = child
    if value is _ABSENT:
        target.pop(path[-1], None)
    else:
        target[path[-1]] = copy.deepcopy(value)


@settings(max_examples=400, deadline=None)
@given(
    base=st.sampled_from(TOOL_FACTS + EVENTS),
    edits=st.lists(st.tuples(st.sampled_from(_PATHS), st.sampled_from(_VALUES)), max_size=4),
)
def test_the_inline_lane_is_always_the_lane_classify_lane_gives(
    base: dict[str, Any], edits: list[tuple[tuple[str, ...], Any]]
) -> None:
    event = copy.deepcopy(base)
    for path, value in edits:
        _mutate(event, path, value)
    try:
        expected = classify_lane(event)
    except (AttributeError, TypeError):
        return  # a shape no decoder lets through (content ``true``): no rule applies
    lane = plain_lane(event)
    if lane is not None:
        assert expected is lane


def test_the_plain_tool_facts_of_a_clean_run_take_the_inline_path() -> None:
    assert sum(plain_lane(event) is not None for event in TOOL_FACTS) >= len(TOOL_FACTS) // 2


def _big_ledger(copies: int) -> bytes:
    return to_jsonl(LEDGER) * copies


def test_strict_events_without_ledger_lines_equal_the_line_reader() -> None:
    data = _big_ledger(2)
    assert read_ledger_events(data) == [line.event for line in read_ledger_bytes(data).lines]
    assert read_ledger_events(data[:-1]) == read_ledger_events(data)
    assert read_ledger_events(b"") == []
