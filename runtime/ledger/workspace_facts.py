"""Workspace checkpoint facts (docs/design/workspace.md section 2, docs/design/ledger.md section 7):
their envelope and how the planner reads them.

``workspaceCheckpoint`` and ``workspaceCheckpointFailed`` events are system facts in a lane of
their own: no content (nothing for a model), hidden from the model, exactly one action key. For
the tool ledger they are ordinary events, so its scanner passes over them; the generic append
refuses them (``reserved_workspace_fact``) and only the workspace-fact writer commits them.
A run declares its checkpoint mode in its first event
(``actions.runtimeProtocol.workspaceCheckpoints``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.file_names import shown_name
from runtime.ledger.restore_point_words import AT_STOP, copy_reflects, restore_kind

WORKSPACE_FACT_KEYS = frozenset({"workspaceCheckpoint", "workspaceCheckpointFailed"})
READ_ONLY_TOOLS = frozenset({"read_file", "list_dir", "glob"})
"""Tools that never change the folder. Every other tool may write (``write_file``,
``edit_file``, ``bash`` and any tool added later): a capture follows each of its T2s, and a
dispatch of one after the newest checkpoint makes that checkpoint stale."""


def may_write(tool_name: str) -> bool:
    return tool_name not in READ_ONLY_TOOLS


SETTLED_BASELINE_KEY = "workspaceBaseline"
"""A settled writing call's baseline (docs/design/workspace.md section 3) is a workspace fact of
its own, committed only in the attestation's transaction; a continuation's start event carries a
rebaseline's ``workspaceBaseline`` beside its other actions and is not a workspace fact."""


def is_settled_baseline(event: Mapping[str, Any]) -> bool:
    actions = event.get("actions")
    return isinstance(actions, Mapping) and set(actions) == {SETTLED_BASELINE_KEY}


FOLDER_HOLDS_CODES = frozenset(
    {"checkpoint_nested_repository", "checkpoint_lfs_unsupported", "checkpoint_too_large"}
)
"""Why the folder cannot be snapshotted as it stands, for what it holds (a nested repository, Git
LFS filters, too many bytes): not a Git failure nor an unreadable folder. A run goes on without
a snapshot then, and so does the user's decision to continue with the current files."""


def uncaptured_decision(actions: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The failed capture that records the user's decision to continue with the current files
    (``workspaceCheckpointFailed`` with ``decidedBy``: the folder could not be snapshotted, so
    no ``workspaceBaseline`` could name a snapshot), or None."""
    if not actions:
        return None
    failed = actions.get("workspaceCheckpointFailed")
    if isinstance(failed, Mapping) and failed.get("decidedBy"):
        return failed
    return None


def is_decision_fact(event: Mapping[str, Any]) -> bool:
    """A hidden workspace fact whose notice is model content: a settled writing call's
    baseline, or a decision to continue with the current files whose capture failed."""
    actions = event.get("actions")
    return is_settled_baseline(event) or (
        isinstance(actions, Mapping) and uncaptured_decision(actions) is not None
    )


def is_workspace_fact(event: Mapping[str, Any]) -> bool:
    actions = event.get("actions")
    return isinstance(actions, Mapping) and (
        not WORKSPACE_FACT_KEYS.isdisjoint(actions) or is_settled_baseline(event)
    )


def workspace_fact_problem(event: RuntimeEvent) -> str | None:
    """Why ``event`` is not a well-formed workspace fact, or None."""
    actions = event.get("actions")
    allowed = WORKSPACE_FACT_KEYS | {SETTLED_BASELINE_KEY}
    if actions is None or len(actions) != 1 or not allowed.issuperset(actions):
        return (
            "a workspace fact carries exactly one action: a checkpoint, a failed capture or a "
            "settled call's baseline"
        )
    if "content" in event or "status" in event or "refs" in event:
        return "a workspace fact has no content, status or refs"
    if event["role"] != "system" or event["author"] != "system":
        return "a workspace fact is role system, author system"
    if event.get("modelVisibility") != "hidden" or event["partial"]:
        return "a workspace fact is hidden from the model and never partial"
    return None


SKIPPED_PATHS_NAMED = 100
"""The most files left out of a snapshot (over the size limit) its fact names."""


def skipped_paths(skipped: Sequence[str]) -> dict[str, list[str]]:
    """A snapshot fact's ``skippedPaths`` (``workspaceCheckpoint`` and ``workspaceBaseline``
    alike): the files the capture left out, so that no check of the folder against the
    snapshot claims them; nothing when none was."""
    return {"skippedPaths": list(skipped[:SKIPPED_PATHS_NAMED])} if skipped else {}


def snapshot_fact(actions: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The snapshot an event's actions record: a ``workspaceCheckpoint``, or the checkpoint of
    the user's decision to continue with the current files (``workspaceBaseline``, in a
    continuation's start event). Both name ``checkpointRef``, ``commitId``, ``treeId``,
    ``workspaceIdentity`` and ``workspaceEpoch``."""
    if not actions:
        return None
    for key in ("workspaceCheckpoint", "workspaceBaseline"):
        body = actions.get(key)
        if isinstance(body, Mapping):
            return body
    return None


def declared_mode(events: Sequence[RuntimeEvent]) -> Mapping[str, Any] | None:
    """The checkpoint mode the run's first event declares, or None (a run from before
    checkpoints, or one run without a checkpoint carrier)."""
    if not events:
        return None
    actions: Mapping[str, Any] = events[0].get("actions") or {}
    protocol: Mapping[str, Any] = actions.get("runtimeProtocol") or {}
    mode = protocol.get("workspaceCheckpoints")
    return mode if isinstance(mode, Mapping) else None


@dataclass(frozen=True, slots=True)
class BoundaryCheckpoint:
    """The checkpoint state of a run's committed prefix, as the planner judges it.

    ``checkpoint``: the newest ``workspaceCheckpoint`` (or ``workspaceBaseline``) payload (None:
    none was committed);
    ``failed``: the newest fact is a failed capture (its payload); ``stale_after``: the event id
    of a writing call dispatched after the newest checkpoint fact (None: not stale)."""

    checkpoint: Mapping[str, Any] | None
    failed: Mapping[str, Any] | None
    stale_after: str | None
    stale_tool: str | None = None


def boundary_checkpoint(events: Sequence[RuntimeEvent]) -> BoundaryCheckpoint:
    """The newest checkpoint fact of ``events`` (a committed run prefix) and whether a writing
    call was dispatched after it. Read-only calls do not age a checkpoint."""
    checkpoint: Mapping[str, Any] | None = None
    failed: Mapping[str, Any] | None = None
    stale_after: str | None = None
    stale_tool: str | None = None
    for event in events:
        actions = event.get("actions")
        if actions is None:
            continue
        snapshot = snapshot_fact(actions)
        if snapshot is not None:
            checkpoint, failed, stale_after, stale_tool = snapshot, None, None, None
        elif "workspaceCheckpointFailed" in actions:
            failed, stale_after, stale_tool = actions["workspaceCheckpointFailed"], None, None
        elif "toolDispatch" in actions and stale_after is None:
            name = actions["toolDispatch"]["toolName"]
            if may_write(name):
                stale_after, stale_tool = event["id"], name
    return BoundaryCheckpoint(checkpoint, failed, stale_after, stale_tool)


MARK_PATHS_NAMED = 5
"""How many changed paths the mark of a continuation with the current files names."""


def decision_mark(
    actions: Mapping[str, Any] | None, subjects: Mapping[str, str] | None = None
) -> str | None:
    """How the transcript marks a continuation that began with the user's workspace decision
    (docs/design/workspace.md section 4), or None; ``subjects`` names calls by what they did."""
    if not actions:
        return None
    transition = actions.get("workspaceTransition")
    if isinstance(transition, Mapping):
        mark = f"Continued in a restored copy at {transition.get('toPath', '?')}"
        if restore_kind(transition) != AT_STOP:
            mark += f", holding {copy_reflects(transition, subjects)}"
        return mark
    baseline = actions.get("workspaceBaseline")
    if isinstance(baseline, Mapping) and set(actions) == {SETTLED_BASELINE_KEY}:
        # a settled writing call's baseline (section 3), not a continuation's start
        if not baseline.get("compared", False):
            return "Your answer took the folder as it was as the new starting point"
        # The files it took, named: the list the card showed before the answer may be older.
        said, named = _changed_words(baseline)
        return (
            f"Your answer took the folder as it was as the new starting point; {said} changed "
            "since the last snapshot" + (f": {named}" if named else "")
        )
    uncaptured = uncaptured_decision(actions)
    if uncaptured is not None:
        why = str(uncaptured.get("message", "")) or str(uncaptured.get("reasonCode", ""))
        return (
            "Continued with your current files; they could not be snapshotted"
            + (f" ({why})" if why else "")
            + ", so the continuation has no snapshot of them"
        )
    if isinstance(baseline, Mapping):
        if not baseline.get("compared", False):
            return "Continued with your current files; there was no snapshot to compare them with"
        said, named = _changed_words(baseline)
        return f"Continued with your current files; {said} changed" + (
            f": {named}" if named else ""
        )
    return None


def _changed_words(baseline: Mapping[str, Any]) -> tuple[str, str]:
    """A baseline's changed files as a count ("2 files") and named (the first few)."""
    listed = [str(item.get("path", "")) for item in baseline.get("changedPaths") or []]
    more = int(baseline.get("moreChangedPaths") or 0)
    named = ", ".join(shown_name(path) for path in listed[:MARK_PATHS_NAMED])
    rest = len(listed) + more - min(len(listed), MARK_PATHS_NAMED)
    if rest and named:
        named += f" and {rest} more"
    return changed_count_words(listed, more), named


def lineage_transitions(events: Sequence[RuntimeEvent]) -> list[dict[str, Any]]:
    """The user's workspace decisions recorded in a lineage's events, oldest first (``maka
    plan``)."""
    found: list[dict[str, Any]] = []
    for event in events:
        actions = event.get("actions") or {}
        mark = decision_mark(actions)
        if mark is None:
            continue
        body: Mapping[str, Any] = (
            actions.get("workspaceTransition")
            or actions.get("workspaceBaseline")
            or uncaptured_decision(actions)
            or {}
        )
        found.append(
            {
                "runId": event["runId"],
                "kind": "isolated_restore" if "workspaceTransition" in actions else "rebaseline",
                "workspaceEpoch": body.get("workspaceEpoch"),
                "decidedAt": body.get("decidedAt"),
                "text": mark,
            }
        )
    return found


def changed_count_words(paths: Sequence[str], more: int = 0) -> str:
    """``3 files``; folders (``name/``: an empty folder, or a folder whose permissions
    changed; docs/design/workspace.md section 1) are said as folders: ``1 folder``, or ``3 files
    and folders`` when both changed (or some were not listed). Not "empty": a folder whose mode
    changed holds files."""
    count = len(paths) + more
    folders = sum(1 for path in paths if path.endswith("/"))
    if not folders:
        return f"{count} file" + ("" if count == 1 else "s")
    if folders == count:
        return f"{count} folder" + ("" if count == 1 else "s")
    return f"{count} files and folders"


NOTICE_PATHS_SHOWN = 50


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
    lines = [
        f"- {shown_name(str(item['path']))} ({item['change']})"
        for item in changed[:NOTICE_PATHS_SHOWN]
    ]
    if more:
        lines.append(f"- and {more} more")
    said = changed_count_words([str(item["path"]) for item in changed], more)
    # Since the last snapshot, not "outside your view": the snapshot was out of date (why the
    # user was asked), so a call of the model's own after it may have made some of these
    # changes; a file its finished command wrote was told to it as changed by someone else.
    return (
        f"Note from the host: {said} in the folder changed since the last snapshot of it, "
        "taken before this session stopped. Your own calls after that snapshot may have made "
        "some of these changes; the others were made outside your view:\n"
        + "\n".join(lines)
        + "\nThe user chose to continue with the files as they are now. Re-read these files "
        "before you rely on what you saw of them earlier."
    )
