"""Where a session can be branched from, and the prefix a branch refers to (issue #36).

A *boundary* is a committed event after which the history is whole: a user message, a tool
result, or a run's ending. Branching at one makes a new session whose history is the source's
prefix up to that event, by reference: the boundary run's lineage (``lineage_reader``) with its
last generation cut at the boundary's ``event_seq``, projected for the provider by the same
composite replay Safe resume uses (``continuation_replay.build_replay_plan``: a segment with a
call that has no settled outcome is refused, and anything after the last stable item is
trimmed). Nothing is copied; the cut prefix's digest is what the ``branchStart`` fact records.

The snapshot *bound* to a boundary is the folder as it was there: the newest snapshot fact
of its run before it with no call that may write dispatched after it, else the first one of its
run after it before such a call (the capture that follows a writing call's result, or the run's
first capture). None when no capture of its run describes that moment (before snapshots
existed, a run without them, or a failed capture): between two runs the user may have changed
the folder, so a snapshot of another run never stands for it.

Pure over committed facts and the store's reads; planning writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from runtime.continuation.continuation_replay import (
    ImmutablePrefix,
    ReplayBlocked,
    ReplayPlan,
    SegmentIssue,
    build_replay_plan,
)
from runtime.continuation.lineage_reader import (
    Lineage,
    LineageStore,
    build_prefix,
    read_lineage,
)
from runtime.ledger.branch_facts import BranchRecord
from runtime.ledger.codes import BranchCode
from runtime.ledger.continuation_ports import ContinuationClaim
from runtime.ledger.event_model import RuntimeEvent, is_terminal
from runtime.ledger.lane_rules import RECOVERY_DECISION_KIND
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import (
    LedgerReader,
    RunHeader,
    RunStatus,
    SessionRecord,
    StoredEvent,
)
from runtime.ledger.workspace_facts import is_settled_baseline, may_write, snapshot_fact

USER_MESSAGE = "user_message"
TOOL_RESULT = "tool_result"
RUN_ENDING = "run_ending"
MAX_BRANCH_DEPTH = 64
_LABEL_CHARS = 80


@runtime_checkable
class BranchReader(Protocol):
    def read_branch(self, session_id: str) -> BranchRecord | None: ...


class BranchStore(LineageStore, LedgerReader, BranchReader, Protocol):
    def read_event(self, event_id: str) -> StoredEvent | None: ...


class BranchRefused(LedgerError):
    """No branch at that point; ``code`` is a ``BranchCode`` (or a store code)."""

    def __init__(self, code: StrEnum, message: str, issues: Sequence[SegmentIssue] = ()) -> None:
        super().__init__(code, message)
        self.issues = tuple(issues)


@dataclass(frozen=True, slots=True)
class Boundary:
    """One point a session can be branched from."""

    event_id: str
    run_id: str
    seq: int
    kind: str  # USER_MESSAGE, TOOL_RESULT or RUN_ENDING
    ts: int
    label: str
    snapshot: Mapping[str, Any] | None = None
    snapshot_ts: int = 0  # when the bound snapshot's fact was written (0: none bound)
    # A call before it has no settled outcome there, so a branch there is refused (only known
    # for a run's own calls; a call never dispatched is trimmed and holds nothing).
    unsettled: bool = False
    # For an unsettled point: the later result in its run that gives the last of its open calls
    # an outcome (recovered, or the user's answer), where a branch can start instead.
    settled_at: str | None = None
    # The point's own ``event_seq``: the number the timeline shows for its row. ``seq`` is where
    # the history is cut, past it when events were written with it (a recovered or answered
    # result's decision, the answer's baseline of the folder); a user is shown this one.
    event_seq: int = 0

    @property
    def shown_seq(self) -> int:
        """The point's number as the timeline shows it (its own event's)."""
        return self.event_seq or self.seq

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "eventId": self.event_id,
            "runId": self.run_id,
            "seq": self.shown_seq,  # (the timeline's row number, not the cut's high water)
            "kind": self.kind,
            "ts": self.ts,
            "label": self.label,
            "snapshotBound": self.snapshot is not None,
            "branchable": not self.unsettled,
        }
        if self.snapshot is not None:
            body["checkpointRef"] = str(self.snapshot.get("checkpointRef", ""))
        if self.unsettled and self.settled_at is not None:
            body["settledAt"] = self.settled_at
        return body


def boundary_kind(event: RuntimeEvent) -> str | None:
    """USER_MESSAGE, TOOL_RESULT, RUN_ENDING or None (not a point a branch can start after)."""
    if event["partial"]:
        return None
    if is_terminal(event):
        return RUN_ENDING
    content = event.get("content")
    if content is None:
        return None
    if content["kind"] == "function_response":
        return TOOL_RESULT
    if content["kind"] == "text" and event["role"] == "user" and event["author"] == "user":
        return USER_MESSAGE
    return None


def _label(event: RuntimeEvent, kind: str) -> str:
    content: Mapping[str, Any] = event.get("content") or {}
    if kind == USER_MESSAGE:
        text = " ".join(str(content.get("text", "")).split())
        return f"you: {text[:_LABEL_CHARS]}"
    if kind == TOOL_RESULT:
        return f"result of {content.get('name', 'a tool')}"
    return f"run ended {event.get('status') or 'completed'}"


@dataclass(slots=True)
class _Binder:
    """One pass over a session's events in order: the snapshot bound to each boundary."""

    current: Mapping[str, Any] | None = None
    current_ts: int = 0
    waiting: list[int] = field(default_factory=list)  # boundaries with no snapshot before them
    bound: dict[int, Mapping[str, Any] | None] = field(default_factory=dict)
    bound_ts: dict[int, int] = field(default_factory=dict)

    def see(self, position: int, event: RuntimeEvent, boundary: bool) -> None:
        actions = event.get("actions")
        if actions:
            snapshot = snapshot_fact(actions)
            if snapshot is not None:
                self.current, self.current_ts = snapshot, int(event.get("ts") or 0)
                for waiting in self.waiting:
                    self._bind(waiting)
                self.waiting.clear()
            elif "workspaceCheckpointFailed" in actions:
                self._lose()
            else:
                dispatch = actions.get("toolDispatch")
                if dispatch is not None and may_write(str(dispatch["toolName"])):
                    self._lose()
        if boundary:
            if self.current is not None:
                self._bind(position)
            else:
                self.waiting.append(position)

    def _bind(self, position: int) -> None:
        self.bound[position], self.bound_ts[position] = self.current, self.current_ts

    def new_run(self) -> None:
        """A run starts. The user may have worked in the folder since the last one ended, so
        no snapshot of an earlier run describes this run's points (its first capture does),
        and an earlier run's points still waiting for a snapshot get none."""
        self._lose()

    def _lose(self) -> None:
        self.current = None
        for waiting in self.waiting:
            self.bound[waiting] = None
        self.waiting.clear()


def _ordered(runs: Sequence[RunHeader]) -> list[RunHeader]:
    return sorted(runs, key=lambda header: (header.created_at, header.run_id))


def list_boundaries(store: BranchStore, session_id: str) -> list[Boundary]:
    """Every boundary of the session's committed runs, oldest first, with its bound snapshot
    (unchecked: whether its objects still exist is the carrier's question) and whether a call
    of its run has no settled outcome there. One pass over the session's events."""
    binder = _Binder()
    found: list[tuple[int, Boundary]] = []
    position = 0
    tail = -1  # the position of the last event the newest boundary's cut takes
    headers: dict[str, RunHeader] = {}
    for header in _ordered(store.list_session_runs(session_id)):
        if header.status in (RunStatus.CREATED, RunStatus.RUNNING):
            continue  # not committed as a whole: a running or unrepaired turn
        headers[header.run_id] = header
        binder.new_run()
        open_calls: set[str] = set()
        first = len(found)  # this run's boundaries start here
        open_at: dict[int, frozenset[str]] = {}  # a boundary's position -> its calls open then
        results: dict[str, tuple[int, str]] = {}  # call id -> (position, event id) of its result
        for row in store.read_run_events(header.run_id):
            event = row.event
            content = event.get("content")
            if content is not None and content["kind"] == "function_call":
                open_calls.add(str(content.get("id")))
            elif content is not None and content["kind"] == "function_response":
                open_calls.discard(str(content.get("id")))
                results.setdefault(str(content.get("id")), (position, event["id"]))
            kind = boundary_kind(event)
            binder.see(position, event, kind is not None)
            if found and tail == position - 1 and written_with(event, found[-1][1].event_id):
                # Written with a recovered or attested result (its recovery decision, the
                # answer's baseline of the folder): the history is whole only with them, so the
                # cut takes them (the boundary stays the result the user picks).
                last = found[-1][1]
                found[-1] = (found[-1][0], Boundary(**{**_fields(last), "seq": row.seq}))
                tail = position
            if kind is not None:
                tail = position
                boundary = Boundary(
                    event_id=event["id"],
                    run_id=header.run_id,
                    seq=row.seq,
                    event_seq=row.seq,
                    kind=kind,
                    ts=int(event.get("ts") or 0),
                    label=_label(event, kind),
                    unsettled=bool(open_calls) and kind != USER_MESSAGE,
                )
                found.append((position, boundary))
                if boundary.unsettled:
                    open_at[position] = frozenset(open_calls)
            position += 1
        found[first:] = [(p, _settled_at(b, open_at.get(p), results)) for p, b in found[first:]]
    return [
        Boundary(
            **{
                **_fields(b),
                "snapshot": binder.bound.get(p),
                "snapshot_ts": binder.bound_ts.get(p, 0),
                "unsettled": b.unsettled and _held(store, headers[b.run_id], b.seq),
            }
        )
        for p, b in found
    ]


def _settled_at(
    boundary: Boundary, open_calls: frozenset[str] | None, results: Mapping[str, tuple[int, str]]
) -> Boundary:
    """``boundary`` with ``settled_at``: when every call open at it got a result later in its
    run, the latest of those results (the first point after it all of them are settled)."""
    if not open_calls or not all(call in results for call in open_calls):
        return boundary
    _, event_id = max(results[call] for call in open_calls)
    return Boundary(**{**_fields(boundary), "settled_at": event_id})


def _held(store: BranchStore, header: RunHeader, seq: int) -> bool:
    """Whether a point after a call with no result is refused by the gate a branch there
    meets (``resolve_prefix``): a call never dispatched is trimmed from the history and holds
    nothing; one that may have run does. Asked only of such points, so a listing builds a
    replay only after an interrupted call."""
    try:
        resolve_prefix(store, header, seq)
    except BranchRefused:
        return True
    return False


def written_with(event: RuntimeEvent, outcome_event_id: str) -> bool:
    """Whether ``event`` belongs with the result ``outcome_event_id`` (it follows it, or the
    decision after it): the recovery decision that completes the call, or the baseline of the
    folder the user's answer recorded (docs/design/workspace.md section 3)."""
    if settles(event, outcome_event_id):
        return True
    return (
        is_settled_baseline(event)
        and event["id"] == outcome_event_id.removesuffix("_attest_outcome") + "_attest_baseline"
    )


def settles(event: RuntimeEvent, outcome_event_id: str) -> bool:
    """Whether ``event`` is the recovery decision that completes a call with the result
    ``outcome_event_id`` (written with it: reconciled by startup recovery, or said by the user)."""
    recovery = (event.get("actions") or {}).get("toolRecovery")
    if not isinstance(recovery, Mapping) or recovery.get("kind") != RECOVERY_DECISION_KIND:
        return False
    payload = recovery.get("payload")
    return isinstance(payload, Mapping) and payload.get("outcomeEventId") == outcome_event_id


def _fields(boundary: Boundary) -> dict[str, Any]:
    return {name: getattr(boundary, name) for name in Boundary.__slots__}


def find_boundary(store: BranchStore, session_id: str, event_id: str) -> Boundary:
    """The boundary ``event_id`` names in the session; raises ``BranchRefused``."""
    stored = store.read_event(event_id)
    if stored is None or stored.event["sessionId"] != session_id:
        raise BranchRefused(
            BranchCode.BRANCH_EVENT_NOT_FOUND, f"session {session_id} has no event {event_id}"
        )
    kind = boundary_kind(stored.event)
    if kind is None:
        raise BranchRefused(
            BranchCode.BRANCH_BOUNDARY_INVALID,
            f"event {event_id} is not a user message, a tool result or a run's ending",
        )
    header = store.read_run_header(stored.event["runId"])
    if header is None or header.status in (RunStatus.CREATED, RunStatus.RUNNING):
        raise BranchRefused(
            BranchCode.BRANCH_SOURCE_RUNNING,
            f"the turn holding {event_id} has not ended (running, or interrupted and not yet "
            "repaired)",
        )
    for boundary in list_boundaries(store, session_id):
        if boundary.event_id == event_id:
            return boundary
    raise BranchRefused(BranchCode.BRANCH_EVENT_NOT_FOUND, f"no boundary {event_id}")


@dataclass(frozen=True, slots=True)
class BranchPrefix:
    """The history a branch refers to: the boundary run's lineage cut at the boundary."""

    session_id: str
    header: RunHeader  # the boundary run
    prefix: ImmutablePrefix  # its events 1..high water
    lineage_run_ids: tuple[str, ...]
    replay: ReplayPlan


def resolve_prefix(store: LineageStore, header: RunHeader, high_water: int) -> BranchPrefix:
    """The cut lineage and its replay; raises ``BranchRefused`` when the prefix cannot be
    continued (a call without a settled outcome, a damaged lineage)."""
    lineage = read_lineage(store, header)
    if not isinstance(lineage, Lineage):
        raise BranchRefused(lineage.code, lineage.message)
    try:
        cut = build_prefix(header, store.read_run_events(header.run_id), high_water)
    except ValueError as error:
        raise BranchRefused(BranchCode.BRANCH_SOURCE_CHANGED, str(error)) from None
    prefixes = (*lineage.prefixes[:-1], cut)
    replay = build_replay_plan(prefixes)
    if isinstance(replay, ReplayBlocked):
        raise BranchRefused(
            BranchCode.BRANCH_BOUNDARY_UNSETTLED,
            "the history up to that point cannot be continued: "
            + "; ".join(issue.message for issue in replay.issues),
            replay.issues,
        )
    return BranchPrefix(
        header.session_id,
        header,
        cut,
        tuple(p.identity.run_id for p in prefixes),
        replay,
    )


def resolve_recorded(store: LineageStore, record: BranchRecord) -> BranchPrefix:
    """The prefix a ``branchStart`` fact refers to, checked against its digests; raises
    ``BranchRefused`` (``branch_source_changed``) when the source no longer matches."""
    header = store.read_run_header(record.source_run_id)
    if header is None or header.session_id != record.source_session_id:
        raise BranchRefused(
            BranchCode.BRANCH_SOURCE_CHANGED,
            f"the run {record.source_run_id} this session was branched from is gone",
        )
    prefix = resolve_prefix(store, header, record.source_high_water)
    last = prefix.prefix.events[-1] if prefix.prefix.events else None
    if (
        prefix.prefix.prefix_digest != record.source_prefix_digest
        or last is None
        or (
            last["id"] != record.boundary_event_id
            and not written_with(last, record.boundary_event_id)
        )
        or prefix.replay.provider_replay_digest != record.fact.get("providerReplayDigest")
    ):
        raise BranchRefused(
            BranchCode.BRANCH_SOURCE_CHANGED,
            f"the history of {record.source_session_id} up to {record.boundary_event_id} no "
            "longer matches what this session was branched from",
        )
    return prefix


def branch_chain(store: BranchReader, session_id: str) -> list[BranchRecord]:
    """The session's branch facts, its own first and the oldest ancestor's last."""
    chain: list[BranchRecord] = []
    seen = {session_id}
    record = store.read_branch(session_id)
    while record is not None:
        chain.append(record)
        if record.source_session_id in seen or len(chain) > MAX_BRANCH_DEPTH:
            raise BranchRefused(
                BranchCode.BRANCH_SOURCE_CHANGED, "the sessions' branch records loop"
            )
        seen.add(record.source_session_id)
        record = store.read_branch(record.source_session_id)
    return chain


class RowsOnce:
    """A ``BranchStore`` that reads each run's events once (one plan: the boundaries, the
    lineage and the cut prefix read the same rows; a long run's decode dominates the plan)."""

    def __init__(self, store: BranchStore) -> None:
        self._store = store
        self._rows: dict[str, Sequence[StoredEvent]] = {}

    def read_run_events(self, run_id: str) -> Sequence[StoredEvent]:
        rows = self._rows.get(run_id)
        if rows is None:
            rows = self._rows[run_id] = self._store.read_run_events(run_id)
        return rows

    def read_run_header(self, run_id: str) -> RunHeader | None:
        return self._store.read_run_header(run_id)

    def list_session_runs(self, session_id: str) -> Sequence[RunHeader]:
        return self._store.list_session_runs(session_id)

    def get_session(self, session_id: str) -> SessionRecord | None:
        return self._store.get_session(session_id)

    def list_sessions(self) -> Sequence[SessionRecord]:
        return self._store.list_sessions()

    def read_event(self, event_id: str) -> StoredEvent | None:
        return self._store.read_event(event_id)

    def read_branch(self, session_id: str) -> BranchRecord | None:
        return self._store.read_branch(session_id)

    def find_claim_by_boundary(self, boundary_digest: str) -> ContinuationClaim | None:
        return self._store.find_claim_by_boundary(boundary_digest)

    def find_claim_by_target(self, target_run_id: str) -> ContinuationClaim | None:
        return self._store.find_claim_by_target(target_run_id)

    def find_claim_by_source(
        self, source_run_id: str, source_high_water: int
    ) -> ContinuationClaim | None:
        return self._store.find_claim_by_source(source_run_id, source_high_water)
