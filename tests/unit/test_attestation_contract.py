"""The user's attestation in the ledger contract (docs/design/recovery.md section 8,
docs/design/ledger.md 5.7): the bundle rules accept exactly the attestation bundles the builders
write, for any recoveryMode and only with schema ``user_attestation_v1``; the resolver settles them
``completed`` with origin ``user_attestation``; the resume plan then replays the call with the
attested result."""

from __future__ import annotations

from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from runtime.ledger.attestation import (
    ATTESTATION_SCHEMA,
    MAX_NOTE_CHARS,
    Attestation,
    attestation_result,
    attestation_suffix_ok,
)
from runtime.ledger.codes import (
    BundleCode,
    OperationStatus,
    ReconcileObservation,
    ResolverReason,
    ResolverStatus,
    SettlementOrigin,
)
from runtime.ledger.event_model import MAX_SAFE_INTEGER, RuntimeEvent
from runtime.ledger.recovery_bundle import (
    OperationIdentity,
    parse_reconcile_fact,
    validate_recovery_bundle,
)
from runtime.recovery.recovery_resolver import resolve_recovery
from runtime.recovery.resume_plan import plan_resume
from tests.helpers.ledger_builders import (
    DIGEST_A,
    DROP,
    attestation_bundle,
    call_event,
    dispatch_event,
    reconcile_event,
    terminal,
    user_text,
    with_changes,
)

MODES = st.sampled_from(["replay_safe", "idempotent", "reconcile", "never_auto_retry"])
NOTES = st.one_of(
    st.none(),
    st.text(min_size=1, max_size=MAX_NOTE_CHARS).filter(lambda note: note.strip() != ""),
)
ATTESTATIONS = st.builds(
    Attestation,
    attested_at=st.integers(0, 4_102_444_800_000),
    owner_epoch=st.integers(1, MAX_SAFE_INTEGER),
    note=NOTES,
)


def _operation(mode: str) -> tuple[RuntimeEvent, RuntimeEvent, OperationIdentity]:
    call = call_event("c1", "bash", {"command": "make migrate"})
    dispatch = dispatch_event(call, recovery_mode=mode)
    identity = OperationIdentity.from_dispatch(call, dispatch)
    assert identity is not None
    return call, dispatch, identity


def _bundle(mode: str, ran: bool, attestation: Attestation) -> list[RuntimeEvent]:
    call, dispatch, _ = _operation(mode)
    return attestation_bundle(
        call,
        dispatch,
        ran,
        attested_at=attestation.attested_at,
        owner_epoch=attestation.owner_epoch,
        note=attestation.note,
    )


def _validate(mode: str, reconcile: Any, outcome: Any, decision: Any) -> BundleCode | None:
    call, dispatch, identity = _operation(mode)
    verdict = validate_recovery_bundle(identity, call, dispatch, reconcile, outcome, decision)
    assert verdict.ok == (verdict.code is None)
    return verdict.code


@settings(max_examples=150, deadline=None)
@given(MODES, st.booleans(), ATTESTATIONS, st.booleans())
def test_any_attestation_settles_the_call_on_the_users_word(
    mode: str, ran: bool, attestation: Attestation, after_terminal: bool
) -> None:
    call, dispatch, _ = _operation(mode)
    bundle = _bundle(mode, ran, attestation)
    assert _validate(mode, *bundle) is None
    fact = parse_reconcile_fact(bundle[0]["actions"]["toolRecovery"])
    assert fact is not None and fact.attestation == attestation
    assert fact.observation_digest == attestation.digest()
    ending = terminal(status="failed", state_delta={"failureClass": "app_restarted"}, ts=59)
    events = [
        user_text(marker=True),
        call,
        dispatch,
        *([ending] if after_terminal else []),
        *bundle,
    ]
    (decision,) = resolve_recovery(events).decisions
    assert decision.status is ResolverStatus.COMPLETED
    assert decision.settlement_origin is SettlementOrigin.USER_ATTESTATION
    assert decision.reason is (
        ResolverReason.USER_ATTESTED_RAN if ran else ResolverReason.USER_ATTESTED_NOT_RUN
    )
    assert decision.response_is_error is (not ran)
    plan = plan_resume(events)
    assert plan.rejection_reasons == ()
    (operation,) = plan.operations
    assert operation.status is (OperationStatus.SUCCEEDED if ran else OperationStatus.FAILED)
    replayed = [event["id"] for event in plan.replay_runtime_events]
    assert call["id"] in replayed
    assert bundle[1]["id"] in replayed


_PAYLOAD_EDITS: list[dict[str, Any]] = [
    {"observationSchema": "state_identity_v1"},
    {"observationSchema": "user_attestation_v2"},
    {"observationDigest": DIGEST_A},
    {"attestedBy": "someone_else"},
    {"attestedBy": DROP},
    {"attestedAt": DROP},
    {"attestedAt": -1},
    {"attestedAt": 1.5},
    {"ownerEpoch": 0},
    {"ownerEpoch": "2"},
    {"note": ""},
    {"note": "x" * (MAX_NOTE_CHARS + 1)},
    {"note": 7},
    {"extra": True},
    {"observation": "matches_expected_state"},
]


@settings(max_examples=150, deadline=None)
@given(MODES, st.booleans(), ATTESTATIONS, st.sampled_from(_PAYLOAD_EDITS))
def test_a_changed_observation_is_never_an_attestation(
    mode: str, ran: bool, attestation: Attestation, edit: dict[str, Any]
) -> None:
    """Any field changed without the digest following (or a value outside the schema) makes the
    observation invalid: its fields are what the digest covers."""
    reconcile, outcome, decision = _bundle(mode, ran, attestation)
    edited = with_changes(reconcile, actions={"toolRecovery": {"payload": edit}})
    code = _validate(mode, edited, outcome, decision)
    if mode == "reconcile" and edit.get("observation") == "matches_expected_state":
        # A file observation under the attestation schema is refused as well.
        assert code is BundleCode.RECONCILE_FACT_INVALID
    elif mode != "reconcile":
        assert code is BundleCode.RECOVERY_MODE_UNSUPPORTED
    else:
        assert code is BundleCode.RECONCILE_FACT_INVALID


def test_a_file_observation_under_the_attestation_schema_is_invalid() -> None:
    call, _, _ = _operation("reconcile")
    observed = reconcile_event(
        call,
        "matches_expected_state",
        extra={"actions": {"toolRecovery": {"payload": {"observationSchema": ATTESTATION_SCHEMA}}}},
    )
    assert parse_reconcile_fact(observed["actions"]["toolRecovery"]) is None
    attested = with_changes(observed, actions={"toolRecovery": {"payload": {"observation": "x"}}})
    assert parse_reconcile_fact(attested["actions"]["toolRecovery"]) is None


_RESULT_EDITS: list[dict[str, Any]] = [
    {"attestation": "maybe"},
    {"attestedAt": 1},
    {"note": "a different note"},
    {"outputRecorded": True},
    {"message": 3},
    {"output": "fabricated output"},
]


@settings(max_examples=150, deadline=None)
@given(MODES, st.booleans(), ATTESTATIONS, st.sampled_from(_RESULT_EDITS), st.booleans())
def test_an_outcome_that_says_something_else_conflicts(
    mode: str, ran: bool, attestation: Attestation, edit: dict[str, Any], flip_error: bool
) -> None:
    reconcile, outcome, decision = _bundle(mode, ran, attestation)
    if flip_error:
        edited = with_changes(outcome, content={"isError": ran})
    else:
        result = attestation_result(ran, attestation)
        assume(any(result.get(key, DROP) != value for key, value in edit.items()))
        result.update(edit)
        edited = with_changes(outcome, content={"result": DROP})
        edited = with_changes(edited, content={"result": result})
    code = _validate(mode, reconcile, edited, decision)
    assert code is BundleCode.ATTESTATION_OUTCOME_CONFLICT


@given(MODES, st.booleans(), ATTESTATIONS)
def test_the_decision_must_give_the_attested_reason(
    mode: str, ran: bool, attestation: Attestation
) -> None:
    reconcile, outcome, decision = _bundle(mode, ran, attestation)
    for reason in (
        "reconcile_matches_expected_state",
        "user_attested_not_run" if ran else "user_attested_ran",
    ):
        wrong = with_changes(
            decision, actions={"toolRecovery": {"payload": {"reasonCode": reason}}}
        )
        assert _validate(mode, reconcile, outcome, wrong) is BundleCode.RECONCILE_DECISION_CONFLICT
    parked = with_changes(
        decision,
        actions={
            "toolRecovery": {
                "payload": {
                    "disposition": "parked",
                    "outcomeEventId": DROP,
                    "reasonCode": "reconcile_diverged",
                }
            }
        },
    )
    assert _validate(mode, reconcile, None, parked) is BundleCode.RECONCILE_DECISION_CONFLICT


def test_the_attested_observations_are_not_file_observations() -> None:
    for observation in (
        ReconcileObservation.USER_ATTESTED_RAN,
        ReconcileObservation.USER_ATTESTED_NOT_RUN,
    ):
        call, _, _ = _operation("reconcile")
        plain = reconcile_event(call, observation.value)
        assert parse_reconcile_fact(plain["actions"]["toolRecovery"]) is None


# ---- what may follow a terminal event -----------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.booleans(), ATTESTATIONS), max_size=3), st.data())
def test_only_whole_attestation_bundles_may_follow_a_terminal_event(
    bundles: list[tuple[bool, Attestation]], data: st.DataObject
) -> None:
    suffix: list[RuntimeEvent] = []
    for index, (ran, attestation) in enumerate(bundles):
        call = call_event(f"c{index}", "bash", {"command": "true"})
        dispatch = dispatch_event(call, recovery_mode="never_auto_retry")
        suffix.extend(
            attestation_bundle(
                call, dispatch, ran, attested_at=attestation.attested_at, note=attestation.note
            )
        )
    assert attestation_suffix_ok(suffix)
    if suffix:
        cut = data.draw(st.integers(0, len(suffix) - 1))
        assert not attestation_suffix_ok(suffix[:cut] + suffix[cut + 1 :])
        plain = user_text()
        assert not attestation_suffix_ok([*suffix, plain, plain, plain])
        swapped = [suffix[1], suffix[0], *suffix[2:]]
        assert not attestation_suffix_ok(swapped)


def _baseline_after(decision: RuntimeEvent, operation_id: str) -> RuntimeEvent:
    from runtime.ledger.fact_events import EventIdentity, settled_baseline_event

    body = {"protocol": "workspace_baseline_v1", "changedPaths": [], "compared": True}
    return settled_baseline_event(
        EventIdentity.of_event(decision), f"{operation_id}_attest_baseline", 1, body
    )


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans(), ATTESTATIONS), min_size=1, max_size=3))
def test_a_bundle_may_be_followed_by_its_own_settled_baseline(
    bundles: list[tuple[bool, bool, Attestation]],
) -> None:
    """docs/design/workspace.md section 3: settling a writing call records the folder as the new
    baseline right after its bundle; only its own, only there."""
    suffix: list[RuntimeEvent] = []
    last_operation = ""
    for index, (ran, with_baseline, attestation) in enumerate(bundles):
        call = call_event(f"c{index}", "bash", {"command": "true"})
        dispatch = dispatch_event(call, recovery_mode="never_auto_retry")
        bundle = attestation_bundle(
            call, dispatch, ran, attested_at=attestation.attested_at, note=attestation.note
        )
        suffix.extend(bundle)
        last_operation = str((bundle[0].get("refs") or {})["operationId"])
        if with_baseline:
            suffix.append(_baseline_after(bundle[-1], last_operation))
    assert attestation_suffix_ok(suffix)
    stray = _baseline_after(suffix[-1], last_operation)
    assert not attestation_suffix_ok([stray, *suffix])  # not before its bundle
    other = _baseline_after(suffix[-1], "toolop_other")
    assert not attestation_suffix_ok([*suffix, other])  # not another call's
