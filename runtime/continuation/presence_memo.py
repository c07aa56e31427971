"""One presence decision per snapshot per plan (docs/design/workspace.md section 3).

Planning a resume asks whether the boundary snapshot is whole three times: for the restore point,
for the workspace gate's evidence and, when a rebaseline is offered, for the snapshot it would be
compared with. Each answer walks every object under the snapshot (``rev-list --objects
--missing=print``), which in a big folder is a large part of ``maka plan``. ``PresenceMemo``
wraps the carrier for one plan and asks Git once per snapshot; everything else goes to the
carrier as it is. An answer Git could not give (``CheckpointError``) is not remembered.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runtime.ledger.checkpoint_ports import CheckpointCarrier, ModeDecision, Snapshot, TreeChange


class PresenceMemo:
    """A ``CheckpointCarrier`` that remembers ``has_snapshot``'s answers (one plan's life)."""

    def __init__(self, carrier: CheckpointCarrier) -> None:
        self._carrier = carrier
        self._known: dict[tuple[str, str, str], bool] = {}

    @property
    def missing_note(self) -> str | None:
        """The carrier's word on where a missing snapshot may be instead (a shared ledger)."""
        note = getattr(self._carrier, "missing_note", None)
        return note if isinstance(note, str) else None

    def has_snapshot(self, workspace_identity: str, commit_id: str, tree_id: str) -> bool:
        key = (workspace_identity, commit_id, tree_id)
        found = self._known.get(key)
        if found is None:
            found = self._carrier.has_snapshot(workspace_identity, commit_id, tree_id)
            self._known[key] = found
        return found

    def has_tree(self, workspace_identity: str, tree_id: str) -> bool:
        return self._carrier.has_tree(workspace_identity, tree_id)

    def recorded_bits(self, workspace_identity: str, tree_id: str) -> Mapping[str, int] | None:
        """The wrapped carrier's permission record of a snapshot (``checkpoint_evidence``);
        None when it keeps none."""
        read = getattr(self._carrier, "recorded_bits", None)
        if not callable(read):
            return None
        found: Mapping[str, int] | None = read(workspace_identity, tree_id)
        return found

    def damaged_aside(self, workspace_identity: str, trees: list[str]) -> Mapping[str, Any]:
        """The wrapped carrier's objects a check moved aside as damaged, by tree
        (``checkpoint_evidence``); empty when it moves none."""
        read = getattr(self._carrier, "damaged_aside", None)
        if not callable(read):
            return {}
        found: Mapping[str, Any] = read(workspace_identity, trees)
        return found

    def decide_mode(self, folder: Path, workspace_identity: str) -> ModeDecision:
        return self._carrier.decide_mode(folder, workspace_identity)

    def capture(
        self,
        folder: Path,
        workspace_identity: str,
        ref: str,
        message: str,
        *,
        rebuild_index: bool = False,
    ) -> Snapshot:
        self._known.clear()
        return self._carrier.capture(
            folder, workspace_identity, ref, message, rebuild_index=rebuild_index
        )

    def observe(self, folder: Path, workspace_identity: str) -> Snapshot:
        return self._carrier.observe(folder, workspace_identity)

    def has_repository(self, workspace_identity: str) -> bool:
        return self._carrier.has_repository(workspace_identity)

    def changes(
        self,
        workspace_identity: str,
        old_tree: str,
        new_tree: str,
        *,
        old_workspace: str | None = None,
    ) -> list[TreeChange]:
        return self._carrier.changes(
            workspace_identity, old_tree, new_tree, old_workspace=old_workspace
        )

    def materialize(
        self,
        workspace_identity: str,
        tree_id: str,
        target: Path,
        session_id: str,
        *,
        source: Path | None = None,
    ) -> str:
        return self._carrier.materialize(
            workspace_identity, tree_id, target, session_id, source=source
        )

    def restore_attempts(self, session_id: str) -> list[str]:
        return self._carrier.restore_attempts(session_id)

    def restore_log(self) -> list[tuple[str, str]]:
        return self._carrier.restore_log()
