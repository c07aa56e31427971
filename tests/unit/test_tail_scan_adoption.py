"""A tail scanned alone in another process (``TailScan``) is adopted by the head's scan
(``tail_scan.adopt_tail``) only when that equals scanning the tail after the head: same
operations, facts, issues and event positions. Whenever the head left state the tail touches,
adoption is refused and scanning the tail here gives the answer."""

from __future__ import annotations

import marshal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.fastplan.tail_scan import BatchScan, TailScan, adopt_tail
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.tool_ledger_scanner import ToolLedgerScan, scan_tool_ledger
from tests.helpers.ledger_builders import (
    ALL_ENDINGS,
    ENDINGS,
    MARKER_ACTIONS,
    MIXED_EDITS,
    SECOND_INVOCATION,
    RunIds,
    call_event,
    clean_ledger,
    mixed_ledger,
    reconcile_event,
    tool_turn,
    user_text,
    with_changes,
)


def _positions(scan: ToolLedgerScan) -> list[dict[str, int]]:
    return [dict(op.event_positions) for op in scan.operations]


def _split_scan(events: list[RuntimeEvent], split: int) -> tuple[ToolLedgerScan, bool]:
    """Scan ``events[:split]`` here and ``events[split:]`` as a tail; adopt if allowed."""
    head, tail = events[:split], list(events[split:])
    batch = BatchScan()
    batch.feed(head)
    work = TailScan(len(head))
    work.feed(tail)
    summary = marshal.loads(marshal.dumps(work.summary()))  # as it crosses the process line
    adopted = adopt_tail(batch, summary, tail)
    if adopted is not None:
        return adopted, True
    batch.feed(tail)
    return batch.finish(), False


def _kind(event: RuntimeEvent) -> str | None:
    content: Any = event.get("content")
    return None if content is None else str(content["kind"])


def _assert_same(scan: ToolLedgerScan, events: list[RuntimeEvent]) -> None:
    full = scan_tool_ledger(events)
    assert scan == full
    assert _positions(scan) == _positions(full)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_split_scan_always_equals_the_whole_scan(data: st.DataObject) -> None:
    events = mixed_ledger(data.draw, edits=MIXED_EDITS, endings=ALL_ENDINGS)
    split = data.draw(st.integers(0, len(events)))
    scan, _ = _split_scan(events, split)
    _assert_same(scan, events)


def test_a_clean_run_split_between_turns_is_adopted() -> None:
    events = clean_ledger(ids=RunIds(), endings=list(ENDINGS) * 3)
    middle_call = next(
        index
        for index, event in enumerate(events)
        if index > len(events) // 2 and _kind(event) == "function_call"
    )
    for split in (1, 6, middle_call, len(events) - 1, len(events)):
        scan, adopted = _split_scan(events, split)
        assert adopted, split
        _assert_same(scan, events)


def test_a_tail_repeating_a_head_event_is_scanned_here() -> None:
    events = clean_ledger(ids=RunIds(), endings=["response", "response"])
    events = [*events, events[2]]
    scan, adopted = _split_scan(events, len(events) - 1)
    assert not adopted
    _assert_same(scan, events)


def test_a_marker_on_the_tails_first_event_of_a_known_invocation_is_scanned_here() -> None:
    events = clean_ledger(ids=RunIds(), endings=["response"])
    split = 3
    events[split] = with_changes(events[split], actions=MARKER_ACTIONS)
    scan, adopted = _split_scan(events, split)
    assert not adopted
    _assert_same(scan, events)
    assert any(issue.code == "protocol_marker_invalid" for issue in scan.issues)


def test_a_tail_in_another_identity_of_a_known_invocation_is_scanned_here() -> None:
    events = [user_text(ids=RunIds(), marker=True), *tool_turn("c1", ids=RunIds())]
    moved = [with_changes(event, turnId="turn-other") for event in tool_turn("c2", ids=RunIds())]
    scan, adopted = _split_scan([*events, *moved], len(events))
    assert not adopted
    _assert_same(scan, [*events, *moved])


def test_a_recovery_fact_for_a_head_operation_is_scanned_here() -> None:
    call = call_event("c1", ids=RunIds())
    events = [user_text(ids=RunIds(), marker=True)]
    events.extend(tool_turn("c1", ids=RunIds(), ending="dangling"))
    events.append(reconcile_event(call))
    scan, adopted = _split_scan(events, len(events) - 1)
    assert not adopted
    _assert_same(scan, events)
    assert scan.operations[0].reconcile_events


def test_a_new_invocation_in_the_tail_may_carry_its_marker() -> None:
    head = clean_ledger(ids=RunIds(), endings=["response"])
    tail = [user_text(ids=SECOND_INVOCATION, event_id="evt-user-2", marker=True)]
    tail.extend(tool_turn("c9", ids=SECOND_INVOCATION))
    tail.extend(tool_turn("c10", ids=SECOND_INVOCATION, ending="dangling"))
    scan, adopted = _split_scan([*head, *tail], len(head))
    assert adopted
    _assert_same(scan, [*head, *tail])


def test_a_malformed_summary_is_refused_and_a_finished_scan_cannot_adopt() -> None:
    events = clean_ledger(ids=RunIds(), endings=["response"])
    batch = BatchScan()
    batch.feed(events[:2])
    assert adopt_tail(batch, ("not", "a", "summary"), list(events[2:])) is None
    work = TailScan(5)  # the wrong first position
    work.feed(events[2:])
    assert adopt_tail(batch, work.summary(), list(events[2:])) is None
    batch.finish()
    try:
        adopt_tail(batch, work.summary(), list(events[2:]))
    except RuntimeError:
        pass
    else:
        raise AssertionError("a finished scan adopted a tail")
