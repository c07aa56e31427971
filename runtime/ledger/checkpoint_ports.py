"""The workspace checkpoint carrier, as the runtime and the planner see it
(docs/design/workspace.md).

The carrier (``storage.checkpoints.checkpoint_store``) only captures, verifies and compares
snapshots of a
session folder; it never approves a resume (the planner decides from committed facts). These are
the values it hands back and the port the run loop and the safety inspector call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from runtime.ledger.coded_error import CodedError
from runtime.ledger.codes import CheckpointFailureCode, CheckpointUnavailableCode, RestoreCode

CHECKPOINT_PROTOCOL = "workspace_checkpoint_v1"
CHANGED_PATHS_SHOWN = 50
"""Resume diagnostics list this many changed paths, then a count of the rest."""


class CheckpointMode(StrEnum):
    GIT_V1 = "git_v1"
    UNAVAILABLE = "unavailable"


class PathChange(StrEnum):
    ADDED = "added"
    MODIFIED = "modified"
    DELETED = "deleted"


@dataclass(frozen=True, slots=True)
class ModeDecision:
    """A run's checkpoint mode, chosen once at its start and never weakened during it."""

    mode: CheckpointMode
    reason: CheckpointUnavailableCode | None = None
    detail: str = ""

    def to_json(self) -> dict[str, str]:
        body = {"mode": self.mode.value}
        if self.reason is not None:
            body["reasonCode"] = self.reason.value
        return body


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A captured tree: ``commit_id`` is empty for a resume-time observation (no ref, no commit)."""

    tree_id: str
    policy_hash: str
    commit_id: str = ""
    ref: str = ""
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TreeChange:
    path: str
    change: PathChange


@dataclass(frozen=True, slots=True)
class SettleBaseline:
    """What settling the call does to the folder's starting point.

    ``changes``: the paths that differ from the run's newest snapshot (None: there is no
    snapshot to compare with); ``body``: the ``workspaceBaseline`` fact to commit (None for a
    preview, or when nothing is recorded); ``problem``: why the folder could not be captured
    (the attestation is recorded all the same, the snapshot stays stale)."""

    changes: tuple[TreeChange, ...] | None
    body: dict[str, Any] | None = None
    problem: str | None = None

    def changed_paths(self) -> list[str]:
        return [change.path for change in self.changes or ()]


class CheckpointError(CodedError):
    """A capture or an observation that could not be made; ``code`` says why."""

    code: CheckpointFailureCode | RestoreCode

    def __init__(self, code: CheckpointFailureCode | RestoreCode, message: str) -> None:
        super().__init__(code, message)


class CheckpointCarrier(Protocol):
    """One private bare repository per workspace identity, the session folder as work tree."""

    def decide_mode(self, folder: Path, workspace_identity: str) -> ModeDecision: ...

    def capture(
        self,
        folder: Path,
        workspace_identity: str,
        ref: str,
        message: str,
        *,
        rebuild_index: bool = False,
    ) -> Snapshot:
        """Add the folder under the policy, write the tree, commit it (parent: the workspace's
        previous checkpoint) and point ``ref`` at it. ``rebuild_index``: start from an empty
        index (every file hashed again), for a store whose objects were partly removed, where
        the index's cache could name them. Raises ``CheckpointError``."""
        ...

    def observe(self, folder: Path, workspace_identity: str) -> Snapshot:
        """The folder's current tree under the same policy: no ref, no commit, and the
        persistent index is left as it was. Raises ``CheckpointError``."""
        ...

    def has_repository(self, workspace_identity: str) -> bool:
        """Whether the workspace's private repository exists."""
        ...

    def has_snapshot(self, workspace_identity: str, commit_id: str, tree_id: str) -> bool:
        """Whether the commit, its tree and every folder and file under it still exist in the
        workspace's repository (the one presence decision every surface uses). Raises
        ``CheckpointError`` when Git cannot tell: that is not a missing snapshot."""
        ...

    def has_tree(self, workspace_identity: str, tree_id: str) -> bool:
        """Whether the tree and every folder and file under it exist in the workspace's
        repository (no commit needed); False when Git cannot tell."""
        ...

    def changes(
        self,
        workspace_identity: str,
        old_tree: str,
        new_tree: str,
        *,
        old_workspace: str | None = None,
    ) -> list[TreeChange]:
        """Each path that differs between two trees, sorted by path. ``old_workspace``: the
        repository holding ``old_tree`` when it is another workspace's (a restored copy
        compared with the snapshot it was made from)."""
        ...

    def materialize(
        self,
        workspace_identity: str,
        tree_id: str,
        target: Path,
        session_id: str,
        *,
        source: Path | None = None,
    ) -> str:
        """Write a snapshot's files into ``target`` (a new or empty folder; the workspace's own
        folder is not touched), give it a workspace marker of its own and return its identity.
        The attempt is noted first, so a copy whose transition never committed can be named
        (``restore_attempts``). Raises ``CheckpointError``."""
        ...

    def restore_attempts(self, session_id: str) -> list[str]:
        """The folders restores of this session were attempted into, oldest first."""
        ...

    def restore_log(self) -> list[tuple[str, str]]:
        """Every restore attempted, as (session id, folder), oldest first, each once: the copies
        of a branch or resume that never recorded its session are found here."""
        ...


def checkpoint_ref(session_id: str, run_id: str, n: int) -> str:
    return f"refs/maka/{session_id}/{run_id}/{n}"


def changed_paths_summary(changes: Sequence[TreeChange]) -> dict[str, object]:
    """The diagnostic detail of a drift: the first ``CHANGED_PATHS_SHOWN`` paths, then a count."""
    shown = [{"path": c.path, "change": c.change.value} for c in changes[:CHANGED_PATHS_SHOWN]]
    return {"changedPaths": shown, "moreChangedPaths": max(0, len(changes) - len(shown))}
