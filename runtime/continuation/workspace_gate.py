"""The workspace checkpoint gate of the continuation planner (docs/design/workspace.md section 3).

Pure: it reads the interrupted run's committed events (its declared checkpoint mode and its
checkpoint facts) and the evidence the resume service gathered (whether the boundary
checkpoint's Git objects still exist, and how the folder's current tree differs from it), and
says whether the resume parks and why. It never approves a resume on its own: the planner's
other gates still apply.

- no mode declared, or mode ``unavailable``: diagnostic ``workspace_checkpoint_unavailable``,
  never a rejection (the resume works as in Phase 1);
- the newest fact is a failed capture: ``workspace_checkpoint_failed``;
- no snapshot in the whole lineage and no writing call dispatched in it: the diagnostic
  ``workspace_checkpoint_unavailable`` (nothing the agent ran could have changed files), never a
  rejection; the continuation captures the first snapshot;
- no checkpoint yet, or a writing call whose effect the ledger does not prove dispatched after
  the newest one (``expected_tree``: completed or finalized file writes and calls that did not
  run roll the checkpoint forward): ``workspace_checkpoint_stale`` (the crash came between a
  T2 and its capture, or inside it); except a continuation stopped before its first snapshot
  with nothing run (``admission_basis``): when the snapshot its admission was based on is
  intact (the evidence says so), that snapshot is the one compared;
- the checkpoint's Git objects are gone: ``workspace_checkpoint_missing``, unless the folder's
  tree is the very tree it recorded (and whole in this store), with no write rolled forward:
  then ``workspace_verified``, compared by the tree (``CheckpointEvidence.by_tree_id``);
- the folder differs: ``workspace_drift`` with each changed path (the first 50, then a count);
- otherwise the diagnostic ``workspace_verified``, naming the calls the checkpoint was rolled
  forward over.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime.continuation.admission_basis import AdmissionBasis
from runtime.continuation.expected_tree import expected_tree, rolled_source, rolled_words
from runtime.ledger.checkpoint_ports import TreeChange, changed_paths_summary
from runtime.ledger.codes import DiagnosticCode, ParkReason
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.restore_point_words import call_subjects
from runtime.ledger.workspace_facts import (
    changed_count_words,
    declared_mode,
    may_write,
    snapshot_fact,
)


@dataclass(frozen=True, slots=True)
class WorkspaceTree:
    """The safety inspector's capture of the folder (no ref, no fact)."""

    tree_id: str | None
    problem: str | None = None
    # The capture's code when it failed (``checkpoint_nested_repository``, say).
    code: str | None = None


@dataclass(frozen=True, slots=True)
class CheckpointEvidence:
    """What the resume service found about the boundary checkpoint."""

    snapshot_present: bool
    changes: tuple[TreeChange, ...] = ()
    problem: str | None = None
    # False when the folder is another workspace than the checkpoint's: nothing was compared
    # (the identity gate parks; no drift and no verification are claimed).
    compared: bool = True
    # True: this is about the snapshot the interrupted continuation's admission was based on
    # (``admission_basis``; it stopped before its own first one), and its objects exist.
    basis: bool = False
    # True: the run's newest snapshot is stale and ``changes`` says how the folder differs from
    # it (never a verification: the stale park stands, naming the files to check).
    stale_compared: bool = False
    # Where a missing snapshot may be instead (a ledger shared by several hosts: each keeps its
    # snapshots in its own data folder), said with the missing-snapshot park.
    missing_note: str | None = None
    # Why a snapshot is not whole here when a check found it damaged and moved its objects
    # aside (kept: a capture of a folder still holding those bytes writes them again).
    damaged_note: str | None = None
    # With ``damaged_note``: objects of it were moved aside by a check (else Git cannot read
    # some where they are, and nothing was moved).
    damaged_moved: bool = False
    # True: the snapshot's objects are not here, but the folder's tree, captured now, is the
    # very tree the snapshot recorded (Git names a tree by its content: the same paths, bytes,
    # modes and permission record), so nothing changed; ``snapshot_present`` is then True.
    by_tree_id: bool = False
    # Paths of ``changes`` listed as deleted that are still in the folder: snapshots leave them
    # out now (an ignore rule came in, or the file grew over the size limit).
    left_out: tuple[str, ...] = ()
    # The folder now holds what no snapshot can take (a repository made inside it, say: the
    # capture's code and message): it changed since the snapshot, but which files cannot be
    # said. A drift all the same, with both ways forward.
    folder_holds: tuple[str, str] | None = None


def _why_gone(evidence: CheckpointEvidence | None) -> str:
    """Where a missing snapshot went, when that is known: moved aside as damaged, or kept by
    another host of a shared ledger ("" when nothing more is known)."""
    if evidence is None:
        return ""
    note = evidence.damaged_note or evidence.missing_note
    return f" ({note})" if note else ""


def _left_out(evidence: CheckpointEvidence) -> dict[str, Any]:
    return {"leftOutPaths": list(evidence.left_out)} if evidence.left_out else {}


@dataclass(frozen=True, slots=True)
class GateFinding:
    reason: ParkReason | None  # None: a diagnostic only
    code: str
    message: str
    detail: Mapping[str, Any] = field(default_factory=dict)
    event_id: str | None = None


def nothing_written_nor_captured(generations: Sequence[Sequence[RuntimeEvent]]) -> bool:
    """No snapshot (nor failed capture, nor baseline) in the lineage and no call that may write
    dispatched in it: the model has changed nothing (docs/design/workspace.md section 3)."""
    for events in generations:
        for event in events:
            actions = event.get("actions")
            if not actions:
                continue
            if snapshot_fact(actions) is not None or "workspaceCheckpointFailed" in actions:
                return False
            dispatch = actions.get("toolDispatch")
            if dispatch is not None and may_write(str(dispatch.get("toolName", ""))):
                return False
    return True


def _stale_call(events: Sequence[RuntimeEvent], dispatch_id: str, tool: str | None) -> str:
    """The call that made the snapshot stale, as people know it: ``the command "make"``."""
    dispatch = next((e for e in events if e["id"] == dispatch_id), None)
    actions: Mapping[str, Any] = (dispatch.get("actions") if dispatch is not None else None) or {}
    call: Mapping[str, Any] = actions.get("toolDispatch") or {}
    call_id = call.get("providerToolCallId")
    subject = call_subjects(events).get(str(call_id)) if call_id else None
    return f"the {subject}" if subject else f"a {tool} call"


def _since_last_snapshot(changes: Sequence[TreeChange]) -> str:
    """What differs from a stale snapshot, in words (the paths travel in the detail)."""
    if not changes:
        return "no file in the folder differs from that snapshot"
    verb = "differs" if len(changes) == 1 else "differ"
    return f"{changed_count_words([c.path for c in changes])} {verb} from that snapshot"


# C901: the workspace gate's findings in the order the design ranks them (mode, failed capture,
# nothing written, stale, missing, drift, verified); each branch returns one finding.
def workspace_gate(  # noqa: C901
    events: Sequence[RuntimeEvent],
    evidence: CheckpointEvidence | None,
    basis: AdmissionBasis | None = None,
    generations: Sequence[Sequence[RuntimeEvent]] = (),
) -> list[GateFinding]:
    """``events``: the interrupted run's committed prefix; ``generations``: the whole lineage,
    oldest first (``events`` is its last), for the lineage-wide questions."""
    mode = declared_mode(events)
    if mode is None or mode.get("mode") != "git_v1":
        detail: dict[str, Any] = {}
        if mode is not None and "reasonCode" in mode:
            detail["reasonCode"] = mode["reasonCode"]
        return [
            GateFinding(
                None,
                DiagnosticCode.WORKSPACE_CHECKPOINT_UNAVAILABLE.value,
                "the session runs without workspace checkpoints; its files are not compared",
                detail,
            )
        ]
    boundary = expected_tree(events)
    if boundary.failed is not None:
        reason = ParkReason.WORKSPACE_CHECKPOINT_FAILED
        code = str(boundary.failed.get("reasonCode", ""))
        return [
            GateFinding(
                reason,
                reason.value,
                "the capture of the folder at the stop failed",
                {"reasonCode": code, "message": str(boundary.failed.get("message", ""))},
            )
        ]
    inherited = (
        boundary.checkpoint is None
        and boundary.stale_after is None
        and basis is not None
        and evidence is not None
        and evidence.basis
    )
    if not inherited and nothing_written_nor_captured(generations or (events,)):
        return [
            GateFinding(
                None,
                DiagnosticCode.WORKSPACE_CHECKPOINT_UNAVAILABLE.value,
                "no snapshot was recorded before the stop; nothing the agent ran could have "
                "changed files",
                {"noSnapshotYet": True},
            )
        ]
    if not inherited and (boundary.checkpoint is None or boundary.stale_after is not None):
        reason = ParkReason.WORKSPACE_CHECKPOINT_STALE
        stale_detail: dict[str, Any] = {}
        if boundary.stale_after is not None:
            subject = _stale_call(events, boundary.stale_after, boundary.stale_tool)
            message = f"{subject} may have changed files after the last snapshot"
            stale_detail["subject"] = subject  # the banner says it under the reason
        else:
            message = "the run stopped before its first snapshot of the folder was recorded"
        if boundary.checkpoint is not None:
            stale_detail["checkpointRef"] = boundary.checkpoint.get("checkpointRef")
        if evidence is not None and evidence.stale_compared:
            message += "; " + _since_last_snapshot(evidence.changes)
            stale_detail.update(changed_paths_summary(evidence.changes))
            stale_detail.update(_left_out(evidence))
        return [GateFinding(reason, reason.value, message, stale_detail, boundary.stale_after)]
    checkpoint = basis.checkpoint if inherited and basis is not None else boundary.checkpoint
    assert checkpoint is not None
    ref = checkpoint.get("checkpointRef")
    taken = "taken at the stop"
    based: dict[str, Any] = {}
    if inherited and basis is not None:
        taken = "the interrupted resume started from (it stopped before taking one of its own)"
        based = {"basis": basis.kind, "basisRunId": basis.run_id}
    if evidence is not None and evidence.problem is not None:
        reason = ParkReason.SAFETY_OBSERVATION_UNAVAILABLE
        return [GateFinding(reason, reason.value, evidence.problem)]
    if evidence is None or not evidence.snapshot_present:
        reason = ParkReason.WORKSPACE_CHECKPOINT_MISSING
        return [
            GateFinding(
                reason,
                reason.value,
                (
                    "the snapshot recorded at the stop is not whole in the checkpoint store"
                    if evidence is not None and evidence.damaged_note
                    else "the snapshot recorded at the stop is gone from the checkpoint store"
                )
                + _why_gone(evidence),
                {
                    "checkpointRef": ref,
                    "commitId": checkpoint.get("commitId"),
                    **({"damagedAside": True} if evidence and evidence.damaged_moved else {}),
                    # (a shared ledger: another host's data folder may keep it)
                    **(
                        {"keptElsewhere": True}
                        if evidence and evidence.missing_note and not evidence.damaged_note
                        else {}
                    ),
                },
            )
        ]
    if not evidence.compared:
        return []
    if evidence.folder_holds is not None:
        reason = ParkReason.WORKSPACE_DRIFT
        code, why = evidence.folder_holds
        return [
            GateFinding(
                reason,
                reason.value,
                f"the folder changed since the snapshot {taken}: it now holds what no snapshot "
                f"can take ({why}), so which files changed cannot be said",
                {"checkpointRef": ref, **based, "reasonCode": code},
            )
        ]
    rolled = () if inherited else boundary.rolled
    if inherited and basis is not None and basis.files:
        parent = [g for g in generations if g and g[0]["runId"] == basis.run_id]
        rolled = expected_tree(parent[0]).rolled if parent else ()
    if rolled:
        based["rolledForward"] = [call.to_json() for call in rolled]
    if evidence.changes:
        reason = ParkReason.WORKSPACE_DRIFT
        said = changed_count_words([change.path for change in evidence.changes])
        since = f"since the snapshot {taken}"
        if rolled:
            since += f", rolled forward over {rolled_words(rolled)}"
        return [
            GateFinding(
                reason,
                reason.value,
                f"{said} changed {since}",
                {
                    "checkpointRef": ref,
                    **based,
                    **changed_paths_summary(evidence.changes),
                    **_left_out(evidence),
                },
            )
        ]
    skipped: Sequence[str] = checkpoint.get("skippedPaths") or ()
    message = "the files are as they were at the stop"
    if inherited:
        message = f"the files are as in the snapshot {taken}"
    elif checkpoint.get("decidedBy"):
        # A baseline: the snapshot an answer about a call, or the choice to continue with the
        # files, took after the stop; the files are as then, not as at the stop.
        message = "the files are as they were when you decided about them after the stop"
    if rolled:
        message += (
            f": the snapshot before the stop, rolled forward over {rolled_words(rolled)}, "
            f"{rolled_source(rolled)}"
        )
    verified: dict[str, Any] = {"checkpointRef": ref, **based}
    if skipped:
        # Files over the size limit are not in the snapshot: say so, never claim them.
        noun = "file" if len(skipped) == 1 else "files"
        named = ", ".join(skipped[:3]) + (
            f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        )
        message += f", except {len(skipped)} {noun} over 50 MiB, not compared: {named}"
        verified["skippedPaths"] = list(skipped)
    if evidence.by_tree_id:
        # (only with no write rolled forward: the expected tree would need the snapshot's
        # objects; calls that did not run change nothing)
        # On a ledger several hosts share, another host may hold it; with the data folder's
        # own ledger, it was lost here (a store deleted, or an import that did not carry it).
        where = (
            evidence.damaged_note
            or ("another host took it, say" if evidence.missing_note else None)
            or "its snapshot store lost it, or an import did not carry it"
        )
        message += (
            "; compared by the folder's tree, which is the one the snapshot recorded: the "
            f"snapshot itself is not in this data folder ({where})"
        )
        verified["comparedBy"] = "treeId"
    return [GateFinding(None, DiagnosticCode.WORKSPACE_VERIFIED.value, message, verified)]
