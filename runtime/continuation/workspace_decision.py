"""The user's ways forward when the files no longer match the boundary snapshot
(docs/design/workspace.md section 4).

Pure: which park reasons a decision answers, and the host notice a rebaselined continuation ends
its provider history with. The decision itself is recorded by the admission transaction (the
``workspaceBaseline`` fact in the continuation's start event).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from runtime.ledger.codes import ParkReason
from runtime.ledger.workspace_facts import baseline_notice

__all__ = [
    "ANSWERED_BY",
    "WORKSPACE_DECISION_REASONS",
    "WorkspaceDecision",
    "baseline_notice",
    "offered_decisions",
]


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
            ParkReason.WORKSPACE_CHECKPOINT_MISSING,
        }
    ),
}
"""The park reasons each decision answers: a rebaseline records the folder as it is now, so it
answers a drift, a stale or failed capture and a snapshot that is gone; a restore needs a
snapshot whose objects exist (``restorable``): for a missing one, an earlier snapshot of the
lineage (``restore_point``), and without one it is not offered."""

WORKSPACE_DECISION_REASONS = (
    ANSWERED_BY[WorkspaceDecision.REBASELINE] | ANSWERED_BY[WorkspaceDecision.RESTORE]
)
"""The park reasons some decision answers: the files' reasons."""


def offered_decisions(
    reasons: Sequence[ParkReason], *, restorable: bool = False
) -> tuple[str, ...]:
    """The decisions that would answer a park (``maka plan``, the banner), when every reason of
    it is a workspace reason they answer (a decision never waives another gate). ``restorable``:
    a snapshot of the lineage whose objects exist, so a copy of it can be made."""
    if not reasons:
        return ()
    offered: list[str] = []
    for decision in (WorkspaceDecision.RESTORE, WorkspaceDecision.REBASELINE):
        if decision is WorkspaceDecision.RESTORE and not restorable:
            continue
        if all(reason in ANSWERED_BY[decision] for reason in reasons):
            offered.append(decision.value)
    return tuple(offered)
