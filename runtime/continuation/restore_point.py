"""Which snapshot a restored copy would be made from (docs/design/workspace.md section 4), and what
it reflects.

Pure over the lineage's committed events (oldest generation first) and a predicate saying whether
a snapshot's Git objects still exist: the newest snapshot of the lineage that is intact. When
that is the boundary snapshot, the copy is the folder at the stop, or the folder before the
calls that may have written after it (a stale or failed capture; a call the ledger proves
changed nothing, settled "did not run" or found untouched, is not one of them); when the
boundary snapshot is gone (``workspace_checkpoint_missing``), it is the latest earlier one whose
objects exist, and the calls after it are named so nobody takes the copy for the folder at the
stop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime.continuation.expected_tree import changed_nothing
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.restore_point_words import (
    AT_STOP,
    BEFORE_LATER_CALLS,
    EARLIER_SNAPSHOT,
    call_subjects,
    copy_reflects,
)
from runtime.ledger.workspace_facts import may_write, snapshot_fact

LATER_CALLS_KEPT = 50


@dataclass(frozen=True, slots=True)
class RestorePoint:
    """The snapshot a copy is made from and what the transition fact records about it."""

    checkpoint: Mapping[str, Any]
    kind: str  # AT_STOP, BEFORE_LATER_CALLS or EARLIER_SNAPSHOT
    fields: Mapping[str, Any]  # the transition fact's restore-point fields (none at the stop)
    # The lineage's calls as people know them (by command or file, never by id), for the words.
    subjects: Mapping[str, str] = field(default_factory=dict)

    @property
    def reflects(self) -> str:
        """What the copy holds, for people."""
        return copy_reflects(self.fields, self.subjects)


@dataclass(slots=True)
class _Seen:
    checkpoint: Mapping[str, Any]
    after_call: dict[str, str] | None
    later: list[dict[str, str]]
    ts: int = 0  # when its fact was committed


def _snapshots(generations: Sequence[Sequence[RuntimeEvent]]) -> list[_Seen]:
    """Every snapshot of the lineage, oldest first, with the writing calls after it."""
    seen: list[_Seen] = []
    for events in generations:
        last_write: dict[str, str] | None = None  # captures follow each writing call's result
        unchanged: frozenset[str] | None = None  # read once per run, when a call needs it
        for event in events:
            actions = event.get("actions")
            if not actions:
                continue
            snapshot = snapshot_fact(actions)
            if snapshot is not None:
                seen.append(_Seen(snapshot, last_write, [], int(event.get("ts") or 0)))
                continue
            dispatch = actions.get("toolDispatch")
            if dispatch is None or not may_write(dispatch["toolName"]):
                continue
            call = {"toolName": dispatch["toolName"], "toolCallId": dispatch["providerToolCallId"]}
            last_write = call
            if seen and dispatch.get("operationId") is not None:
                if unchanged is None:
                    unchanged = changed_nothing(events)
                if call["toolCallId"] in unchanged:
                    continue  # proven to have changed nothing: the copy lacks nothing of it
            for entry in seen:
                entry.later.append(call)
    return seen


def find_restore_point(
    generations: Sequence[Sequence[RuntimeEvent]],
    intact: Callable[[Mapping[str, Any]], bool],
) -> RestorePoint | None:
    """The newest intact snapshot of the lineage, or None (nothing left to copy)."""
    seen = _snapshots(generations)
    for index in range(len(seen) - 1, -1, -1):
        entry = seen[index]
        if not intact(entry.checkpoint):
            continue
        fields: dict[str, Any] = {}
        if index < len(seen) - 1:
            kind = EARLIER_SNAPSHOT
            fields["restorePoint"] = kind
            fields["lostCheckpointRef"] = str(seen[-1].checkpoint.get("checkpointRef", ""))
            if entry.after_call is not None:
                fields["snapshotAfterCall"] = entry.after_call
            fields["snapshotAgeMs"] = max(0, seen[-1].ts - entry.ts)
        elif entry.later:
            kind = BEFORE_LATER_CALLS
            fields["restorePoint"] = kind
        else:
            kind = AT_STOP
        if kind != AT_STOP and entry.later:
            fields["laterCalls"] = entry.later[:LATER_CALLS_KEPT]
            if len(entry.later) > LATER_CALLS_KEPT:
                fields["moreLaterCalls"] = len(entry.later) - LATER_CALLS_KEPT
        subjects = call_subjects(event for events in generations for event in events)
        return RestorePoint(entry.checkpoint, kind, fields, subjects)
    return None
