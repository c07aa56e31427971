"""Continuing in a restored copy (docs/design/workspace.md section 4, isolated restore): where the
copy goes and the ``workspaceTransition`` fact the admission transaction commits.

The carrier materializes the boundary snapshot into a new, empty folder and gives it a marker
of its own; the user's folder is not touched. A crash after that (``after_restore_materialized``)
leaves the copy in place: the next plan names it and no resume ever reuses it (the default name
skips every folder that exists).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runtime.continuation.copy_place import copy_base
from runtime.ledger.checkpoint_ports import CheckpointCarrier, CheckpointError
from runtime.ledger.coded_error import CodedError
from runtime.ledger.codes import RestoreCode
from runtime.ledger.crash_points import CrashPoint, failpoint


def default_restore_path(folder: str) -> Path:
    """``<folder>-restored-<n>``: the first such sibling that does not exist (beside the
    repository when the folder is inside one: ``copy_place``)."""
    base = copy_base(folder)
    n = 1
    while os.path.lexists(f"{base}-restored-{n}"):
        n += 1
    return Path(f"{base}-restored-{n}")


def _inside(target: str, folder: str) -> bool:
    """Whether ``target`` is ``folder`` or under it (links resolved): a copy there would change
    the folder the user keeps."""
    real_target, real_folder = os.path.realpath(target), os.path.realpath(folder)
    try:
        return os.path.commonpath([real_target, real_folder]) == real_folder
    except ValueError:  # different drives
        return False


class RestoreFailed(CodedError):
    def __init__(self, error: CheckpointError) -> None:
        super().__init__(error.code, error.message)


def materialize_restore(
    carrier: CheckpointCarrier,
    *,
    session_id: str,
    from_identity: str,
    from_path: str,
    checkpoint: Mapping[str, Any],
    restore_to: str | None,
    epoch: int,
    now: int,
    point_fields: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Make the copy; the transition fact naming it (with what the copy reflects when it is
    not the folder at the stop: ``point_fields``). Raises ``RestoreFailed``."""
    if restore_to is not None and _inside(restore_to, from_path):
        raise RestoreFailed(
            CheckpointError(
                RestoreCode.WORKSPACE_RESTORE_TARGET_INSIDE,
                f"{os.path.abspath(restore_to)} is inside {from_path}; a restored copy goes "
                "outside your folder, which is left as it is",
            )
        )
    for _ in range(100):
        target = Path(os.path.abspath(restore_to or default_restore_path(from_path)))
        try:
            to_identity = carrier.materialize(
                str(checkpoint["workspaceIdentity"]),
                str(checkpoint["treeId"]),
                target,
                session_id,
                source=Path(from_path),
            )
            break
        except CheckpointError as error:
            if restore_to or error.code is not RestoreCode.WORKSPACE_RESTORE_TARGET_NOT_EMPTY:
                raise RestoreFailed(error) from None
            # another resume took that name a moment ago: the next one
    else:
        raise RestoreFailed(CheckpointError(RestoreCode.WORKSPACE_RESTORE_FAILED, "no free name"))
    failpoint(CrashPoint.AFTER_RESTORE_MATERIALIZED)
    return {
        "protocol": "workspace_transition_v1",
        "kind": "isolated_restore",
        "fromIdentity": from_identity,
        "toIdentity": to_identity,
        "fromPath": from_path,
        "toPath": str(target),
        "checkpointRef": str(checkpoint["checkpointRef"]),
        "commitId": str(checkpoint["commitId"]),
        "treeId": str(checkpoint["treeId"]),
        "workspaceEpoch": epoch,
        "decidedBy": "local_user",
        "decidedAt": now,
        **(point_fields or {}),
    }
