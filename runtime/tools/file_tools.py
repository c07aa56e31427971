"""``read_file``, ``write_file`` and ``edit_file``.

Writes go through a temporary file in the same folder, ``fsync``, an atomic ``os.replace`` and an
``fsync`` of the folder, so a crash leaves either the old file or the new one, never half of
either. Just before the replace the writer re-observes the target: if it changed since preflight
(someone else wrote it), the tool fails rather than overwrite that change.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runtime.ledger.event_model import FileStateBefore, FileStateEvidence, RecoveryMode
from runtime.recovery.failpoints import failpoint
from runtime.tools.file_state_evidence import (
    digest_bytes,
    file_write_result,
    observe_file,
    write_evidence,
)
from runtime.tools.tool_contract import (
    PreparedCall,
    ToolContext,
    ToolFailure,
    ToolOutput,
    ToolRefusal,
    ToolRefusalCode,
)
from runtime.tools.workspace_paths import WorkspacePath, resolve_workspace_path

READ_LIMIT_BYTES = 256 * 1024


def _path_schema(description: str) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "description": description}


class ReadFileTool:
    name = "read_file"
    description = "Read a UTF-8 text file in the session folder (optionally a range of lines)."
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "path": _path_schema("file path relative to the session folder"),
            "offset": {"type": "integer", "minimum": 1, "description": "first line (1-based)"},
            "limit": {"type": "integer", "minimum": 1, "description": "number of lines"},
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    read_only = True
    recovery_mode: RecoveryMode = "replay_safe"

    def prepare(self, args: Mapping[str, Any], ctx: ToolContext) -> PreparedCall:
        target = resolve_workspace_path(ctx.cwd, args["path"])
        return PreparedCall(
            self.name,
            args,
            summary=f"read {target.relative}",
            plan={"absolute": str(target.absolute), "relative": target.relative},
        )

    def run(self, prepared: PreparedCall, ctx: ToolContext) -> ToolOutput:
        failpoint("P3")
        path = Path(prepared.plan["absolute"])
        relative = prepared.plan["relative"]
        try:
            with path.open("rb") as handle:
                data = handle.read(READ_LIMIT_BYTES + 1)
        except FileNotFoundError:
            raise ToolFailure(f"{relative} does not exist") from None
        except IsADirectoryError:
            raise ToolFailure(f"{relative} is a folder; use list_dir") from None
        except OSError as error:
            raise ToolFailure(f"cannot read {relative}: {error.strerror}") from None
        truncated = len(data) > READ_LIMIT_BYTES
        data = data[:READ_LIMIT_BYTES]
        if b"\x00" in data[:8192]:
            raise ToolFailure(f"{relative} looks like a binary file")
        text = data.decode("utf-8", errors="replace")
        lines = text.splitlines(keepends=True)
        offset = int(prepared.args.get("offset", 1))
        limit = prepared.args.get("limit")
        end = len(lines) if limit is None else offset - 1 + int(limit)
        selected = "".join(lines[offset - 1 : end])
        return ToolOutput(
            {
                "path": relative,
                "content": selected,
                "totalLines": len(lines),
                "truncated": truncated or end < len(lines) or offset > 1,
            }
        )


def _atomic_replace(path: Path, data: bytes, evidence_before: Mapping[str, Any]) -> None:
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    current, _ = observe_file(path)
    if dict(current) != dict(evidence_before):
        raise ToolFailure(
            f"{path.name} changed after the write was prepared; nothing was written",
        )
    temp = folder / f".{path.name}.maka-{secrets.token_hex(6)}.tmp"
    mode = None
    with contextlib.suppress(FileNotFoundError):
        mode = os.stat(path).st_mode & 0o7777
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644 if mode is None else mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        failpoint("P3")  # temp file complete, target untouched: the side effect has not happened
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    _fsync_folder(folder)


def _fsync_folder(folder: Path) -> None:
    if os.name == "nt":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _prepared_write(
    name: str,
    args: Mapping[str, Any],
    ctx: ToolContext,
    target: WorkspacePath,
    *,
    before: FileStateBefore,
    data: bytes,
    summary: str,
) -> PreparedCall:
    """A write of ``data`` to ``target`` (write_file and edit_file alike): the T1 evidence and
    the plan ``_write_output`` carries out."""
    return PreparedCall(
        name,
        args,
        evidence=write_evidence(target.relative, ctx.workspace_identity, before, data),
        summary=summary,
        plan={
            "absolute": str(target.absolute),
            "relative": target.relative,
            "before": before,
            "bytes": data,
        },
    )


def _write_output(prepared: PreparedCall, ctx: ToolContext) -> ToolOutput:
    if ctx.cancel.is_cancelled():
        raise ToolFailure("cancelled before the write; nothing was written")
    data: bytes = prepared.plan["bytes"]
    path = Path(prepared.plan["absolute"])
    try:
        _atomic_replace(path, data, prepared.plan["before"])
    except ToolRefusal as refusal:
        raise ToolFailure(refusal.message) from None
    except OSError as error:
        raise ToolFailure(f"cannot write {prepared.plan['relative']}: {error.strerror}") from None
    evidence: FileStateEvidence | None = prepared.evidence
    if evidence is None:  # no workspace identity: same shape, computed here
        evidence = FileStateEvidence(
            kind="file_state_v1",
            path=prepared.plan["relative"],
            workspaceIdentity="-",
            before=prepared.plan["before"],
            expectedAfter={"exists": True, "sha256": digest_bytes(data), "size": len(data)},
        )
    return ToolOutput(file_write_result(prepared.tool_name, evidence))


class WriteFileTool:
    name = "write_file"
    description = "Create or overwrite a text file in the session folder with the given content."
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "path": _path_schema("file path relative to the session folder"),
            "content": {"type": "string", "description": "the complete new file content"},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }
    read_only = False
    recovery_mode: RecoveryMode = "reconcile"

    def prepare(self, args: Mapping[str, Any], ctx: ToolContext) -> PreparedCall:
        target = resolve_workspace_path(ctx.cwd, args["path"], for_write=True)
        before, _ = observe_file(target.absolute)
        data = str(args["content"]).encode("utf-8")
        summary = f"write {len(data)} bytes to {target.relative}"
        return _prepared_write(
            self.name, args, ctx, target, before=before, data=data, summary=summary
        )

    def run(self, prepared: PreparedCall, ctx: ToolContext) -> ToolOutput:
        return _write_output(prepared, ctx)


class EditFileTool:
    name = "edit_file"
    description = (
        "Replace one exact, unique occurrence of old_string with new_string in a text file."
    )
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "path": _path_schema("file path relative to the session folder"),
            "old_string": {"type": "string", "minLength": 1, "description": "exact text to find"},
            "new_string": {"type": "string", "description": "replacement text"},
        },
        "required": ["path", "old_string", "new_string"],
        "additionalProperties": False,
    }
    read_only = False
    recovery_mode: RecoveryMode = "reconcile"

    def prepare(self, args: Mapping[str, Any], ctx: ToolContext) -> PreparedCall:
        target = resolve_workspace_path(ctx.cwd, args["path"], for_write=True)
        before, current = observe_file(target.absolute)
        if current is None:
            raise ToolRefusal(
                ToolRefusalCode.EDIT_TARGET_MISSING, f"{target.relative} does not exist"
            )
        try:
            text = current.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolRefusal(
                ToolRefusalCode.NOT_A_REGULAR_FILE, f"{target.relative} is not UTF-8 text"
            ) from None
        old, new = str(args["old_string"]), str(args["new_string"])
        count = text.count(old)
        if count == 0:
            raise ToolRefusal(
                ToolRefusalCode.EDIT_NO_MATCH, f"old_string was not found in {target.relative}"
            )
        if count > 1:
            raise ToolRefusal(
                ToolRefusalCode.EDIT_AMBIGUOUS,
                f"old_string occurs {count} times in {target.relative}; make it unique",
            )
        data = text.replace(old, new, 1).encode("utf-8")
        summary = f"edit {target.relative}"
        return _prepared_write(
            self.name, args, ctx, target, before=before, data=data, summary=summary
        )

    def run(self, prepared: PreparedCall, ctx: ToolContext) -> ToolOutput:
        return _write_output(prepared, ctx)
