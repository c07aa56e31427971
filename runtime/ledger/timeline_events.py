"""One committed event as the ledger timeline shows it: its kind, its status and a one-line
summary (``timeline_model`` groups these into rows).

The kinds and statuses are closed vocabularies the desktop's filters and icons key on. An event
read from a file is classified by the full lane rules (a damaged event becomes a ``damaged``
entry, never hidden); one read from the store by its lane signal alone, the store's writers
having refused any event without exactly one lane.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, NamedTuple, cast

from runtime.ledger.codes import Lane
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
TOOL_KINDS = frozenset(
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


# ---- one event --------------------------------------------------------------------------------


def _terminal(event: RuntimeEvent) -> bool:
    actions = event.get("actions")
    return event.get("status") in TERMINAL_STATUSES or bool(
        actions is not None and actions.get("endInvocation")
    )


def tool_call_id(event: RuntimeEvent) -> str | None:
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


def entry_of(seq: int, event: RuntimeEvent, lanes_checked: bool = False) -> TimelineEntry:
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
_STOPPED_RESULT: _Described = (
    TimelineKind.TOOL_RESPONSE,
    TimelineStatus.CANCELLED,
    "stopped: the turn was cancelled",
)
_HOST_STOPPED_RESULT: _Described = (
    TimelineKind.TOOL_RESPONSE,
    TimelineStatus.CANCELLED,
    "stopped by Maka",
)
STOPPED_WORDS = {
    _STOPPED_RESULT[2]: "stopped when the turn was cancelled",
    _HOST_STOPPED_RESULT[2]: "stopped by Maka",
}
"""A tool row's words for a call whose result says it was stopped, by that result's summary."""
_STOPS = {"cancelled": _STOPPED_RESULT, "host": _HOST_STOPPED_RESULT}
NOT_STARTED_WORDS = "not run (the turn was cancelled)"
"""A tool row's words for a call refused because its turn was cancelled before it started."""
NOT_STARTED_BY_HOST_WORDS = "not run (Maka stopped the turn)"
"""The same when Maka stopped the turn (a question nobody could answer, a shutdown)."""
_DISPATCHED: dict[str, _Described] = {}


def _call(event: RuntimeEvent) -> _Described:
    return _called(event["content"]["name"])  # type: ignore[typeddict-item]


def _called(name: object) -> _Described:
    return TimelineKind.TOOL_CALL, TimelineStatus.OK, f"call {name}"


def _dispatch(event: RuntimeEvent) -> _Described:
    return _dispatched(event["actions"]["toolDispatch"]["recoveryMode"])


def _dispatched(mode: str) -> _Described:
    found = _DISPATCHED.get(mode)
    if found is None:
        found = _DISPATCHED[mode] = (
            TimelineKind.TOOL_DISPATCH,
            TimelineStatus.OK,
            f"dispatched ({mode})",
        )
    return found


def _response(event: RuntimeEvent) -> _Described:
    content: Mapping[str, Any] = event["content"]
    if not content.get("isError"):
        return _RESULT
    return _STOPS.get(stop_of(content.get("result")) or "", _ERROR_RESULT)


def stop_of(result: object) -> str | None:
    """Why an error result says its call was stopped, not failed: ``"host"`` (Maka ended the
    command, ``stoppedByHost``), ``"cancelled"`` (the turn was cancelled while it ran, or
    before it started: ``cancelled``, or a refusal's ``code`` ``cancelled``), else None. The
    timeline index reads the same in SQL (``storage/ledger/timeline_index.py``)."""
    if not isinstance(result, dict):
        return None
    if result.get("stoppedByHost") is True:
        return "host"
    if result.get("cancelled") is True or result.get("code") == "cancelled":
        return "cancelled"
    return None


def stopped_words(content: Mapping[str, Any] | None, dispatched: bool) -> str | None:
    """What a tool row says of a call whose (error) result says it was stopped, not failed
    (``stop_of``): "stopped when the turn was cancelled", "stopped by Maka", or, for a call
    never dispatched, ``NOT_STARTED_WORDS``; None for any other result. ``maka plan`` words its
    call lines with it, so they read as ``maka timeline``'s rows."""
    if not content or not content.get("isError"):
        return None
    stop = _STOPS.get(stop_of(content.get("result")) or "")
    if stop is None:
        return None
    if dispatched:
        return STOPPED_WORDS[stop[2]]
    return NOT_STARTED_BY_HOST_WORDS if stop is _HOST_STOPPED_RESULT else NOT_STARTED_WORDS


class ToolFact(NamedTuple):
    """What ``entry_of`` and a tool row read of a stored event on a tool lane, answered by the
    store without decoding it (``storage/ledger/timeline_index.py``): its id, its lane, what
    its lane's summary names (a call's ``content.name``, a dispatch's ``recoveryMode``, a
    response's ``isError`` as a flag, an observation's ``observation``, a decision's
    ``reasonCode`` and ``disposition``, a missing one as ``"?"``) and the tool name a row
    takes from it (``tool_name_of``: None when it gives none)."""

    event_id: str
    lane: str
    first: str | None
    second: str | None
    is_error: bool
    tool_name: str | None


_FACT_LANES = {
    Lane.FUNCTION_CALL.value: Lane.FUNCTION_CALL,
    Lane.TOOL_DISPATCH.value: Lane.TOOL_DISPATCH,
    Lane.FUNCTION_RESPONSE.value: Lane.FUNCTION_RESPONSE,
    Lane.RECONCILE_RESULT.value: Lane.RECONCILE_RESULT,
    Lane.RECOVERY_DECISION.value: Lane.RECOVERY_DECISION,
}
_FACT_DESCRIBED: dict[tuple[str, str | None, str | None, bool], _Described] = {}


def fact_entry(seq: int, fact: ToolFact) -> TimelineEntry:
    """``entry_of``'s entry of that event as a filter reads it (its event reduced to its id,
    as ``LazyRows.searchable`` keeps every entry), by the same describers."""
    key = (fact.lane, fact.first, fact.second, fact.is_error)
    described = _FACT_DESCRIBED.get(key)
    if described is None:
        lane = _FACT_LANES[fact.lane]
        if lane is Lane.FUNCTION_CALL:
            described = _called(fact.first)
        elif lane is Lane.TOOL_DISPATCH:
            described = _dispatched(str(fact.first))
        elif lane is Lane.FUNCTION_RESPONSE:
            stop = _STOPS.get(fact.first or "", _ERROR_RESULT)
            described = stop if fact.is_error else _RESULT
        elif lane is Lane.RECONCILE_RESULT:
            described = _recovery({"observation": fact.first}, lane)
        else:
            described = _recovery({"reasonCode": fact.first, "disposition": fact.second}, lane)
        if len(_FACT_DESCRIBED) < 4096:  # a run names a few tools and modes
            _FACT_DESCRIBED[key] = described
    kind, status, summary = described
    event = cast("RuntimeEvent", {"id": fact.event_id})
    return TimelineEntry(seq, event, kind, fact.lane, status, summary)


def tool_name_of(event: RuntimeEvent) -> str | None:
    """The tool name a tool row takes from one of its facts (the first that has one): its
    content's ``name``, else its dispatch's ``toolName``."""
    content: Mapping[str, Any] = event.get("content") or {}
    if "name" in content:
        return str(content["name"])
    actions: Mapping[str, Any] = event.get("actions") or {}
    if "toolDispatch" in actions:
        return str(actions["toolDispatch"]["toolName"])
    return None


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
        if set(actions) == {"workspaceBaseline"}:  # a settled writing call's baseline
            return (
                TimelineKind.BASELINE,
                ok,
                f"your answer took the current files ({changed} changed)",
            )
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
            f"snapshot at event {fact['runtimeHighWater']} (commit {fact['commitId'][:12]})",
        )
    if "workspaceCheckpointFailed" in actions:
        fact = actions["workspaceCheckpointFailed"]
        if fact.get("decidedBy"):  # the decision to continue, its capture refused
            return (
                TimelineKind.BASELINE,
                ok,
                f"continued with the current files, not snapshotted ({fact['reasonCode']})",
            )
        return (
            TimelineKind.CHECKPOINT,
            TimelineStatus.FAILED,
            f"snapshot failed ({fact['reasonCode']})",
        )
    if _terminal(event):
        return _ending(event, actions)
    permission = _permission(actions, event.get("author"))
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
    content: Mapping[str, Any] = event.get("content") or {}
    # The reasons ``runtime.base.cancel_token`` names (HOST_STOPPED, OUTPUT_CLOSED).
    reason = content.get("reason") if content.get("kind") == "error" else None
    if reason == "host_stopped":
        why = "stopped by Maka: the Maka process running it was shut down"
    elif delta.get("abortSource") == "host":
        why = "stopped by Maka at a permission question nobody could answer"
    elif reason == "output_closed":
        why = "stopped: the program reading its output ended"
    words = f"run {status}" + (f" ({why})" if why else "")
    outcome = {
        "completed": TimelineStatus.OK,
        "failed": TimelineStatus.FAILED,
        "aborted": TimelineStatus.CANCELLED,
        "cancelled": TimelineStatus.CANCELLED,
    }.get(status, TimelineStatus.OK)
    return TimelineKind.RUN_END, outcome, words


def _permission(actions: Mapping[str, Any], author: object = "user") -> str | None:
    if "permissionRequest" in actions:
        request = actions["permissionRequest"]
        return _short(f"asked to allow {request['toolName']}: {request['summary']}")
    if "permissionDecision" in actions:
        if author == "host":  # closed by Maka when the turn stopped: nobody answered
            return "question closed unanswered (the turn was stopped)"
        decision = actions["permissionDecision"]["decision"]
        return "allowed" if decision == "allow" else "denied"
    if "permissionClosure" in actions:
        return f"question closed ({actions['permissionClosure']['reason']})"
    return None
