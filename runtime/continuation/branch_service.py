"""Branching a session from a committed boundary (issue #36): plan, then one admission.

``plan`` reads only: the boundary (``branch_prefix.find_boundary``), the prefix it refers to and
its replay (refused when a call has no settled outcome there: the resume gates), the snapshot
bound to it and whether its objects are still in the checkpoint store. ``execute`` then

1. re-reads the prefix and refuses when it changed since the plan;
2. materializes the bound snapshot into the new folder (the isolated restore of
   docs/design/workspace.md section 4: the source folder is not touched; a Git repository's copy
   is a clone with its history and the snapshot's files on top), or, with ``current_files``,
   captures the source folder as it is now and materializes that;
3. verifies the copy: the tree observed in it must be the snapshot's recorded tree
   (``branch_copy_mismatch`` otherwise; the copy is left in place and never used);
   crash point ``after_branch_copy_materialized``;
4. commits the new session and its ``branchStart`` fact in one transaction (crash points
   ``branch_admission_before_commit`` and ``after_branch_admission_committed``).

The ledger side is O(1) in the prefix: one session row and one fact row; no event is copied.
The new session's first turn is an ordinary turn (``maka run --session``, the TUI), whose
history starts with the prefix (``runtime/agent/branch_history.py``).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from runtime.continuation.branch_prefix import (
    Boundary,
    BranchPrefix,
    BranchRefused,
    BranchStore,
    RowsOnce,
    find_boundary,
    list_boundaries,
    resolve_prefix,
)
from runtime.continuation.continuation_replay import SegmentIssue
from runtime.continuation.copy_place import copy_base, place_refusal
from runtime.continuation.lineage_reader import build_prefix
from runtime.ledger.branch_facts import BRANCH_START_V1, BranchRecord, branch_record
from runtime.ledger.checkpoint_ports import CheckpointCarrier, CheckpointError, checkpoint_ref
from runtime.ledger.codes import BranchCode, RestoreCode, StoreCode
from runtime.ledger.command_words import maka_command, shell_quoted
from runtime.ledger.crash_points import CrashPoint, failpoint
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import RunHeader, SessionRecord
from runtime.ledger.workspace_facts import declared_mode

BRANCH_EPOCH = 1
"""The new folder's first workspace epoch (a run's first, ``workspace_checkpointer``)."""


class BranchWriter(BranchStore, Protocol):
    def get_session(self, session_id: str) -> SessionRecord | None: ...

    def list_sessions(self) -> Sequence[SessionRecord]: ...

    def admit_branch(self, session: SessionRecord, record: BranchRecord) -> None: ...


@dataclass(frozen=True, slots=True)
class BranchOption:
    """A boundary as a surface offers it: whether a snapshot is bound and still whole."""

    boundary: Boundary
    snapshot_kept: bool
    trimmed: bool = False
    """Kept only until the next prune: retention removed the snapshot's ref (no longer needed),
    and its objects wait for the prune; a branch made from it names it again, so it stays."""
    damaged_aside: bool = False
    """Not kept whole because a check found its objects damaged and moved them aside: a
    capture of a folder still holding those bytes writes them again (then it is kept)."""

    def to_json(self) -> dict[str, Any]:
        body = self.boundary.to_json()
        body["snapshotKept"] = self.snapshot_kept
        if self.trimmed:
            body["trimmed"] = True  # (as ``maka checkpoints --json`` says it)
        if self.damaged_aside:
            body["damagedAside"] = True
        return body


@dataclass(frozen=True, slots=True)
class BranchPlan:
    source: SessionRecord
    boundary: Boundary
    prefix: BranchPrefix
    snapshot: Mapping[str, Any] | None  # bound and whole; None: only --current-files
    target: Path
    current_files: bool
    target_given: bool = False  # the user named the folder (``--to``): a retry names it too

    @property
    def retry_to(self) -> str:
        """The folder a retry names (the one the user gave), or "" for the default."""
        return str(self.target) if self.target_given else ""

    def to_json(self) -> dict[str, Any]:
        return {
            "sourceSessionId": self.source.session_id,
            "boundary": self.boundary.to_json(),
            "prefixDigest": self.prefix.prefix.prefix_digest,
            "workspacePath": str(self.target),
            "currentFiles": self.current_files,
        }


@dataclass(frozen=True, slots=True)
class BranchResult:
    session: SessionRecord
    record: BranchRecord


def default_branch_path(folder: str) -> Path:
    """``<folder>-branch-<n>``: the first such sibling that does not exist (beside the
    repository when the folder is inside one: ``copy_place``)."""
    base = copy_base(folder)
    n = 1
    while os.path.lexists(f"{base}-branch-{n}"):
        n += 1
    return Path(f"{base}-branch-{n}")


def _inside(target: Path, folder: str) -> bool:
    real_target, real_folder = os.path.realpath(target), os.path.realpath(folder)
    try:
        return os.path.commonpath([real_target, real_folder]) == real_folder
    except ValueError:
        return False


class BranchService:
    def __init__(
        self,
        store: BranchWriter,
        checkpoints: CheckpointCarrier | None,
        *,
        now_ms: Callable[[], int],
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex[:20],
        trimmed: Callable[[Mapping[str, Any], int], bool] = lambda snapshot, ts: False,
    ) -> None:
        """``trimmed``: whether retention removed a snapshot (its fact, and when that was
        written) on purpose: its missing objects are then said so, not called damage."""
        self._store = store
        self._checkpoints = checkpoints
        self._trimmed = trimmed
        self._now_ms = now_ms
        self._new_id = new_id

    def _source(self, session_id: str) -> SessionRecord:
        session = self._store.get_session(session_id)
        if session is None:
            raise BranchRefused(StoreCode.SESSION_NOT_FOUND, f"no session {session_id}")
        return session

    def _kept(self, snapshot: Mapping[str, Any] | None, memo: dict[tuple[str, ...], bool]) -> bool:
        if snapshot is None or self._checkpoints is None:
            return False
        key = (
            str(snapshot.get("workspaceIdentity", "")),
            str(snapshot.get("commitId", "")),
            str(snapshot.get("treeId", "")),
        )
        if key not in memo:
            try:
                memo[key] = self._checkpoints.has_snapshot(*key)
            except CheckpointError:
                memo[key] = False
        return memo[key]

    def options(self, session_id: str) -> list[BranchOption]:
        """Every boundary of the session, oldest first, with whether its snapshot is kept (the
        preview every surface lists)."""
        self._source(session_id)
        memo: dict[tuple[str, ...], bool] = {}
        return [
            BranchOption(boundary, self._kept(boundary.snapshot, memo))
            for boundary in list_boundaries(self._store, session_id)
        ]

    def plan(
        self,
        session_id: str,
        event_id: str,
        *,
        to: str | None = None,
        current_files: bool = False,
    ) -> BranchPlan:
        """Raises ``BranchRefused``; writes nothing."""
        source = self._source(session_id)
        reads = RowsOnce(self._store)
        boundary = find_boundary(reads, session_id, event_id)
        header = self._store.read_run_header(boundary.run_id)
        assert header is not None, "find_boundary read it"
        try:
            prefix = resolve_prefix(reads, header, boundary.seq)
        except BranchRefused as unsettled:
            if unsettled.code != BranchCode.BRANCH_BOUNDARY_UNSETTLED:
                raise
            if boundary.settled_at is None:
                # Nothing answers it yet: say how to go on (the refusal alone had no way on).
                raise BranchRefused(
                    unsettled.code,
                    unsettled.message + _ways_on(reads, session_id, boundary, unsettled.issues),
                    unsettled.issues,
                ) from None
            # Answered after this point: the answer is where the history is whole.
            raise BranchRefused(
                unsettled.code,
                f"{unsettled.message}; its outcome was recorded later in the run: branch from "
                f"{boundary.settled_at} instead",
                unsettled.issues,
            ) from None
        # Whether the bound snapshot's objects are all still stored is checked when it is
        # copied (``materialize`` re-hashes them before it writes anything): walking them here
        # too would cost a second pass over a big snapshot.
        snapshot = boundary.snapshot if self._checkpoints is not None else None
        if snapshot is None and not current_files:
            why = (
                "workspace snapshots are off"
                if self._checkpoints is None
                else "no snapshot of the folder was taken there"
            )
            named = os.path.abspath(to) if to else ""
            raise _unavailable(session_id, event_id, why, self._capture_refusal(source), named)
        if current_files and self._checkpoints is None:
            raise BranchRefused(
                BranchCode.BRANCH_SNAPSHOT_UNAVAILABLE,
                "workspace snapshots are off, so no copy of the folder can be made",
            )
        target = Path(os.path.abspath(to)) if to else default_branch_path(source.cwd)
        if _inside(target, source.cwd):
            where = (
                "is the source folder"
                if os.path.realpath(target) == os.path.realpath(source.cwd)
                else f"is inside {source.cwd}"
            )
            raise BranchRefused(
                RestoreCode.WORKSPACE_RESTORE_TARGET_INSIDE,
                f"{target} {where}; the branch's folder goes outside the source folder, which is "
                "left as it is",
            )
        if current_files and not os.path.isdir(source.cwd):
            raise BranchRefused(
                BranchCode.BRANCH_SNAPSHOT_UNAVAILABLE,
                f"{source.cwd}, the source's folder, is not there, so no copy of its current "
                "files can be made; nothing was done. Branch from a point whose snapshot is kept "
                "(without --current-files), or move the session to the folder's new place first "
                f"({maka_command(f'sessions relocate {session_id} FOLDER')})",
            )
        self._refuse_beside_a_repository_session(target, source)
        refused = place_refusal(target)
        if refused is not None:
            raise BranchRefused(refused.code, refused.message)
        return BranchPlan(source, boundary, prefix, snapshot, target, current_files, bool(to))

    def _refuse_beside_a_repository_session(self, target: Path, source: SessionRecord) -> None:
        """A copy of a Git repository is a clone: inside another session's folder that is a
        repository of its own, it is a nested repository there, and that session's snapshots
        stop (``checkpoint_nested_repository``). Anywhere else inside another session's folder
        stays the user's choice (a session in the home folder leaves no place outside it)."""
        if not os.path.lexists(os.path.join(source.cwd, ".git")):
            return
        for other in self._store.list_sessions():
            if other.session_id == source.session_id:
                continue
            if (
                os.path.lexists(os.path.join(other.cwd, ".git"))
                and _inside(target, other.cwd)
                and not self._holds_a_repository_already(other)
            ):
                raise BranchRefused(
                    RestoreCode.WORKSPACE_RESTORE_TARGET_INSIDE,
                    f"{target} is inside {other.cwd}, the Git repository session "
                    f"{other.session_id} works in: the copy, a clone of {source.cwd}, would be "
                    "a repository inside it and that session's snapshots would stop; choose a "
                    "folder outside it",
                )

    def _holds_a_repository_already(self, session: SessionRecord) -> bool:
        """Whether the session's latest run took no snapshot because its folder holds a nested
        repository already (a dotfiles repository of the home folder, say): one more there
        stops nothing, and refusing would leave no default place for a copy."""
        mode = self._latest_mode(session.session_id)
        return (
            mode is not None
            and mode.get("mode") == "unavailable"
            and mode.get("reasonCode") == "checkpoint_nested_repository"
        )

    def _latest_mode(self, session_id: str) -> Mapping[str, Any] | None:
        """The checkpoint mode the session's latest run declared, from the record alone."""
        runs = sorted(
            self._store.list_session_runs(session_id),
            key=lambda header: (header.created_at, header.run_id),
        )
        if not runs:
            return None
        return declared_mode(
            [row.event for row in self._store.read_run_events(runs[-1].run_id)[:1]]
        )

    def _capture_refusal(self, source: SessionRecord) -> str | None:
        """Why a copy of the session's current files cannot be made either, from the record
        alone (planning writes nothing, not even an empty store): its folder is gone, or its
        latest run took no snapshot because of what the folder holds (a nested repository or a
        submodule, Git LFS, its size). None otherwise."""
        if not os.path.isdir(source.cwd):
            return f"{source.cwd}, the source's folder, is not there"
        mode = self._latest_mode(source.session_id)
        code = str(mode.get("reasonCode", "")) if mode is not None else ""
        if mode is None or mode.get("mode") != "unavailable" or code not in _FOLDER_REASONS:
            return None
        return f"{code}: the session's latest run could not snapshot its folder for this reason"

    def execute(self, plan: BranchPlan) -> BranchResult:
        """Copy, verify, admit. Raises ``BranchRefused`` (nothing recorded)."""
        carrier = self._checkpoints
        assert carrier is not None, "plan refused a branch without a carrier"
        header = self._store.read_run_header(plan.boundary.run_id)
        if header is None:
            raise BranchRefused(BranchCode.BRANCH_SOURCE_CHANGED, "the source run is gone")
        # The plan ran the gates over this prefix; committed events never change, so its digest
        # says whether it is still the one planned.
        try:
            again = build_prefix(
                header, self._store.read_run_events(header.run_id), plan.boundary.seq
            )
        except ValueError:
            again = None
        if again is None or again.prefix_digest != plan.prefix.prefix.prefix_digest:
            raise BranchRefused(
                BranchCode.BRANCH_SOURCE_CHANGED, "the source's history changed since the plan"
            )
        prefix = plan.prefix
        session_id = f"session_{self._new_id()}"
        now = self._now_ms()
        snapshot = plan.snapshot if not plan.current_files else None
        if snapshot is None:
            snapshot = self._capture_current(plan, header, session_id)
        to_identity = self._materialize(plan, snapshot, session_id)
        failpoint(CrashPoint.AFTER_BRANCH_COPY_MATERIALIZED)
        fact: dict[str, Any] = {
            "protocol": BRANCH_START_V1,
            "sessionId": session_id,
            "source": {
                "sessionId": plan.source.session_id,
                "invocationId": header.invocation_id,
                "runId": header.run_id,
                "turnId": header.turn_id,
                "highWater": prefix.prefix.last_event_seq,
                "prefixDigest": prefix.prefix.prefix_digest,
                "boundaryEventId": plan.boundary.event_id,
                "boundaryKind": plan.boundary.kind,
            },
            "lineageRunIds": list(prefix.lineage_run_ids),
            "boundaryDigest": prefix.replay.manifest_digest,
            "providerReplayDigest": prefix.replay.provider_replay_digest,
            "snapshot": {
                key: str(snapshot.get(key, ""))
                for key in ("checkpointRef", "commitId", "treeId", "workspaceIdentity")
            },
            "currentFiles": plan.current_files,
            "workspacePath": str(plan.target),
            "workspaceIdentity": to_identity,
            "workspaceEpoch": BRANCH_EPOCH,
            "decidedBy": "local_user",
            "decidedAt": now,
        }
        record = branch_record(fact, now)
        session = SessionRecord(
            session_id=session_id,
            cwd=os.path.realpath(plan.target),
            title=_branch_title(plan.source.title),
            created_at=now,
        )
        try:
            self._store.admit_branch(session, record)
        except LedgerError as error:
            raise BranchRefused(error.code, error.message) from error
        return BranchResult(session, record)

    def _capture_current(
        self, plan: BranchPlan, header: RunHeader, session_id: str
    ) -> Mapping[str, Any]:
        """The source folder as it is now, as a snapshot of its workspace (its own folder and
        history are not changed: the capture writes only to the private store)."""
        carrier = self._checkpoints
        assert carrier is not None
        identity = _latest_identity(self._store.list_session_runs(plan.source.session_id))
        if identity is None:
            raise BranchRefused(
                BranchCode.BRANCH_SNAPSHOT_UNAVAILABLE,
                "the source session recorded no workspace identity, so its files cannot be "
                "captured",
            )
        ref = checkpoint_ref(plan.source.session_id, f"branch-{session_id}", 0)
        try:
            snap = carrier.capture(
                Path(os.path.realpath(plan.source.cwd)), identity, ref, f"maka branch {ref}"
            )
        except CheckpointError as error:
            message = f"the files could not be captured: {error.message}"
            raise BranchRefused(error.code, message) from None
        return {
            "checkpointRef": snap.ref,
            "commitId": snap.commit_id,
            "treeId": snap.tree_id,
            "workspaceIdentity": identity,
        }

    def _materialize(self, plan: BranchPlan, snapshot: Mapping[str, Any], session_id: str) -> str:
        carrier = self._checkpoints
        assert carrier is not None
        identity, tree = str(snapshot["workspaceIdentity"]), str(snapshot["treeId"])
        # On a shared ledger a snapshot another host took is in that host's data folder.
        elsewhere = getattr(carrier, "missing_note", None)
        try:
            if not plan.current_files and not carrier.has_repository(identity):
                why = (
                    f"its snapshot is not in this data folder: {elsewhere}"
                    if elsewhere
                    else "its snapshot is gone"
                )
                raise _unavailable(
                    plan.source.session_id,
                    plan.boundary.event_id,
                    why,
                    self._capture_refusal(plan.source),
                    plan.retry_to,
                )
            to_identity = carrier.materialize(
                identity, tree, plan.target, session_id, source=Path(plan.source.cwd)
            )
            observed = carrier.observe(Path(os.path.realpath(plan.target)), to_identity)
        except CheckpointError as error:
            if error.code is RestoreCode.WORKSPACE_RESTORE_SNAPSHOT_DAMAGED:
                # Nothing was written: the snapshot's objects are checked first.
                why = f"its snapshot is no longer whole in the checkpoint store: {error.message}"
                if elsewhere and "missing" in error.message:
                    why = f"its snapshot is not in this data folder: {elsewhere}"
                elif "missing" in error.message and self._trimmed(
                    snapshot, plan.boundary.snapshot_ts
                ):
                    why = (
                        "its snapshot was removed by retention, which keeps every snapshot of a "
                        "session's two latest runs and the last one of each earlier run"
                    )
                raise _unavailable(
                    plan.source.session_id,
                    plan.boundary.event_id,
                    why,
                    self._capture_refusal(plan.source),
                    plan.retry_to,
                ) from None
            raise BranchRefused(error.code, error.message) from None
        if observed.tree_id != tree:
            raise BranchRefused(
                BranchCode.BRANCH_COPY_MISMATCH,
                f"the copy at {plan.target} does not hold the snapshot's files (tree "
                f"{observed.tree_id[:12]}, recorded {tree[:12]}); it is left there and not used",
            )
        return to_identity


# Why a run took no snapshot that is about what the folder holds: a capture of it now fails too.
_FOLDER_REASONS = frozenset(
    {"checkpoint_nested_repository", "checkpoint_lfs_unsupported", "checkpoint_too_large"}
)


_SETTLEABLE = frozenset({"pending_tool_result"})
"""The replay issues of a call whose outcome is unknown (indeterminate), which the user can
settle by saying whether it ran (``maka settle``)."""
_EARLIER_TRIES = 16
"""How many earlier points a refusal tries, newest first, for one that can be continued."""


def _ways_on(
    reads: BranchStore, session_id: str, boundary: Boundary, issues: Sequence[SegmentIssue]
) -> str:
    """The ways on from a point a call without an outcome holds (to follow its refusal's
    message): settle each such call and branch from the answer it records, or branch from the
    latest earlier point whose history can be continued."""
    calls = list(
        dict.fromkeys(
            issue.tool_call_id
            for issue in issues
            if issue.code in _SETTLEABLE and issue.tool_call_id
        )
    )
    ways = []
    if calls:
        settle = " and ".join(
            maka_command(f"settle {session_id} {call} --ran (or --not-run)") for call in calls
        )
        which, it = ("that call", "it") if len(calls) == 1 else ("those calls", "them")
        ways.append(
            f"if you know whether {which} ran, record {it} with {settle}, then branch from the "
            f"result your answer records ({maka_command(f'branch {session_id}')} lists it)"
        )
    earlier = _earlier_point(reads, session_id, boundary)
    if earlier is not None:
        ways.append(
            f"branch from {earlier} instead (the latest earlier point whose history can be "
            "continued)"
        )
    said = "; or ".join(ways)
    return f"; nothing was done. {said[:1].upper()}{said[1:]}" if said else "; nothing was done"


def _earlier_point(reads: BranchStore, session_id: str, boundary: Boundary) -> str | None:
    """The latest point before ``boundary`` a branch can start from (its history is whole
    there), or None."""
    points = list_boundaries(reads, session_id)
    position = next((i for i, point in enumerate(points) if point.event_id == boundary.event_id), 0)
    tried = 0
    for point in reversed(points[:position]):
        if point.unsettled:
            continue
        if tried == _EARLIER_TRIES:
            return None
        tried += 1
        header = reads.read_run_header(point.run_id)
        if header is None:
            continue
        try:  # (a call of an earlier run of its lineage may hold it too)
            resolve_prefix(reads, header, point.seq)
        except BranchRefused:
            continue
        return point.event_id
    return None


def _unavailable(
    session_id: str, event_id: str, why: str, current_refused: str | None = None, to: str = ""
) -> BranchRefused:
    """No snapshot at the point; the other way offered only when it can work (a folder that
    snapshots cannot capture, a nested repository say, cannot be copied as it is either).
    ``to``: the folder the user named, named again in that way (else the default one)."""
    where = f" --to {shell_quoted(to)}" if to else ""
    instead = (
        "Branch with a copy of the current files instead: "
        f"{maka_command(f'branch {session_id} --at {event_id}{where} --current-files')}"
        if current_refused is None
        else f"A copy of the current files cannot be made either: {current_refused}"
    )
    return BranchRefused(
        BranchCode.BRANCH_SNAPSHOT_UNAVAILABLE,
        f"no copy of the folder as it was at {event_id} can be made ({why}); nothing was "
        f"done. {instead}",
    )


_BRANCH_SUFFIX = re.compile(r" \(branch(?: (\d+))?\)$")


def _branch_title(title: str) -> str:
    """``title (branch)``; a branch of a branch is ``title (branch 2)``, then 3 (not ``title
    (branch) (branch)``)."""
    found = _BRANCH_SUFFIX.search(title)
    if found is None:
        text = f"{title} (branch)"
    else:
        text = f"{title[: found.start()]} (branch {int(found.group(1) or 1) + 1})"
    return text if len(text) <= 200 else text[:199]


def _latest_identity(runs: Sequence[RunHeader]) -> str | None:
    ordered = sorted(runs, key=lambda header: (header.created_at, header.run_id))
    for header in reversed(ordered):
        if header.workspace_identity:
            return str(header.workspace_identity)
    return None
