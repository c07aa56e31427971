"""JSONL ledger files: strict reading, torn tails, per-line checks, and mutated ledgers."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.ledger.canonical_codec import canonical_json_bytes
from runtime.ledger.codes import BundleCode, LedgerFileCode, ScanIssueCode
from runtime.ledger.ledger_errors import DecodeCode, LedgerError
from runtime.ledger.ledger_file import (
    LedgerFileError,
    check_ledger_bytes,
    check_ledger_file,
    read_ledger_bytes,
    read_ledger_file,
)
from runtime.ledger.recovery_bundle import interpret_scanned_recovery
from runtime.ledger.tool_ledger_scanner import scan_tool_ledger
from tests.helpers.ledger_builders import (
    ENDINGS,
    RunIds,
    call_event,
    clean_ledger,
    dispatch_event,
    response_event,
    to_jsonl,
    tool_turn,
    user_text,
)

LEDGER = clean_ledger(len(ENDINGS))
DATA = to_jsonl(LEDGER)
DOCUMENTED = {
    str(code) for enum in (ScanIssueCode, BundleCode, DecodeCode, LedgerFileCode) for code in enum
}


def lines_of(data: bytes) -> list[bytes]:
    return data.split(b"\n")[:-1]


def join(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def problems(data: bytes) -> list[tuple[int, str]]:
    return [(problem.line_number, problem.code) for problem in check_ledger_bytes(data).problems]


# ---- reading ----------------------------------------------------------------------------------


def test_reading_gives_each_line_its_number_bytes_and_event() -> None:
    content = read_ledger_bytes(DATA)
    assert [line.line_number for line in content.lines] == list(range(1, len(LEDGER) + 1))
    assert [line.event for line in content.lines] == LEDGER
    assert [line.raw for line in content.lines] == lines_of(DATA)
    assert content.torn_tail_bytes == 0


def test_a_last_line_without_newline_that_decodes_is_accepted() -> None:
    assert len(read_ledger_bytes(DATA[:-1]).lines) == len(LEDGER)


def test_a_torn_last_line_is_reported_as_torn_with_its_line() -> None:
    with pytest.raises(LedgerFileError) as caught:
        read_ledger_bytes(DATA[:-20])
    assert caught.value.code is LedgerFileCode.TORN_LAST_LINE
    assert caught.value.line_number == len(LEDGER)


def test_a_torn_tail_can_be_dropped_on_request() -> None:
    content = read_ledger_bytes(DATA[:-20], accept_torn_tail=True)
    assert [line.event for line in content.lines] == LEDGER[:-1]
    assert content.torn_tail_bytes == len(lines_of(DATA)[-1]) - 19


def test_an_undecodable_middle_line_names_its_line_and_field() -> None:
    lines = lines_of(DATA)
    lines[2] = lines[2].replace(b'"partial":false', b'"partial":false,"colour":"red"')
    with pytest.raises(LedgerFileError) as caught:
        read_ledger_bytes(join(lines), accept_torn_tail=True)
    error = caught.value
    assert (error.code, error.line_number, error.field) == (
        DecodeCode.EVENT_SCHEMA_INVALID,
        3,
        "colour",
    )
    assert "line 3" in str(error)


def test_broken_json_in_a_terminated_line_is_not_a_torn_tail() -> None:
    lines = lines_of(DATA)
    lines[-1] = lines[-1][:-5]
    with pytest.raises(LedgerFileError) as caught:
        read_ledger_bytes(join(lines), accept_torn_tail=True)
    assert (caught.value.code, caught.value.line_number) == (DecodeCode.JSON_INVALID, len(LEDGER))


def test_an_empty_line_is_refused() -> None:
    with pytest.raises(LedgerFileError) as caught:
        read_ledger_bytes(join([lines_of(DATA)[0], b"", lines_of(DATA)[1]]))
    assert (caught.value.code, caught.value.line_number) == (LedgerFileCode.EMPTY_LINE, 2)


def test_an_empty_file_has_no_events() -> None:
    assert read_ledger_bytes(b"").lines == ()
    assert check_ledger_bytes(b"").clean


def test_a_missing_file_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(LedgerFileError) as caught:
        read_ledger_file(tmp_path / "absent.jsonl")
    assert caught.value.code is LedgerFileCode.LEDGER_FILE_UNREADABLE
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(DATA)
    assert check_ledger_file(path).clean


# ---- checking ---------------------------------------------------------------------------------


def test_a_clean_ledger_has_no_problems() -> None:
    report = check_ledger_bytes(DATA)
    assert report.clean and not report.unreadable and report.event_count == len(LEDGER)


def test_every_undecodable_line_is_listed_and_the_file_is_unreadable() -> None:
    lines = lines_of(DATA)
    lines[1] = b"{"
    lines[4] = lines[4].replace(b'"ts":', b'"ts":"x","t":')
    report = check_ledger_bytes(join(lines)[:-10])
    assert report.unreadable
    assert problems(join(lines)[:-10]) == [
        (2, "json_invalid"),
        (5, "event_schema_invalid"),
        (len(LEDGER), "torn_last_line"),
    ]


def test_a_line_that_is_not_canonical_bytes_is_reported() -> None:
    lines = lines_of(DATA)
    lines[0] = json.dumps(json.loads(lines[0]), ensure_ascii=False).encode()  # spaces
    reordered = dict(reversed(list(json.loads(lines[1]).items())))
    lines[1] = json.dumps(reordered, separators=(",", ":")).encode()  # key order
    lines[2] = b" " + lines[2]  # leading whitespace
    assert problems(join(lines)) == [
        (1, "not_canonical"),
        (2, "not_canonical"),
        (3, "not_canonical"),
    ]


def test_a_repeated_line_is_a_duplicate_at_the_repeat() -> None:
    lines = lines_of(DATA)
    lines.insert(5, lines[2])
    assert problems(join(lines)) == [(6, "duplicate_event_id")]


def test_an_issue_about_an_earlier_event_is_reported_at_that_events_line() -> None:
    call = call_event()
    unbound = response_event(call)
    data = to_jsonl([user_text(), call, unbound, dispatch_event(call)])
    assert problems(data) == [(3, "identity_conflict"), (4, "event_order_conflict")]


def test_a_lane_conflict_says_which_rule_was_broken() -> None:
    call = call_event()
    bad = dict(call, status="completed")
    report = check_ledger_bytes(to_jsonl([user_text(), bad]))
    (problem,) = report.problems
    assert (problem.line_number, problem.code) == (2, "semantic_lane_conflict")
    assert "status" in problem.message


def test_an_invalid_recovery_tail_is_reported_at_its_decision() -> None:
    turn = tool_turn("call-1", ending="parked")
    call, dispatch, reconcile, decision = turn
    never = json.loads(canonical_json_bytes(dispatch))
    never["actions"]["toolDispatch"]["recoveryMode"] = "never_auto_retry"
    data = to_jsonl([user_text(), call, never, reconcile, decision])
    assert problems(data) == [(5, "recovery_mode_unsupported")]


# ---- mutated ledgers --------------------------------------------------------------------------

_EDITS: list[tuple[tuple[str, ...], Any]] = [
    (("id",), "evt-user"),
    (("runId",), "run-x"),
    (("turnId",), "turn-x"),
    (("partial",), True),
    (("status",), "completed"),
    (("role",), "system"),
    (("author",), "tool"),
    (("content",), {"kind": "text", "text": "x"}),
    (("content", "id"), "call-0"),
    (("content", "name"), "Edit"),
    (("content", "args"), {"path": "other"}),
    (("content", "isError"), True),
    (("refs",), {"operationId": "toolop_x", "toolCallId": "call-0"}),
    (("refs", "operationId"), "toolop_x"),
    (("refs", "toolCallId"), "call-1"),
    (("actions",), {"endInvocation": True}),
    (("actions", "toolDispatch", "operationId"), "toolop_x"),
    (("actions", "toolDispatch", "providerToolCallId"), "call-2"),
    (("actions", "toolDispatch", "canonicalArgsHash"), "sha256:" + "0" * 64),
    (("actions", "toolDispatch", "recoveryMode"), "idempotent"),
    (("actions", "toolRecovery", "payload", "observation"), "unreadable"),
    (("actions", "toolRecovery", "payload", "operationId"), "toolop_x"),
    (("actions", "toolRecovery", "payload", "evidenceEventIds"), ["a"]),
    (("actions", "toolRecovery", "payload", "disposition"), "completed"),
    (("actions", "runtimeProtocol"), {"toolBoundary": "t1_after_preflight_v1"}),
]


def _edit(line: bytes, path: tuple[str, ...], value: Any) -> bytes:
    try:
        event = json.loads(line)
    except ValueError:  # an earlier byte edit broke the line
        return line
    if not isinstance(event, dict):
        return line
    target = event
    for key in path[:-1]:
        if not isinstance(target.get(key), dict):
            return line
        target = target[key]
    target[path[-1]] = value
    try:
        return canonical_json_bytes(event)
    except LedgerError:  # e.g. a lone surrogate escape an earlier byte edit produced
        return line


@st.composite
def mutated_ledgers(draw: st.DrawFn) -> tuple[bytes, list[str]]:
    invocations = draw(st.integers(1, 2))
    events = []
    for index in range(invocations):
        ids = RunIds() if index == 0 else RunIds("sess-1", "inv-2", "run-2", "turn-2")
        endings = draw(st.lists(st.sampled_from(ENDINGS), min_size=1, max_size=5))
        events.extend(clean_ledger(ids=ids, endings=endings))
    lines = lines_of(to_jsonl(events))
    applied: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["drop", "duplicate", "swap", "move", "edit", "bytes"]))
        i = draw(st.integers(0, len(lines) - 1))
        j = draw(st.integers(0, len(lines) - 1))
        applied.append(kind)
        if kind == "drop" and len(lines) > 1:
            lines.pop(i)
        elif kind == "duplicate":
            lines.insert(j, lines[i])
        elif kind == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "move":
            lines.insert(j, lines.pop(i))
        elif kind == "edit":
            path, value = draw(st.sampled_from(_EDITS))
            lines[i] = _edit(lines[i], path, value)
        elif kind == "bytes":
            position = draw(st.integers(0, len(lines[i]) - 1))
            byte = draw(st.integers(0, 255))
            lines[i] = lines[i][:position] + bytes([byte]) + lines[i][position + 1 :]
    data = join(lines)
    if draw(st.booleans()):
        data = data[: -draw(st.integers(1, 40))]  # a torn tail
    return data, applied


@settings(max_examples=int(os.environ.get("MAKA_MUTATION_EXAMPLES", "300")), deadline=None)
@given(mutated_ledgers())
def test_mutated_ledgers_never_crash_and_only_yield_documented_codes(
    case: tuple[bytes, list[str]],
) -> None:
    data, _ = case
    report = check_ledger_bytes(data)
    assert {problem.code for problem in report.problems} <= DOCUMENTED
    if report.unreadable:
        decoding = {str(code) for code in (*DecodeCode, *LedgerFileCode)}
        assert {problem.code for problem in report.problems} <= decoding
        return
    events = [line.event for line in read_ledger_bytes(data).lines]
    scan = scan_tool_ledger(events)
    assert {issue.code for issue in scan.issues} <= set(ScanIssueCode)
    for op in scan.operations:
        meaning = interpret_scanned_recovery(op)
        assert meaning.kind in ("absent", "valid", "corruption")


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(ENDINGS), min_size=1, max_size=5), st.data())
def test_a_duplicated_line_is_always_found(endings: list[str], data: st.DataObject) -> None:
    lines = lines_of(to_jsonl(clean_ledger(endings=endings)))
    i = data.draw(st.integers(0, len(lines) - 1))
    j = data.draw(st.integers(i + 1, len(lines)))
    lines.insert(j, lines[i])
    assert (j + 1, "duplicate_event_id") in problems(join(lines))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.sampled_from(["response", "dangling", "parked", "completed"]), min_size=1, max_size=4
    ),
    st.data(),
)
def test_dropping_the_call_of_a_dispatched_operation_is_always_found(
    endings: list[str], data: st.DataObject
) -> None:
    events = clean_ledger(endings=endings)
    calls = [index for index, event in enumerate(events) if event["id"].endswith("_call")]
    dropped = data.draw(st.sampled_from(calls))
    del events[dropped]
    found = {code for _, code in problems(to_jsonl(events))}
    assert "event_order_conflict" in found
