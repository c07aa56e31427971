"""A run's workspace checkpoint mode, decided once before its first event
(docs/design/workspace.md section 2).

Shared by the agent (a new run) and the continuation (a resumed run's new run), so it lives
below both."""

from __future__ import annotations

import logging
from pathlib import Path

from runtime.ledger.checkpoint_ports import CheckpointCarrier, CheckpointMode, ModeDecision

_log = logging.getLogger(f"maka.{__name__}")  # the host logs "maka" to its log file


def decide_mode(carrier: CheckpointCarrier, folder: Path, workspace_identity: str) -> ModeDecision:
    """The run's mode. A probe that fails for another reason than the listed ones leaves the
    mode ``git_v1``: its captures will fail and say so (fail closed, never silently off)."""
    try:
        return carrier.decide_mode(folder, workspace_identity)
    except Exception as error:  # the carrier's trouble must not stop the turn
        _log.warning("checkpoint mode probe failed: %s", error)
        return ModeDecision(CheckpointMode.GIT_V1)
