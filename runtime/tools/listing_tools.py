"""``list_dir`` and ``glob``: read-only views of the session folder, confined like every path."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from runtime.ledger.crash_points import CrashPoint, failpoint
from runtime.ledger.event_model import RecoveryMode
from runtime.tools import confined_fs
from runtime.tools.tool_contract import (
    PreparedCall,
    ToolContext,
    ToolFailure,
    ToolOutput,
    ToolRefusal,
    ToolRefusalCode,
)
from runtime.tools.workspace_paths import kept_out, path_error_sentence, resolve_workspace_path

ENTRY_LIMIT = 1000


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


@dataclass(frozen=True, slots=True)
class ListDirPlan:
    """``list_dir``: the confined folder to list."""

    relative: str


@dataclass(frozen=True, slots=True)
class GlobPlan:
    """``glob``: the folder to search, the session folder no match may leave, the pattern."""

    base: Path
    root: str
    pattern: str


class ListDirTool:
    name = "list_dir"
    description = "List the entries of a folder in the session folder (name, type, size)."
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1, "description": "folder; '.' is the root"}
        },
        "required": [],
        "additionalProperties": False,
    }
    read_only = True
    recovery_mode: RecoveryMode = "replay_safe"

    def prepare(self, args: Mapping[str, Any], ctx: ToolContext) -> PreparedCall[ListDirPlan]:
        target = resolve_workspace_path(ctx.cwd, args.get("path", "."))
        return PreparedCall(
            self.name,
            args,
            summary=f"list {target.relative}",
            plan=ListDirPlan(relative=target.relative),
        )

    def run(self, prepared: PreparedCall[ListDirPlan], ctx: ToolContext) -> ToolOutput:
        failpoint(CrashPoint.P3)
        relative = prepared.plan.relative
        try:
            names, entries = _list_confined(ctx.cwd, relative)
        except FileNotFoundError:
            raise ToolFailure(f"{relative} does not exist") from None
        except NotADirectoryError:
            raise ToolFailure(f"{relative} is not a folder") from None
        except OSError as error:
            raise ToolFailure(f"cannot list {relative}: {path_error_sentence(error)}") from None
        return ToolOutput(
            {
                "path": relative,
                "entries": entries,
                "truncated": len(names) > ENTRY_LIMIT,
            }
        )


def _entry(name: str, info: os.stat_result) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "type": _kind(info.st_mode)}
    if stat.S_ISREG(info.st_mode):
        entry["size"] = info.st_size
    return entry


def _list_confined(root: Path, relative: str) -> tuple[list[str], list[dict[str, Any]]]:
    """Every name in the folder and the entries of the first ``ENTRY_LIMIT``, read through a
    descriptor walked from the root without following links (``confined_fs``)."""
    entries: list[dict[str, Any]] = []
    if not confined_fs.DIR_FD_SUPPORTED:
        folder = confined_fs.verified_path(root, relative)
        names = sorted(os.listdir(folder))
        confined_fs.verified_path(root, relative)  # still the same folder after listing
        for name in names[:ENTRY_LIMIT]:
            try:
                entries.append(_entry(name, os.lstat(folder / name)))
            except OSError:
                continue
        return names, entries
    with confined_fs.open_folder(root, relative) as fd:
        names = sorted(os.listdir(fd))
        for name in names[:ENTRY_LIMIT]:
            try:
                info = confined_fs.lstat_at(fd, name)
            except OSError:
                continue
            if info is not None:
                entries.append(_entry(name, info))
    return names, entries


class GlobTool:
    name = "glob"
    description = "Find files in the session folder matching a glob pattern such as **/*.py."
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "minLength": 1, "description": "glob pattern"},
            "path": {"type": "string", "minLength": 1, "description": "folder to search in"},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
    read_only = True
    recovery_mode: RecoveryMode = "replay_safe"

    def prepare(self, args: Mapping[str, Any], ctx: ToolContext) -> PreparedCall[GlobPlan]:
        pattern = str(args["pattern"])
        pure = PurePosixPath(pattern)
        if pure.is_absolute() or os.path.isabs(pattern) or ".." in pure.parts:
            raise ToolRefusal(
                ToolRefusalCode.PATH_OUTSIDE_WORKSPACE,
                f"the pattern {pattern!r} must stay inside the session folder (no '..', "
                "no absolute path)",
            )
        base = resolve_workspace_path(ctx.cwd, args.get("path", "."))
        return PreparedCall(
            self.name,
            args,
            summary=f"find {pattern}",
            plan=GlobPlan(base=base.absolute, root=str(ctx.cwd), pattern=pattern),
        )

    def run(self, prepared: PreparedCall[GlobPlan], ctx: ToolContext) -> ToolOutput:
        failpoint(CrashPoint.P3)
        plan = prepared.plan
        base = plan.base
        root = os.path.realpath(plan.root)
        matches: list[str] = []
        truncated = False
        for found in sorted(base.glob(plan.pattern)):
            real = os.path.realpath(found)
            if real != root and not real.startswith(root + os.sep):
                continue  # a symlink pointing outside: never reported, never followed
            if kept_out(real) is not None:
                continue  # Maka's data folder: no tool looks into it
            if len(matches) == ENTRY_LIMIT:
                truncated = True
                break
            matches.append(Path(os.path.relpath(found, root)).as_posix())
        return ToolOutput({"matches": matches, "truncated": truncated})
