"""Builders of RuntimeEvent v1 events for tests (and the ledger benchmark).

Every builder returns a decoded event (it goes through ``decode_event``, so a builder can never
hand a test something the decoder would refuse) and takes keyword arguments for whatever a test
wants to vary. Tool builders derive ids and hashes the way the runtime does: the dispatch carries
the real ``canonicalArgsHash`` and ``operationId``; dispatch/response ids are
``<operationId>_dispatch`` / ``<operationId>_response``.

To build an event a decoder accepts but a rule refuses, use ``with_changes`` (deep-merge keys,
``DROP`` removes one) on a built event.

Typical clean tool turn::

    ids = RunIds()
    call = call_event(ids=ids)
    dispatch = dispatch_event(call)
    events = [user_text(ids=ids, marker=True), call, dispatch, bound_response(call), terminal(ids)]
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from runtime.ledger.attestation import ATTESTED_REASONS, Attestation, attestation_result
from runtime.ledger.canonical_codec import (
    canonical_args_hash,
    canonical_bytes,
    operation_id,
)
from runtime.ledger.codes import ReconcileObservation, RecoveryDisposition, RecoveryReasonCode
from runtime.ledger.event_model import RuntimeEvent, decode_event
from runtime.ledger.recovery_bundle import PARKED_REASONS, DecisionFact, ReconcileFact

DIGEST_A = "sha256:" + "ab" * 32
DROP: Any = object()
"""Marker for ``with_changes``: remove this key."""


@dataclass(frozen=True, slots=True)
class RunIds:
    """The execution identity shared by every event of one run."""

    session_id: str = "sess-1"
    invocation_id: str = "inv-1"
    run_id: str = "run-1"
    turn_id: str = "turn-1"

    def envelope(self, event_id: str, role: str, author: str, ts: int) -> dict[str, Any]:
        return {
            "id": event_id,
            "sessionId": self.session_id,
            "invocationId": self.invocation_id,
            "runId": self.run_id,
            "turnId": self.turn_id,
            "ts": ts,
            "partial": False,
            "role": role,
            "author": author,
        }


DEFAULT_IDS = RunIds()
MARKER_ACTIONS = {"runtimeProtocol": {"toolBoundary": "t1_after_preflight_v1"}}
"""The T1 protocol marker a run's first event carries, as its ``actions``."""


def ids_of(event: Mapping[str, Any]) -> RunIds:
    return RunIds(event["sessionId"], event["invocationId"], event["runId"], event["turnId"])


def _finish(event: dict[str, Any], extra: Mapping[str, Any] | None) -> RuntimeEvent:
    if extra:
        event = _merge(event, extra)
    return decode_event(event)


def _merge(base: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(dict(base))
    for key, value in changes.items():
        if value is DROP:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def with_changes(event: Mapping[str, Any], **changes: Any) -> RuntimeEvent:
    """A copy of ``event`` with ``changes`` deep-merged (``DROP`` removes a key). Not decoded,
    so the result may break any rule; nested dicts merge, everything else replaces."""
    return cast(RuntimeEvent, _merge(event, changes))


# ---- ordinary events --------------------------------------------------------------------------


def user_text(
    text: str = "please do it",
    *,
    event_id: str = "evt-user",
    ids: RunIds = DEFAULT_IDS,
    ts: int = 1,
    marker: bool = False,
    extra: Mapping[str, Any] | None = None,
) -> RuntimeEvent:
    event = ids.envelope(event_id, "user", "user", ts)
    event["content"] = {"kind": "text", "text": text}
    if marker:
        event["actions"] = copy.deepcopy(MARKER_ACTIONS)
    return _finish(event, extra)


def model_text(
    text: str = "done",
    *,
    event_id: str = "evt-model",
    ids: RunIds = DEFAULT_IDS,
    ts: int = 2,
    partial: bool = False,
    extra: Mapping[str, Any] | None = None,
) -> RuntimeEvent:
    event = ids.envelope(event_id, "model", "agent", ts)
    event["partial"] = partial
    event["content"] = {"kind": "text", "text": text}
    return _finish(event, extra)


def terminal(
    ids: RunIds = DEFAULT_IDS,
    *,
    event_id: str = "evt-terminal",
    status: str = "completed",
    ts: int = 99,
    state_delta: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> RuntimeEvent:
    event = ids.envelope(event_id, "system", "system", ts)
    event["status"] = status
    delta = dict(state_delta) if state_delta is not None else {"stopReason": "end_turn"}
    event["actions"] = {"endInvocation": True, "stateDelta": delta}
    return _finish(event, extra)


# ---- tool facts -------------------------------------------------------------------------------


def call_event(
    call_id: str = "call-1",
    tool_name: str = "Write",
    args: Any = None,
    *,
    event_id: str | None = None,
    ids: RunIds = DEFAULT_IDS,
    ts: int = 2,
    refs: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> RuntimeEvent:
    """A function_call; its id defaults to ``<operationId>_call``."""
    if args is None:
        args = {"path": "notes.txt", "content": "after"}
    op = operation_id(ids.invocation_id, call_id)
    event = ids.envelope(event_id or f"{op}_call", "model", "agent", ts)
    event["content"] = {"kind": "function_call", "id": call_id, "name": tool_name, "args": args}
    if refs is not None:
        event["refs"] = dict(refs)
    return _finish(event, extra)


def operation_of(call: Mapping[str, Any]) -> str:
    return operation_id(call["invocationId"], call["content"]["id"])


def dispatch_event(
    call: Mapping[str, Any],
    *,
    recovery_mode: str = "reconcile",
    event_id: str | None = None,
    ts: int | None = None,
    evidence: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> RuntimeEvent:
    """The T1 dispatch of ``call`` with the real hash and operation id."""
    content = call["content"]
    op = operation_of(call)
    event = ids_of(call).envelope(
        event_id or f"{op}_dispatch", "system", "system", ts if ts is not None else call["ts"] + 1
    )
    fact: dict[str, Any] = {
        "protocol": "t1_after_preflight_v1",
        "operationId": op,
        "providerToolCallId": content["id"],
        "toolName": content["name"],
        "canonicalArgsHash": canonical_args_hash(content["name"], content["args"]),
        "recoveryMode": recovery_mode,
    }
    if evidence is not None:
        fact["evidence"] = dict(evidence)
    event["actions"] = {"toolDispatch": fact}
    event["refs"] = {"operationId": op, "toolCallId": content["id"]}
    return _finish(event, extra)


def response_event(
    call: Mapping[str, Any],
    result: Any = "ok",
    *,
    event_id: str | None = None,
    ts: int | None = None,
    is_error: bool | None = None,
    duration_ms: int | None = None,
    extra: Mapping[str, Any] | None = None,
) -> RuntimeEvent:
    """An *unbound* function_response (a pre-T1 synthetic result: denied, rejected...)."""
    content = call["content"]
    event = ids_of(call).envelope(
        event_id or f"{call['id']}_result", "tool", "tool", ts if ts is not None else call["ts"] + 2
    )
    body: dict[str, Any] = {
        "kind": "function_response",
        "id": content["id"],
        "name": content["name"],
        "result": result,
    }
    if is_error is not None:
        body["isError"] = is_error
    event["content"] = body
    if duration_ms is not None:
        event["actions"] = {"stateDelta": {"durationMs": duration_ms}}
    event["refs"] = {"toolCallId": content["id"]}
    return _finish(event, extra)


def bound_response(
    call: Mapping[str, Any],
    result: Any = "ok",
    *,
    event_id: str | None = None,
    ts: int | None = None,
    is_error: bool | None = None,
    duration_ms: int | None = 42,
    extra: Mapping[str, Any] | None = None,
) -> RuntimeEvent:
    """The T2 outcome of ``call``'s operation (``refs.operationId`` + ``refs.toolCallId``)."""
    op = operation_of(call)
    bound = {"refs": {"operationId": op, "toolCallId": call["content"]["id"]}}
    merged = _merge(bound, extra) if extra else bound
    return response_event(
        call,
        result,
        event_id=event_id or f"{op}_response",
        ts=ts,
        is_error=is_error,
        duration_ms=duration_ms,
        extra=merged,
    )


def _recovery_event(
    call: Mapping[str, Any], event_id: str, ts: int, tool_recovery: dict[str, Any]
) -> dict[str, Any]:
    event = ids_of(call).envelope(event_id, "system", "system", ts)
    event["actions"] = {"toolRecovery": tool_recovery}
    event["refs"] = {"operationId": operation_of(call), "toolCallId": call["content"]["id"]}
    return event


def reconcile_event(
    call: Mapping[str, Any],
    observation: str = "diverged",
    *,
    event_id: str | None = None,
    ts: int = 50,
    digest: str = DIGEST_A,
    extra: Mapping[str, Any] | None = None,
) -> RuntimeEvent:
    fact = ReconcileFact(operation_of(call), ReconcileObservation(observation), digest)
    event_id = event_id or f"{operation_of(call)}_reconcile"
    return _finish(_recovery_event(call, event_id, ts, fact.to_tool_recovery()), extra)


def decision_event(
    call: Mapping[str, Any],
    dispatch: Mapping[str, Any],
    reconcile: Mapping[str, Any],
    outcome: Mapping[str, Any] | None = None,
    *,
    event_id: str | None = None,
    ts: int = 52,
    extra: Mapping[str, Any] | None = None,
) -> RuntimeEvent:
    """The decision that fits ``reconcile``: completed (with ``outcome``) when the observation
    matches the expected state, parked with the mapped reason otherwise."""
    observation = ReconcileObservation(
        reconcile["actions"]["toolRecovery"]["payload"]["observation"]
    )
    evidence = [call["id"], dispatch["id"], reconcile["id"]]
    if observation is ReconcileObservation.MATCHES_EXPECTED_STATE:
        if outcome is None:
            raise ValueError("a completed decision needs its outcome event")
        fact = DecisionFact(
            operation_of(call),
            RecoveryDisposition.COMPLETED,
            RecoveryReasonCode.RECONCILE_MATCHES_EXPECTED_STATE,
            (*evidence, outcome["id"]),
            outcome["id"],
        )
    else:
        fact = DecisionFact(
            operation_of(call),
            RecoveryDisposition.PARKED,
            PARKED_REASONS[observation],
            tuple(evidence),
        )
    event_id = event_id or f"{operation_of(call)}_decision"
    return _finish(_recovery_event(call, event_id, ts, fact.to_tool_recovery()), extra)


def attestation_bundle(
    call: Mapping[str, Any],
    dispatch: Mapping[str, Any],
    ran: bool = True,
    *,
    ts: int = 60,
    attested_at: int = 1_764_605_000_000,
    owner_epoch: int = 2,
    note: str | None = None,
) -> list[RuntimeEvent]:
    """The user's attestation of ``call``'s unknown outcome: reconcile, outcome, decision."""
    attestation = Attestation(attested_at, owner_epoch, note)
    fact = ReconcileFact.attested(operation_of(call), ran, attestation)
    op = operation_of(call)
    reconcile = _finish(
        _recovery_event(call, f"{op}_attest_reconcile", ts, fact.to_tool_recovery()), None
    )
    outcome = bound_response(
        call,
        attestation_result(ran, attestation),
        event_id=f"{op}_attest_outcome",
        ts=ts + 1,
        is_error=not ran,
        duration_ms=None,
    )
    decision = DecisionFact(
        op,
        RecoveryDisposition.COMPLETED,
        ATTESTED_REASONS[fact.observation],
        (call["id"], dispatch["id"], reconcile["id"], outcome["id"]),
        outcome["id"],
    )
    decided = _finish(
        _recovery_event(call, f"{op}_attest_decision", ts + 2, decision.to_tool_recovery()), None
    )
    return [reconcile, outcome, decided]


# ---- whole ledgers ----------------------------------------------------------------------------


def tool_turn(
    call_id: str,
    *,
    ids: RunIds = DEFAULT_IDS,
    ts: int = 10,
    ending: str = "response",
    args: Any = None,
    tool_name: str = "Write",
) -> list[RuntimeEvent]:
    """The events of one tool call. ``ending``: ``response`` (call, dispatch, T2),
    ``synthetic`` (call + unbound response, no dispatch), ``dangling`` (call + dispatch),
    ``parked`` (call, dispatch, reconcile diverged, parked decision) or ``completed``
    (call, dispatch, reconcile, recovered outcome, completed decision)."""
    call = call_event(call_id, tool_name, args, ids=ids, ts=ts)
    if ending == "synthetic":
        return [call, response_event(call, "denied", is_error=True, ts=ts + 1)]
    dispatch = dispatch_event(call, ts=ts + 1)
    if ending == "response":
        return [call, dispatch, bound_response(call, ts=ts + 2)]
    if ending == "dangling":
        return [call, dispatch]
    if ending == "parked":
        reconcile = reconcile_event(call, "diverged", ts=ts + 2)
        return [call, dispatch, reconcile, decision_event(call, dispatch, reconcile, ts=ts + 3)]
    if ending == "completed":
        reconcile = reconcile_event(call, "matches_expected_state", ts=ts + 2)
        outcome = bound_response(call, ts=ts + 3, duration_ms=None)
        decision = decision_event(call, dispatch, reconcile, outcome, ts=ts + 4)
        return [call, dispatch, reconcile, outcome, decision]
    if ending in ATTESTED_ENDINGS:
        bash = call_event(call_id, "bash", {"command": f"make {call_id}"}, ids=ids, ts=ts)
        sent = dispatch_event(bash, recovery_mode="never_auto_retry", ts=ts + 1)
        ran = ending == "attested_ran"
        note = "checked the log" if ran else None
        return [bash, sent, *attestation_bundle(bash, sent, ran, ts=ts + 2, note=note)]
    raise ValueError(f"unknown ending {ending!r}")


ENDINGS = ("response", "synthetic", "dangling", "parked", "completed")
ATTESTED_ENDINGS = ("attested_ran", "attested_not_run")
"""Calls settled by the user's attestation (``user_attestation_v1``); not in ``ENDINGS`` so
ledgers built from ``ENDINGS`` alone stay as they were."""
ALL_ENDINGS = ENDINGS + ATTESTED_ENDINGS


def clean_ledger(
    tool_calls: int = 3, *, ids: RunIds = DEFAULT_IDS, endings: Iterable[str] | None = None
) -> list[RuntimeEvent]:
    """A scanner-clean run: marked user event, tool turns (endings cycle through ``ENDINGS``
    unless given), model text, terminal event."""
    chosen = (
        list(endings)
        if endings is not None
        else [ENDINGS[index % len(ENDINGS)] for index in range(tool_calls)]
    )
    events: list[RuntimeEvent] = [user_text(ids=ids, marker=True)]
    ts = 10
    for index, ending in enumerate(chosen):
        events.extend(tool_turn(f"call-{index}", ids=ids, ts=ts, ending=ending))
        ts += 10
    events.append(model_text(ids=ids, ts=ts))
    events.append(terminal(ids, ts=ts + 1))
    return events


def to_jsonl(events: Iterable[Mapping[str, Any]]) -> bytes:
    """Canonical bytes, one event per line, each line ending in a newline."""
    return b"".join(canonical_bytes(cast(RuntimeEvent, event)) + b"\n" for event in events)


SECOND_INVOCATION = RunIds("sess-1", "inv-2", "run-2", "turn-2")


def _with_kind(events: list[RuntimeEvent], key: str) -> list[RuntimeEvent]:
    return [event for event in events if key in (event.get("actions") or {})]


def _claimed_operation_id(draw: Any, events: list[RuntimeEvent]) -> str:
    """An operation id some dispatch of ``events`` binds, or one no event names."""
    from hypothesis import strategies as st

    bound = [
        event["actions"]["toolDispatch"]["operationId"]
        for event in events
        if "toolDispatch" in (event.get("actions") or {})
    ]
    return cast(str, draw(st.sampled_from([*bound, "toolop_nobody"])))


def orphan_dispatch_copy(
    dispatch: Mapping[str, Any], tool_call_id: str, operation_id: str
) -> RuntimeEvent:
    """``dispatch`` turned into the dispatch of a call no event makes (``tool_call_id``),
    claiming ``operation_id`` (its own or another operation's), with an id of its own."""
    return with_changes(
        dispatch,
        id=f"{dispatch['id']}-{tool_call_id}",
        actions={"toolDispatch": {"providerToolCallId": tool_call_id, "operationId": operation_id}},
        refs={"toolCallId": tool_call_id, "operationId": operation_id},
    )


def stray_recovery_copy(fact: Mapping[str, Any], operation_id: str, suffix: str) -> RuntimeEvent:
    """The recovery fact ``fact`` (reconcile or decision) with an id of its own, claiming
    ``operation_id``."""
    return with_changes(
        fact,
        id=f"{fact['id']}-{suffix}",
        actions={"toolRecovery": {"payload": {"operationId": operation_id}}},
        refs={"operationId": operation_id},
    )


MIXED_EDITS = ("dup", "drop", "swap", "mark", "spine", "orphan", "stray")
"""Every edit ``mixed_ledger`` knows."""


def mixed_ledger(
    draw: Any,
    *,
    edits: tuple[str, ...] = ("dup", "drop", "swap", "orphan", "stray"),
    endings: tuple[str, ...] = ENDINGS,
) -> list[RuntimeEvent]:
    """For hypothesis (``draw`` from ``st.data()``): clean turns in two invocations, then up to
    six random edits: ``dup`` (an event repeated elsewhere), ``drop``, ``swap`` (two events trade
    places), ``mark`` (an event given the T1 marker), ``spine`` (an event moved to another
    turn), ``orphan`` (a copy of a dispatch for a call no event makes, claiming a bound or an
    unknown operation id, inserted anywhere) and ``stray`` (a copy of a recovery fact claiming a
    bound or an unknown operation id, inserted anywhere)."""
    from hypothesis import strategies as st

    events: list[RuntimeEvent] = []
    for index, ids in enumerate((DEFAULT_IDS, SECOND_INVOCATION)):
        chosen = draw(st.lists(st.sampled_from(endings), max_size=4))
        events.extend(clean_ledger(ids=ids, endings=chosen)[: -1 if index else None])
    for count in range(draw(st.integers(0, 6))):
        edit = draw(st.sampled_from(edits))
        i = draw(st.integers(0, len(events) - 1))
        j = draw(st.integers(0, len(events) - 1))
        if edit in ("orphan", "stray"):
            key = "toolDispatch" if edit == "orphan" else "toolRecovery"
            sources = _with_kind(events, key)
            if sources:
                source = draw(st.sampled_from(sources))
                claimed = _claimed_operation_id(draw, events)
                events.insert(
                    j,
                    orphan_dispatch_copy(source, f"orphan-{count}", claimed)
                    if edit == "orphan"
                    else stray_recovery_copy(source, claimed, f"stray-{count}"),
                )
        elif edit == "dup":
            events.insert(j, events[i])
        elif edit == "drop" and len(events) > 1:
            events.pop(i)
        elif edit == "mark":
            events[i] = with_changes(events[i], actions=MARKER_ACTIONS)
        elif edit == "spine":
            events[i] = with_changes(events[i], turnId="turn-moved")
        else:
            events[i], events[j] = events[j], events[i]
    return events
