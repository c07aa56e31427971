"""Recovery facts and the recovery bundle (docs/design/ledger.md section 4).

After a crash between T1 (dispatch) and T2 (response), startup recovery observes the world and
writes one bundle for the operation: a *reconcile observation*, an optional *recovered outcome*
(a bound, successful function_response) and a *decision* (``completed`` or ``parked``). Only an
operation dispatched with ``recoveryMode: reconcile`` accepts a bundle, and ``parked`` is final.

Two entry points share one rule set:

- ``validate_recovery_bundle``: the full check of a bundle against its operation, first failure
  wins, in the order of ``BundleCode`` (the recovery-bundle writer calls it before committing);
- ``interpret_scanned_recovery``: what a scanned operation's recovery tail means (absent,
  corruption with a code, or valid), including causal order; the resolver and the projection
  rebuild call it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from runtime.ledger.attestation import (
    ATTESTATION_FIELDS,
    ATTESTATION_SCHEMA,
    ATTESTED_REASONS,
    Attestation,
    attestation_from_payload,
    outcome_matches,
)
from runtime.ledger.canonical_codec import canonical_args_hash
from runtime.ledger.codes import (
    BundleCode,
    Lane,
    ReconcileObservation,
    RecoveryDisposition,
    RecoveryReasonCode,
)
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.lane_rules import (
    RECONCILE_RESULT_KIND,
    RECOVERY_DECISION_KIND,
    classify_lane,
)
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.tool_ledger_scanner import ScannedOperation

RECONCILE_PROTOCOL = "tool_reconcile_v1"
RECOVERY_PROTOCOL = "tool_recovery_v1"
OBSERVATION_SCHEMA = "state_identity_v1"
FACT_VERSION = 1
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")

PARKED_REASONS: Mapping[ReconcileObservation, RecoveryReasonCode] = {
    ReconcileObservation.MATCHES_PRIOR_STATE: RecoveryReasonCode.RECONCILE_MATCHES_PRIOR_STATE,
    ReconcileObservation.DIVERGED: RecoveryReasonCode.RECONCILE_DIVERGED,
    ReconcileObservation.UNREADABLE: RecoveryReasonCode.RECONCILE_UNREADABLE,
}
"""The only reasonCode a parked decision may give for each observation."""


# ---- fact payloads ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReconcileFact:
    """``{protocol: tool_reconcile_v1, operationId, observation, observationSchema,
    observationDigest}``: what recovery saw, as a digest of the observed state."""

    operation_id: str
    observation: ReconcileObservation
    observation_digest: str
    attestation: Attestation | None = None
    """Set exactly for the user's attestation (schema ``user_attestation_v1``)."""

    def to_tool_recovery(self) -> dict[str, Any]:
        """The ``actions.toolRecovery`` value carrying this fact."""
        payload: dict[str, Any] = {
            "protocol": RECONCILE_PROTOCOL,
            "operationId": self.operation_id,
            "observation": str(self.observation),
            "observationSchema": (
                OBSERVATION_SCHEMA if self.attestation is None else ATTESTATION_SCHEMA
            ),
            "observationDigest": self.observation_digest,
        }
        if self.attestation is not None:
            payload.update(self.attestation.fields())
        return {"kind": RECONCILE_RESULT_KIND, "version": FACT_VERSION, "payload": payload}

    @staticmethod
    def attested(operation_id: str, ran: bool, attestation: Attestation) -> ReconcileFact:
        observation = (
            ReconcileObservation.USER_ATTESTED_RAN
            if ran
            else ReconcileObservation.USER_ATTESTED_NOT_RUN
        )
        return ReconcileFact(operation_id, observation, attestation.digest(), attestation)


@dataclass(frozen=True, slots=True)
class DecisionFact:
    """``{protocol: tool_recovery_v1, operationId, disposition, reasonCode, evidenceEventIds,
    outcomeEventId (completed only)}``."""

    operation_id: str
    disposition: RecoveryDisposition
    reason_code: RecoveryReasonCode
    evidence_event_ids: tuple[str, ...]
    outcome_event_id: str | None = None

    def to_tool_recovery(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "protocol": RECOVERY_PROTOCOL,
            "operationId": self.operation_id,
            "disposition": str(self.disposition),
            "reasonCode": str(self.reason_code),
            "evidenceEventIds": list(self.evidence_event_ids),
        }
        if self.outcome_event_id is not None:
            payload["outcomeEventId"] = self.outcome_event_id
        return {"kind": RECOVERY_DECISION_KIND, "version": FACT_VERSION, "payload": payload}


def _envelope_payload(tool_recovery: object, kind: str) -> Mapping[str, Any] | None:
    if not isinstance(tool_recovery, Mapping) or set(tool_recovery) != {
        "kind",
        "version",
        "payload",
    }:
        return None
    version = tool_recovery["version"]
    if tool_recovery["kind"] != kind or version != FACT_VERSION or isinstance(version, bool):
        return None
    payload = tool_recovery["payload"]
    return payload if isinstance(payload, Mapping) else None


def _non_empty(value: object) -> bool:
    return isinstance(value, str) and value != ""


_RECONCILE_KEYS = frozenset(
    {"protocol", "operationId", "observation", "observationSchema", "observationDigest"}
)


def parse_reconcile_fact(tool_recovery: object) -> ReconcileFact | None:
    """The reconcile fact in an ``actions.toolRecovery`` value, or None if it is not exactly
    one. A state observation (``state_identity_v1``) takes the file observations only; the
    user's attestation (``user_attestation_v1``) takes the attested ones, its fields, and a
    digest that must be theirs."""
    payload = _envelope_payload(tool_recovery, RECONCILE_RESULT_KIND)
    if payload is None or not set(payload) >= _RECONCILE_KEYS:
        return None
    observation = payload["observation"]
    digest = payload["observationDigest"]
    if (
        payload["protocol"] != RECONCILE_PROTOCOL
        or not _non_empty(payload["operationId"])
        or observation not in ReconcileObservation.__members__.values()
        or not isinstance(digest, str)
        or _DIGEST.fullmatch(digest) is None
    ):
        return None
    observed = ReconcileObservation(observation)
    schema = payload["observationSchema"]
    if schema == OBSERVATION_SCHEMA:
        if set(payload) != _RECONCILE_KEYS or observed in ATTESTED_REASONS:
            return None
        return ReconcileFact(payload["operationId"], observed, digest)
    if (
        schema != ATTESTATION_SCHEMA
        or observed not in ATTESTED_REASONS
        or not set(payload) - _RECONCILE_KEYS <= ATTESTATION_FIELDS
    ):
        return None
    attestation = attestation_from_payload(payload)
    if attestation is None or attestation.digest() != digest:
        return None
    return ReconcileFact(payload["operationId"], observed, digest, attestation)


_COMPLETED_KEYS = frozenset(
    {"protocol", "operationId", "disposition", "reasonCode", "outcomeEventId", "evidenceEventIds"}
)
_PARKED_KEYS = _COMPLETED_KEYS - {"outcomeEventId"}
_COMPLETED_REASONS = frozenset(
    {RecoveryReasonCode.RECONCILE_MATCHES_EXPECTED_STATE, *ATTESTED_REASONS.values()}
)


def parse_decision_fact(tool_recovery: object) -> DecisionFact | None:
    """The decision fact in an ``actions.toolRecovery`` value, or None if it is not exactly
    one."""
    payload = _envelope_payload(tool_recovery, RECOVERY_DECISION_KIND)
    if payload is None or payload.get("protocol") != RECOVERY_PROTOCOL:
        return None
    if not _non_empty(payload.get("operationId")):
        return None
    evidence = payload.get("evidenceEventIds")
    if (
        not isinstance(evidence, list)
        or not evidence
        or not all(_non_empty(item) for item in evidence)
        or len(set(evidence)) != len(evidence)
    ):
        return None
    disposition = payload.get("disposition")
    reason = payload.get("reasonCode")
    if not isinstance(reason, str):
        return None
    if disposition == RecoveryDisposition.COMPLETED:
        if (
            set(payload) != _COMPLETED_KEYS
            or reason not in _COMPLETED_REASONS
            or not _non_empty(payload["outcomeEventId"])
        ):
            return None
        outcome: str | None = payload["outcomeEventId"]
    elif disposition == RecoveryDisposition.PARKED:
        if set(payload) != _PARKED_KEYS or reason not in PARKED_REASONS.values():
            return None
        outcome = None
    else:
        return None
    return DecisionFact(
        payload["operationId"],
        RecoveryDisposition(disposition),
        RecoveryReasonCode(reason),
        tuple(evidence),
        outcome,
    )


# ---- bundle validation ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OperationIdentity:
    """What the bundle is checked against: the operation as T1 recorded it."""

    operation_id: str
    invocation_id: str
    run_id: str
    turn_id: str
    provider_tool_call_id: str
    tool_name: str
    canonical_args_hash: str
    recovery_mode: str
    call_event_id: str
    dispatch_event_id: str

    @staticmethod
    def from_dispatch(call: RuntimeEvent, dispatch: RuntimeEvent) -> OperationIdentity | None:
        """The identity as the ledger states it (execution identity and T1 fields from the
        dispatch); None when ``dispatch`` carries no ``toolDispatch``."""
        actions = dispatch.get("actions")
        fact = actions.get("toolDispatch") if actions is not None else None
        if fact is None:
            return None
        return OperationIdentity(
            operation_id=fact["operationId"],
            invocation_id=dispatch["invocationId"],
            run_id=dispatch["runId"],
            turn_id=dispatch["turnId"],
            provider_tool_call_id=fact["providerToolCallId"],
            tool_name=fact["toolName"],
            canonical_args_hash=fact["canonicalArgsHash"],
            recovery_mode=fact["recoveryMode"],
            call_event_id=call["id"],
            dispatch_event_id=dispatch["id"],
        )


@dataclass(frozen=True, slots=True)
class BundleVerdict:
    ok: bool
    code: BundleCode | None = None
    message: str = ""
    reconcile: ReconcileFact | None = None
    decision: DecisionFact | None = None


def _refused(code: BundleCode, message: str) -> BundleVerdict:
    return BundleVerdict(False, code, message)


def _same_execution(event: Mapping[str, Any], identity: OperationIdentity) -> bool:
    return (
        event.get("partial") is False
        and event.get("invocationId") == identity.invocation_id
        and event.get("runId") == identity.run_id
        and event.get("turnId") == identity.turn_id
    )


def _bound_to(event: Mapping[str, Any], identity: OperationIdentity) -> bool:
    refs = event.get("refs") or {}
    return (
        refs.get("operationId") == identity.operation_id
        and refs.get("toolCallId") == identity.provider_tool_call_id
    )


def _tool_recovery(event: Mapping[str, Any]) -> object:
    actions = event.get("actions") or {}
    return actions.get("toolRecovery")


def validate_recovery_bundle(  # noqa: PLR0917 (the bundle's facts, in ledger order)
    operation: OperationIdentity,
    call: RuntimeEvent,
    dispatch: RuntimeEvent,
    reconcile: RuntimeEvent,
    outcome: RuntimeEvent | None,
    decision: RuntimeEvent,
) -> BundleVerdict:
    """Check one bundle against its operation; the first failing rule gives the code."""
    call_map = cast(Mapping[str, Any], call)
    content = call_map.get("content") or {}
    if (
        call["id"] != operation.call_event_id
        or content.get("kind") != "function_call"
        or content.get("id") != operation.provider_tool_call_id
        or content.get("name") != operation.tool_name
        or classify_lane(call_map) is not Lane.FUNCTION_CALL
        or not _same_execution(call_map, operation)
    ):
        return _refused(BundleCode.CALL_IDENTITY_CONFLICT, "the call is not the operation's call")
    try:
        recomputed: str | None = canonical_args_hash(content["name"], content["args"])
    except LedgerError:
        recomputed = None
    if recomputed != operation.canonical_args_hash:
        return _refused(
            BundleCode.CANONICAL_ARGS_HASH_CONFLICT,
            "the argument hash does not match the canonical function call",
        )
    session = call["sessionId"]
    dispatch_map = cast(Mapping[str, Any], dispatch)
    fact = (dispatch_map.get("actions") or {}).get("toolDispatch")
    if (
        dispatch["id"] != operation.dispatch_event_id
        or not isinstance(fact, Mapping)
        or fact.get("operationId") != operation.operation_id
        or fact.get("providerToolCallId") != operation.provider_tool_call_id
        or fact.get("toolName") != operation.tool_name
        or fact.get("canonicalArgsHash") != operation.canonical_args_hash
        or fact.get("recoveryMode") != operation.recovery_mode
        or classify_lane(dispatch_map) is not Lane.TOOL_DISPATCH
        or not _same_execution(dispatch_map, operation)
        or dispatch["sessionId"] != session
        or not _bound_to(dispatch_map, operation)
    ):
        return _refused(
            BundleCode.DISPATCH_IDENTITY_CONFLICT, "the dispatch is not the operation's dispatch"
        )
    reconcile_map = cast(Mapping[str, Any], reconcile)
    decision_map = cast(Mapping[str, Any], decision)
    observed = parse_reconcile_fact(_tool_recovery(reconcile_map))
    if operation.recovery_mode != "reconcile" and (
        observed is None or observed.attestation is None
    ):
        # The user's attestation is valid for any recoveryMode; everything else needs reconcile.
        return _refused(
            BundleCode.RECOVERY_MODE_UNSUPPORTED,
            f"recoveryMode {operation.recovery_mode} does not accept a recovery bundle",
        )
    if observed is None:
        return _refused(BundleCode.RECONCILE_FACT_INVALID, "not a reconcile observation")
    decided = parse_decision_fact(_tool_recovery(decision_map))
    if decided is None:
        return _refused(BundleCode.DECISION_FACT_INVALID, "not a recovery decision")
    for event, lane in (
        (reconcile_map, Lane.RECONCILE_RESULT),
        (decision_map, Lane.RECOVERY_DECISION),
    ):
        if (
            classify_lane(event) is not lane
            or not _same_execution(event, operation)
            or event.get("sessionId") != session
            or not _bound_to(event, operation)
        ):
            return _refused(
                BundleCode.RECOVERY_FACT_IDENTITY_CONFLICT,
                f"recovery fact {event.get('id')} is not bound to the operation",
            )
    if (
        observed.operation_id != operation.operation_id
        or decided.operation_id != operation.operation_id
    ):
        return _refused(
            BundleCode.OPERATION_IDENTITY_CONFLICT, "a recovery fact names another operation"
        )
    refusal = _check_disposition(operation, session, observed, decided, outcome)
    if refusal is not None:
        return refusal
    expected = [operation.call_event_id, operation.dispatch_event_id, reconcile["id"]]
    if decided.disposition is RecoveryDisposition.COMPLETED and outcome is not None:
        expected.append(outcome["id"])
    if list(decided.evidence_event_ids) != expected:
        return _refused(
            BundleCode.EVIDENCE_ORDER_CONFLICT,
            "evidenceEventIds must be exactly [call, dispatch, reconcile(, outcome)]",
        )
    return BundleVerdict(True, reconcile=observed, decision=decided)


def _check_disposition(
    operation: OperationIdentity,
    session: str,
    observed: ReconcileFact,
    decided: DecisionFact,
    outcome: RuntimeEvent | None,
) -> BundleVerdict | None:
    if decided.disposition is RecoveryDisposition.PARKED:
        if outcome is not None:
            return _refused(BundleCode.OUTCOME_FOR_PARKED, "a parked decision has no outcome")
        if PARKED_REASONS.get(observed.observation) != decided.reason_code:
            return _refused(
                BundleCode.RECONCILE_DECISION_CONFLICT,
                f"observation {observed.observation} does not support {decided.reason_code}",
            )
        return None
    if outcome is None:
        return _refused(BundleCode.OUTCOME_REQUIRED, "a completed decision needs its outcome")
    outcome_map = cast(Mapping[str, Any], outcome)
    content = outcome_map.get("content") or {}
    if (
        outcome["sessionId"] != session
        or classify_lane(outcome_map) is not Lane.FUNCTION_RESPONSE
        or content.get("kind") != "function_response"
        or content.get("id") != operation.provider_tool_call_id
        or content.get("name") != operation.tool_name
        or not _bound_to(outcome_map, operation)
        or not _same_execution(outcome_map, operation)
    ):
        return _refused(
            BundleCode.OUTCOME_IDENTITY_CONFLICT, "the outcome is not the operation's response"
        )
    if observed.attestation is None and content.get("isError"):
        return _refused(BundleCode.OUTCOME_NOT_SUCCESSFUL, "a recovered outcome is not an error")
    if decided.outcome_event_id != outcome["id"]:
        return _refused(
            BundleCode.OUTCOME_REFERENCE_CONFLICT, "outcomeEventId does not name the outcome"
        )
    expected_reason = (
        RecoveryReasonCode.RECONCILE_MATCHES_EXPECTED_STATE
        if observed.observation is ReconcileObservation.MATCHES_EXPECTED_STATE
        else ATTESTED_REASONS.get(observed.observation)
    )
    if expected_reason != decided.reason_code:
        return _refused(
            BundleCode.RECONCILE_DECISION_CONFLICT,
            f"observation {observed.observation} does not support completed"
            f" with {decided.reason_code}",
        )
    if observed.attestation is not None and not outcome_matches(
        observed.observation, observed.attestation, content
    ):
        return _refused(
            BundleCode.ATTESTATION_OUTCOME_CONFLICT,
            "the recovered outcome does not say what the user attested",
        )
    return None


# ---- interpretation of a scanned operation ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecoveryAbsent:
    kind: Literal["absent"] = "absent"


@dataclass(frozen=True, slots=True)
class RecoveryCorruption:
    code: BundleCode
    message: str
    kind: Literal["corruption"] = "corruption"


@dataclass(frozen=True, slots=True)
class RecoveryValid:
    """The bundle that settles the operation. ``confirmed``: the parked bundle (reconcile,
    decision) of a file write recovery found untouched, which this bundle (the user's
    attestation that it did not run) confirmed; None for a single bundle."""

    reconcile: ReconcileFact
    decision: DecisionFact
    reconcile_event: RuntimeEvent
    decision_event: RuntimeEvent
    outcome_event: RuntimeEvent | None
    confirmed: tuple[RuntimeEvent, RuntimeEvent] | None = None
    kind: Literal["valid"] = "valid"


RecoveryInterpretation = RecoveryAbsent | RecoveryCorruption | RecoveryValid


def interpret_scanned_recovery(
    op: ScannedOperation, event_order: Mapping[str, int] | None = None
) -> RecoveryInterpretation:
    """What an operation's recovery tail means. ``event_order`` maps event id to ledger
    position; without it the positions the scanner recorded are used."""
    if not op.reconcile_events and not op.decision_events:
        return RecoveryAbsent()
    call, dispatch = op.call_event, op.dispatch_event
    identity = (
        OperationIdentity.from_dispatch(call, dispatch)
        if call is not None and dispatch is not None
        else None
    )
    order = op.event_positions if event_order is None else event_order
    if (
        len(op.reconcile_events) == 2
        and len(op.decision_events) == 2
        and op.operation_id is not None
        and identity is not None
        and call is not None
        and dispatch is not None
    ):
        return _confirmed_finding(op, identity, call, dispatch, order)
    if (
        len(op.reconcile_events) != 1
        or len(op.decision_events) != 1
        or op.operation_id is None
        or identity is None
        or call is None
        or dispatch is None
    ):
        return RecoveryCorruption(
            BundleCode.RECOVERY_FACT_SHAPE_CONFLICT,
            "an operation's recovery needs its call, its dispatch, one reconcile and one decision",
        )
    reconcile, decision = op.reconcile_events[0], op.decision_events[0]
    outcome = op.response_event
    verdict = validate_recovery_bundle(identity, call, dispatch, reconcile, outcome, decision)
    if not verdict.ok or verdict.reconcile is None or verdict.decision is None:
        return RecoveryCorruption(
            verdict.code or BundleCode.RECOVERY_FACT_SHAPE_CONFLICT, verdict.message
        )
    chain = [call, dispatch, reconcile, *([outcome] if outcome is not None else []), decision]
    positions = [order.get(event["id"]) for event in chain]
    if any(position is None for position in positions) or any(
        cast(int, a) >= cast(int, b) for a, b in itertools.pairwise(positions)
    ):
        return RecoveryCorruption(
            BundleCode.EVENT_ORDER_CONFLICT,
            "recovery facts violate the causal order call < dispatch < reconcile < outcome "
            "< decision",
        )
    return RecoveryValid(verdict.reconcile, verdict.decision, reconcile, decision, outcome)


def _in_order(chain: list[RuntimeEvent], order: Mapping[str, int]) -> bool:
    positions = [order.get(event["id"]) for event in chain]
    return all(position is not None for position in positions) and all(
        cast(int, a) < cast(int, b) for a, b in itertools.pairwise(positions)
    )


def _confirmed_finding(
    op: ScannedOperation,
    identity: OperationIdentity,
    call: RuntimeEvent,
    dispatch: RuntimeEvent,
    order: Mapping[str, int],
) -> RecoveryInterpretation:
    """Two bundles: valid only as a file write recovery found untouched (parked,
    ``reconcile_matches_prior_state``) followed by the user's attestation that it did not run
    (docs/design/recovery.md section 8: the user confirms recovery's finding in one answer). Parked
    stays final for every other finding and every other answer."""
    position = lambda event: order.get(event["id"], -1)  # noqa: E731
    reconciles = sorted(op.reconcile_events, key=position)
    decisions = sorted(op.decision_events, key=position)
    found = validate_recovery_bundle(identity, call, dispatch, reconciles[0], None, decisions[0])
    if (
        not found.ok
        or found.reconcile is None
        or found.decision is None
        or found.reconcile.observation is not ReconcileObservation.MATCHES_PRIOR_STATE
        or found.decision.disposition is not RecoveryDisposition.PARKED
    ):
        return RecoveryCorruption(
            BundleCode.RECOVERY_FACT_SHAPE_CONFLICT,
            "a second recovery bundle only confirms a file write recovery found not done",
        )
    outcome = op.response_event
    said = validate_recovery_bundle(identity, call, dispatch, reconciles[1], outcome, decisions[1])
    if not said.ok or said.reconcile is None or said.decision is None:
        return RecoveryCorruption(
            said.code or BundleCode.RECOVERY_FACT_SHAPE_CONFLICT, said.message
        )
    if said.reconcile.observation is not ReconcileObservation.USER_ATTESTED_NOT_RUN:
        return RecoveryCorruption(
            BundleCode.RECONCILE_DECISION_CONFLICT,
            "recovery found the file as it was before the write: only 'it did not run' "
            "confirms that",
        )
    assert outcome is not None  # a completed attestation has its outcome (validated above)
    chain = [call, dispatch, reconciles[0], decisions[0], reconciles[1], outcome, decisions[1]]
    if not _in_order(chain, order):
        return RecoveryCorruption(
            BundleCode.EVENT_ORDER_CONFLICT,
            "recovery facts violate the causal order call < dispatch < recovery's finding < "
            "the user's confirmation",
        )
    return RecoveryValid(
        said.reconcile,
        said.decision,
        reconciles[1],
        decisions[1],
        outcome,
        (reconciles[0], decisions[0]),
    )
