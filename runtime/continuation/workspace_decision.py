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
    RESTORE = "isolated_restore"


ANSWERED_BY = {
    WorkspaceDecision.REBASELINE: frozenset(
        {
            ParkReason.WORKSPACE_DRIFT,
            ParkReason.WORKSPACE_CHECKPOINT_STALE,
            ParkReason.WORKSPACE_CHECKPOINT_FAILED,
            ParkReason.WORKSPACE_CHECKPOINT_MISSING,
        }
    ),
    WorkspaceDecision.RESTORE: frozenset(
        {
            ParkReason.WORKSPACE_DRIFT,
            ParkReason.WORKSPACE_CHECKPOINT_STALE,
            ParkReason.WORKSPACE_CHECKPOINT_FAILED,
        }
    ),
}
"""The park reasons each decision answers: a rebaseline records the folder as it is now, so it
answers a drift, a stale or failed capture and a snapshot that is gone; a restore needs a
snapshot whose objects exist (the newest one), so it never answers a missing one."""


def offered_decisions(
    reasons: Sequence[ParkReason], *, restorable: bool = False
) -> tuple[str, ...]:
    """The decisions that would answer a park (``maka plan``, the banner), when every reason of
    it is a workspace reason they answer (a decision never waives another gate). ``restorable``:
    the newest snapshot's objects exist, so a copy of it can be made."""
    if not reasons:
        return ()
    offered: list[str] = []
    for decision in (WorkspaceDecision.RESTORE, WorkspaceDecision.REBASELINE):
        if decision is WorkspaceDecision.RESTORE and not restorable:
            continue
        if all(reason in ANSWERED_BY[decision] for reason in reasons):
            offered.append(decision.value)
    return tuple(offered)


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
