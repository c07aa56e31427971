"""``read_file``, ``write_file`` and ``edit_file``.

Writes go through a temporary file in the same folder, ``fsync``, an atomic rename and an
``fsync`` of the folder, so a crash leaves either the old file or the new one, never half of
either. Just before the rename the writer re-observes the target: if it changed since preflight
(someone else wrote it), the tool fails rather than overwrite that change.

Every file operation (the preflight observation included) goes through ``confined_fs``: relative
to descriptors walked from the workspace root without following links, so a folder swapped for a
link while the tool runs can never make it read or write outside the session folder.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from runtime.ledger.crash_points import CrashPoint, failpoint
from runtime.ledger.event_model import FileStateBefore, FileStateEvidence, RecoveryMode
from runtime.tools import confined_fs
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
from runtime.tools.workspace_paths import (
    WorkspacePath,
    path_error_sentence,
    resolve_workspace_path,
)

READ_LIMIT_BYTES = 256 * 1024


def _path_schema(description: str) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "description": description}


@dataclass(frozen=True, slots=True)
class ReadPlan:
    """``read_file``: the confined path and the lines to return (``limit`` None = to the end)."""

    relative: str
    offset: int
    limit: int | None


@dataclass(frozen=True, slots=True)
class WritePlan:
    """``write_file`` and ``edit_file``: exactly these bytes replace the file, provided it is
    still in the ``before`` state preflight observed (the T1 evidence records both)."""

    relative: str
    before: FileStateBefore
    data: bytes


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

    def prepare(self, args: Mapping[str, Any], ctx: ToolContext) -> PreparedCall[ReadPlan]:
        target = resolve_workspace_path(ctx.cwd, args["path"])
        limit = args.get("limit")
        return PreparedCall(
            self.name,
            args,
            summary=f"read {target.relative}",
            plan=ReadPlan(
                relative=target.relative,
                offset=int(args.get("offset", 1)),
                limit=None if limit is None else int(limit),
            ),
        )

    def run(self, prepared: PreparedCall[ReadPlan], ctx: ToolContext) -> ToolOutput:
        failpoint(CrashPoint.P3)
        plan = prepared.plan
        relative = plan.relative
        try:
            data = _read_confined(ctx.cwd, relative, READ_LIMIT_BYTES + 1)
        except FileNotFoundError:
            raise ToolFailure(f"{relative} does not exist") from None
        except IsADirectoryError:
            raise ToolFailure(f"{relative} is a folder; use list_dir") from None
        except OSError as error:
            raise ToolFailure(f"cannot read {relative}: {path_error_sentence(error)}") from None
        truncated = len(data) > READ_LIMIT_BYTES
        data = data[:READ_LIMIT_BYTES]
        if b"\x00" in data[:8192]:
            raise ToolFailure(f"{relative} looks like a binary file")
        text = data.decode("utf-8", errors="replace")
        lines = text.splitlines(keepends=True)
        offset, limit = plan.offset, plan.limit
        end = len(lines) if limit is None else offset - 1 + limit
        selected = "".join(lines[offset - 1 : end])
        return ToolOutput(
            {
                "path": relative,
                "content": selected,
                "totalLines": len(lines),
                "truncated": truncated or end < len(lines) or offset > 1,
            }
        )


def _read_confined(root: Path, relative: str, limit: int) -> bytes:
    if not confined_fs.DIR_FD_SUPPORTED:
        path = confined_fs.verified_path(root, relative)
        with path.open("rb") as handle:
            data = handle.read(limit)
        confined_fs.verified_path(root, relative)  # still the same path after reading
        return data
    with confined_fs.open_parent(root, relative) as (folder, name):
        return confined_fs.read_at(folder, name, limit)


def observe_confined(root: Path, relative: str) -> tuple[FileStateBefore, bytes | None]:
    """The state of ``root/relative`` and its bytes (None when absent), read without following
    any link. A missing folder on the way means the file does not exist; a link, folder or other
    non-regular file as the target is refused (it cannot be reconciled)."""
    if not confined_fs.DIR_FD_SUPPORTED:
        return observe_file(confined_fs.verified_path(root, relative))
    try:
        with confined_fs.open_parent(root, relative) as (folder, name):
            return _observe_in(folder, name)
    except FileNotFoundError:
        return FileStateBefore(exists=False), None


def _observe_in(folder: int, name: str) -> tuple[FileStateBefore, bytes | None]:
    info = confined_fs.lstat_at(folder, name)
    if info is None:
        return FileStateBefore(exists=False), None
    if not stat.S_ISREG(info.st_mode):
        raise ToolRefusal(ToolRefusalCode.NOT_A_REGULAR_FILE, f"{name} is not a regular file")
    data = confined_fs.read_at(folder, name)
    return FileStateBefore(exists=True, sha256=digest_bytes(data), size=len(data)), data


def _changed(name: str) -> ToolFailure:
    return ToolFailure(f"{name} changed after the write was prepared; nothing was written")


def _atomic_replace(
    root: Path, relative: str, data: bytes, evidence_before: FileStateBefore
) -> None:
    if not confined_fs.DIR_FD_SUPPORTED:
        _replace_by_path(root, relative, data, evidence_before)
        return
    with confined_fs.open_parent(root, relative, create=True) as (folder, name):
        current, _ = _observe_in(folder, name)
        if dict(current) != dict(evidence_before):
            raise _changed(name)
        info = confined_fs.lstat_at(folder, name)
        mode = 0o644 if info is None else info.st_mode & 0o7777
        temp = confined_fs.write_new_bytes_at(folder, name, data, mode)
        try:
            failpoint(CrashPoint.P3)  # temp file complete, target untouched: no side effect yet
            confined_fs.rename_at(folder, temp, name)
        except BaseException:
            confined_fs.unlink_quietly(folder, temp)
            raise
        parent = PurePosixPath(relative).parent.as_posix()
        if not confined_fs.same_folder(root, parent, folder):
            raise confined_fs.FolderMoved(parent)


def _replace_by_path(
    root: Path, relative: str, data: bytes, evidence_before: FileStateBefore
) -> None:
    """The fallback without ``dir_fd`` (Windows): path operations, with the final path
    re-verified (``confined_fs.verified_path``) after opening and just before the rename."""
    import contextlib
    import secrets

    path = confined_fs.verified_path(root, relative)
    path.parent.mkdir(parents=True, exist_ok=True)
    path = confined_fs.verified_path(root, relative)
    current, _ = observe_file(path)
    if dict(current) != dict(evidence_before):
        raise _changed(path.name)
    temp = path.parent / f".{path.name}.maka-{secrets.token_hex(6)}.tmp"
    mode = None
    with contextlib.suppress(FileNotFoundError):
        mode = os.stat(path).st_mode & 0o7777
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644 if mode is None else mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        failpoint(CrashPoint.P3)
        if confined_fs.verified_path(root, relative) != path:
            raise OSError(errno.ELOOP, "a folder on the path was replaced by a link", relative)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def _preflight_observe(root: Path, target: WorkspacePath) -> tuple[FileStateBefore, bytes | None]:
    """``observe_confined`` with an OS error turned into the refusal the model sees."""
    try:
        return observe_confined(root, target.relative)
    except OSError as error:
        raise ToolRefusal(
            ToolRefusalCode.PATH_UNUSABLE,
            f"cannot use {target.relative}: {path_error_sentence(error)}",
        ) from None


def _prepared_write(
    name: str,
    args: Mapping[str, Any],
    ctx: ToolContext,
    target: WorkspacePath,
    *,
    before: FileStateBefore,
    data: bytes,
    summary: str,
) -> PreparedCall[WritePlan]:
    """A write of ``data`` to ``target`` (write_file and edit_file alike): the T1 evidence and
    the plan ``_write_output`` carries out."""
    return PreparedCall(
        name,
        args,
        evidence=write_evidence(target.relative, ctx.workspace_identity, before, data),
        summary=summary,
        plan=WritePlan(relative=target.relative, before=before, data=data),
    )


def _write_output(prepared: PreparedCall[WritePlan], ctx: ToolContext) -> ToolOutput:
    if ctx.cancel.is_cancelled():
        raise ToolFailure("cancelled before the write; nothing was written")
    plan = prepared.plan
    data, relative = plan.data, plan.relative
    try:
        _atomic_replace(ctx.cwd, relative, data, plan.before)
    except ToolRefusal as refusal:
        raise ToolFailure(refusal.message) from None
    except confined_fs.FolderMoved:
        raise ToolFailure(
            f"the folder holding {relative} was moved or replaced while it was written: the new "
            "content went into the folder that was there when the write began, which is no "
            f"longer at {PurePosixPath(relative).parent.as_posix()}"
        ) from None
    except OSError as error:
        raise ToolFailure(f"cannot write {relative}: {path_error_sentence(error)}") from None
    evidence: FileStateEvidence | None = prepared.evidence
    if evidence is None:  # no workspace identity: same shape, computed here
        evidence = FileStateEvidence(
            kind="file_state_v1",
            path=relative,
            workspaceIdentity="-",
            before=plan.before,
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

    def prepare(self, args: Mapping[str, Any], ctx: ToolContext) -> PreparedCall[WritePlan]:
        target = resolve_workspace_path(ctx.cwd, args["path"], for_write=True)
        before, _ = _preflight_observe(ctx.cwd, target)
        data = str(args["content"]).encode("utf-8")
        summary = f"write {len(data)} bytes to {target.relative}"
        return _prepared_write(
            self.name, args, ctx, target, before=before, data=data, summary=summary
        )

    def run(self, prepared: PreparedCall[WritePlan], ctx: ToolContext) -> ToolOutput:
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

    def prepare(self, args: Mapping[str, Any], ctx: ToolContext) -> PreparedCall[WritePlan]:
        target = resolve_workspace_path(ctx.cwd, args["path"], for_write=True)
        before, current = _preflight_observe(ctx.cwd, target)
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

    def run(self, prepared: PreparedCall[WritePlan], ctx: ToolContext) -> ToolOutput:
        return _write_output(prepared, ctx)
