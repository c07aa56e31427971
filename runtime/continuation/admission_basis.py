"""The snapshot a continuation's admission was based on (docs/design/workspace.md sections 3 and 4).

A continuation stopped before its first snapshot of the folder (killed right after its admission,
or inside its first capture) ran nothing that could change the files. Its boundary snapshot is then
the one its admission was based on, instead of none at all:

- a plain continuation: its parent's boundary snapshot (the same workspace), walking further up
  the lineage while each generation is such a continuation too;
- a continuation in a restored copy: the snapshot the copy was made from (its
  ``workspaceTransition``), compared with the copy;
- a continuation that began with a rebaseline has a snapshot of its own (its ``workspaceBaseline``)
  and is judged by it as any run is.

Conservative: a generation that committed a checkpoint fact or a failed capture, or recorded any
tool call that may write, is judged by its own facts (today's rule); so is a run whose mode is not
``git_v1``. Pure over the lineage's committed events, oldest generation first; whether the basis
snapshot is intact is the resume service's evidence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime.continuation.expected_tree import ExpectedFile, expected_tree
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.workspace_facts import (
    WORKSPACE_FACT_KEYS,
    declared_mode,
    may_write,
    snapshot_fact,
)

PARENT = "parent"
RESTORED_COPY = "restored_copy"


@dataclass(frozen=True, slots=True)
class AdmissionBasis:
    """``checkpoint``: the snapshot (``workspaceIdentity`` names the store holding it,
    ``workspaceEpoch`` the epoch the continuation runs in); ``folder_identity``: the workspace
    compared with it; ``kind``: ``parent`` or ``restored_copy``; ``run_id``: the run that
    recorded it; ``files``: the parent's writes after that snapshot the ledger proves
    (``expected_tree``), compared by their content hash."""

    checkpoint: Mapping[str, Any]
    folder_identity: str
    kind: str
    run_id: str
    files: Mapping[str, ExpectedFile] = field(default_factory=dict)


def _call_names(event: RuntimeEvent) -> list[str]:
    """The tools an event dispatches or asks for (conservative: a call asked for counts)."""
    names: list[str] = []
    dispatch = (event.get("actions") or {}).get("toolDispatch")
    if isinstance(dispatch, Mapping):
        names.append(str(dispatch.get("toolName", "")))
    content: Any = event.get("content")
    if isinstance(content, Mapping) and content.get("kind") == "function_call":
        names.append(str(content.get("name", "")))
    return names


def stopped_before_first_snapshot(events: Sequence[RuntimeEvent]) -> bool:
    """A continuation in mode ``git_v1`` that committed no checkpoint fact (nor a failed
    capture, nor a baseline) and recorded no tool call that may write."""
    if not events:
        return False
    first: Mapping[str, Any] = events[0].get("actions") or {}
    if "continuationStart" not in first:
        return False
    mode = declared_mode(events)
    if mode is None or mode.get("mode") != "git_v1":
        return False
    for event in events:
        actions: Mapping[str, Any] = event.get("actions") or {}
        if snapshot_fact(actions) is not None or not WORKSPACE_FACT_KEYS.isdisjoint(actions):
            return False
        if any(may_write(name) for name in _call_names(event)):
            return False
    return True


def admission_basis(
    generations: Sequence[Sequence[RuntimeEvent]], workspace_identity: str | None
) -> AdmissionBasis | None:
    """The snapshot standing in for the boundary checkpoint of the newest generation (the
    interrupted run, whose header names ``workspace_identity``), or None: the run is judged by
    its own facts."""
    if not workspace_identity:
        return None
    index = len(generations) - 1
    while index >= 1 and stopped_before_first_snapshot(generations[index]):
        events = generations[index]
        first: Mapping[str, Any] = events[0].get("actions") or {}
        transition = first.get("workspaceTransition")
        if isinstance(transition, Mapping):
            if str(transition.get("toIdentity")) != workspace_identity:
                return None
            checkpoint = {
                "workspaceIdentity": str(transition.get("fromIdentity")),
                "workspaceEpoch": transition.get("workspaceEpoch"),
                "checkpointRef": transition.get("checkpointRef"),
                "commitId": transition.get("commitId"),
                "treeId": transition.get("treeId"),
            }
            return AdmissionBasis(checkpoint, workspace_identity, RESTORED_COPY, _run(events))
        parent = generations[index - 1]
        own = expected_tree(parent)
        if own.failed is not None or own.stale_after is not None:
            return None
        if own.checkpoint is not None:
            if str(own.checkpoint.get("workspaceIdentity")) != workspace_identity:
                return None
            return AdmissionBasis(
                own.checkpoint, workspace_identity, PARENT, _run(parent), own.files
            )
        index -= 1  # the parent stopped before its first snapshot too: what it was based on
    return None


def _run(events: Sequence[RuntimeEvent]) -> str:
    return str(events[0]["runId"]) if events else ""
