"""Prospective validation of a write against the ledger (docs/design/ledger.md section 3,
last paragraph).

Every writer calls this before committing, with the ledger's current scanner state and its
candidates:

1. a ledger that already has an issue refuses everything, even exact retries (its first issue);
2. a candidate whose id is stored is an exact retry when its canonical bytes equal the stored
   ones (it is dropped), otherwise ``duplicate_event_id``;
3. the remaining candidates must have the writer's lane shape (``lane_rules``);
4. the scanner must raise nothing when the candidates are fed after the ledger;
5. an operation whose recovery tail the candidates touch must still interpret as valid (a bundle
   code otherwise): this is where "only ``recoveryMode: reconcile`` accepts a bundle" and "parked
   is final" are enforced.

``validate_candidates`` works on an incremental ``ToolLedgerScanner`` and a stored-bytes lookup, so
its cost does not grow with history; ``validate_transition`` is the batch form over event lists.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from runtime.ledger.canonical_codec import canonical_bytes
from runtime.ledger.codes import BundleCode, ScanIssueCode, TransitionKind, WriterRejectionCode
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.lane_rules import check_transition_shape
from runtime.ledger.recovery_bundle import RecoveryCorruption, interpret_scanned_recovery
from runtime.ledger.tool_ledger_scanner import ScanIssue, ScannedOperation, ToolLedgerScanner

TransitionCode = ScanIssueCode | WriterRejectionCode | BundleCode


@dataclass(frozen=True, slots=True)
class TransitionVerdict:
    """``ok`` with the candidates to insert (exact retries dropped), or the first refusal."""

    ok: bool
    new_events: tuple[RuntimeEvent, ...] = ()
    code: TransitionCode | None = None
    event_id: str | None = None
    operation_id: str | None = None
    tool_call_id: str | None = None
    message: str = ""
    fork: ToolLedgerScanner | None = field(default=None, compare=False, repr=False)
    """On success with new events: the validated fork of the scanner, fed with them; after they
    are committed the caller may hand it to ``ToolLedgerScanner.absorb`` instead of feeding
    the events a second time."""


_EARLIER_PROBLEM = "the events recorded before these already hold a problem"
_CONFLICT = "these events conflict with the events recorded before them"


def _from_issue(issue: ScanIssue, message: str) -> TransitionVerdict:
    return TransitionVerdict(
        False,
        code=issue.code,
        event_id=issue.event_id,
        operation_id=issue.operation_id,
        tool_call_id=issue.tool_call_id,
        message=message,
    )


def validate_candidates(
    scanner: ToolLedgerScanner,
    candidates: Sequence[RuntimeEvent],
    kind: TransitionKind,
    stored_bytes: Callable[[str], bytes | None],
    *,
    shape_checked: bool = False,
) -> TransitionVerdict:
    """Validate ``candidates`` for a ``kind`` write against the ledger ``scanner`` has seen.

    ``stored_bytes(event_id)`` returns the canonical bytes stored under that id, or None. The
    scanner is not changed; after a successful commit the caller feeds ``new_events`` to it
    (or absorbs ``fork``). ``shape_checked``: the caller already ran ``check_transition_shape``
    on exactly ``candidates`` for ``kind`` and it passed; the check is then run again only if
    exact retries were dropped (the remaining list differs).
    """
    existing_issue = scanner.first_issue
    if existing_issue is not None:
        return _from_issue(existing_issue, _EARLIER_PROBLEM)
    remaining: list[RuntimeEvent] = []
    for candidate in candidates:
        stored = stored_bytes(candidate["id"])
        if stored is None:
            remaining.append(candidate)
        elif stored != canonical_bytes(candidate):
            return TransitionVerdict(
                False,
                code=ScanIssueCode.DUPLICATE_EVENT_ID,
                event_id=candidate["id"],
                message="an event with this id is stored with other bytes",
            )
    rejection = (
        None
        if shape_checked and len(remaining) == len(candidates)
        else check_transition_shape(remaining, kind)
    )
    if rejection is not None:
        return TransitionVerdict(
            False, code=rejection.code, event_id=rejection.event_id, message=rejection.reason
        )
    if not remaining:
        return TransitionVerdict(True)
    trial = scanner.fork(remaining)
    for candidate in remaining:
        raised = trial.feed(candidate)
        if raised:
            return _from_issue(raised[0], _CONFLICT)
    touched = {
        op.operation_id: op for op in trial.recovery_operations() if op.operation_id is not None
    }
    for op in touched.values():
        meaning = interpret_scanned_recovery(op)
        if isinstance(meaning, RecoveryCorruption):
            # Name the first candidate that made the tail invalid.
            culprit = next(
                candidate["id"] for candidate in remaining if candidate["id"] in op.event_positions
            )
            return TransitionVerdict(
                False,
                code=meaning.code,
                event_id=culprit,
                operation_id=op.operation_id,
                tool_call_id=op.tool_call_id,
                message=meaning.message,
            )
    return TransitionVerdict(True, new_events=tuple(remaining), fork=trial)


def feed_boundary_candidates(
    scanner: ToolLedgerScanner, candidates: Sequence[RuntimeEvent], kind: TransitionKind
) -> TransitionVerdict | ScannedOperation | None:
    """``validate_candidates`` for a T1 or T2 write, fed straight into ``scanner`` (no fork).

    For the tool writers' hot path: the candidates are all new (the caller already answered
    exact retries) and have the writer's lane shape (checked by the caller): T1
    ``[function_call, tool_dispatch]`` or ``[tool_dispatch]``, T2 ``[function_response]``. The
    verdict is the one ``validate_candidates`` gives for them: the issues feeding raises are the
    same (a fork only reproduces this scanner's state for them), and so is the recovery check,
    which reads the operations the candidates touch:

    - T2: the operation the response is filed under (its invocation and call id); its recovery
      tail is interpreted when it has one.
    - T1: none can hold a recovery fact. Recovery facts attach only to an operation with a
      dispatch (before it they are ``event_order_conflict``, docs/design/ledger.md section 4); the
      dispatch, fed without an issue, joined an operation that had none
      (``duplicate_dispatch`` otherwise); and the call, fed without an issue into a ledger
      without issues, opened a new operation (a dispatch before its call is
      ``event_order_conflict``).

    ``scanner`` is changed whatever the verdict: unless the verdict is ok *and* the candidates
    are then committed, the caller must throw the scanner away (the store's write transaction
    does: a refusal or any failure rolls back and evicts the run's state).

    Returns the refusal (a ``TransitionVerdict`` that is not ok) or, when the write is valid,
    the operation the caller needs as the scanner now holds it: a T2's, or a T1's without its
    call (the dispatch's); None for a T1 with its call. No verdict object is built on success.
    """
    existing_issue = scanner.first_issue
    if existing_issue is not None:
        return _from_issue(existing_issue, _EARLIER_PROBLEM)
    for candidate in candidates:
        raised = scanner.feed(candidate)
        if raised:
            return _from_issue(raised[0], _CONFLICT)
    last = cast(dict[str, Any], candidates[-1])
    if kind is TransitionKind.T1_PREPARE:
        if len(candidates) != 1:
            return None
        fact = last["actions"]["toolDispatch"]
        return scanner.operation(last["invocationId"], fact["providerToolCallId"])
    if kind is not TransitionKind.T2_OUTCOME or len(candidates) != 1:
        raise ValueError(f"feed_boundary_candidates takes a T1 or a T2 write, not {kind}")
    op = scanner.operation(last["invocationId"], last["content"]["id"])
    if op is not None and (op.reconcile_events or op.decision_events):
        meaning = interpret_scanned_recovery(op)
        if isinstance(meaning, RecoveryCorruption):
            return TransitionVerdict(
                False,
                code=meaning.code,
                event_id=last["id"],
                operation_id=op.operation_id,
                tool_call_id=op.tool_call_id,
                message=meaning.message,
            )
    return op


def validate_transition(
    existing_events: Sequence[RuntimeEvent],
    candidates: Sequence[RuntimeEvent],
    kind: TransitionKind,
) -> TransitionVerdict:
    """Batch form: ``existing_events`` in ledger order (normally the run's events)."""
    scanner = ToolLedgerScanner()
    scanner.feed_all(existing_events)
    by_id: Mapping[str, RuntimeEvent] = {}
    if scanner.first_issue is None:
        by_id = {event["id"]: event for event in existing_events}

    def stored(event_id: str) -> bytes | None:
        event = by_id.get(event_id)
        return canonical_bytes(event) if event is not None else None

    return validate_candidates(scanner, candidates, kind, stored)
