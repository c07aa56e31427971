"""The tool-ledger scanner: the single interpreter of tool facts (docs/design/ledger.md section 4).

Every consumer (resolver, projection rebuild, import, every tool-bearing writer) reads tool facts
through this scanner, so they can never disagree about duplicates, order or identity.

The scanner is incremental: ``ToolLedgerScanner.feed(event)`` applies one event in ledger order
and returns the issues it raised. ``scan_tool_ledger(events)`` is the batch form over the same
code. A writer validates candidates without rescanning history: ``fork(candidates)`` copies only
the state those candidates can touch (their ids, invocations and operations), and ``probe`` feeds
the candidates into such a fork, so the cost of a check depends on the candidates, not on the size
of the ledger. Feeding the fork gives exactly the issues a full rescan of history + candidates
would add, because every rule below reads only that state.

Per event, in this order (the order decides which code a writer reports):

1. ``duplicate_event_id``: the id was already fed; the event is skipped entirely.
2. Invocation spine: the first event of an invocation records (sessionId, runId, turnId); a later
   event with another triple is ``invocation_identity_conflict`` (processing continues).
3. Protocol marker: only the first event fed for an invocation (one run has one invocation) may
   carry ``actions.runtimeProtocol``, and only with the T1 value; anything else is
   ``protocol_marker_invalid`` (processing continues). The check lives here, per invocation, so
   that writers refuse a late marker and the resolver finds every marker issue in one scan; the
   resolver lists marker issues before the others.
4. Lane: a ``semantic_lane_conflict`` skips the event. Partial (ordinary) events are skipped.
5. function_call, tool_dispatch, function_response, recovery facts: grouped per operation keyed
   by (invocationId, provider call id) (a tuple, so no two distinct pairs can collide) and by
   ``operationId`` across everything scanned; see the handlers for the exact rules.

Parsing positions: the scanner numbers fed events 0, 1, 2... and remembers the position of each
event it attaches to an operation (``ScannedOperation.event_positions``), which is what the
recovery interpretation's causal-order check reads when the caller has no better order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from runtime.ledger.canonical_codec import canonical_args_hash
from runtime.ledger.codes import Lane, ScanIssueCode
from runtime.ledger.event_model import TOOL_BOUNDARY_PROTOCOL_V1, RuntimeEvent
from runtime.ledger.lane_rules import LaneConflict, classify_lane
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.workspace_facts import workspace_fact_problem

OperationKey = tuple[str, str]
"""(invocationId, provider tool-call id): a tuple, so ``("a\\0b","c")`` and ``("a","b\\0c")``
are different keys."""

_BOUNDARY = TOOL_BOUNDARY_PROTOCOL_V1
_TOOL_CONTENT = frozenset({"function_call", "function_response"})


@dataclass(frozen=True, slots=True)
class ScanIssue:
    code: ScanIssueCode
    event_id: str
    operation_id: str | None = None
    tool_call_id: str | None = None


class ScannedOperation(NamedTuple):
    """Presence facts of one tool operation; consumers assign states (resolver, projections).

    A named tuple rather than a frozen dataclass, like the resolver's per-operation records: a
    long run has tens of thousands of operations and a frozen dataclass costs five times as much
    to build. Equality and hashing leave ``event_positions`` out (where the scan numbered the
    events is not a fact of the operation)."""

    tool_call_id: str
    invocation_id: str
    tool_name: str | None
    operation_id: str | None
    call_event: RuntimeEvent | None
    dispatch_event: RuntimeEvent | None
    response_event: RuntimeEvent | None
    reconcile_events: tuple[RuntimeEvent, ...]
    decision_events: tuple[RuntimeEvent, ...]
    issues: tuple[ScanIssue, ...]
    event_positions: Mapping[str, int]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ScannedOperation):
            return NotImplemented
        return self[:10] == other[:10]

    def __ne__(self, other: object) -> bool:
        if not isinstance(other, ScannedOperation):
            return NotImplemented
        return self[:10] != other[:10]

    def __hash__(self) -> int:
        return hash(self[:10])


@dataclass(frozen=True, slots=True)
class ToolLedgerScan:
    """``markers``: (position, event id) of every scanned event whose actions carry a
    ``runtimeProtocol`` marker, duplicated events included, in ledger order (the resolver's
    marker rule is about the run's first event, not an invocation's, so it reads them here)."""

    operations: tuple[ScannedOperation, ...]
    issues: tuple[ScanIssue, ...]
    markers: tuple[tuple[int, str], ...]

    @property
    def has_corruption(self) -> bool:
        return bool(self.issues)


class _Op:
    """Mutable per-operation state inside a scanner (never leaves it)."""

    __slots__ = (
        "call",
        "decisions",
        "dispatch",
        "issues",
        "key",
        "operation_id",
        "positions",
        "reconciles",
        "response",
        "tool_name",
    )

    def __init__(self, key: OperationKey, tool_name: str | None) -> None:
        self.key = key
        self.tool_name = tool_name
        self.operation_id: str | None = None
        self.call: dict[str, Any] | None = None
        self.dispatch: dict[str, Any] | None = None
        self.response: dict[str, Any] | None = None
        self.reconciles: list[dict[str, Any]] = []
        self.decisions: list[dict[str, Any]] = []
        self.issues: list[ScanIssue] = []
        self.positions: dict[str, int] = {}

    def copy(self) -> _Op:
        twin = _Op(self.key, self.tool_name)
        twin.operation_id = self.operation_id
        twin.call, twin.dispatch, twin.response = self.call, self.dispatch, self.response
        twin.reconciles = list(self.reconciles)
        twin.decisions = list(self.decisions)
        twin.issues = list(self.issues)
        twin.positions = dict(self.positions)
        return twin

    def freeze(self, *, copy: bool = True) -> ScannedOperation:
        """The operation's facts; ``copy=False`` hands over the positions map (only when this
        state is never changed again)."""
        # Positional, and no ``cast`` calls: on a long run this is done tens of thousands of times.
        facts: Any = self
        key = self.key
        return ScannedOperation(
            key[1],
            key[0],
            self.tool_name,
            self.operation_id,
            facts.call,
            facts.dispatch,
            facts.response,
            tuple(facts.reconciles) if self.reconciles else (),
            tuple(facts.decisions) if self.decisions else (),
            tuple(self.issues) if self.issues else (),
            dict(self.positions) if copy else self.positions,
        )


def _execution_identity(event: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (event["sessionId"], event["invocationId"], event["runId"], event["turnId"])


def _args_hash_or_none(call: Mapping[str, Any]) -> str | None:
    content = call["content"]
    try:
        return canonical_args_hash(content["name"], content["args"])
    except LedgerError:
        return None


class ToolLedgerScanner:
    """Incremental scanner state: seen ids, invocation spines and operations."""

    __slots__ = (
        "_base_count",
        "_by_key",
        "_by_opid",
        "_count",
        "_issues",
        "_markers",
        "_operations",
        "_origins",
        "_parent",
        "_seen",
        "_spines",
    )

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._spines: dict[str, tuple[str, str, str]] = {}
        self._by_key: dict[OperationKey, _Op] = {}
        self._by_opid: dict[str, _Op] = {}
        self._operations: list[_Op] = []
        self._issues: list[ScanIssue] = []
        self._markers: list[tuple[int, str]] = []
        self._count = 0
        # Set on a fork only: the scanner it was made from, that scanner's event count at the
        # time, and each copied operation's original (by the copy's id), for ``absorb``.
        self._parent: ToolLedgerScanner | None = None
        self._base_count = 0
        self._origins: dict[int, _Op] = {}

    # ---- reading the state ----------------------------------------------------------------

    @property
    def issues(self) -> tuple[ScanIssue, ...]:
        return tuple(self._issues)

    @property
    def first_issue(self) -> ScanIssue | None:
        return self._issues[0] if self._issues else None

    @property
    def event_count(self) -> int:
        """How many events were fed (including skipped ones); the next event's position."""
        return self._count

    def has_event(self, event_id: str) -> bool:
        return event_id in self._seen

    def operation(self, invocation_id: str, tool_call_id: str) -> ScannedOperation | None:
        op = self._by_key.get((invocation_id, tool_call_id))
        return op.freeze() if op is not None else None

    def operation_by_id(self, operation_id: str) -> ScannedOperation | None:
        op = self._by_opid.get(operation_id)
        return op.freeze() if op is not None else None

    def result(self, *, copy: bool = True) -> ToolLedgerScan:
        """The scan so far. ``copy=False`` hands the operations' positions maps over uncopied:
        only for a scanner that is never fed again."""
        return ToolLedgerScan(
            tuple(op.freeze(copy=copy) for op in self._operations),
            tuple(self._issues),
            tuple(self._markers),
        )

    def recovery_operations(self) -> tuple[ScannedOperation, ...]:
        """The operations that hold a reconcile or decision fact (``result().operations``
        filtered, without freezing the others)."""
        return tuple(op.freeze() for op in self._operations if op.reconciles or op.decisions)

    # ---- prospective checks ---------------------------------------------------------------

    def fork(self, candidates: Iterable[RuntimeEvent]) -> ToolLedgerScanner:
        """A small independent scanner holding only the state ``candidates`` can touch.

        Feeding the candidates into the fork raises exactly the issues that feeding them into
        this scanner would, and leaves this scanner unchanged. The fork starts without issues.
        """
        twin = ToolLedgerScanner()
        twin._count = twin._base_count = self._count
        twin._parent = self
        copies: dict[int, _Op] = {}
        for candidate in candidates:
            event = cast(dict[str, Any], candidate)
            if event["id"] in self._seen:
                twin._seen.add(event["id"])
            invocation = event["invocationId"]
            spine = self._spines.get(invocation)
            if spine is not None:
                twin._spines[invocation] = spine
            keys, operation_ids = _touched(event)
            for key in keys:
                op = self._by_key.get(key)
                if op is not None and id(op) not in copies:
                    self._adopt_into(twin, op, copies)
            for operation_id in operation_ids:
                op = self._by_opid.get(operation_id)
                if op is not None:
                    copy = copies.get(id(op)) or self._adopt_into(twin, op, copies)
                    twin._by_opid[operation_id] = copy
        return twin

    def _adopt_into(self, twin: ToolLedgerScanner, op: _Op, copies: dict[int, _Op]) -> _Op:
        """Copy ``op`` into the fork ``twin`` (``copies`` maps originals' ids to copies)."""
        copy = copies[id(op)] = op.copy()
        twin._origins[id(copy)] = op
        twin._operations.append(copy)
        twin._by_key[copy.key] = copy
        if copy.operation_id is not None and self._by_opid.get(copy.operation_id) is op:
            twin._by_opid[copy.operation_id] = copy
        return copy

    def absorb(self, fork: ToolLedgerScanner) -> bool:
        """Take over the state of ``fork`` after the events fed to it became facts, instead of
        feeding them again: the fork holds every piece of state those events touched, in exactly
        the state feeding them here would produce (the property ``fork`` guarantees), so
        copying it back is the same as feeding. Returns False (and changes nothing) unless
        ``fork`` was made from this scanner and nothing was fed here since; the caller then
        feeds the events itself. A fork can be absorbed once."""
        if fork._parent is not self or fork._base_count != self._count:
            return False
        fork._parent = None
        origins = fork._origins
        self._seen |= fork._seen
        self._spines.update(fork._spines)
        for twin in fork._operations:
            original = origins.get(id(twin))
            if original is None:  # an operation the fork's events created
                self._operations.append(twin)
                self._by_key[twin.key] = twin
                continue
            original.tool_name = twin.tool_name
            original.operation_id = twin.operation_id
            original.call, original.dispatch = twin.call, twin.dispatch
            original.response = twin.response
            original.reconciles, original.decisions = twin.reconciles, twin.decisions
            original.issues, original.positions = twin.issues, twin.positions
        for operation_id, twin in fork._by_opid.items():
            self._by_opid[operation_id] = origins.get(id(twin), twin)
        self._issues.extend(fork._issues)
        self._markers.extend(fork._markers)
        self._count = fork._count
        return True

    def probe(self, candidates: Iterable[RuntimeEvent]) -> tuple[ScanIssue, ...]:
        """The issues feeding ``candidates`` (in order) would raise; changes nothing."""
        batch = list(candidates)
        twin = self.fork(batch)
        raised: list[ScanIssue] = []
        for candidate in batch:
            raised.extend(twin.feed(candidate))
        return tuple(raised)

    # ---- feeding --------------------------------------------------------------------------

    def feed_all(self, events: Iterable[RuntimeEvent]) -> tuple[ScanIssue, ...]:
        raised: list[ScanIssue] = []
        for event in events:
            raised.extend(self.feed(event))
        return tuple(raised)

    def feed(self, event: RuntimeEvent) -> tuple[ScanIssue, ...]:
        """Apply one event (in ledger order); returns the issues it raised, in order."""
        issues = self._issues
        mark = len(issues)
        self._apply(cast(dict[str, Any], event))
        return tuple(issues[mark:]) if len(issues) > mark else ()

    # C901: the scanner's per-event hot path, one branch per action, inlined for speed.
    def _apply(self, raw: dict[str, Any]) -> None:  # noqa: C901
        """``feed`` without building its return value (the batch scan calls this directly)."""
        position = self._count
        self._count = position + 1
        event_id: str = raw["id"]
        seen = self._seen
        actions = raw.get("actions")
        if event_id in seen:
            self._issues.append(ScanIssue(ScanIssueCode.DUPLICATE_EVENT_ID, event_id))
            if actions is not None and "runtimeProtocol" in actions:
                self._markers.append((position, event_id))
            return
        seen.add(event_id)
        invocation: str = raw["invocationId"]
        spine = (raw["sessionId"], raw["runId"], raw["turnId"])
        known = self._spines.get(invocation)
        if known is None:
            self._spines[invocation] = spine
        elif known != spine:
            self._issues.append(ScanIssue(ScanIssueCode.INVOCATION_IDENTITY_CONFLICT, event_id))
        if actions is not None and "runtimeProtocol" in actions:
            self._markers.append((position, event_id))
            # The marker's value is the T1 protocol (the decoder already holds the rest of its
            # shape, e.g. the run's declared workspace checkpoint mode).
            if known is not None or actions["runtimeProtocol"].get("toolBoundary") != _BOUNDARY:
                self._issues.append(ScanIssue(ScanIssueCode.PROTOCOL_MARKER_INVALID, event_id))
        # The workspace-fact writer's and import's own check: a fact that is not one is an
        # issue here too (never an ordinary event to replay).
        if (
            actions is not None
            and ("workspaceCheckpoint" in actions or "workspaceCheckpointFailed" in actions)
            and workspace_fact_problem(cast(RuntimeEvent, raw)) is not None
        ):
            self._issues.append(ScanIssue(ScanIssueCode.WORKSPACE_FACT_MALFORMED, event_id))
        content = raw.get("content")
        if content is None:
            if actions is None or ("toolDispatch" not in actions and "toolRecovery" not in actions):
                return  # no lane signal: an ordinary event, nothing more to record
        elif content["kind"] not in _TOOL_CONTENT and (
            actions is None or ("toolDispatch" not in actions and "toolRecovery" not in actions)
        ):
            return
        lane: Lane | LaneConflict | None = plain_lane(raw)
        if lane is None:
            lane = classify_lane(raw)
        if isinstance(lane, LaneConflict):
            self._issues.append(ScanIssue(ScanIssueCode.SEMANTIC_LANE_CONFLICT, event_id))
        elif lane is Lane.ORDINARY or raw["partial"]:
            pass
        elif lane is Lane.FUNCTION_CALL:
            self._on_call(raw, invocation, position)
        elif lane is Lane.TOOL_DISPATCH:
            self._on_dispatch(raw, invocation, position)
        elif lane is Lane.FUNCTION_RESPONSE:
            self._on_response(raw, invocation, position)
        else:
            self._on_recovery(raw, lane, position)

    # ---- per-lane rules -------------------------------------------------------------------

    def _new_op(self, key: OperationKey, tool_name: str | None) -> _Op:
        op = _Op(key, tool_name)
        self._by_key[key] = op
        self._operations.append(op)
        return op

    def _op_issue(
        self, op: _Op, code: ScanIssueCode, event_id: str, operation_id: str | None = None
    ) -> ScanIssue:
        issue = ScanIssue(code, event_id, operation_id or op.operation_id, op.key[1])
        op.issues.append(issue)
        self._issues.append(issue)
        return issue

    def _on_call(self, event: dict[str, Any], invocation: str, position: int) -> None:
        content = event["content"]
        key = (invocation, content["id"])
        op = self._by_key.get(key)
        if op is None:
            op = self._new_op(key, content["name"])
        elif op.call is not None:
            self._op_issue(op, ScanIssueCode.DUPLICATE_CALL, event["id"])
            return
        elif op.tool_name != content["name"]:
            self._op_issue(op, ScanIssueCode.IDENTITY_CONFLICT, event["id"])
        op.call = event
        op.positions[event["id"]] = position

    def _on_dispatch(self, event: dict[str, Any], invocation: str, position: int) -> None:
        fact = event["actions"]["toolDispatch"]
        operation_id: str = fact["operationId"]
        event_id: str = event["id"]
        key = (invocation, fact["providerToolCallId"])
        op = self._by_key.get(key)
        if op is None:
            # A dispatch before its call (an orphan dispatch): the operation is created from
            # the dispatch, its operation id and dispatch event set at once, before the
            # duplicate-operation check, so it stays an orphan dispatch with both even when
            # that check skips the binding below (docs/design/ledger.md section 4).
            op = self._new_op(key, fact["toolName"])
            op.operation_id = operation_id
            op.dispatch = event
            op.positions[event_id] = position
            self._op_issue(op, ScanIssueCode.EVENT_ORDER_CONFLICT, event_id)
        elif op.dispatch is not None:
            self._op_issue(op, ScanIssueCode.DUPLICATE_DISPATCH, event_id, operation_id)
            return
        other = self._by_opid.get(operation_id)
        if other is not None and other is not op:
            issue = self._op_issue(op, ScanIssueCode.DUPLICATE_OPERATION, event_id, operation_id)
            other.issues.append(issue)
            return
        op.operation_id = operation_id
        op.dispatch = event
        op.positions[event_id] = position
        self._by_opid[operation_id] = op
        refs = event["refs"]
        call = op.call
        if (
            op.tool_name != fact["toolName"]
            or refs["operationId"] != operation_id
            or refs["toolCallId"] != fact["providerToolCallId"]
            or (call is not None and _execution_identity(call) != _execution_identity(event))
        ):
            self._op_issue(op, ScanIssueCode.IDENTITY_CONFLICT, event_id)
        if call is not None and _args_hash_or_none(call) != fact["canonicalArgsHash"]:
            self._op_issue(op, ScanIssueCode.CANONICAL_ARGS_HASH_CONFLICT, event_id)
        response = op.response
        if response is not None:
            self._op_issue(op, ScanIssueCode.EVENT_ORDER_CONFLICT, event_id)
            response_refs = response.get("refs") or {}
            if (
                response_refs.get("operationId") != operation_id
                or response_refs.get("toolCallId") != fact["providerToolCallId"]
                or _execution_identity(response) != _execution_identity(event)
            ):
                self._op_issue(op, ScanIssueCode.IDENTITY_CONFLICT, response["id"])

    def _on_response(self, event: dict[str, Any], invocation: str, position: int) -> None:
        content = event["content"]
        event_id: str = event["id"]
        key = (invocation, content["id"])
        op = self._by_key.get(key)
        if op is None:
            op = self._new_op(key, content["name"])
            op.response = event
            op.positions[event_id] = position
            self._op_issue(op, ScanIssueCode.ORPHAN_RESPONSE, event_id)
            return
        if op.response is not None:
            self._op_issue(op, ScanIssueCode.DUPLICATE_RESPONSE, event_id)
            return
        op.response = event
        op.positions[event_id] = position
        refs = event.get("refs") or {}
        call = op.call
        if (
            op.tool_name != content["name"]
            or call is None
            or _execution_identity(call) != _execution_identity(event)
            or (
                op.operation_id is not None
                and (
                    refs.get("operationId") != op.operation_id
                    or refs.get("toolCallId") != op.key[1]
                )
            )
        ):
            self._op_issue(op, ScanIssueCode.IDENTITY_CONFLICT, event_id)

    def _on_recovery(self, event: dict[str, Any], lane: Lane, position: int) -> None:
        payload = event["actions"]["toolRecovery"].get("payload")
        operation_id = payload.get("operationId") if isinstance(payload, dict) else None
        op = self._by_opid.get(operation_id) if isinstance(operation_id, str) else None
        if op is None:
            # Unknown operation, or a recovery fact before its dispatch: the issue names the
            # operation the fact claims (a string one) and the tool call its refs name.
            tool_call_id = event["refs"].get("toolCallId")
            claimed = operation_id if isinstance(operation_id, str) else None
            self._issues.append(
                ScanIssue(ScanIssueCode.EVENT_ORDER_CONFLICT, event["id"], claimed, tool_call_id)
            )
            return
        target = op.reconciles if lane is Lane.RECONCILE_RESULT else op.decisions
        target.append(event)
        op.positions[event["id"]] = position


def plain_lane(event: Mapping[str, Any]) -> Lane | None:
    """The lane of a tool fact in its plainest well-formed shape, or None to ask
    ``classify_lane``.

    A long run is mostly plain calls, responses carrying at most their duration, and dispatches;
    recognising those directly is much cheaper than collecting every lane signal. Whenever this
    returns a lane, ``classify_lane`` returns the same one (a property test checks it): the
    event has exactly that one lane signal and meets every envelope rule of the lane.
    """
    if event.get("partial") is not False or "status" in event:
        return None
    role, author = event.get("role"), event.get("author")
    actions = event.get("actions")
    content = event.get("content")
    if content is not None:
        kind = content.get("kind")
        if kind == "function_call":
            if actions is None and role == "model" and author == "agent":
                return Lane.FUNCTION_CALL
        elif (
            kind == "function_response"
            and role == "tool"
            and author == "tool"
            and (actions is None or _is_duration_only(actions))
        ):
            return Lane.FUNCTION_RESPONSE
        return None
    if (
        "content" not in event
        and actions is not None
        and len(actions) == 1
        and "toolDispatch" in actions
        and role == "system"
        and author == "system"
        and _is_bound_refs(event.get("refs"))
    ):
        return Lane.TOOL_DISPATCH
    return None


def _is_duration_only(actions: Mapping[str, Any]) -> bool:
    """``actions`` is exactly ``{stateDelta: {durationMs: <integer>}}`` (a float duration, also
    allowed, is left to ``classify_lane``)."""
    if len(actions) != 1:
        return False
    delta = actions.get("stateDelta")
    return type(delta) is dict and len(delta) == 1 and type(delta.get("durationMs")) is int


def _is_bound_refs(refs: Any) -> bool:
    """``refs`` holds exactly ``operationId`` and ``toolCallId``."""
    return type(refs) is dict and len(refs) == 2 and "operationId" in refs and "toolCallId" in refs


def _touched(event: Mapping[str, Any]) -> tuple[list[OperationKey], list[str]]:
    """Operation keys and operation ids ``event`` may read or change in the scanner."""
    keys: list[OperationKey] = []
    operation_ids: list[str] = []
    invocation = event["invocationId"]
    content = event.get("content")
    if content is not None and content.get("kind") in ("function_call", "function_response"):
        keys.append((invocation, content["id"]))
    actions = event.get("actions")
    if actions is not None:
        fact = actions.get("toolDispatch")
        if fact is not None:
            keys.append((invocation, fact["providerToolCallId"]))
            operation_ids.append(fact["operationId"])
        recovery = actions.get("toolRecovery")
        payload = recovery.get("payload") if isinstance(recovery, dict) else None
        operation_id = payload.get("operationId") if isinstance(payload, dict) else None
        if isinstance(operation_id, str):
            operation_ids.append(operation_id)
    return keys, operation_ids


def scan_tool_ledger(events: Iterable[RuntimeEvent]) -> ToolLedgerScan:
    """Scan ``events`` in ledger order (the batch form of ``ToolLedgerScanner``): the same
    result, without per-event issue tuples."""
    scanner = ToolLedgerScanner()
    apply = scanner._apply
    for event in cast(Iterable[dict[str, Any]], events):
        apply(event)
    # The scanner goes away here, so its operations' containers can be handed over uncopied.
    return scanner.result(copy=False)
