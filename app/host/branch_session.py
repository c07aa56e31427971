"""Branching a session, as every host surface calls it (issue #36): ``branch_options`` lists the
points a session can be branched from (with whether a snapshot is bound and kept), and
``branch_session`` makes the branch. ``maka branch`` and ``/branch`` in the TUI call these; the
desktop calls them from its host the same way (the store and checkpoint carrier it owns).

What a surface shows of a branch: ``branch_of(store, session_id)`` (the new session's source and
boundary) and ``branches_from(store, session_id)`` (where a session was branched, by event id).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from runtime.continuation.branch_service import (
    BranchOption,
    BranchPlan,
    BranchResult,
    BranchService,
    BranchWriter,
)
from runtime.continuation.lifecycle_log import LifecycleLog
from runtime.ledger.branch_facts import BranchRecord
from runtime.ledger.checkpoint_ports import CheckpointCarrier


class BranchLister(BranchWriter, Protocol):
    def list_branches(self) -> Sequence[BranchRecord]: ...


def branch_options(
    store: BranchWriter, checkpoints: CheckpointCarrier | None, session_id: str
) -> list[BranchOption]:
    """The session's branchable boundaries, oldest first (reads only). Raises
    ``BranchRefused`` (``session_not_found``)."""
    options = BranchService(store, checkpoints, now_ms=_never).options(session_id)
    return _with_snapshot_states(store, checkpoints, options)


def _with_snapshot_states(
    store: BranchWriter, checkpoints: CheckpointCarrier | None, options: list[BranchOption]
) -> list[BranchOption]:
    """``options`` with each kept snapshot that retention removed marked ``trimmed`` (as
    ``maka checkpoints`` calls it "removed by retention"): its objects wait for the next prune,
    and a branch made from it meanwhile names it again; and each bound snapshot not kept
    because a check moved its damaged objects aside marked ``damaged_aside`` (as ``maka
    checkpoints`` calls it "DAMAGED"). One reading of the refs for all."""
    import dataclasses

    from storage.checkpoints.checkpoint_audit import (
        CheckpointRow,
        damaged_aside,
        removed_by_retention,
    )
    from storage.checkpoints.checkpoint_store import GitCheckpointStore

    if not isinstance(checkpoints, GitCheckpointStore):
        return options

    def row(option: BranchOption) -> CheckpointRow:
        boundary = option.boundary
        return CheckpointRow(
            "", "", boundary.event_id, boundary.snapshot_ts, "checkpoint",
            boundary.snapshot or {}, present=option.snapshot_kept,
        )  # fmt: skip

    bound = [option for option in options if option.boundary.snapshot is not None]
    kept = [row(option) for option in bound if option.snapshot_kept]
    lost = [row(option) for option in bound if not option.snapshot_kept]
    try:
        trimmed = removed_by_retention(store, checkpoints, kept) if kept else set()
        aside = {r.event_id for r, _ in damaged_aside(checkpoints, lost)} if lost else set()
    except Exception:  # a wording only: never fail the listing it words
        return options
    return [
        dataclasses.replace(
            option,
            trimmed=option.boundary.event_id in trimmed,
            damaged_aside=option.boundary.event_id in aside,
        )
        for option in options
    ]


def plan_branch(
    store: BranchWriter,
    checkpoints: CheckpointCarrier | None,
    session_id: str,
    event_id: str,
    *,
    to: str | None = None,
    current_files: bool = False,
) -> BranchPlan:
    """What ``branch_session`` would do (reads only). Raises ``BranchRefused``."""
    service = BranchService(store, checkpoints, now_ms=_never)
    return service.plan(session_id, event_id, to=to, current_files=current_files)


def _retention_removed(
    store: BranchWriter, checkpoints: CheckpointCarrier | None
) -> Callable[[Mapping[str, Any], int], bool]:
    from storage.checkpoints.checkpoint_audit import snapshot_removed_by_retention
    from storage.checkpoints.checkpoint_store import GitCheckpointStore

    def trimmed(snapshot: Mapping[str, Any], ts: int) -> bool:
        if not isinstance(checkpoints, GitCheckpointStore):
            return False
        return snapshot_removed_by_retention(store, checkpoints, snapshot, ts)

    return trimmed


def branch_session(
    store: BranchWriter,
    checkpoints: CheckpointCarrier | None,
    session_id: str,
    event_id: str,
    *,
    now_ms: Callable[[], int],
    to: str | None = None,
    current_files: bool = False,
    lifecycle: LifecycleLog | None = None,
) -> BranchResult:
    """Plan and make the branch: a new session in a restored copy of the folder. Raises
    ``BranchRefused`` with nothing recorded (a copy already made is left where it is)."""
    service = BranchService(
        store, checkpoints, now_ms=now_ms, trimmed=_retention_removed(store, checkpoints)
    )
    plan = service.plan(session_id, event_id, to=to, current_files=current_files)
    _name_the_snapshot(checkpoints, plan)
    result = service.execute(plan)
    if lifecycle is not None:
        lifecycle.session_branched(
            {
                "sessionId": result.session.session_id,
                "sourceSessionId": session_id,
                "boundaryEventId": event_id,
                "workspacePath": result.session.cwd,
                "currentFiles": current_files,
            },
        )
    return result


def _name_the_snapshot(checkpoints: CheckpointCarrier | None, plan: BranchPlan) -> None:
    """A point whose snapshot retention removed while its objects wait for the next prune can
    still be branched from: its ref is made again first, so that retention keeps it as the
    snapshot the branch was copied from (the branch's record names it)."""
    from storage.checkpoints.checkpoint_store import GitCheckpointStore

    snapshot = plan.snapshot
    if plan.current_files or snapshot is None or not isinstance(checkpoints, GitCheckpointStore):
        return
    identity, ref = snapshot.get("workspaceIdentity"), snapshot.get("checkpointRef")
    commit = snapshot.get("commitId")
    if isinstance(identity, str) and isinstance(ref, str) and isinstance(commit, str):
        checkpoints.name_again(identity, ref, commit)


@dataclass(frozen=True, slots=True)
class BranchMark:
    """A branch made from a session, for the source's transcript."""

    session_id: str
    boundary_event_id: str
    created_at: int


def branch_of(store: BranchWriter, session_id: str) -> BranchRecord | None:
    return store.read_branch(session_id)


def branches_from(store: BranchLister, session_id: str) -> list[BranchMark]:
    return [
        BranchMark(record.session_id, record.boundary_event_id, record.created_at)
        for record in store.list_branches()
        if record.source_session_id == session_id
    ]


def branch_header_words(record: BranchRecord) -> str:
    """The new session's header line: its source and boundary. The number is where the history
    it carries ends (the fact's high water), said as such: past the boundary's own event when
    events were written with it (an answered call's decision and baseline of the folder), so
    "event 15" of a boundary the timeline numbers #13 would be untrue."""
    how = "a copy of the current files" if record.current_files else "the folder as it was there"
    return (
        f"branched from session {record.source_session_id} at event {record.boundary_event_id} "
        f"(run {record.source_run_id}, its history up to event {record.source_high_water}), "
        f"with {how}"
    )


def branch_json(result: BranchResult) -> dict[str, Any]:
    return {
        "sessionId": result.session.session_id,
        "cwd": result.session.cwd,
        "title": result.session.title,
        "branchedFrom": result.record.to_json(),
    }


def _never() -> int:
    raise AssertionError("planning writes nothing")
