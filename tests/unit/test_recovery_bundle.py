"""Recovery facts, bundle validation (every code, in order) and scanned interpretation."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from runtime.ledger.canonical_codec import canonical_args_hash
from runtime.ledger.codes import (
    BundleCode,
    ReconcileObservation,
    RecoveryDisposition,
    RecoveryReasonCode,
)
from runtime.ledger.event_model import RuntimeEvent, decode_event
from runtime.ledger.recovery_bundle import (
    BundleVerdict,
    DecisionFact,
    OperationIdentity,
    ReconcileFact,
    RecoveryAbsent,
    RecoveryCorruption,
    RecoveryValid,
    interpret_scanned_recovery,
    parse_decision_fact,
    parse_reconcile_fact,
    validate_recovery_bundle,
)
from runtime.ledger.tool_ledger_scanner import scan_tool_ledger
from tests.helpers.ledger_builders import (
    DIGEST_A,
    DROP,
    attestation_bundle,
    bound_response,
    call_event,
    decision_event,
    dispatch_event,
    operation_of,
    reconcile_event,
    user_text,
    with_changes,
)

B = BundleCode
CALL = call_event()
OP = operation_of(CALL)
DISPATCH = dispatch_event(CALL)


def identity_of(call: RuntimeEvent, dispatch: RuntimeEvent) -> OperationIdentity:
    identity = OperationIdentity.from_dispatch(call, dispatch)
    assert identity is not None
    return identity


IDENTITY = identity_of(CALL, DISPATCH)
DIVERGED = reconcile_event(CALL, "diverged")
PARKED = decision_event(CALL, DISPATCH, DIVERGED)
MATCHED = reconcile_event(CALL, "matches_expected_state")
OUTCOME = bound_response(CALL, duration_ms=None, ts=51)
COMPLETED = decision_event(CALL, DISPATCH, MATCHED, OUTCOME)


def changed(event: RuntimeEvent, **changes: Any) -> RuntimeEvent:
    return with_changes(event, **changes)  # deliberately not decoded: rules must hold anyway


def payload(**changes: Any) -> dict[str, Any]:
    return {"actions": {"toolRecovery": {"payload": changes}}}


def check(**overrides: Any) -> BundleVerdict:
    """Validate the parked bundle, or the completed one when ``completed=True``."""
    completed = overrides.pop("completed", False)
    args: dict[str, Any] = {
        "operation": IDENTITY,
        "call": CALL,
        "dispatch": DISPATCH,
        "reconcile": MATCHED if completed else DIVERGED,
        "outcome": OUTCOME if completed else None,
        "decision": COMPLETED if completed else PARKED,
    }
    args.update(overrides)
    return validate_recovery_bundle(
        args["operation"],
        args["call"],
        args["dispatch"],
        args["reconcile"],
        args["outcome"],
        args["decision"],
    )


def refused(verdict: BundleVerdict) -> BundleCode | None:
    assert not verdict.ok or verdict.code is None
    return verdict.code


# ---- accepted bundles -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("observation", "reason"),
    [
        ("matches_prior_state", "reconcile_matches_prior_state"),
        ("diverged", "reconcile_diverged"),
        ("unreadable", "reconcile_unreadable"),
    ],
)
def test_a_parked_bundle_maps_each_observation_to_its_reason(observation: str, reason: str) -> None:
    reconcile = reconcile_event(CALL, observation)
    decision = decision_event(CALL, DISPATCH, reconcile)
    verdict = check(reconcile=reconcile, decision=decision)
    assert verdict.ok
    assert verdict.decision is not None and verdict.decision.reason_code == reason
    assert verdict.decision.evidence_event_ids == (CALL["id"], DISPATCH["id"], reconcile["id"])


def test_a_completed_bundle_is_accepted_with_its_facts() -> None:
    verdict = check(completed=True)
    assert verdict == BundleVerdict(
        True,
        reconcile=ReconcileFact(OP, ReconcileObservation.MATCHES_EXPECTED_STATE, DIGEST_A),
        decision=DecisionFact(
            OP,
            RecoveryDisposition.COMPLETED,
            RecoveryReasonCode.RECONCILE_MATCHES_EXPECTED_STATE,
            (CALL["id"], DISPATCH["id"], MATCHED["id"], OUTCOME["id"]),
            OUTCOME["id"],
        ),
    )


def test_fact_payloads_round_trip_through_their_action_values() -> None:
    reconcile = ReconcileFact(OP, ReconcileObservation.UNREADABLE, DIGEST_A)
    decision = DecisionFact(
        OP, RecoveryDisposition.PARKED, RecoveryReasonCode.RECONCILE_UNREADABLE, ("a", "b", "c")
    )
    assert parse_reconcile_fact(reconcile.to_tool_recovery()) == reconcile
    assert parse_decision_fact(decision.to_tool_recovery()) == decision
    assert parse_decision_fact(reconcile.to_tool_recovery()) is None
    assert parse_reconcile_fact(decision.to_tool_recovery()) is None


# ---- 1. call identity -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {"operation": dataclasses.replace(IDENTITY, call_event_id="other")},
        {"call": user_text(event_id=CALL["id"])},
        {"call": changed(CALL, content={"id": "call-9"})},
        {"call": changed(CALL, content={"name": "Edit"})},
        {"call": changed(CALL, actions={"endInvocation": True})},
        {"call": changed(CALL, turnId="turn-2")},
        {"call": changed(CALL, runId="run-2")},
        {"call": changed(CALL, partial=True)},
    ],
    ids=["id", "not-a-call", "call-id", "name", "lane", "turn", "run", "partial"],
)
def test_the_call_must_be_the_operations_call(overrides: dict[str, Any]) -> None:
    assert refused(check(**overrides)) is B.CALL_IDENTITY_CONFLICT


# ---- 2. argument hash -------------------------------------------------------------------------


def test_the_hash_is_recomputed_from_the_call_not_trusted() -> None:
    forged = changed(DISPATCH, actions={"toolDispatch": {"canonicalArgsHash": DIGEST_A}})
    identity = dataclasses.replace(IDENTITY, canonical_args_hash=DIGEST_A)
    assert refused(check(operation=identity, dispatch=forged)) is B.CANONICAL_ARGS_HASH_CONFLICT


# ---- 3. dispatch identity ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {"operation": dataclasses.replace(IDENTITY, dispatch_event_id="other")},
        {"dispatch": changed(DISPATCH, actions=DROP)},
        {"dispatch": changed(DISPATCH, actions={"toolDispatch": {"operationId": "toolop_x"}})},
        {"dispatch": changed(DISPATCH, actions={"toolDispatch": {"providerToolCallId": "c9"}})},
        {"dispatch": changed(DISPATCH, actions={"toolDispatch": {"toolName": "Edit"}})},
        {"dispatch": changed(DISPATCH, actions={"toolDispatch": {"recoveryMode": "idempotent"}})},
        {"dispatch": changed(DISPATCH, status="completed")},
        {"dispatch": changed(DISPATCH, turnId="turn-2")},
        {"dispatch": changed(DISPATCH, sessionId="sess-2")},
        {"dispatch": changed(DISPATCH, refs={"operationId": "toolop_x"})},
        {"dispatch": changed(DISPATCH, refs={"toolCallId": "c9"})},
    ],
    ids=[
        "id",
        "no-fact",
        "operation",
        "tool-call",
        "tool",
        "mode",
        "lane",
        "turn",
        "session",
        "refs-op",
        "refs-call",
    ],
)
def test_the_dispatch_must_be_the_operations_dispatch(overrides: dict[str, Any]) -> None:
    assert refused(check(**overrides)) is B.DISPATCH_IDENTITY_CONFLICT


def test_a_dispatch_hash_other_than_the_operations_conflicts() -> None:
    # The operation and the call agree on new arguments; the dispatch still has the old hash.
    call = call_event(args={"x": 1})
    identity = dataclasses.replace(
        IDENTITY, canonical_args_hash=canonical_args_hash("Write", {"x": 1})
    )
    assert refused(check(operation=identity, call=call)) is B.DISPATCH_IDENTITY_CONFLICT


# ---- 4. recovery mode -------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["replay_safe", "idempotent", "never_auto_retry"])
def test_only_reconcile_operations_accept_a_bundle(mode: str) -> None:
    dispatch = dispatch_event(CALL, recovery_mode=mode)
    identity = identity_of(CALL, dispatch)
    assert refused(check(operation=identity, dispatch=dispatch)) is B.RECOVERY_MODE_UNSUPPORTED


# ---- 5./6. fact envelopes ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        payload(protocol="tool_reconcile_v2"),
        payload(observationSchema="state_identity_v2"),
        payload(observation="maybe"),
        payload(observationDigest="sha256:ABC"),
        payload(operationId=""),
        payload(extra=1),
        payload(observation=DROP),
        {"actions": {"toolRecovery": {"version": 2}}},
        {"actions": {"toolRecovery": {"version": True}}},
        {"actions": {"toolRecovery": {"payload": []}}},
        {"actions": DROP},
    ],
    ids=[
        "protocol",
        "schema",
        "observation",
        "digest",
        "operation",
        "extra",
        "missing",
        "version",
        "version-bool",
        "payload",
        "none",
    ],
)
def test_a_malformed_reconcile_observation_is_invalid(changes: dict[str, Any]) -> None:
    assert refused(check(reconcile=changed(DIVERGED, **changes))) is B.RECONCILE_FACT_INVALID


def test_a_decision_in_the_reconcile_slot_is_invalid() -> None:
    assert refused(check(reconcile=PARKED)) is B.RECONCILE_FACT_INVALID


@pytest.mark.parametrize(
    ("base", "changes"),
    [
        (PARKED, payload(protocol="tool_recovery_v2")),
        (PARKED, payload(evidenceEventIds=[])),
        (PARKED, payload(evidenceEventIds=["a", "a"])),
        (PARKED, payload(evidenceEventIds=["a", ""])),
        (PARKED, payload(evidenceEventIds=["a", 1])),
        (PARKED, payload(evidenceEventIds="a")),
        (PARKED, payload(outcomeEventId="x")),
        (PARKED, payload(reasonCode="reconcile_matches_expected_state")),
        (PARKED, payload(disposition="abandoned")),
        (PARKED, payload(operationId=DROP)),
        (PARKED, payload(extra=True)),
        (COMPLETED, payload(outcomeEventId=DROP)),
        (COMPLETED, payload(outcomeEventId="")),
        (COMPLETED, payload(reasonCode="reconcile_diverged")),
    ],
    ids=[
        "protocol",
        "no-evidence",
        "repeated-evidence",
        "empty-evidence",
        "number-evidence",
        "string-evidence",
        "parked-outcome",
        "parked-reason",
        "disposition",
        "operation",
        "extra",
        "completed-no-outcome",
        "completed-empty-outcome",
        "completed-reason",
    ],
)
def test_a_malformed_decision_is_invalid(base: RuntimeEvent, changes: dict[str, Any]) -> None:
    completed = base is COMPLETED
    verdict = check(completed=completed, decision=changed(base, **changes))
    assert refused(verdict) is B.DECISION_FACT_INVALID


# ---- 7./8. fact identity ----------------------------------------------------------------------


@pytest.mark.parametrize("slot", ["reconcile", "decision"])
@pytest.mark.parametrize(
    "changes",
    [
        {"status": "completed"},
        {"turnId": "turn-2"},
        {"sessionId": "sess-2"},
        {"partial": True},
        {"refs": {"operationId": "toolop_x"}},
        {"refs": {"toolCallId": "c9"}},
    ],
    ids=["lane", "turn", "session", "partial", "refs-op", "refs-call"],
)
def test_recovery_facts_must_be_bound_to_the_operation(slot: str, changes: dict[str, Any]) -> None:
    event = DIVERGED if slot == "reconcile" else PARKED
    verdict = check(**{slot: changed(event, **changes)})
    assert refused(verdict) is B.RECOVERY_FACT_IDENTITY_CONFLICT


@pytest.mark.parametrize("slot", ["reconcile", "decision"])
def test_fact_payloads_must_name_the_operation(slot: str) -> None:
    event = DIVERGED if slot == "reconcile" else PARKED
    verdict = check(**{slot: changed(event, **payload(operationId="toolop_other"))})
    assert refused(verdict) is B.OPERATION_IDENTITY_CONFLICT


# ---- 9. disposition ---------------------------------------------------------------------------


def test_a_completed_decision_needs_its_outcome() -> None:
    assert refused(check(completed=True, outcome=None)) is B.OUTCOME_REQUIRED


@pytest.mark.parametrize(
    "changes",
    [
        {"sessionId": "sess-2"},
        {"actions": {"endInvocation": True}},
        {"content": {"name": "Edit"}},
        {"content": {"id": "call-9"}},
        {"refs": {"operationId": DROP}},
        {"refs": {"toolCallId": "call-9"}},
        {"turnId": "turn-2"},
        {"content": {"kind": "text", "text": "x", "id": DROP, "name": DROP, "result": DROP}},
    ],
    ids=["session", "lane", "name", "call-id", "unbound", "refs-call", "turn", "not-a-response"],
)
def test_the_outcome_must_be_the_operations_response(changes: dict[str, Any]) -> None:
    verdict = check(completed=True, outcome=changed(OUTCOME, **changes))
    assert refused(verdict) is B.OUTCOME_IDENTITY_CONFLICT


def test_an_error_outcome_cannot_complete_the_operation() -> None:
    outcome = changed(OUTCOME, content={"isError": True})
    assert refused(check(completed=True, outcome=outcome)) is B.OUTCOME_NOT_SUCCESSFUL


def test_the_decision_must_name_its_outcome() -> None:
    decision = changed(COMPLETED, **payload(outcomeEventId="another"))
    assert refused(check(completed=True, decision=decision)) is B.OUTCOME_REFERENCE_CONFLICT


def test_completed_requires_the_expected_state_to_be_observed() -> None:
    verdict = check(completed=True, reconcile=DIVERGED)
    assert refused(verdict) is B.RECONCILE_DECISION_CONFLICT


def test_parked_cannot_follow_an_expected_state_observation() -> None:
    assert refused(check(reconcile=MATCHED)) is B.RECONCILE_DECISION_CONFLICT


def test_parked_reason_must_be_the_mapped_one() -> None:
    reconcile = reconcile_event(CALL, "unreadable")
    assert refused(check(reconcile=reconcile)) is B.RECONCILE_DECISION_CONFLICT


def test_a_parked_decision_has_no_outcome() -> None:
    assert refused(check(outcome=OUTCOME)) is B.OUTCOME_FOR_PARKED


# ---- 10. evidence -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("completed", "evidence"),
    [
        (False, ["DISPATCH", "CALL", "RECONCILE"]),
        (False, ["CALL", "DISPATCH"]),
        (False, ["CALL", "DISPATCH", "RECONCILE", "OUTCOME"]),
        (True, ["CALL", "DISPATCH", "RECONCILE"]),
        (True, ["CALL", "DISPATCH", "OUTCOME", "RECONCILE"]),
    ],
)
def test_evidence_is_exactly_call_dispatch_reconcile_and_outcome(
    completed: bool, evidence: list[str]
) -> None:
    names = {"CALL": CALL, "DISPATCH": DISPATCH, "RECONCILE": DIVERGED, "OUTCOME": OUTCOME}
    ids = [names[name]["id"] for name in evidence]
    decision = changed(COMPLETED if completed else PARKED, **payload(evidenceEventIds=ids))
    assert refused(check(completed=completed, decision=decision)) is B.EVIDENCE_ORDER_CONFLICT


# ---- order of the checks ----------------------------------------------------------------------


def test_earlier_rules_win() -> None:
    bad_call = changed(CALL, content={"name": "Edit"})
    bad_reconcile = changed(DIVERGED, **payload(protocol="x"))
    never = dispatch_event(CALL, recovery_mode="never_auto_retry")
    never_identity = identity_of(CALL, never)
    assert refused(check(call=bad_call, reconcile=bad_reconcile)) is B.CALL_IDENTITY_CONFLICT
    assert (
        refused(check(operation=never_identity, dispatch=never, reconcile=bad_reconcile))
        is B.RECOVERY_MODE_UNSUPPORTED
    )
    assert (
        refused(check(reconcile=bad_reconcile, decision=changed(PARKED, **payload(x=1))))
        is B.RECONCILE_FACT_INVALID
    )
    assert (
        refused(check(decision=changed(PARKED, **payload(x=1), turnId="t9")))
        is B.DECISION_FACT_INVALID
    )
    moved = changed(DIVERGED, turnId="t9", **payload(operationId="toolop_x"))
    assert refused(check(reconcile=moved)) is B.RECOVERY_FACT_IDENTITY_CONFLICT
    assert (
        refused(check(outcome=OUTCOME, decision=changed(PARKED, **payload(evidenceEventIds=["a"]))))
        is B.OUTCOME_FOR_PARKED
    )


# ---- interpretation of a scanned operation ----------------------------------------------------


def interpret(events: list[RuntimeEvent], order: dict[str, int] | None = None) -> Any:
    scan = scan_tool_ledger(events)
    return interpret_scanned_recovery(scan.operations[0], order)


def test_an_operation_without_recovery_facts_is_absent() -> None:
    assert interpret([CALL, DISPATCH, OUTCOME]) == RecoveryAbsent()


def test_a_valid_parked_tail_is_interpreted() -> None:
    meaning = interpret([CALL, DISPATCH, DIVERGED, PARKED])
    assert isinstance(meaning, RecoveryValid)
    assert meaning.decision.disposition is RecoveryDisposition.PARKED
    assert (meaning.reconcile_event, meaning.decision_event, meaning.outcome_event) == (
        DIVERGED,
        PARKED,
        None,
    )


def test_a_valid_completed_tail_uses_the_operations_response_as_outcome() -> None:
    meaning = interpret([CALL, DISPATCH, MATCHED, OUTCOME, COMPLETED])
    assert isinstance(meaning, RecoveryValid)
    assert meaning.outcome_event == OUTCOME


SECOND_RECONCILE = reconcile_event(CALL, "diverged", event_id="r2")


@pytest.mark.parametrize(
    "events",
    [
        [CALL, DISPATCH, DIVERGED],
        [CALL, DISPATCH, PARKED],
        [CALL, DISPATCH, DIVERGED, SECOND_RECONCILE, PARKED],
        [CALL, DISPATCH, DIVERGED, PARKED, decision_event(CALL, DISPATCH, DIVERGED, event_id="d2")],
        [DISPATCH, DIVERGED, PARKED],
    ],
    ids=["reconcile-only", "decision-only", "two-reconciles", "two-decisions", "no-call"],
)
def test_anything_but_one_reconcile_and_one_decision_is_a_shape_conflict(
    events: list[RuntimeEvent],
) -> None:
    meaning = interpret(events)
    assert isinstance(meaning, RecoveryCorruption)
    assert meaning.code is B.RECOVERY_FACT_SHAPE_CONFLICT


def test_a_bundle_rule_failure_is_corruption_with_its_code() -> None:
    never = dispatch_event(CALL, recovery_mode="never_auto_retry")
    meaning = interpret([CALL, never, DIVERGED, PARKED])
    assert meaning == RecoveryCorruption(B.RECOVERY_MODE_UNSUPPORTED, meaning.message)


def test_a_normal_response_followed_by_a_parked_bundle_is_corrupt() -> None:
    meaning = interpret([CALL, DISPATCH, OUTCOME, DIVERGED, PARKED])
    assert isinstance(meaning, RecoveryCorruption) and meaning.code is B.OUTCOME_FOR_PARKED


@pytest.mark.parametrize(
    "events",
    [
        [CALL, DISPATCH, OUTCOME, MATCHED, COMPLETED],
        [CALL, DISPATCH, MATCHED, COMPLETED, OUTCOME],
    ],
    ids=["outcome-before-reconcile", "decision-before-outcome"],
)
def test_facts_out_of_causal_order_are_an_order_conflict(events: list[RuntimeEvent]) -> None:
    meaning = interpret(events)
    assert isinstance(meaning, RecoveryCorruption) and meaning.code is B.EVENT_ORDER_CONFLICT


def test_a_caller_supplied_order_is_used_and_must_cover_every_fact() -> None:
    events = [CALL, DISPATCH, DIVERGED, PARKED]
    positions = {event["id"]: index for index, event in enumerate(events)}
    assert isinstance(interpret(events, positions), RecoveryValid)
    swapped = positions | {DIVERGED["id"]: 9}
    assert isinstance(interpret(events, swapped), RecoveryCorruption)
    missing = {key: value for key, value in positions.items() if key != CALL["id"]}
    meaning = interpret(events, missing)
    assert isinstance(meaning, RecoveryCorruption) and meaning.code is B.EVENT_ORDER_CONFLICT


def test_builders_produce_decodable_facts() -> None:
    for event in (DIVERGED, PARKED, MATCHED, COMPLETED):
        assert decode_event(event) == event


# ---- the user confirming a write recovery found not done --------------------------------------

PRIOR = reconcile_event(CALL, "matches_prior_state")
PRIOR_PARKED = decision_event(CALL, DISPATCH, PRIOR)


def test_a_not_run_attestation_after_a_prior_state_park_confirms_it() -> None:
    said = attestation_bundle(CALL, DISPATCH, ran=False)
    meaning = interpret([CALL, DISPATCH, PRIOR, PRIOR_PARKED, *said])
    assert isinstance(meaning, RecoveryValid)
    assert meaning.decision.disposition is RecoveryDisposition.COMPLETED
    assert meaning.decision.reason_code == "user_attested_not_run"
    assert meaning.confirmed == (PRIOR, PRIOR_PARKED)
    assert (meaning.reconcile_event, meaning.outcome_event, meaning.decision_event) == tuple(said)


def test_parked_stays_final_for_every_other_second_bundle() -> None:
    ran = attestation_bundle(CALL, DISPATCH, ran=True)
    not_run = attestation_bundle(CALL, DISPATCH, ran=False)
    for events in (
        [CALL, DISPATCH, PRIOR, PRIOR_PARKED, *ran],  # "it ran" contradicts the file
        [CALL, DISPATCH, DIVERGED, PARKED, *not_run],  # another finding is final
        [CALL, DISPATCH, *not_run, PRIOR, PRIOR_PARKED],  # the answer before the finding
    ):
        assert isinstance(interpret(events), RecoveryCorruption), events
