"""The user's ways forward when the files no longer match the boundary snapshot (WORKSPACE.md
section 4).

Pure: which park reasons a decision answers, and the host notice a rebaselined continuation ends
its provider history with. The decision itself is recorded by the admission transaction (the
``workspaceBaseline`` fact in the continuation's start event).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from runtime.ledger.codes import ParkReason

NOTICE_PATHS_SHOWN = 50


class WorkspaceDecision(StrEnum):
    REBASELINE = "rebaseline"


ANSWERED_BY = {
    WorkspaceDecision.REBASELINE: frozenset(
        {
            ParkReason.WORKSPACE_DRIFT,
            ParkReason.WORKSPACE_CHECKPOINT_STALE,
            ParkReason.WORKSPACE_CHECKPOINT_FAILED,
            ParkReason.WORKSPACE_CHECKPOINT_MISSING,
        }
    ),
}
"""The park reasons each decision answers: a rebaseline records the folder as it is now, so it
answers a drift, a stale or failed capture and a snapshot that is gone."""

DECISION_OPTIONS: dict[ParkReason, tuple[str, ...]] = {
    ParkReason.WORKSPACE_DRIFT: ("rebaseline",),
    ParkReason.WORKSPACE_CHECKPOINT_STALE: ("rebaseline",),
    ParkReason.WORKSPACE_CHECKPOINT_FAILED: ("rebaseline",),
    ParkReason.WORKSPACE_CHECKPOINT_MISSING: ("rebaseline",),
}
"""What a parked plan offers for each workspace reason (``maka plan``, the banner)."""


def offered_decisions(reasons: Sequence[ParkReason]) -> tuple[str, ...]:
    """The decisions that would answer a park, when every reason of it is a workspace reason
    that they answer (a decision never waives another gate)."""
    if not reasons or any(reason not in DECISION_OPTIONS for reason in reasons):
        return ()
    common = set(DECISION_OPTIONS[reasons[0]])
    for reason in reasons[1:]:
        common &= set(DECISION_OPTIONS[reason])
    return tuple(sorted(common))


def baseline_notice(baseline: Mapping[str, Any]) -> str:
    """The host notice that ends a rebaselined continuation's provider history."""
    changed: Sequence[Mapping[str, Any]] = baseline.get("changedPaths") or []
    more = int(baseline.get("moreChangedPaths") or 0)
    if not baseline.get("compared", False):
        return (
            "Note from the host: while this session was stopped, files in the folder may have "
            "changed outside your view, and there is no snapshot to tell which. The user chose "
            "to continue with the files as they are now. Re-read any file before you rely on "
            "what you saw of it earlier."
        )
    if not changed:
        return (
            "Note from the host: the user chose to continue with the files as they are now; "
            "no file differs from what you last saw."
        )
    lines = [f"- {item['path']} ({item['change']})" for item in changed[:NOTICE_PATHS_SHOWN]]
    if more:
        lines.append(f"- and {more} more")
    count = len(changed) + more
    noun = "file" if count == 1 else "files"
    return (
        f"Note from the host: while this session was stopped, {count} {noun} in the folder "
        "changed outside your view:\n"
        + "\n".join(lines)
        + "\nThe user chose to continue with the files as they are now. Re-read these files "
        "before you rely on what you saw of them earlier."
    )
