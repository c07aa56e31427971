"""Host-authored notices for tool calls whose outcome a new turn cannot know
(docs/design/recovery.md 7).

After a park the user may type a new message instead of resuming. The model then sees the
session's committed history with paired calls only; an interrupted call is not in it, and it is
never given a fabricated result. Instead, for every operation left ``indeterminate`` or ``parked``
the history carries an explicit notice in the user's seat, naming the tool and its arguments and
saying that the outcome is unknown (or, for a write recovery proved never happened, that it did
not happen). Notices are derived from committed facts each time, so they are deterministic.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from runtime.agent.context_overflow import unanswered_turn_events
from runtime.ledger.codes import ResolverReason, ResolverStatus
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.quarantined_runs import Quarantined, read_unless_quarantined
from runtime.ledger.store_ports import LedgerReader, RunHeader, RunStatus
from runtime.providers.history_projection import history_from_events, omitted_event_ids
from runtime.providers.provider_port import HistoryItem, HostNotice
from runtime.recovery.recovery_resolver import resolve_recovery

_ARGS_LIMIT = 400


def _describe_call(event: RuntimeEvent | None, tool_name: str) -> str:
    if event is None or event.get("content") is None:
        return tool_name
    content = event["content"]
    args = content.get("args") if content["kind"] == "function_call" else None
    text = json.dumps(args, ensure_ascii=False, sort_keys=True)
    if len(text) > _ARGS_LIMIT:
        text = text[:_ARGS_LIMIT] + "…"
    return f"{tool_name} with arguments {text}"


def outcome_notices(events: Sequence[RuntimeEvent]) -> tuple[HostNotice, ...]:
    """Notices for one run's unsettled tool calls, in ledger order."""
    resolution = resolve_recovery(events)
    by_id = {event["id"]: event for event in events}
    notices: list[HostNotice] = []
    for decision in resolution.decisions:
        if decision.status not in (ResolverStatus.INDETERMINATE, ResolverStatus.PARKED):
            continue
        call = by_id.get(decision.call_runtime_event_id or "")
        if call is not None and call.get("modelVisibility") == "hidden":
            continue
        what = _describe_call(call, decision.tool_name or "a tool")
        if decision.reason is ResolverReason.RECONCILE_MATCHES_PRIOR_STATE:
            text = (
                f"Note from the host: an earlier turn was interrupted while calling {what}. "
                "Recovery checked the workspace: that change did not happen. Redo it only if it "
                "is still wanted."
            )
        else:
            text = (
                f"Note from the host: an earlier turn was interrupted while calling {what}. "
                "Its outcome is unknown: it may or may not have taken effect. Do not retry it "
                "blindly; use read-only tools to check the current state first."
            )
        notices.append(HostNotice(text))
    return tuple(notices)


UNREADABLE_TURN_NOTE = (
    "Note from the host: the saved record of an earlier turn of this conversation can no longer "
    "be read, so it is left out. What that turn did to the files may still be there: check the "
    "current state before relying on it."
)
_UNREADABLE: list[RuntimeEvent] = []


def _readable_events(reader: LedgerReader, header: RunHeader) -> list[RuntimeEvent]:
    """The run's events; ``_UNREADABLE`` (no events) when its stored record no longer decodes
    (``store_corrupt``: startup recovery quarantined it). The whole run is left out, so the
    history stays paired, and a note says so: one damaged run no longer keeps every later
    message of the session from running (docs/design/recovery.md: the rest goes on)."""
    rows = read_unless_quarantined(reader, header.run_id)
    if isinstance(rows, Quarantined):
        return _UNREADABLE
    return [row.event for row in rows]


def committed_history(reader: LedgerReader, runs: Sequence[RunHeader]) -> tuple[HistoryItem, ...]:
    """What the model is shown of earlier turns: each run's committed, paired history, oldest
    first, then a notice for every tool call whose outcome is unknown or parked. A new turn and a
    continuation (for the turns before its lineage) both build their history with this."""
    return committed_context(reader, runs)[0]


def committed_context(
    reader: LedgerReader, runs: Sequence[RunHeader], also_omit: frozenset[str] = frozenset()
) -> tuple[tuple[HistoryItem, ...], tuple[RuntimeEvent, ...]]:
    """``committed_history`` and, beside it, the model-visible events of earlier turns that
    failed before the model answered anything (what an overflow also leaves out). A host notice
    in any of ``runs`` (or ``also_omit``) leaves its named events out of every run's history."""
    per_run = [_readable_events(reader, header) for header in runs]
    omitted = frozenset(also_omit.union(*(omitted_event_ids(events) for events in per_run)))
    items: list[HistoryItem] = []
    notices: list[HistoryItem] = []
    if any(events is _UNREADABLE for events in per_run):
        notices.append(HostNotice(UNREADABLE_TURN_NOTE))
    unanswered: list[RuntimeEvent] = []
    for header, events in zip(runs, per_run, strict=True):
        items.extend(history_from_events(events, omitted))
        notices.extend(outcome_notices(events))
        if header.status is RunStatus.FAILED:
            unanswered.extend(unanswered_turn_events(events, omitted))
    return (*items, *notices), tuple(unanswered)
