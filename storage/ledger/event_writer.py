"""The common write path: candidate preparation, the checks every writer shares, the insert.

Every writer (generic append, T1, T2, recovery bundle, run ending, import) goes through
``LedgerTransaction``, which runs inside one ``BEGIN IMMEDIATE`` and applies the checks in this
order (the order decides which code a refusal carries):

1. (before the transaction) decode strictly, canonical bytes, lane; the writer's own gate
   (the generic append refuses reserved facts and terminal events).
2. The run header exists (``run_not_found``) and every candidate carries the header's session,
   invocation and turn (``invocation_identity_conflict``: the invocation spine).
3. Tool-bearing writes only: the run's ledger must already be clean (its scanner's first issue
   otherwise, so a damaged ledger refuses even exact retries).
4. Exact retry: a candidate whose id is stored with the same canonical bytes is dropped; the same
   id with other bytes is ``identity_conflict``. All dropped = a no-op answering ``created=False``.
5. Seal: a run with a terminal event accepts nothing new (``run_sealed``).
6. Tool-bearing writes: the shared transition validation (``validate_candidates``: shape, the
   scanner fed with the candidates after the run's facts, recovery interpretation; T1 and T2
   feed the run's own scanner instead of a fork, ``feed_boundary_candidates``, same verdicts).
   Ordinary events: only the T1 marker rule (``protocol_marker_invalid`` unless ``event_seq``
   is 1).
7. Insert with the next gap-free ``event_seq`` of the invocation; the run's scanner is fed (or
   already was).

Validation reads only per-run state (``run_ledger_state``), never the whole ledger.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any, NamedTuple, cast

from runtime.ledger.canonical_codec import (
    canonical_bytes,
    canonical_json_bytes,
    plain_canonical_json_bytes,
)
from runtime.ledger.codes import (
    Lane,
    ScanIssueCode,
    TransitionKind,
    WriterRejectionCode,
)
from runtime.ledger.event_model import (
    RuntimeEvent,
    decode_event,
    decode_event_json,
    has_t1_marker,
    is_terminal,
)
from runtime.ledger.lane_rules import LaneConflict, check_generic_append, classify_lane
from runtime.ledger.ledger_errors import EventDecodeError, LedgerError
from runtime.ledger.store_ports import CommitResult, StoreRefusal
from runtime.ledger.tool_ledger_scanner import ScannedOperation, ToolLedgerScanner, plain_lane
from runtime.ledger.transition_validator import (
    TransitionVerdict,
    feed_boundary_candidates,
    validate_candidates,
)
from storage.ledger.event_rows import insert_event_row, lookup_payload
from storage.ledger.run_ledger_state import RunLedgerState, RunStateCache


class Candidate(NamedTuple):
    """A decoded event ready to commit: its canonical bytes and its lane. Immutable; a named
    tuple rather than a frozen dataclass because every event a writer commits builds one, and
    a frozen dataclass's ``__init__`` (one ``object.__setattr__`` per field) costs four times
    as much."""

    event: RuntimeEvent
    payload: bytes
    lane: Lane
    terminal: bool

    @property
    def event_id(self) -> str:
        return self.event["id"]


_PLAIN_JSON = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False
).encode


def prepare_candidate(event: object, *, decoded: bool = False) -> Candidate:
    """Canonical bytes, strict decode and lane. Anything malformed is refused before a
    transaction starts.

    A caller's dict is first encoded canonically (which refuses what canonical JSON cannot
    carry: non-finite numbers, unsafe integers, lone surrogates, non-JSON values) and the bytes
    are then decoded strictly; the decoded event is what the store keeps. That is the same
    strict decoder as ``decode_event`` at a fraction of its cost for large free-form values.
    When canonical encoding changed anything plain JSON would have written (a float such as
    ``1.0``, which canonical JSON writes as ``1``; keys ordered by UTF-16), the dict itself goes
    through ``decode_event`` so that no such value is silently re-typed (``ts: 1.0`` stays an
    error). ``decoded`` skips the decode when the caller just decoded the event (import)."""
    try:
        if decoded:
            checked = cast(RuntimeEvent, event)
            payload = canonical_bytes(checked)
        else:
            if not isinstance(event, dict):
                raise EventDecodeError("a RuntimeEvent must be a JSON object", "")
            plain = plain_canonical_json_bytes(event)
            if plain is not None:
                # Plain JSON is canonical here: nothing can have been re-typed, and every
                # number in it is a safe integer.
                payload = plain
                checked = decode_event_json(payload, numbers_checked=True)
            else:
                payload = canonical_json_bytes(event)
                if _PLAIN_JSON(event).encode("utf-8") == payload:
                    checked = decode_event_json(payload)
                else:
                    checked = decode_event(event)
    except LedgerError as error:
        event_id = event.get("id") if isinstance(event, dict) else None
        raise StoreRefusal(
            error.code, error.message, event_id if isinstance(event_id, str) else None
        ) from None
    # The scanner's shortcut for the plainest tool facts (property-tested to agree with
    # ``classify_lane`` whenever it answers) spares the full classification on the hot path.
    lane = plain_lane(checked) or classify_lane(checked)
    if isinstance(lane, LaneConflict):
        raise StoreRefusal(lane.code, lane.reason, lane.event_id)
    return Candidate(checked, payload, lane, is_terminal(checked))


def check_generic(candidate: Candidate) -> None:
    """The generic append's gate: ordinary events, function_calls and unbound responses only;
    terminal events belong to the run-ending writer."""
    rejection = check_generic_append(candidate.event)
    if rejection is not None:
        raise StoreRefusal(rejection.code, rejection.reason, rejection.event_id)
    if candidate.terminal:
        raise StoreRefusal(
            WriterRejectionCode.RESERVED_RUN_ENDING_FACT,
            "a terminal event is committed with its run header by commit_run_ending",
            candidate.event_id,
        )


class LedgerTransaction:
    """The shared checks and the insert, for one open write transaction.

    ``assume_new``: ``split_retries`` may skip its per-id lookup when none of the candidate ids
    is in the run's scanner (so none is stored in this run, and an exact retry, whose bytes name
    this run, is impossible). An id stored in *another* run is then only met by the insert's
    primary key, after checks the exact order would have run later; so the caller must, when
    ``lookups_skipped`` is set and the write fails (a refusal or a constraint), roll back and
    run the write again with ``assume_new=False``, whose answer is the authoritative one.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        cache: RunStateCache,
        committed_at: int,
        *,
        assume_new: bool = False,
        cursor: sqlite3.Cursor | None = None,
    ) -> None:
        self.conn = conn
        # For single statements whose rows are not iterated (the hot path's inserts).
        self.cursor: sqlite3.Connection | sqlite3.Cursor = cursor if cursor is not None else conn
        self.cache = cache
        self.committed_at = committed_at
        self.assume_new = assume_new
        self.lookups_skipped = False
        # The last successful transition validation: the scanner it forked, the fed fork, and
        # its events; ``insert`` absorbs the fork once they are all inserted (see there).
        self._validated_parent: ToolLedgerScanner | None = None
        self._validated_fork: ToolLedgerScanner | None = None
        self._validated_events: Sequence[RuntimeEvent] = ()
        self._validated_inserted = 0

    def run(self, run_id: str) -> RunLedgerState:
        return self.cache.state(self.conn, run_id)

    def check_spine(self, state: RunLedgerState, candidates: Sequence[Candidate]) -> None:
        for candidate in candidates:
            event = candidate.event
            if (
                event["runId"] != state.run_id
                or event["sessionId"] != state.session_id
                or event["invocationId"] != state.invocation_id
                or event["turnId"] != state.turn_id
            ):
                raise StoreRefusal(
                    ScanIssueCode.INVOCATION_IDENTITY_CONFLICT,
                    f"event {candidate.event_id} does not carry the execution identity of run "
                    f"{state.run_id} (one run = one invocation, one session, one turn)",
                    candidate.event_id,
                )

    def check_health(self, state: RunLedgerState) -> None:
        issue = self.cache.scanner(self.conn, state).first_issue
        if issue is not None:
            raise StoreRefusal(
                issue.code,
                f"the run's ledger already has an issue ({issue.code} at {issue.event_id}); "
                "no tool fact is accepted",
                issue.event_id,
            )

    def split_retries(
        self, candidates: Sequence[Candidate], state: RunLedgerState | None = None
    ) -> tuple[list[Candidate], dict[str, int]]:
        """(new candidates, ``event_seq`` of exact retries); other bytes = ``identity_conflict``.
        With ``assume_new`` and the run's scanner loaded, ids the run has never seen are taken
        as new without a lookup (see the class docstring)."""
        scanner = state.scanner if self.assume_new and state is not None else None
        if scanner is not None:
            ids = {candidate.event["id"] for candidate in candidates}
            if len(ids) == len(candidates):
                for event_id in ids:
                    if scanner.has_event(event_id):
                        break
                else:
                    self.lookups_skipped = True
                    return list(candidates), {}
        new: list[Candidate] = []
        retried: dict[str, int] = {}
        for candidate in candidates:
            stored = lookup_payload(self.conn, candidate.event)
            if stored is None:
                if any(other.event_id == candidate.event_id for other in new):
                    raise StoreRefusal(
                        WriterRejectionCode.IDENTITY_CONFLICT,
                        f"event id {candidate.event_id} appears twice in one write",
                        candidate.event_id,
                    )
                new.append(candidate)
            elif stored[0] == candidate.payload:
                retried[candidate.event_id] = stored[1]
            else:
                raise StoreRefusal(
                    WriterRejectionCode.IDENTITY_CONFLICT,
                    f"event id {candidate.event_id} is already stored with other content",
                    candidate.event_id,
                )
        return new, retried

    def check_seal(self, state: RunLedgerState, new: Sequence[Candidate]) -> None:
        if new and state.sealed:
            raise StoreRefusal(
                WriterRejectionCode.RUN_SEALED,
                f"run {state.run_id} is sealed by its terminal event {state.terminal_event_id}",
                new[0].event_id,
            )

    def validate_tool_transition(
        self,
        state: RunLedgerState,
        candidates: Sequence[Candidate],
        kind: TransitionKind,
        *,
        shape_checked: bool = False,
    ) -> None:
        """The shared transition validation over the run's incremental scanner. ``candidates``
        are the new ones (``split_retries`` already answered for stored ids), so none of them
        has stored bytes. ``shape_checked``: the writer already checked the lane shape of
        exactly these candidates (``check_shape``)."""
        self._flush_validated()
        scanner = self.cache.scanner(self.conn, state)
        events = [candidate.event for candidate in candidates]
        verdict = validate_candidates(
            scanner, events, kind, _nothing_stored, shape_checked=shape_checked
        )
        if verdict.ok and verdict.fork is not None:
            self._validated_parent = scanner
            self._validated_fork = verdict.fork
            self._validated_events = events
            self._validated_inserted = 0
        if not verdict.ok:
            raise StoreRefusal(
                verdict.code or WriterRejectionCode.TRANSITION_SHAPE_CONFLICT,
                verdict.message or "the write conflicts with the run's ledger",
                verdict.event_id,
            )

    def feed_tool_boundary(
        self, state: RunLedgerState, candidates: Sequence[Candidate], kind: TransitionKind
    ) -> ScannedOperation | None:
        """T1/T2's transition validation, fed straight into the run's scanner instead of a
        fork (``feed_boundary_candidates``): ``candidates`` are the new ones, their lane shape
        checked by the writer; insert them with ``insert(..., fed=True)``. On a refusal the
        scanner holds candidates that never became facts; the refusal rolls the transaction
        back, and the rollback evicts the run's state (``RunStateCache.abandon``), so the next
        write loads it again from the committed rows. Returns the operation the writer needs
        (``feed_boundary_candidates``)."""
        self._flush_validated()
        scanner = self.cache.scanner(self.conn, state)
        outcome = feed_boundary_candidates(
            scanner, [candidate.event for candidate in candidates], kind
        )
        if isinstance(outcome, TransitionVerdict):
            raise StoreRefusal(
                outcome.code or WriterRejectionCode.TRANSITION_SHAPE_CONFLICT,
                outcome.message or "the write conflicts with the run's ledger",
                outcome.event_id,
            )
        return outcome

    def check_marker(self, state: RunLedgerState, candidate: Candidate, offset: int) -> None:
        if has_t1_marker(candidate.event) and state.next_seq + offset != 1:
            raise StoreRefusal(
                ScanIssueCode.PROTOCOL_MARKER_INVALID,
                "the T1 protocol marker is allowed only on the first event of a run",
                candidate.event_id,
            )

    def insert(self, state: RunLedgerState, candidate: Candidate, *, fed: bool = False) -> int:
        """Insert ``candidate`` with the run's next ``event_seq`` and bring the run's state up
        to date; ``fed``: ``feed_tool_boundary`` already fed it to the run's scanner."""
        seq = state.next_seq
        insert_event_row(
            self.cursor,
            candidate.event,
            candidate.payload,
            seq=seq,
            lane=candidate.lane,
            terminal=candidate.terminal,
            committed_at=self.committed_at,
        )
        state.next_seq = seq + 1
        if candidate.terminal and state.terminal_event_id is None:
            state.terminal_event_id = candidate.event_id
        if not fed:
            scanner = state.scanner
            if scanner is not None:
                self._feed(scanner, candidate.event)
        return seq

    def _feed(self, scanner: ToolLedgerScanner, event: RuntimeEvent) -> None:
        """Bring the run's scanner up to date with an inserted event. The events of the last
        transition validation were already fed to its fork: while they are inserted in order
        into the scanner that was forked, nothing is fed, and the fork is absorbed after the
        last one (the same state as feeding them, without a second feed). Anything else feeds
        what the fork held back, then the event."""
        parent = self._validated_parent
        if parent is scanner:
            events = self._validated_events
            done = self._validated_inserted
            if events[done] is event:
                if done + 1 < len(events):
                    self._validated_inserted = done + 1
                    return
                self._validated_parent = None
                fork = self._validated_fork
                if fork is not None and scanner.absorb(fork):
                    return
                self._validated_inserted = done
                self._validated_parent = parent
        self._flush_validated()
        scanner.feed(event)

    def _flush_validated(self) -> None:
        """Feed the held-back validated events already inserted, and forget the fork."""
        parent = self._validated_parent
        if parent is not None:
            self._validated_parent = None
            for held in self._validated_events[: self._validated_inserted]:
                parent.feed(held)


def _nothing_stored(event_id: str) -> bytes | None:
    del event_id
    return None


def is_tool_bearing(candidates: Sequence[Candidate]) -> bool:
    return any(candidate.lane is not Lane.ORDINARY for candidate in candidates)


def append_generic(tx: LedgerTransaction, candidate: Candidate) -> CommitResult:
    """The generic append of one event (already through ``check_generic``)."""
    state = tx.run(candidate.event["runId"])
    tx.check_spine(state, [candidate])
    tool = is_tool_bearing([candidate])
    if tool:
        tx.check_health(state)
    new, retried = tx.split_retries([candidate])
    if not new:
        return CommitResult(created=False, event_seq=retried[candidate.event_id])
    tx.check_seal(state, new)
    if tool:
        tx.validate_tool_transition(state, new, TransitionKind.GENERIC_APPEND)
    else:
        tx.check_marker(state, candidate, 0)
    return CommitResult(created=True, event_seq=tx.insert(state, candidate))


def event_dict(event: RuntimeEvent) -> dict[str, Any]:
    return cast(dict[str, Any], event)
