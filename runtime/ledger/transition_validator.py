"""Prospective validation of a write against the ledger (LEDGER.md section 3, last paragraph).

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
        return _from_issue(existing_issue, "the ledger already has an issue")
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
            return _from_issue(raised[0], "the candidates conflict with the ledger")
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


_BOUNDARY_KINDS = frozenset({TransitionKind.T1_PREPARE, TransitionKind.T2_OUTCOME})


def feed_boundary_candidates(
    scanner: ToolLedgerScanner, candidates: Sequence[RuntimeEvent], kind: TransitionKind
) -> TransitionVerdict | tuple[ScannedOperation | None, ...]:
    """``validate_candidates`` for a T1 or T2 write, fed straight into ``scanner`` (no fork).

    For the tool writers' hot path: the candidates are all new (the caller already answered
    exact retries) and their lane shape was checked by the caller. The verdict is the one
    ``validate_candidates`` gives for them: the issues feeding raises are the same (a fork only
    reproduces this scanner's state for them), and so is the recovery check, which reads the
    operations the candidates touch. A T1 or T2 candidate touches only the operation of its own
    (invocation, call id), plus for a dispatch the operation of its ``operationId``, which after
    a dispatch fed without an issue is that same operation; so those operations are looked at
    (each a frozen copy the caller may use afterwards).

    ``scanner`` is changed whatever the verdict: unless the verdict is ok *and* the candidates
    are then committed, the caller must throw the scanner away (the store's write transaction
    does: a refusal or any failure rolls back and evicts the run's state).

    Returns the refusal (a ``TransitionVerdict`` that is not ok) or, when the write is valid,
    each candidate's operation in candidate order (no verdict object is built on the hot path).
    """
    if kind not in _BOUNDARY_KINDS:
        raise ValueError(f"feed_boundary_candidates is for T1 and T2 only, not {kind}")
    existing_issue = scanner.first_issue
    if existing_issue is not None:
        return _from_issue(existing_issue, "the ledger already has an issue")
    for candidate in candidates:
        raised = scanner.feed(candidate)
        if raised:
            return _from_issue(raised[0], "the candidates conflict with the ledger")
    operations: list[ScannedOperation | None] = []
    frozen: dict[tuple[str, str], ScannedOperation | None] = {}
    for candidate in candidates:
        event = cast(dict[str, Any], candidate)
        content = event.get("content")
        call_id: str = (
            content["id"]
            if content is not None
            else event["actions"]["toolDispatch"]["providerToolCallId"]
        )
        key = (event["invocationId"], call_id)
        if key in frozen:
            operations.append(frozen[key])
            continue
        op = frozen[key] = scanner.operation(*key)
        operations.append(op)
        if op is None or (not op.reconcile_events and not op.decision_events):
            continue
        meaning = interpret_scanned_recovery(op)
        if isinstance(meaning, RecoveryCorruption):
            # Name the first candidate that made the tail invalid.
            culprit = next(c["id"] for c in candidates if c["id"] in op.event_positions)
            return TransitionVerdict(
                False,
                code=meaning.code,
                event_id=culprit,
                operation_id=op.operation_id,
                tool_call_id=op.tool_call_id,
                message=meaning.message,
            )
    return tuple(operations)


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
