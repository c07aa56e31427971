"""``maka ledger plan --json`` writes a long plan's text directly (``plan_json_text``) instead of
dumping the document; the text must be exactly ``json.dumps`` of the document, whatever the
strings hold (quotes, backslashes, control characters and non-ASCII text take the dumped form)."""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.commands import ledger_json
from app.commands.ledger_json import plan_json, plan_json_text
from runtime.ledger.attestation import Attestation
from runtime.ledger.codes import DiagnosticCode, Disposition, OperationStatus, ParkReason
from runtime.recovery.resume_plan import (
    INDETERMINATE_TOOL_RESULT_DIRECTIVE,
    AttestedCall,
    ResumeDiagnostic,
    ResumePlan,
    ToolOperation,
)

# Mostly plain ids (the direct form), sometimes a character that needs an escape.
_PLAIN = st.text(st.characters(codec="utf-8", exclude_characters='"\\'), min_size=1, max_size=8)
_ANY = st.text(st.characters(codec="utf-8"), min_size=1, max_size=8)
_TEXT = st.one_of(_PLAIN.filter(lambda s: s.isprintable()), _PLAIN, _ANY)
_PLAIN_ID = st.from_regex(r"evt_[0-9a-f]{6}", fullmatch=True)
_ID = st.one_of(_PLAIN_ID, _PLAIN_ID, _TEXT)


@st.composite
def _attested(draw: st.DrawFn) -> AttestedCall:
    note = draw(st.none() | _TEXT)
    return AttestedCall(draw(st.booleans()), Attestation(draw(st.integers(0, 2**53)), 1, note))


@st.composite
def _operations(draw: st.DrawFn) -> ToolOperation:
    responded = draw(st.booleans())
    return ToolOperation(
        draw(_ID),
        draw(_TEXT),
        {"path": draw(_TEXT)},
        draw(st.sampled_from(OperationStatus)),
        draw(_ID),
        draw(_ID) if responded else None,
        draw(st.booleans()) if responded or draw(st.booleans()) else None,
        draw(_attested()) if draw(st.integers(0, 4)) == 0 else None,
    )


@st.composite
def _diagnostics(draw: st.DrawFn) -> ResumeDiagnostic:
    detail = draw(st.none() | st.dictionaries(_TEXT, _TEXT | st.integers(), max_size=2))
    return ResumeDiagnostic(
        draw(st.sampled_from(DiagnosticCode)),
        draw(_TEXT),
        draw(st.none() | _ID),
        draw(st.none() | _ID),
        draw(st.none() | _TEXT),
        MappingProxyType(detail) if detail is not None else None,
    )


@st.composite
def _plans(draw: st.DrawFn) -> ResumePlan:
    verify = draw(st.booleans())
    replay: list[Any] = [{"id": event_id} for event_id in draw(st.lists(_ID, max_size=6))]
    return ResumePlan(
        disposition=draw(st.sampled_from(Disposition)),
        operations=tuple(draw(st.lists(_operations(), max_size=5))),
        diagnostics=tuple(draw(st.lists(_diagnostics(), max_size=3))),
        rejection_reasons=tuple(draw(st.lists(st.sampled_from(ParkReason), max_size=2))),
        requires_verification=verify,
        source_runtime_event_high_water=draw(st.integers(0, 2**53)),
        directive=INDETERMINATE_TOOL_RESULT_DIRECTIVE if verify else None,
        runtime_events=(),
        replay_runtime_events=tuple(replay),
    )


@settings(max_examples=400, deadline=None)
@given(_plans())
def test_the_direct_text_is_the_dumped_document(plan: ResumePlan) -> None:
    assert plan_json_text(plan) == json.dumps(plan_json(plan), ensure_ascii=False)


def test_an_empty_plan_and_an_escaped_id_read_back_as_the_document() -> None:
    empty = ResumePlan(Disposition.SAFE_REPLAY, (), (), (), False, 0, None, (), ())
    assert json.loads(plan_json_text(empty)) == plan_json(empty)
    quoted: Any = ({"id": 'a"b'}, {"id": "c\\d"}, {"id": "e\nf"})
    escaped = ResumePlan(Disposition.SAFE_REPLAY, (), (), (), False, 3, None, (), quoted)
    text = plan_json_text(escaped)
    assert json.loads(text)["replayRuntimeEventIds"] == ['a"b', "c\\d", "e\nf"]


def _is_plain(text: str) -> bool:
    return json.dumps(text, ensure_ascii=False) == f'"{text}"'


@settings(max_examples=100, deadline=None)
@given(_plans())
def test_plain_strings_take_the_direct_form(plan: ResumePlan) -> None:
    """Each long list is written directly whenever no string it inserts needs an escape
    (otherwise the fast path would silently never run), and dumped otherwise. A call the user
    settled is always dumped on its own (rare, and it carries their note)."""
    ids = [event["id"] for event in plan.replay_runtime_events]
    direct = [op for op in plan.operations if op.attested is None]
    op_strings = [
        text for op in direct for text in (op.tool_call_id, op.tool_name, op.call_runtime_event_id)
    ]
    op_strings += [op.response_runtime_event_id or "" for op in direct]
    dumped: list[str] = []
    original_operation, original_dumps = ledger_json.operation_json, ledger_json._dumps

    def operation_spy(operation: ToolOperation) -> dict[str, Any]:
        if operation.attested is None:
            dumped.append("operations")
        return original_operation(operation)

    def dumps_spy(value: Any) -> str:
        if ids and value == ids:
            dumped.append("replay")
        return original_dumps(value)

    ledger_json.operation_json = operation_spy
    ledger_json._dumps = dumps_spy
    try:
        ledger_json.plan_json_text(plan)
    finally:
        ledger_json.operation_json = original_operation
        ledger_json._dumps = original_dumps
    assert ("operations" in dumped) == (not all(map(_is_plain, op_strings)))
    assert ("replay" in dumped) == (not all(map(_is_plain, ids)))
