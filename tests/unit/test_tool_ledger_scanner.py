"""The tool-ledger scanner: every issue code, detection order, and the incremental form."""

from __future__ import annotations

from typing import Any

from hypothesis import event as tally
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.ledger.canonical_codec import canonical_bytes, operation_id
from runtime.ledger.codes import ScanIssueCode
from runtime.ledger.event_model import RuntimeEvent, decode_event
from runtime.ledger.tool_ledger_scanner import (
    ScanIssue,
    ToolLedgerScan,
    ToolLedgerScanner,
    scan_tool_ledger,
)
from tests.helpers.ledger_builders import (
    ALL_ENDINGS,
    DIGEST_A,
    ENDINGS,
    MIXED_EDITS,
    RunIds,
    bound_response,
    call_event,
    clean_ledger,
    decision_event,
    dispatch_event,
    mixed_ledger,
    model_text,
    operation_of,
    orphan_dispatch_copy,
    reconcile_event,
    response_event,
    stray_recovery_copy,
    user_text,
    with_changes,
)

C = ScanIssueCode
CALL = call_event()
OP = operation_of(CALL)
DISPATCH = dispatch_event(CALL)
BOUND = bound_response(CALL)
OTHER_TURN = RunIds(turn_id="turn-2")


def changed(event: RuntimeEvent, **changes: Any) -> RuntimeEvent:
    return decode_event(with_changes(event, **changes))


def codes(scan: ToolLedgerScan) -> list[tuple[ScanIssueCode, str]]:
    return [(issue.code, issue.event_id) for issue in scan.issues]


def only_op(scan: ToolLedgerScan) -> Any:
    assert len(scan.operations) == 1
    return scan.operations[0]


def test_a_clean_ledger_has_no_issues_and_one_operation_per_call() -> None:
    events = clean_ledger(len(ENDINGS))
    scan = scan_tool_ledger(events)
    assert scan.issues == ()
    assert not scan.has_corruption
    assert [op.tool_call_id for op in scan.operations] == [f"call-{i}" for i in range(5)]


def test_a_full_tool_turn_groups_its_facts_in_one_operation() -> None:
    op = only_op(scan_tool_ledger([user_text(), CALL, DISPATCH, BOUND]))
    assert (op.tool_call_id, op.invocation_id, op.tool_name, op.operation_id) == (
        "call-1",
        "inv-1",
        "Write",
        OP,
    )
    assert (op.call_event, op.dispatch_event, op.response_event) == (CALL, DISPATCH, BOUND)
    assert op.event_positions == {CALL["id"]: 1, DISPATCH["id"]: 2, BOUND["id"]: 3}


# ---- 1. duplicate ids -------------------------------------------------------------------------


def test_a_repeated_event_id_is_a_duplicate_and_the_repeat_is_skipped() -> None:
    other_call = call_event("call-2", event_id=CALL["id"])
    scan = scan_tool_ledger([CALL, other_call])
    assert codes(scan) == [(C.DUPLICATE_EVENT_ID, CALL["id"])]
    assert [op.tool_call_id for op in scan.operations] == ["call-1"]


def test_a_duplicate_reports_nothing_else() -> None:
    late = changed(CALL, runId="run-9", status="completed")
    assert codes(scan_tool_ledger([CALL, late])) == [(C.DUPLICATE_EVENT_ID, CALL["id"])]


# ---- 2. invocation spine ----------------------------------------------------------------------


def test_one_invocation_with_two_identities_conflicts_and_the_event_still_counts() -> None:
    moved = call_event("call-2", ids=RunIds(run_id="run-2"))
    scan = scan_tool_ledger([user_text(), moved])
    assert codes(scan) == [(C.INVOCATION_IDENTITY_CONFLICT, moved["id"])]
    assert only_op(scan).call_event == moved


def test_the_recorded_spine_is_the_first_one() -> None:
    first = user_text()
    moved = model_text(ids=RunIds(turn_id="turn-9"))
    back = model_text(event_id="evt-model-2")
    assert codes(scan_tool_ledger([first, moved, back])) == [
        (C.INVOCATION_IDENTITY_CONFLICT, moved["id"])
    ]


# ---- 3. protocol marker -----------------------------------------------------------------------


def test_the_marker_is_allowed_on_the_first_event_of_each_invocation() -> None:
    other = RunIds("sess-2", "inv-2", "run-2", "turn-2")
    events = [
        user_text(marker=True),
        user_text(event_id="u2", ids=other, marker=True),
        model_text(),
    ]
    assert scan_tool_ledger(events).issues == ()


def test_a_late_marker_is_invalid_after_the_spine_check() -> None:
    marked = decode_event(
        with_changes(
            user_text(event_id="late", ids=RunIds(run_id="run-2")),
            actions={"runtimeProtocol": {"toolBoundary": "t1_after_preflight_v1"}},
        )
    )
    assert codes(scan_tool_ledger([user_text(), marked])) == [
        (C.INVOCATION_IDENTITY_CONFLICT, "late"),
        (C.PROTOCOL_MARKER_INVALID, "late"),
    ]


def test_a_late_marker_is_invalid_even_when_the_first_event_had_none() -> None:
    marked = user_text(event_id="late", marker=True)
    assert codes(scan_tool_ledger([model_text(), marked])) == [(C.PROTOCOL_MARKER_INVALID, "late")]


def test_a_marker_with_an_unknown_value_on_the_first_event_is_invalid() -> None:
    # The decoder refuses such events; the scanner must not depend on that.
    odd: Any = with_changes(user_text(), actions={"runtimeProtocol": {"toolBoundary": "v0"}})
    assert codes(scan_tool_ledger([odd])) == [(C.PROTOCOL_MARKER_INVALID, odd["id"])]


# ---- 4. lanes and partials --------------------------------------------------------------------


def test_a_lane_conflict_is_reported_and_the_event_skipped() -> None:
    bad = changed(CALL, status="completed")
    scan = scan_tool_ledger([bad])
    assert codes(scan) == [(C.SEMANTIC_LANE_CONFLICT, bad["id"])]
    assert scan.operations == ()


def test_spine_issues_come_before_lane_issues() -> None:
    bad = changed(call_event(ids=RunIds(run_id="run-2")), partial=True)
    assert codes(scan_tool_ledger([user_text(), bad])) == [
        (C.INVOCATION_IDENTITY_CONFLICT, bad["id"]),
        (C.SEMANTIC_LANE_CONFLICT, bad["id"]),
    ]


def test_partial_ordinary_events_are_ignored() -> None:
    assert scan_tool_ledger([user_text(), model_text(partial=True)]).issues == ()


# ---- 5. function_call -------------------------------------------------------------------------


def test_a_second_call_for_the_same_tool_call_id_is_a_duplicate() -> None:
    again = call_event(event_id="evt-call-again")
    scan = scan_tool_ledger([CALL, again])
    assert codes(scan) == [(C.DUPLICATE_CALL, "evt-call-again")]
    assert only_op(scan).call_event == CALL
    assert only_op(scan).issues == scan.issues


def test_the_same_tool_call_id_in_two_invocations_is_two_operations() -> None:
    other = call_event(ids=RunIds("sess-1", "inv-2", "run-2", "turn-2"), event_id="c2")
    assert len(scan_tool_ledger([CALL, other]).operations) == 2


def test_operation_keys_never_collide() -> None:
    first = call_event("c", ids=RunIds(invocation_id="a\0b", run_id="r1"), event_id="e1")
    second = call_event("b\0c", ids=RunIds(invocation_id="a", run_id="r2"), event_id="e2")
    scan = scan_tool_ledger([first, second])
    assert scan.issues == ()
    assert len(scan.operations) == 2


def test_a_late_call_attaches_to_an_orphan_dispatch_and_a_name_mismatch_conflicts() -> None:
    renamed = call_event(tool_name="Edit", event_id="evt-late-call")
    scan = scan_tool_ledger([DISPATCH, renamed])
    assert codes(scan) == [
        (C.EVENT_ORDER_CONFLICT, DISPATCH["id"]),
        (C.IDENTITY_CONFLICT, "evt-late-call"),
    ]
    assert only_op(scan).call_event == renamed


# ---- 6. tool_dispatch -------------------------------------------------------------------------


def test_a_dispatch_before_its_call_is_an_order_conflict_and_still_binds() -> None:
    scan = scan_tool_ledger([DISPATCH])
    assert scan.issues == (ScanIssue(C.EVENT_ORDER_CONFLICT, DISPATCH["id"], OP, "call-1"),)
    op = only_op(scan)
    assert (op.operation_id, op.dispatch_event, op.call_event) == (OP, DISPATCH, None)


def test_a_second_dispatch_is_a_duplicate() -> None:
    again = dispatch_event(CALL, event_id="d2")
    scan = scan_tool_ledger([CALL, DISPATCH, again])
    assert codes(scan) == [(C.DUPLICATE_DISPATCH, "d2")]
    assert only_op(scan).dispatch_event == DISPATCH


def test_a_dispatch_reusing_another_operation_id_is_a_duplicate_operation() -> None:
    call_two = call_event("call-2", event_id="c2")
    stolen = changed(
        dispatch_event(call_two, event_id="d2"),
        actions={"toolDispatch": {"operationId": OP}},
        refs={"operationId": OP},
    )
    scan = scan_tool_ledger([CALL, DISPATCH, call_two, stolen])
    assert codes(scan) == [(C.DUPLICATE_OPERATION, "d2")]
    first, second = scan.operations
    assert first.issues == second.issues == scan.issues
    assert second.dispatch_event is None and second.operation_id is None


def test_an_orphan_dispatch_reusing_a_bound_operation_id_keeps_both_facts() -> None:
    """A dispatch without its call creates its operation from the dispatch (operation id and
    dispatch event at once) before the duplicate-operation check, so the skip that check causes
    still leaves an orphan dispatch with both (reference section 4.2, step 6)."""
    orphan = orphan_dispatch_copy(DISPATCH, "call-2", OP)
    scan = scan_tool_ledger([CALL, DISPATCH, orphan])
    assert scan.issues == (
        ScanIssue(C.EVENT_ORDER_CONFLICT, orphan["id"], OP, "call-2"),
        ScanIssue(C.DUPLICATE_OPERATION, orphan["id"], OP, "call-2"),
    )
    owner, stray = scan.operations
    assert (stray.tool_call_id, stray.operation_id) == ("call-2", OP)
    assert (stray.call_event, stray.dispatch_event) == (None, orphan)
    assert stray.event_positions == {orphan["id"]: 2}
    assert owner.dispatch_event == DISPATCH and owner.issues == (scan.issues[1],)
    # The operation id stays bound to its first operation: recovery facts still go there.
    reconcile = reconcile_event(CALL)
    after = scan_tool_ledger([CALL, DISPATCH, orphan, reconcile])
    assert after.operations[0].reconcile_events == (reconcile,)
    assert after.operations[1].reconcile_events == ()


def test_a_second_dispatch_after_an_orphan_dispatch_is_a_duplicate_dispatch() -> None:
    orphan = orphan_dispatch_copy(DISPATCH, "call-2", OP)
    again = with_changes(orphan, id="again")
    scan = scan_tool_ledger([CALL, DISPATCH, orphan, again])
    assert [issue.code for issue in scan.issues] == [
        C.EVENT_ORDER_CONFLICT,
        C.DUPLICATE_OPERATION,
        C.DUPLICATE_DISPATCH,
    ]
    assert scan.operations[1].dispatch_event == orphan


def test_a_dispatch_naming_another_tool_conflicts() -> None:
    renamed = changed(DISPATCH, actions={"toolDispatch": {"toolName": "Edit"}})
    assert codes(scan_tool_ledger([CALL, renamed])) == [(C.IDENTITY_CONFLICT, DISPATCH["id"])]


def test_dispatch_refs_must_repeat_the_fact() -> None:
    for refs in ({"operationId": "toolop_other"}, {"toolCallId": "call-9"}):
        bad = changed(DISPATCH, refs=refs)
        assert codes(scan_tool_ledger([CALL, bad])) == [(C.IDENTITY_CONFLICT, bad["id"])]


def test_a_dispatch_in_another_turn_than_its_call_conflicts() -> None:
    moved = dispatch_event(changed(CALL, turnId="turn-2"))
    scan = scan_tool_ledger([CALL, moved])
    assert codes(scan) == [
        (C.INVOCATION_IDENTITY_CONFLICT, moved["id"]),
        (C.IDENTITY_CONFLICT, moved["id"]),
    ]


def test_a_dispatch_hash_that_does_not_match_the_call_conflicts() -> None:
    forged = changed(DISPATCH, actions={"toolDispatch": {"canonicalArgsHash": DIGEST_A}})
    assert codes(scan_tool_ledger([CALL, forged])) == [
        (C.CANONICAL_ARGS_HASH_CONFLICT, DISPATCH["id"])
    ]


def test_a_call_whose_arguments_cannot_be_hashed_conflicts() -> None:
    nameless = call_event(tool_name="", event_id="c0")
    dispatch = changed(
        DISPATCH,
        actions={"toolDispatch": {"toolName": "x", "canonicalArgsHash": DIGEST_A}},
    )
    scan = scan_tool_ledger([nameless, dispatch])
    assert (C.CANONICAL_ARGS_HASH_CONFLICT, DISPATCH["id"]) in codes(scan)


def test_identity_is_reported_before_the_hash() -> None:
    bad = changed(
        DISPATCH, actions={"toolDispatch": {"toolName": "Edit", "canonicalArgsHash": DIGEST_A}}
    )
    assert codes(scan_tool_ledger([CALL, bad])) == [
        (C.IDENTITY_CONFLICT, bad["id"]),
        (C.CANONICAL_ARGS_HASH_CONFLICT, bad["id"]),
    ]


def test_a_dispatch_after_the_response_is_an_order_conflict() -> None:
    scan = scan_tool_ledger([CALL, BOUND, DISPATCH])
    assert codes(scan) == [(C.EVENT_ORDER_CONFLICT, DISPATCH["id"])]


def test_a_dispatch_after_an_unbound_response_also_flags_the_response() -> None:
    unbound = response_event(CALL)
    scan = scan_tool_ledger([CALL, unbound, DISPATCH])
    assert codes(scan) == [
        (C.EVENT_ORDER_CONFLICT, DISPATCH["id"]),
        (C.IDENTITY_CONFLICT, unbound["id"]),
    ]


# ---- 7. function_response ---------------------------------------------------------------------


def test_a_response_without_call_or_dispatch_is_an_orphan() -> None:
    scan = scan_tool_ledger([BOUND])
    assert codes(scan) == [(C.ORPHAN_RESPONSE, BOUND["id"])]
    assert only_op(scan).response_event == BOUND


def test_a_second_response_is_a_duplicate() -> None:
    again = bound_response(CALL, event_id="r2")
    scan = scan_tool_ledger([CALL, DISPATCH, BOUND, again])
    assert codes(scan) == [(C.DUPLICATE_RESPONSE, "r2")]
    assert only_op(scan).response_event == BOUND


def test_a_pre_t1_synthetic_response_is_clean() -> None:
    assert scan_tool_ledger([CALL, response_event(CALL, is_error=True)]).issues == ()


def test_a_response_naming_another_tool_conflicts() -> None:
    renamed = changed(BOUND, content={"name": "Edit"})
    assert codes(scan_tool_ledger([CALL, DISPATCH, renamed])) == [
        (C.IDENTITY_CONFLICT, BOUND["id"])
    ]


def test_a_response_to_an_operation_without_call_conflicts() -> None:
    assert codes(scan_tool_ledger([DISPATCH, BOUND]))[1:] == [(C.IDENTITY_CONFLICT, BOUND["id"])]


def test_a_response_in_another_turn_conflicts() -> None:
    moved = bound_response(changed(CALL, turnId="turn-2"))
    assert (C.IDENTITY_CONFLICT, moved["id"]) in codes(scan_tool_ledger([CALL, DISPATCH, moved]))


def test_an_unbound_response_to_a_dispatched_operation_conflicts() -> None:
    unbound = response_event(CALL)
    assert codes(scan_tool_ledger([CALL, DISPATCH, unbound])) == [
        (C.IDENTITY_CONFLICT, unbound["id"])
    ]


def test_a_response_bound_to_another_tool_call_conflicts() -> None:
    wrong = changed(BOUND, refs={"toolCallId": "call-9"})
    assert codes(scan_tool_ledger([CALL, DISPATCH, wrong])) == [(C.IDENTITY_CONFLICT, wrong["id"])]


# ---- 8. recovery facts ------------------------------------------------------------------------


def test_recovery_facts_attach_to_their_dispatched_operation() -> None:
    reconcile = reconcile_event(CALL)
    op = only_op(scan_tool_ledger([CALL, DISPATCH, reconcile]))
    assert op.reconcile_events == (reconcile,)


def test_a_recovery_fact_before_its_dispatch_is_an_order_conflict() -> None:
    reconcile = reconcile_event(CALL)
    scan = scan_tool_ledger([CALL, reconcile, DISPATCH])
    assert scan.issues == (ScanIssue(C.EVENT_ORDER_CONFLICT, reconcile["id"], OP, "call-1"),)
    assert only_op(scan).reconcile_events == ()


def test_a_recovery_fact_for_an_unknown_operation_names_the_operation_it_claims() -> None:
    reconcile = reconcile_event(CALL)
    decision = decision_event(CALL, DISPATCH, reconcile)
    for fact in (reconcile, decision):
        stray = stray_recovery_copy(fact, "toolop_nobody", "stray")
        scan = scan_tool_ledger([CALL, DISPATCH, stray])
        assert scan.issues == (
            ScanIssue(C.EVENT_ORDER_CONFLICT, stray["id"], "toolop_nobody", "call-1"),
        )
        assert only_op(scan).reconcile_events == only_op(scan).decision_events == ()


def test_a_recovery_fact_claiming_no_string_operation_names_none() -> None:
    stray = changed(
        reconcile_event(CALL), actions={"toolRecovery": {"payload": {"operationId": 7}}}
    )
    assert scan_tool_ledger([CALL, DISPATCH, stray]).issues == (
        ScanIssue(C.EVENT_ORDER_CONFLICT, stray["id"], None, "call-1"),
    )


def _is_recovery_fact(event: RuntimeEvent) -> bool:
    return "toolRecovery" in (event.get("actions") or {})


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_unplaced_recovery_fact_names_its_claimed_operation(data: st.DataObject) -> None:
    """An event-order conflict raised at a recovery fact carries the fact's payload
    ``operationId`` and its refs' ``toolCallId``, whatever else the ledger holds."""
    events = mixed_ledger(data.draw, edits=MIXED_EDITS, endings=ALL_ENDINGS)
    by_id = {event["id"]: event for event in reversed(events)}  # the first event of an id
    scan = scan_tool_ledger(events)
    found = 0
    for issue in scan.issues:
        fact = by_id[issue.event_id]
        if issue.code is C.EVENT_ORDER_CONFLICT and _is_recovery_fact(fact):
            found += 1
            payload = fact["actions"]["toolRecovery"]["payload"]
            assert issue.operation_id == payload["operationId"]
            assert issue.tool_call_id == fact["refs"]["toolCallId"]
    tally("recovery fact out of place" if found else "none out of place")


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_orphan_dispatch_keeps_its_operation_id_and_event(data: st.DataObject) -> None:
    """An operation a dispatch created (its first issue is the event-order conflict at that
    dispatch) holds that dispatch and its operation id, even when the id was already bound
    elsewhere and the dispatch was reported as a duplicate operation too."""
    events = mixed_ledger(data.draw, edits=MIXED_EDITS, endings=ALL_ENDINGS)
    by_id = {event["id"]: event for event in reversed(events)}
    scan = scan_tool_ledger(events)
    reused = 0
    for op in scan.operations:
        first = op.issues[0] if op.issues else None
        if first is None or first.code is not C.EVENT_ORDER_CONFLICT:
            continue
        dispatch = by_id[first.event_id]
        if "toolDispatch" not in (dispatch.get("actions") or {}):
            continue
        fact = dispatch["actions"]["toolDispatch"]
        if fact["providerToolCallId"] != op.tool_call_id:
            continue  # a dispatch that came after this operation's response
        assert op.dispatch_event == dispatch
        assert op.operation_id == fact["operationId"] == first.operation_id
        assert op.event_positions[dispatch["id"]] == events.index(dispatch)
        reused += any(issue.code is C.DUPLICATE_OPERATION for issue in op.issues)
    tally("orphan dispatch reusing a bound id" if reused else "no reused id")


# ---- incremental form -------------------------------------------------------------------------


def test_feed_returns_the_issues_of_each_event() -> None:
    scanner = ToolLedgerScanner()
    assert scanner.feed(CALL) == ()
    assert scanner.feed(CALL) == (ScanIssue(C.DUPLICATE_EVENT_ID, CALL["id"]),)
    assert scanner.first_issue == ScanIssue(C.DUPLICATE_EVENT_ID, CALL["id"])
    assert scanner.event_count == 2 and scanner.has_event(CALL["id"])


def test_probe_reports_without_changing_the_scanner() -> None:
    scanner = ToolLedgerScanner()
    scanner.feed_all([user_text(), CALL])
    before = scanner.result()
    assert scanner.probe([call_event(event_id="again")]) == (
        ScanIssue(C.DUPLICATE_CALL, "again", None, "call-1"),
    )
    assert scanner.probe([DISPATCH, BOUND]) == ()
    assert scanner.result() == before
    assert scanner.operation("inv-1", "call-1") == before.operations[0]
    assert scanner.operation_by_id(OP) is None


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_incremental_validation_equals_a_full_rescan(data: st.DataObject) -> None:
    events = mixed_ledger(data.draw, endings=ALL_ENDINGS)
    split = data.draw(st.integers(0, len(events)))
    scanner = ToolLedgerScanner()
    scanner.feed_all(events[:split])
    before = scanner.result()
    full = scan_tool_ledger(events)
    assert scanner.probe(events[split:]) == full.issues[len(before.issues) :]
    assert scanner.result() == before
    scanner.feed_all(events[split:])
    assert scanner.result() == full


def test_operation_ids_are_derived_like_the_runtime() -> None:
    assert operation_id("inv-1", "call-1") == OP
    assert DISPATCH["id"] == f"{OP}_dispatch"
    assert canonical_bytes(DISPATCH).count(OP.encode()) == 3


def _positions(scan: ToolLedgerScan) -> list[dict[str, int]]:
    return [dict(op.event_positions) for op in scan.operations]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_absorbing_a_fed_fork_equals_feeding_the_events(data: st.DataObject) -> None:
    """A writer absorbs its validated fork instead of feeding the events again: the scanner
    must end in exactly the state feeding gives, and keep answering like it afterwards."""
    events = mixed_ledger(data.draw, endings=ALL_ENDINGS)
    split = data.draw(st.integers(0, len(events)))
    end = data.draw(st.integers(split, len(events)))
    scanner = ToolLedgerScanner()
    scanner.feed_all(events[:split])
    fork = scanner.fork(events[split:end])
    for event in events[split:end]:
        fork.feed(event)
    assert scanner.absorb(fork)
    assert not scanner.absorb(fork)  # a fork is absorbed once
    fed = ToolLedgerScanner()
    fed.feed_all(events[:end])
    assert scanner.result() == fed.result()
    assert _positions(scanner.result()) == _positions(fed.result())
    assert scanner.event_count == fed.event_count
    assert all(scanner.has_event(event["id"]) for event in events[:end])
    assert scanner.feed_all(events[end:]) == fed.feed_all(events[end:])
    assert scanner.result() == scan_tool_ledger(events)
    assert _positions(scanner.result()) == _positions(scan_tool_ledger(events))


def test_a_stale_fork_is_not_absorbed() -> None:
    scanner = ToolLedgerScanner()
    scanner.feed(CALL)
    fork = scanner.fork([DISPATCH])
    fork.feed(DISPATCH)
    scanner.feed(model_text())
    assert not scanner.absorb(fork)
    assert not ToolLedgerScanner().absorb(fork)
    assert scanner.operation_by_id(OP) is None
