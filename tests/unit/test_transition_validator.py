"""Prospective validation of writes (docs/design/ledger.md section 3, core contract 4.4)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.ledger.canonical_codec import canonical_bytes
from runtime.ledger.codes import (
    BundleCode,
    ScanIssueCode,
    TransitionKind,
    WriterRejectionCode,
)
from runtime.ledger.event_model import RuntimeEvent, decode_event
from runtime.ledger.tool_ledger_scanner import ToolLedgerScanner
from runtime.ledger.transition_validator import (
    TransitionVerdict,
    validate_candidates,
    validate_transition,
)
from tests.helpers.ledger_builders import (
    DIGEST_A,
    ENDINGS,
    bound_response,
    call_event,
    clean_ledger,
    decision_event,
    dispatch_event,
    reconcile_event,
    response_event,
    tool_turn,
    user_text,
    with_changes,
)

K = TransitionKind
HISTORY = clean_ledger(3)[:-1]  # no terminal: the run is still open
CALL = call_event("call-new", ts=100)
DISPATCH = dispatch_event(CALL)
BOUND = bound_response(CALL)
RECONCILE = reconcile_event(CALL)
PARKED = decision_event(CALL, DISPATCH, RECONCILE)


def refused(verdict: TransitionVerdict) -> tuple[object, str | None]:
    assert not verdict.ok
    return verdict.code, verdict.event_id


def test_a_clean_t1_t2_sequence_is_accepted_with_its_new_events() -> None:
    t1 = validate_transition(HISTORY, [CALL, DISPATCH], K.T1_PREPARE)
    assert t1 == TransitionVerdict(True, new_events=(CALL, DISPATCH))
    t2 = validate_transition([*HISTORY, CALL, DISPATCH], [BOUND], K.T2_OUTCOME)
    assert t2 == TransitionVerdict(True, new_events=(BOUND,))


def test_a_corrupt_ledger_refuses_even_an_exact_retry() -> None:
    corrupt = [*HISTORY, CALL, DISPATCH, call_event("call-new", event_id="again")]
    verdict = validate_transition(corrupt, [CALL, DISPATCH], K.T1_PREPARE)
    assert refused(verdict) == (ScanIssueCode.DUPLICATE_CALL, "again")


def test_an_exact_retry_is_dropped() -> None:
    history = [*HISTORY, CALL, DISPATCH]
    assert validate_transition(history, [CALL, DISPATCH], K.T1_PREPARE) == TransitionVerdict(True)


def test_a_retry_that_differs_in_the_raw_but_not_in_canonical_bytes_is_exact() -> None:
    reordered = decode_event(dict(reversed(list(DISPATCH.items()))))
    assert validate_transition([*HISTORY, CALL, DISPATCH], [reordered], K.T1_PREPARE).ok


def test_an_id_reused_with_other_bytes_is_a_duplicate_event_id() -> None:
    other = decode_event(with_changes(DISPATCH, ts=999))
    verdict = validate_transition([*HISTORY, CALL, DISPATCH], [other], K.T1_PREPARE)
    assert refused(verdict) == (ScanIssueCode.DUPLICATE_EVENT_ID, DISPATCH["id"])


def test_t1_after_a_call_committed_earlier_needs_only_the_dispatch() -> None:
    verdict = validate_transition([*HISTORY, CALL], [CALL, DISPATCH], K.T1_PREPARE)
    assert verdict == TransitionVerdict(True, new_events=(DISPATCH,))


def test_the_shape_is_checked_after_retries_are_dropped() -> None:
    verdict = validate_transition([*HISTORY, CALL, DISPATCH], [DISPATCH, BOUND], K.T2_OUTCOME)
    assert verdict.ok and verdict.new_events == (BOUND,)
    verdict = validate_transition(HISTORY, [DISPATCH, BOUND], K.T2_OUTCOME)
    assert refused(verdict) == (WriterRejectionCode.TRANSITION_SHAPE_CONFLICT, DISPATCH["id"])


def test_the_generic_append_refuses_reserved_facts() -> None:
    verdict = validate_transition([*HISTORY, CALL, DISPATCH], [BOUND], K.GENERIC_APPEND)
    assert refused(verdict) == (WriterRejectionCode.RESERVED_TOOL_BOUNDARY_FACT, BOUND["id"])


def test_scanner_issues_of_the_candidates_refuse_the_write() -> None:
    forged = decode_event(
        with_changes(DISPATCH, actions={"toolDispatch": {"canonicalArgsHash": DIGEST_A}})
    )
    verdict = validate_transition([*HISTORY, CALL], [forged], K.T1_PREPARE)
    assert refused(verdict) == (ScanIssueCode.CANONICAL_ARGS_HASH_CONFLICT, DISPATCH["id"])
    unbound = response_event(CALL)
    verdict = validate_transition([*HISTORY, CALL, DISPATCH], [unbound], K.GENERIC_APPEND)
    assert refused(verdict) == (ScanIssueCode.IDENTITY_CONFLICT, unbound["id"])


def test_a_late_marker_is_refused() -> None:
    verdict = validate_transition(
        HISTORY, [user_text(event_id="u2", marker=True)], K.GENERIC_APPEND
    )
    assert refused(verdict) == (ScanIssueCode.PROTOCOL_MARKER_INVALID, "u2")


def test_a_recovery_bundle_is_accepted_once_and_parked_is_final() -> None:
    dangling = [*HISTORY, CALL, DISPATCH]
    assert validate_transition(dangling, [RECONCILE, PARKED], K.RECOVERY_BUNDLE).ok
    parked = [*dangling, RECONCILE, PARKED]
    assert validate_transition(parked, [RECONCILE, PARKED], K.RECOVERY_BUNDLE).ok  # exact retry
    second = reconcile_event(CALL, "unreadable", event_id="r2")
    again = validate_transition(
        parked, [second, decision_event(CALL, DISPATCH, second, event_id="d2")], K.RECOVERY_BUNDLE
    )
    assert refused(again) == (BundleCode.RECOVERY_FACT_SHAPE_CONFLICT, "r2")
    late = validate_transition(parked, [BOUND], K.T2_OUTCOME)
    assert refused(late) == (BundleCode.OUTCOME_FOR_PARKED, BOUND["id"])


def test_only_a_reconcile_operation_accepts_a_bundle() -> None:
    dispatch = dispatch_event(CALL, recovery_mode="never_auto_retry")
    verdict = validate_transition(
        [*HISTORY, CALL, dispatch], [RECONCILE, PARKED], K.RECOVERY_BUNDLE
    )
    assert refused(verdict) == (BundleCode.RECOVERY_MODE_UNSUPPORTED, RECONCILE["id"])
    assert verdict.operation_id == DISPATCH["refs"]["operationId"]


def test_a_bundle_for_an_operation_without_dispatch_is_an_order_conflict() -> None:
    verdict = validate_transition([*HISTORY, CALL], [RECONCILE, PARKED], K.RECOVERY_BUNDLE)
    assert refused(verdict) == (ScanIssueCode.EVENT_ORDER_CONFLICT, RECONCILE["id"])


def test_a_bundle_after_a_normal_outcome_is_refused() -> None:
    matched = reconcile_event(CALL, "matches_expected_state")
    done = [*HISTORY, CALL, DISPATCH, BOUND]
    completed = decision_event(CALL, DISPATCH, matched, BOUND)
    verdict = validate_transition(done, [matched, BOUND, completed], K.RECOVERY_BUNDLE)
    assert verdict.code is BundleCode.EVENT_ORDER_CONFLICT  # the outcome precedes the reconcile


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(ENDINGS), max_size=5), st.sampled_from(ENDINGS))
def test_the_incremental_form_gives_the_batch_verdict(earlier: list[str], ending: str) -> None:
    history = clean_ledger(endings=earlier)[:-1]
    turn = tool_turn("call-x", ts=500, ending=ending)
    writes: list[tuple[TransitionKind, list[RuntimeEvent]]] = [(K.GENERIC_APPEND, [turn[0]])]
    if ending != "synthetic":
        writes.append((K.T1_PREPARE, [turn[0], turn[1]]))
    if ending == "response":
        writes.append((K.T2_OUTCOME, [turn[2]]))
    if ending in ("parked", "completed"):
        writes.append((K.RECOVERY_BUNDLE, turn[2:]))
    scanner = ToolLedgerScanner()
    scanner.feed_all(history)
    stored = {event["id"]: canonical_bytes(event) for event in history}
    committed = list(history)
    for kind, candidates in writes:
        batch = validate_transition(committed, candidates, kind)
        incremental = validate_candidates(scanner, candidates, kind, stored.get)
        assert incremental == batch
        assert batch.ok
        scanner.feed_all(batch.new_events)
        stored.update((event["id"], canonical_bytes(event)) for event in batch.new_events)
        committed.extend(batch.new_events)
    assert scanner.result().issues == ()
