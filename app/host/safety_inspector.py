"""The safety inspector: the authoritative facts Safe resume checks (docs/design/desktop.md).

Qt-free, so the CLI uses the same inspector as the desktop main process. The renderer can never
supply these facts: it sends a session id, and the inspector observes

- the workspace identity through the folder's ``.maka/workspace.json`` marker (read only: a
  folder without one, its marker deleted by ``git clean -fdx`` say, is observed with no
  identity, "", and the identity gate parks saying the marker is missing; looking never writes
  into the user's folder, where ``maka plan`` made a marker with a new identity and then asked
  whether one had been "made anew"; a replaced marker shows up as a different identity; an
  invalid marker is an error, never silently replaced; a legacy ``.maka-workspace.json`` is
  read as it is: storage/sessions/workspace_identity.py),
- the realpath of the session folder (a moved folder is a diagnostic, not a refusal),
- the current tool catalog,
- the folder's current tree under the workspace checkpoint policy
  (docs/design/workspace.md section 3),
  captured without a ref or a fact, when the workspace has a checkpoint store,
- background work: shells started by tools that are still alive (pid + process create time, so
  a reused pid is never mistaken for ours), tool processes recorded in the ``tool_processes``
  host table that still run (a command that survived a crash; pid + create time + boot id,
  docs/design/recovery.md section 9) and runs of the live owner epoch still unfinished.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from runtime.continuation.continuation_planner import SafetyObservation, SessionFolderMissing
from runtime.continuation.workspace_gate import WorkspaceTree
from runtime.ledger.checkpoint_ports import CheckpointCarrier, CheckpointError
from runtime.ledger.process_records import ToolProcessTable
from runtime.tools.process_identity import describe, how_to_stop, live_tool_processes
from runtime.tools.process_tree import BackgroundShellRegistry
from storage.sessions.workspace_identity import (
    read_workspace_identity,
    resolve_workspace_identity,
)


class SafetyInspector:
    def __init__(
        self,
        tool_names: Callable[[], Sequence[str]],
        shells: BackgroundShellRegistry | None,
        unfinished_runs: Callable[[str], Sequence[str]] | None = None,
        *,
        processes: ToolProcessTable | None = None,
        checkpoints: CheckpointCarrier | None = None,
    ) -> None:
        self._checkpoints = checkpoints
        self._tool_names = tool_names
        self._shells = shells
        self._processes = processes
        self._unfinished_runs = unfinished_runs

    def observe(self, session_id: str, cwd: str) -> SafetyObservation:
        """Observe session ``session_id`` in folder ``cwd``; raises when a fact cannot be read."""
        folder = Path(cwd)
        if not folder.is_dir():
            raise SessionFolderMissing(cwd)
        identity = read_workspace_identity(folder)
        pending: list[str] = []
        if self._shells is not None:
            pending.extend(
                f"shell pid {shell.pid} ({shell.command[:60]})"
                for shell in self._shells.live_shells(session_id)
            )
        if self._processes is not None:
            pending.extend(
                f"{describe(record)} is still running from before Maka stopped; "
                f"stop it with: {how_to_stop(record)}"
                for record in live_tool_processes(self._processes, session_id=session_id)
            )
        if self._unfinished_runs is not None:
            pending.extend(f"run {run_id}" for run_id in self._unfinished_runs(session_id))
        if identity is None:  # (no marker: no identity, and no store to capture it in)
            return SafetyObservation(
                workspace_identity="",
                workspace_path=os.path.realpath(folder),
                background_settled=not pending,
                tool_names=tuple(sorted(set(self._tool_names()))),
                background_detail=tuple(pending),
            )
        return SafetyObservation(
            workspace_identity=identity.identity,
            workspace_path=str(identity.realpath),
            background_settled=not pending,
            tool_names=tuple(sorted(set(self._tool_names()))),
            background_detail=tuple(pending),
            workspace_tree=self._tree(Path(identity.realpath), identity.identity),
        )

    def tidy_marker(self, cwd: str) -> None:
        """Once a continuation is about to run in the folder (not while planning): its marker
        as a turn leaves it (an older ``.maka-workspace.json`` moved into ``.maka``, the
        folder's self-ignoring ``.gitignore``); a folder without one is left as it is."""
        folder = Path(cwd)
        if read_workspace_identity(folder) is not None:
            resolve_workspace_identity(folder)

    def _tree(self, folder: Path, workspace_identity: str) -> WorkspaceTree | None:
        """The folder's current tree under the checkpoint policy (no ref, no fact); None when
        this workspace has no checkpoint store (a session without checkpoints, or a store that
        was deleted: the planner tells those apart from the ledger's facts)."""
        carrier = self._checkpoints
        if carrier is None or not carrier.has_repository(workspace_identity):
            return None
        try:
            return WorkspaceTree(carrier.observe(folder, workspace_identity).tree_id)
        except CheckpointError as error:
            return WorkspaceTree(None, f"{error.code}: {error.message}", str(error.code))
