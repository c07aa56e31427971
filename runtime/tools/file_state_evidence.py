"""``file_state_v1`` evidence (docs/design/recovery.md section 5) and the result shape of
file writes.

The T1 dispatch of ``write_file`` / ``edit_file`` records the file's state before the write and the
state the write will produce. Both come from the same bytes the tool then writes, so the
reconciler can later decide from one observation whether the write happened
(``matches_expected_state``), did not happen (``matches_prior_state``) or was overtaken by someone
else (``diverged``).

``file_write_result`` is the single definition of a successful write's result, used by the tool
itself and by the reconciler for a recovered outcome, so the two are identical by construction.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any

from runtime.ledger.event_model import FileStateAfter, FileStateBefore, FileStateEvidence
from runtime.tools.tool_contract import ToolRefusal, ToolRefusalCode


def digest_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def observe_file(path: Path) -> tuple[FileStateBefore, bytes | None]:
    """The current state of ``path`` and its bytes (None when absent). A symlink, directory or
    other non-regular file is refused: such a target cannot be reconciled."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return FileStateBefore(exists=False), None
    if not stat.S_ISREG(info.st_mode):
        raise ToolRefusal(ToolRefusalCode.NOT_A_REGULAR_FILE, f"{path.name} is not a regular file")
    data = path.read_bytes()
    return FileStateBefore(exists=True, sha256=digest_bytes(data), size=len(data)), data


def write_evidence(
    relative_path: str,
    workspace_identity: str | None,
    before: FileStateBefore,
    new_bytes: bytes,
) -> FileStateEvidence | None:
    """Evidence for a write of ``new_bytes``; None without a workspace identity (the reconciler
    then cannot prove anything, and the operation stays unreconciled)."""
    if not workspace_identity:
        return None
    return FileStateEvidence(
        kind="file_state_v1",
        path=relative_path,
        workspaceIdentity=workspace_identity,
        before=before,
        expectedAfter=FileStateAfter(
            exists=True, sha256=digest_bytes(new_bytes), size=len(new_bytes)
        ),
    )


def file_write_result(tool_name: str, evidence: FileStateEvidence) -> dict[str, Any]:
    """The result of a successful ``write_file`` / ``edit_file`` as committed by T2 (and by the
    reconciler for a recovered outcome)."""
    after = evidence["expectedAfter"]
    result: dict[str, Any] = {
        "path": evidence["path"],
        "bytesWritten": after["size"],
        "sha256": after["sha256"],
    }
    if tool_name == "edit_file":
        result["replacements"] = 1
    else:
        result["created"] = not evidence["before"]["exists"]
    return result
