"""The ledger timeline: every committed event of a session, grouped the way a reader thinks.

A pure reading of runs and their events (no Qt, no SQLite) shared by ``maka timeline``, ``maka
ledger timeline`` and the desktop's Timeline view, so all three show one picture:

- runs in lineage order: a continuation directly under its source, one level deeper, its
  boundary (the source's high-water it continues after) on the run;
- inside a run, rows on the ``event_seq`` axis (timestamps are shown, never used for order);
- the facts of one tool operation (call, T1 dispatch, T2 response or recovery outcome, the
  user's attestation) grouped as one row placed at its first fact, each fact a child entry;
- recovery facts, run endings, workspace checkpoints, baselines and restores as kinds of their
  own; failures, unknown outcomes, parked and damaged records carry a problem status that no
  filter hides (``TimelineRow.problem``).

Why a continuation would park is pinned onto these rows by ``timeline_pins``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from runtime.ledger.codes import Lane
from runtime.ledger.collector_pause import collector_paused
from runtime.ledger.event_model import TERMINAL_STATUSES, RuntimeEvent
from runtime.ledger.lane_rules import RECONCILE_RESULT_KIND, LaneConflict, classify_lane

SUMMARY_LIMIT = 160
"""Characters of text a row's summary keeps (the detail pane shows the whole event)."""


class TimelineKind(StrEnum):
    """What a row or entry is; append-only (the desktop's filters and icons key on it)."""

    MESSAGE = "message"
    THINKING = "thinking"
    TOOL = "tool"
    TOOL_CALL = "tool_call"
    TOOL_DISPATCH = "tool_dispatch"
    TOOL_RESPONSE = "tool_response"
    RECOVERY = "recovery"
    ATTESTATION = "attestation"
    PERMISSION = "permission"
    CONTINUATION = "continuation"
    CHECKPOINT = "checkpoint"
    BASELINE = "baseline"
    RESTORE = "restore"
    RUN_END = "run_end"
    ERROR = "error"
    EVENT = "event"


class TimelineStatus(StrEnum):
    """A row's outcome. ``failed``, ``unknown``, ``parked`` and ``damaged`` are problems."""

    OK = "ok"
    RUNNING = "running"
    NOT_RUN = "not_run"
    CANCELLED = "cancelled"
    FAILED = "failed"
    UNKNOWN = "unknown"
    PARKED = "parked"
    DAMAGED = "damaged"


PROBLEM_STATUSES = frozenset(
    {TimelineStatus.FAILED, TimelineStatus.UNKNOWN, TimelineStatus.PARKED, TimelineStatus.DAMAGED}
)
_TOOL_KINDS = frozenset(
    {
        TimelineKind.TOOL_CALL,
        TimelineKind.TOOL_DISPATCH,
        TimelineKind.TOOL_RESPONSE,
        TimelineKind.RECOVERY,
        TimelineKind.ATTESTATION,
    }
)
_ATTESTED = frozenset({"user_attested_ran", "user_attested_not_run"})


class TimelineEntry(NamedTuple):
    """One committed event: its place on the axis, its lane and a one-line summary. A named
    tuple: a 100,000-event session builds one per event (a frozen dataclass's ``__init__``
    costs several times as much)."""

    seq: int
    event: RuntimeEvent
    kind: TimelineKind
    lane: str
    status: TimelineStatus
    summary: str

    @property
    def event_id(self) -> str:
        return self.event["id"]


class TimelineRow(NamedTuple):
    """A top-level row of a run: one event, or a tool operation's facts (``kind`` tool)."""

    kind: TimelineKind
    status: TimelineStatus
    summary: str
    entries: tuple[TimelineEntry, ...]
    tool_name: str | None = None
    tool_call_id: str | None = None

    @property
    def seq(self) -> int:
        return self.entries[0].seq

    @property
    def problem(self) -> bool:
        return self.status in PROBLEM_STATUSES


@dataclass(frozen=True, slots=True)
class RunSource:
    """A run and its committed events as a reader found them (store rows or file lines)."""

    run_id: str
    events: Sequence[tuple[int, RuntimeEvent]]
    status: str
    parent_run_id: str | None = None
    failure_class: str | None = None
    source_high_water: int | None = None
    lanes_checked: bool = False
    """The events were committed by the store's writers, which refuse an event without exactly
    one lane (LEDGER.md section 3): a lane is then read from its signal alone, without checking
    the envelope again (a file's events are checked in full)."""


@dataclass(frozen=True, slots=True)
class TimelineRun:
    """One run in lineage order: ``depth`` 0 for a first run, +1 per continuation."""

    run_id: str
    depth: int
    status: str
    rows: tuple[TimelineRow, ...]
    event_count: int
    parent_run_id: str | None = None
    failure_class: str | None = None
    source_high_water: int | None = None


def build_run(source: RunSource, depth: int = 0) -> TimelineRun:
    """The rows of one run, tool facts grouped per call id, in ``event_seq`` order."""
    ordered = sorted(source.events, key=_by_seq)
    ended = False
    slots: list[TimelineRow | list[TimelineEntry]] = []
    groups: dict[str, list[TimelineEntry]] = {}
    for seq, event in ordered:
        entry = _entry(seq, event, source.lanes_checked)
        call_id = _tool_call_id(event) if entry.kind in _TOOL_KINDS else None
        if call_id is None:
            ended = ended or entry.kind is TimelineKind.RUN_END
            slots.append(_single(entry))
            continue
        group = groups.get(call_id)
        if group is None:
            group = groups[call_id] = []
            slots.append(group)
        group.append(entry)
    rows = tuple(
        slot if isinstance(slot, TimelineRow) else _tool_row(tuple(slot), ended) for slot in slots
    )
    return TimelineRun(
        run_id=source.run_id,
        depth=depth,
        status=source.status,
        rows=rows,
        event_count=len(ordered),
        parent_run_id=source.parent_run_id,
        failure_class=source.failure_class,
        source_high_water=source.source_high_water,
    )


def _by_seq(pair: tuple[int, RuntimeEvent]) -> int:
    return pair[0]


def lineage_order(sources: Sequence[RunSource]) -> list[tuple[RunSource, int]]:
    """Runs with their depth: each first run in the given order, its continuations right under
    it. A parent that is not among ``sources`` (or a cycle) makes a run a first run."""
    known = {source.run_id for source in sources}
    children: dict[str, list[RunSource]] = {}
    roots: list[RunSource] = []
    for source in sources:
        parent = source.parent_run_id
        if parent is not None and parent in known and parent != source.run_id:
            children.setdefault(parent, []).append(source)
        else:
            roots.append(source)
    ordered: list[tuple[RunSource, int]] = []
    seen: set[str] = set()
    stack = [(root, 0) for root in reversed(roots)]
    while stack:
        source, depth = stack.pop()
        if source.run_id in seen:
            continue
        seen.add(source.run_id)
        ordered.append((source, depth))
        stack.extend((child, depth + 1) for child in reversed(children.get(source.run_id, [])))
    # Runs caught in a parent cycle have no root: show them at the top level all the same.
    ordered.extend((source, 0) for source in sources if source.run_id not in seen)
    return ordered


def build_timeline(sources: Sequence[RunSource]) -> tuple[TimelineRun, ...]:
    """Every run's rows, in lineage order. Builds an object or two per event, none of them
    cyclic: the cyclic collector is paused meanwhile (its passes would cost more than the
    building)."""
    with collector_paused():
        return tuple(build_run(source, depth) for source, depth in lineage_order(sources))


# ---- one event --------------------------------------------------------------------------------


def _terminal(event: RuntimeEvent) -> bool:
    actions = event.get("actions")
    return event.get("status") in TERMINAL_STATUSES or bool(
        actions is not None and actions.get("endInvocation")
    )


def _tool_call_id(event: RuntimeEvent) -> str | None:
    refs = event.get("refs")
    if refs is not None and "toolCallId" in refs:
        return refs["toolCallId"]
    content: Mapping[str, Any] | None = event.get("content")
    if content is not None and content.get("kind") in ("function_call", "function_response"):
        return str(content["id"])
    return None


def _short(text: str) -> str:
    """One line of at most ``SUMMARY_LIMIT`` characters (free text from the ledger only)."""
    line = " ".join(text[: SUMMARY_LIMIT * 4].split())
    return line if len(line) <= SUMMARY_LIMIT else line[: SUMMARY_LIMIT - 1] + "…"


def _signal_lane(event: RuntimeEvent) -> Lane:
    """The lane of an event the store already classified (its one lane signal)."""
    content = event.get("content")
    if content is not None:
        kind = content["kind"]
        if kind == "function_call":
            return Lane.FUNCTION_CALL
        if kind == "function_response":
            return Lane.FUNCTION_RESPONSE
    actions = event.get("actions")
    if actions is not None:
        if "toolDispatch" in actions:
            return Lane.TOOL_DISPATCH
        recovery = actions.get("toolRecovery")
        if recovery is not None:
            if recovery["kind"] == RECONCILE_RESULT_KIND:
                return Lane.RECONCILE_RESULT
            return Lane.RECOVERY_DECISION
    return Lane.ORDINARY


def _entry(seq: int, event: RuntimeEvent, lanes_checked: bool = False) -> TimelineEntry:
    lane = _signal_lane(event) if lanes_checked else classify_lane(event)
    if isinstance(lane, LaneConflict):
        return TimelineEntry(
            seq,
            event,
            TimelineKind.EVENT,
            "conflict",
            TimelineStatus.DAMAGED,
            _short(f"damaged record: {lane.reason}"),
        )
    kind, status, summary = _describe(event, lane)
    return TimelineEntry(seq, event, kind, lane, status, summary)  # a Lane is its value


_Described = tuple["TimelineKind", "TimelineStatus", str]
_RESULT: _Described = (TimelineKind.TOOL_RESPONSE, TimelineStatus.OK, "result")
_ERROR_RESULT: _Described = (TimelineKind.TOOL_RESPONSE, TimelineStatus.FAILED, "error result")
_DISPATCHED: dict[str, _Described] = {}


def _call(event: RuntimeEvent) -> _Described:
    return TimelineKind.TOOL_CALL, TimelineStatus.OK, f"call {event['content']['name']}"  # type: ignore[typeddict-item]


def _dispatch(event: RuntimeEvent) -> _Described:
    mode = event["actions"]["toolDispatch"]["recoveryMode"]
    found = _DISPATCHED.get(mode)
    if found is None:
        found = _DISPATCHED[mode] = (
            TimelineKind.TOOL_DISPATCH,
            TimelineStatus.OK,
            f"dispatched ({mode})",
        )
    return found


def _response(event: RuntimeEvent) -> _Described:
    return _ERROR_RESULT if event["content"].get("isError") else _RESULT


def _reconcile(event: RuntimeEvent) -> _Described:
    return _recovery(event["actions"]["toolRecovery"].get("payload", {}), Lane.RECONCILE_RESULT)


def _decision(event: RuntimeEvent) -> _Described:
    return _recovery(event["actions"]["toolRecovery"].get("payload", {}), Lane.RECOVERY_DECISION)


def _plain(event: RuntimeEvent) -> _Described:
    return _ordinary(event, event.get("content") or {})


_DESCRIBERS = {
    Lane.FUNCTION_CALL: _call,
    Lane.TOOL_DISPATCH: _dispatch,
    Lane.FUNCTION_RESPONSE: _response,
    Lane.RECONCILE_RESULT: _reconcile,
    Lane.RECOVERY_DECISION: _decision,
    Lane.ORDINARY: _plain,
}


def _describe(event: RuntimeEvent, lane: Lane) -> _Described:
    return _DESCRIBERS[lane](event)


def _recovery(payload: Mapping[str, Any], lane: Lane) -> tuple[TimelineKind, TimelineStatus, str]:
    if lane is Lane.RECONCILE_RESULT:
        observation = str(payload.get("observation", "?"))
        kind = TimelineKind.ATTESTATION if observation in _ATTESTED else TimelineKind.RECOVERY
        return kind, TimelineStatus.OK, f"observed {observation}"
    reason = str(payload.get("reasonCode", "?"))
    kind = TimelineKind.ATTESTATION if reason in _ATTESTED else TimelineKind.RECOVERY
    disposition = str(payload.get("disposition", "?"))
    status = {"completed": TimelineStatus.OK, "parked": TimelineStatus.PARKED}.get(
        disposition, TimelineStatus.DAMAGED
    )
    return kind, status, f"decided {disposition} ({reason})"


def _ordinary(
    event: RuntimeEvent, content: Mapping[str, Any]
) -> tuple[TimelineKind, TimelineStatus, str]:
    ok = TimelineStatus.OK
    actions: Mapping[str, Any] = event.get("actions") or {}
    if "workspaceTransition" in actions:
        fact = actions["workspaceTransition"]
        return TimelineKind.RESTORE, ok, _short(f"continued in a restored copy at {fact['toPath']}")
    if "workspaceBaseline" in actions:
        fact = actions["workspaceBaseline"]
        changed = len(fact["changedPaths"]) + fact["moreChangedPaths"]
        return TimelineKind.BASELINE, ok, f"continued with the current files ({changed} changed)"
    if "continuationStart" in actions:
        source = actions["continuationStart"]["immediateSource"]
        return (
            TimelineKind.CONTINUATION,
            ok,
            f"continues {source['runId']} after event {source['highWater']}",
        )
    if "workspaceCheckpoint" in actions:
        fact = actions["workspaceCheckpoint"]
        return (
            TimelineKind.CHECKPOINT,
            ok,
            f"snapshot at event {fact['runtimeHighWater']} ({fact['commitId'][:12]})",
        )
    if "workspaceCheckpointFailed" in actions:
        fact = actions["workspaceCheckpointFailed"]
        return (
            TimelineKind.CHECKPOINT,
            TimelineStatus.FAILED,
            f"snapshot failed ({fact['reasonCode']})",
        )
    if _terminal(event):
        return _ending(event, actions)
    permission = _permission(actions)
    if permission is not None:
        return TimelineKind.PERMISSION, ok, permission
    kind = content.get("kind")
    if kind == "error":
        return TimelineKind.ERROR, TimelineStatus.FAILED, _short(f"error: {content['message']}")
    if kind == "thinking":
        return TimelineKind.THINKING, ok, _short(f"thinking: {content['text']}")
    if kind == "text":
        return TimelineKind.MESSAGE, ok, _short(f"{event['role']}: {content['text']}")
    return TimelineKind.EVENT, ok, f"{event['author']} event"


def _ending(
    event: RuntimeEvent, actions: Mapping[str, Any]
) -> tuple[TimelineKind, TimelineStatus, str]:
    status = event.get("status", "completed")
    delta: Mapping[str, Any] = actions.get("stateDelta") or {}
    why = delta.get("failureClass") or delta.get("stopReason") or delta.get("abortSource")
    words = f"run {status}" + (f" ({why})" if why else "")
    outcome = {
        "completed": TimelineStatus.OK,
        "failed": TimelineStatus.FAILED,
        "aborted": TimelineStatus.CANCELLED,
        "cancelled": TimelineStatus.CANCELLED,
    }.get(status, TimelineStatus.OK)
    return TimelineKind.RUN_END, outcome, words


def _permission(actions: Mapping[str, Any]) -> str | None:
    if "permissionRequest" in actions:
        request = actions["permissionRequest"]
        return _short(f"asked to allow {request['toolName']}: {request['summary']}")
    if "permissionDecision" in actions:
        decision = actions["permissionDecision"]["decision"]
        return "allowed" if decision == "allow" else "denied"
    if "permissionClosure" in actions:
        return f"question closed ({actions['permissionClosure']['reason']})"
    return None


# ---- rows -------------------------------------------------------------------------------------


def _single(entry: TimelineEntry) -> TimelineRow:
    return TimelineRow(entry.kind, entry.status, entry.summary, (entry,))


def _tool_row(entries: tuple[TimelineEntry, ...], ended: bool) -> TimelineRow:
    """A tool operation's row: its status is what its facts prove, in this order: a damaged
    or parked fact, a recovery decision or attestation, the response, else unknown (a
    dispatch with nothing after it in an ended run), not run (a call never dispatched)."""
    name = _tool_name(entries)
    call_id = _tool_call_id(entries[0].event)
    kinds = {entry.kind for entry in entries}
    status = _tool_status(entries, kinds, ended)
    words = {
        TimelineStatus.OK: "done",
        TimelineStatus.FAILED: "failed",
        TimelineStatus.UNKNOWN: "outcome unknown",
        TimelineStatus.PARKED: "parked",
        TimelineStatus.DAMAGED: "damaged record",
        TimelineStatus.NOT_RUN: "not run",
        TimelineStatus.RUNNING: "no result yet",
        TimelineStatus.CANCELLED: "cancelled",
    }[status]
    if TimelineKind.ATTESTATION in kinds:
        words += ", settled by you"
    return TimelineRow(
        TimelineKind.TOOL,
        status,
        f"{name}: {words}",
        entries,
        tool_name=name,
        tool_call_id=call_id,
    )


def _tool_status(
    entries: tuple[TimelineEntry, ...], kinds: set[TimelineKind], ended: bool
) -> TimelineStatus:
    statuses = {entry.status for entry in entries}
    for worst in (TimelineStatus.DAMAGED, TimelineStatus.PARKED):
        if worst in statuses:
            return worst
    decided = [e for e in entries if e.lane == Lane.RECOVERY_DECISION.value]
    if decided:  # a recovery or the user settled it (an attested "did not run" is no failure)
        return decided[-1].status
    response = [e for e in entries if e.kind is TimelineKind.TOOL_RESPONSE]
    if response:
        return response[-1].status
    if TimelineKind.TOOL_DISPATCH in kinds:
        return TimelineStatus.UNKNOWN if ended else TimelineStatus.RUNNING
    return TimelineStatus.NOT_RUN if ended else TimelineStatus.RUNNING


def _tool_name(entries: tuple[TimelineEntry, ...]) -> str:
    for entry in entries:
        content: Mapping[str, Any] = entry.event.get("content") or {}
        if "name" in content:
            return str(content["name"])
        actions: Mapping[str, Any] = entry.event.get("actions") or {}
        if "toolDispatch" in actions:
            return str(actions["toolDispatch"]["toolName"])
    return "tool"
