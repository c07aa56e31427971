"""The expected tree at the boundary (docs/design/workspace.md section 3, "Verify at resume").

A run's newest checkpoint is taken after the T2 of each call that may write, so a crash between a
writing call's T2 and its capture (or inside the capture) leaves the checkpoint behind the folder.
Often the ledger itself proves what that call did, and the checkpoint is rolled forward over it:

- a ``write_file`` / ``edit_file`` call that completed (its T2 holds a matching, successful
  response) or that the file reconciler finalized (a recovered outcome): its path is expected to
  hold exactly the content whose hash its T1 evidence recorded (or to be absent, for a deletion);
- a call the user settled "did not run" (docs/design/recovery.md section 8), or a file write the
  reconciler found untouched (``reconcile_matches_prior_state``): it changed nothing.

Any other writing call dispatched after the checkpoint (a ``bash`` call, a write whose effect is
not proven: an error response, no result, a diverged file) makes the checkpoint stale, as before.

Pure over a run's committed events; the resume service compares the folder with the result
(every rolled-forward path by its content hash and its permission bits, every other path with the
checkpoint's tree).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.ledger.codes import ResolverReason, ResolverStatus
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.workspace_facts import may_write, snapshot_fact
from runtime.recovery.recovery_resolver import ToolRecoveryDecision, resolve_operations

PROVEN_WRITE_TOOLS = frozenset({"write_file", "edit_file"})
COMPLETED = "completed"  # T2 with a matching, successful response
FINALIZED = "finalized"  # the file reconciler found the written content and finalized the call
NOT_RUN = "not_run"  # settled "did not run", or found untouched by the reconciler


@dataclass(frozen=True, slots=True)
class ExpectedFile:
    """What a proven write left at ``path``: ``exists`` with that ``sha256`` and ``size``.

    ``created``: which permission bits the file has after the writes (the write tools keep an
    existing file's bits and give a new one 0644, less the umask): True, a proven write
    created it (its T1 evidence found no file); False, every proven write of it found the file
    there, so it keeps the bits it had at the checkpoint; None, not known (a deletion, or
    evidence without the state before the write)."""

    path: str
    exists: bool
    sha256: str | None
    size: int | None
    created: bool | None = None


@dataclass(frozen=True, slots=True)
class RolledCall:
    """A writing call after the checkpoint whose effect the ledger proves."""

    tool_name: str
    tool_call_id: str
    how: str  # COMPLETED, FINALIZED or NOT_RUN
    path: str | None  # the file it wrote (None: it changed nothing)
    # NOT_RUN because the reconciler found this file as it was before the write (recovery's
    # recorded observation, not the user's word); None for a call the user settled.
    found_unchanged: str | None = None

    def to_json(self) -> dict[str, str]:
        body = {"toolName": self.tool_name, "toolCallId": self.tool_call_id, "how": self.how}
        if self.path is not None:
            body["path"] = self.path
        return body


@dataclass(frozen=True, slots=True)
class ExpectedTree:
    """The boundary checkpoint of a run's committed prefix, rolled forward.

    ``checkpoint``: the newest ``workspaceCheckpoint`` (or ``workspaceBaseline``) payload, or
    None; ``failed``: the newest fact is a failed capture; ``stale_after`` / ``stale_tool``: the
    first writing call after the checkpoint whose effect is not proven (None: not stale);
    ``files``: the expected state of every path a proven write changed (the newest write of a
    path wins); ``rolled``: the proven calls, in ledger order; ``wrote``: some writing call was
    dispatched in the run at all."""

    checkpoint: Mapping[str, Any] | None
    failed: Mapping[str, Any] | None
    stale_after: str | None
    stale_tool: str | None
    files: Mapping[str, ExpectedFile]
    rolled: tuple[RolledCall, ...]
    wrote: bool


def _proven(
    decision: ToolRecoveryDecision | None, dispatch: Mapping[str, Any]
) -> RolledCall | None:
    """The call's proven effect, or None (not proven: the checkpoint is stale)."""
    if decision is None:
        return None
    name = str(dispatch.get("toolName", ""))
    call_id = str(dispatch.get("providerToolCallId", ""))
    evidence = dispatch.get("evidence")
    path = str(evidence.get("path")) if isinstance(evidence, Mapping) else None
    reason = decision.reason
    if reason is ResolverReason.USER_ATTESTED_NOT_RUN:
        return RolledCall(name, call_id, NOT_RUN, None)
    if name not in PROVEN_WRITE_TOOLS or path is None:
        return None
    if reason is ResolverReason.RECONCILE_MATCHES_PRIOR_STATE:
        return RolledCall(name, call_id, NOT_RUN, None, path)
    if decision.status is not ResolverStatus.COMPLETED:
        return None
    if reason is ResolverReason.MATCHING_RESPONSE and decision.response_is_error is False:
        return RolledCall(name, call_id, COMPLETED, path)
    if reason is ResolverReason.RECOVERY_BUNDLE_COMPLETED:
        return RolledCall(name, call_id, FINALIZED, path)
    return None


def expected_tree(events: Sequence[RuntimeEvent]) -> ExpectedTree:
    """The run's boundary checkpoint and the proven writes after it (see the module)."""
    checkpoint: Mapping[str, Any] | None = None
    failed: Mapping[str, Any] | None = None
    after: list[Mapping[str, Any]] = []  # writing dispatches after the newest checkpoint fact
    ids: list[str] = []
    wrote = False
    for event in events:
        actions = event.get("actions")
        if not actions:
            continue
        snapshot = snapshot_fact(actions)
        if snapshot is not None:
            checkpoint, failed, after, ids = snapshot, None, [], []
        elif "workspaceCheckpointFailed" in actions:
            failed, after, ids = actions["workspaceCheckpointFailed"], [], []
        elif "toolDispatch" in actions:
            dispatch: Mapping[str, Any] = actions["toolDispatch"]
            if may_write(str(dispatch.get("toolName", ""))):
                wrote = True
                after.append(dispatch)
                ids.append(event["id"])
    if failed is not None or not after:
        return ExpectedTree(checkpoint, failed, None, None, {}, (), wrote)
    _, resolved = resolve_operations(events)
    decisions = {
        op.decision.operation_id: op.decision
        for op in resolved
        if op.decision.operation_id is not None
    }
    files: dict[str, ExpectedFile] = {}
    rolled: list[RolledCall] = []
    for event_id, dispatch in zip(ids, after, strict=True):
        call = _proven(decisions.get(str(dispatch.get("operationId", ""))), dispatch)
        if call is None or checkpoint is None:
            name = str(dispatch.get("toolName", ""))
            return ExpectedTree(checkpoint, None, event_id, name, {}, (), wrote)
        rolled.append(call)
        if call.path is not None:
            state: Mapping[str, Any] = dispatch["evidence"]["expectedAfter"]
            exists = bool(state.get("exists"))
            files[call.path] = ExpectedFile(
                call.path,
                exists,
                str(state["sha256"]) if exists else None,
                int(state["size"]) if exists else None,
                _created(files.get(call.path), dispatch["evidence"], exists=exists),
            )
    return ExpectedTree(checkpoint, None, None, None, files, tuple(rolled), wrote)


def _created(
    prior: ExpectedFile | None, evidence: Mapping[str, Any], *, exists: bool
) -> bool | None:
    """``ExpectedFile.created`` after a proven write whose T1 ``evidence`` is given, the path's
    previous proven write after the checkpoint being ``prior`` (None: this is the first)."""
    before = evidence.get("before")
    found = before.get("exists") if isinstance(before, Mapping) else None
    if not exists or not isinstance(found, bool):
        return None
    if not found:
        return True  # a new file: 0644, less the umask
    if prior is None:
        return False  # there at the checkpoint's side of the writes: its bits are kept
    # Written again: it keeps the bits the previous write left (unknown when that one was a
    # deletion, the file made again by someone else in between).
    return prior.created if prior.exists else None


def changed_nothing(events: Sequence[RuntimeEvent]) -> frozenset[str]:
    """The provider call ids of the run's writing calls the ledger proves changed nothing: a
    call the user settled "did not run", a file write the reconciler found untouched (as
    ``expected_tree`` rolls a checkpoint forward over them). Both are recovery facts' findings:
    a run without one has none, and is not resolved."""
    if not any("toolRecovery" in (event.get("actions") or {}) for event in events):
        return frozenset()
    dispatches = {
        str(dispatch.get("operationId")): dispatch
        for event in events
        if (dispatch := (event.get("actions") or {}).get("toolDispatch")) is not None
        and may_write(str(dispatch.get("toolName", "")))
    }
    if not dispatches:
        return frozenset()
    _, resolved = resolve_operations(events)
    found: set[str] = set()
    for op in resolved:
        dispatch = dispatches.get(str(op.decision.operation_id))
        if dispatch is None:
            continue
        call = _proven(op.decision, dispatch)
        if call is not None and call.how == NOT_RUN:
            found.add(call.tool_call_id)
    return frozenset(found)


def rolled_words(rolled: Sequence[RolledCall]) -> str:
    """``the write_file call c1 (a.txt)`` / ``3 calls (write_file c1 (a.txt), ...)``, for the
    verified diagnostic. A call that changed nothing says how that is known: recovery found its
    file as it was before the write (the write may have begun: it was cut off before the file
    changed), or the user said it did not run."""

    def effect(call: RolledCall) -> str:
        if call.path is not None:
            return f"({call.path})"
        if call.found_unchanged is not None:
            return f"(recovery found {call.found_unchanged} as it was before the write)"
        return "(you confirmed it did not run)"

    if len(rolled) == 1:
        call = rolled[0]
        return f"the {call.tool_name} call {call.tool_call_id} {effect(call)}"
    shown = ", ".join(f"{c.tool_name} {c.tool_call_id} {effect(c)}" for c in rolled[:5])
    rest = len(rolled) - min(len(rolled), 5)
    return f"{len(rolled)} calls ({shown}" + (f" and {rest} more)" if rest else ")")


def rolled_source(rolled: Sequence[RolledCall]) -> str:
    """What the roll forward rests on: the saved history proves what a completed or finalized
    write left; of a call that changed nothing it records what recovery found, or what the user
    said."""
    if all(call.how in (COMPLETED, FINALIZED) for call in rolled):
        return "as the saved history proves"
    return "as the saved history records"
