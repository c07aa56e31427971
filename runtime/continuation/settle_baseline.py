"""Settling a writing call's unknown outcome is one answer (docs/design/workspace.md section 3).

A ``bash`` call killed between its start and its recorded result changed the folder in ways the
ledger cannot prove, so the run's newest snapshot is stale. When the user settles that call, the
same answer takes the folder as it is now as the new starting point: the host captures it (the
Git objects and ref first, as for any snapshot) and the attestation's transaction commits a
``workspaceBaseline`` fact naming the capture and the paths changed since the run's newest
snapshot. The expected tree then starts from that baseline, so the stale snapshot no longer parks,
and the continuation's history tells the model which files changed.

- ``baseline_preview``: what answering would record, said before the user answers (the desktop
  card, ``maka settle``, ``/settle``); it observes the folder without recording anything.
- ``capture_baseline``: the capture and the fact's body, just before the attestation is recorded.

Nothing happens for a read-only call, a run without checkpoints (mode ``unavailable``, or no
carrier) or "it did not run" when the files equal the snapshot. A capture that fails refuses
nothing the user said: the attestation is recorded without a baseline, the snapshot stays stale
and the answer says so (``SettleBaseline.problem``); ``maka resume --rebaseline`` is the way on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.ledger.checkpoint_ports import (
    CheckpointCarrier,
    CheckpointError,
    SettleBaseline,
    TreeChange,
    changed_paths_summary,
    checkpoint_ref,
)
from runtime.ledger.crash_points import CrashPoint, failpoint
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.workspace_facts import (
    WORKSPACE_FACT_KEYS,
    boundary_checkpoint,
    declared_mode,
    may_write,
    skipped_paths,
    snapshot_fact,
)

BASELINE_PROTOCOL = "workspace_baseline_v1"


@dataclass(frozen=True, slots=True)
class SettleFolder:
    """The settled call's run, as far as its folder goes."""

    carrier: CheckpointCarrier
    folder: Path
    workspace_identity: str
    session_id: str
    run_id: str
    tool_name: str
    events: Sequence[RuntimeEvent]


def applies(run: SettleFolder) -> bool:
    """A writing call of a run that takes snapshots (its declared mode is ``git_v1``)."""
    return takes_folder(run.tool_name, run.events)


def takes_folder(tool_name: str, events: Sequence[RuntimeEvent]) -> bool:
    """Whether settling a call of ``tool_name`` in the run of ``events`` also takes the folder
    as it is now as the run's starting point: a writing call of a run that takes snapshots."""
    mode = declared_mode(events)
    return may_write(tool_name) and mode is not None and mode.get("mode") == "git_v1"


def _changes(
    run: SettleFolder, snapshot: Mapping[str, Any] | None, tree_id: str
) -> tuple[TreeChange, ...] | None:
    if snapshot is None or str(snapshot.get("workspaceIdentity")) != run.workspace_identity:
        return None
    try:
        return tuple(run.carrier.changes(run.workspace_identity, str(snapshot["treeId"]), tree_id))
    except CheckpointError:
        return None


def baseline_preview(run: SettleFolder) -> SettleBaseline | None:
    """What answering would record (None: nothing, see the module); observes only."""
    if not applies(run):
        return None
    try:
        tree = run.carrier.observe(run.folder, run.workspace_identity)
    except CheckpointError as error:
        return SettleBaseline(None, problem=f"{error.code}: {error.message}")
    snapshot = boundary_checkpoint(run.events).checkpoint
    return SettleBaseline(_changes(run, snapshot, tree.tree_id))


def _next_ref(run: SettleFolder) -> str:
    """A ref of the run after every one its facts name (an orphan capture of the killed run, if
    any, is the only ref it can meet: moving an orphan loses nothing)."""
    taken = 0
    for event in run.events:
        actions = event.get("actions") or {}
        if snapshot_fact(actions) is not None or not WORKSPACE_FACT_KEYS.isdisjoint(actions):
            taken += 1
    return checkpoint_ref(run.session_id, run.run_id, taken + 1)


def capture_baseline(run: SettleFolder, ran: bool, now: int) -> SettleBaseline | None:
    """Capture the folder and build the ``workspaceBaseline`` body (None: nothing to record)."""
    if not applies(run):
        return None
    snapshot = boundary_checkpoint(run.events).checkpoint
    if not ran:
        # "It did not run" with the files as in the snapshot needs no baseline: look first, so
        # that no capture is left behind that no fact will name (an orphan ref for the doctor).
        try:
            seen = run.carrier.observe(run.folder, run.workspace_identity)
        except CheckpointError as error:
            return SettleBaseline(None, problem=f"{error.code}: {error.message}")
        unchanged = _changes(run, snapshot, seen.tree_id)
        if unchanged == ():
            return SettleBaseline(unchanged)
    ref = _next_ref(run)
    try:
        captured = run.carrier.capture(
            run.folder, run.workspace_identity, ref, f"maka baseline {ref}"
        )
    except CheckpointError as error:
        return SettleBaseline(None, problem=f"{error.code}: {error.message}")
    changes = _changes(run, snapshot, captured.tree_id)
    if not ran and changes == ():
        # (the folder went back between the look and the capture: the ref stays an orphan,
        # which the next start removes; nothing is recorded)
        return SettleBaseline(changes)
    # The capture's ref exists, its fact does not: an orphan until the attestation commits.
    failpoint(CrashPoint.SETTLE_BASELINE_CAPTURED)
    epoch = int(snapshot.get("workspaceEpoch") or 1) if snapshot is not None else 1
    body: dict[str, Any] = {
        "protocol": BASELINE_PROTOCOL,
        "workspaceIdentity": run.workspace_identity,
        "workspaceEpoch": epoch + 1,
        "checkpointRef": captured.ref,
        "commitId": captured.commit_id,
        "treeId": captured.tree_id,
        "policyHash": captured.policy_hash,
        **skipped_paths(captured.skipped),
        **changed_paths_summary(changes or ()),
        "compared": changes is not None,
        "decidedBy": "local_user",
        "decidedAt": now,
    }
    if snapshot is not None and snapshot.get("checkpointRef"):
        body["previousCheckpointRef"] = str(snapshot["checkpointRef"])
    return SettleBaseline(changes, body)
