"""Maka's own temporary files left by an interrupted file write (``.NAME.maka-<hex>.tmp``).

``write_file`` / ``edit_file`` write the new bytes to a temporary file beside the target and
rename it over the target. A process killed in between (failpoint P3) leaves the target untouched
(recovery then parks the write with ``reconcile_matches_prior_state``) and the temporary file
behind. That file is Maka's artifact, never the user's: when its bytes are exactly what the
dispatch evidence says Maka was writing (``expectedAfter``: SHA-256 and size), recovery removes
it. Any other file matching the name (a partial write, or bytes someone changed) is left alone and
named in the park's diagnostics, so the user knows it is there.

Only names of the exact shape the tool creates are considered, in the target's own folder, with no
link anywhere on the way (the same rule as the observation of the target).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from runtime.ledger.codes import ResolverReason, ResolverStatus
from runtime.ledger.event_model import FileStateEvidence, RuntimeEvent
from runtime.recovery.file_observation import relative_parts
from runtime.recovery.recovery_resolver import resolve_operations

_CHUNK = 1024 * 1024
_SUFFIX = re.compile(r"\.maka-[0-9a-f]{12}\.tmp")

# Parked file-write reasons whose dispatch evidence may have left a temporary file.
_PARKED_WRITE_REASONS = frozenset(
    {
        ResolverReason.RECONCILE_MATCHES_PRIOR_STATE,
        ResolverReason.RECONCILE_DIVERGED,
        ResolverReason.RECONCILE_UNREADABLE,
    }
)


@dataclass(frozen=True, slots=True)
class Leftover:
    """One temporary file beside the target: ``relative`` to the session folder; ``ours`` =
    its bytes are exactly the ones the write was going to put in place."""

    relative: str
    path: Path
    ours: bool


def _is_temp_name(name: str, target_name: str) -> bool:
    prefix = f".{target_name}"
    return name.startswith(prefix) and _SUFFIX.fullmatch(name[len(prefix) :]) is not None


def _digest(path: Path, info: os.stat_result) -> tuple[str, int] | None:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    flags |= getattr(os, "O_BINARY", 0)
    try:
        handle = os.open(path, flags)
    except OSError:
        return None
    try:
        opened = os.fstat(handle)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            return None
        hasher = hashlib.sha256()
        size = 0
        while chunk := os.read(handle, _CHUNK):
            hasher.update(chunk)
            size += len(chunk)
    except OSError:
        return None
    finally:
        os.close(handle)
    return "sha256:" + hasher.hexdigest(), size


def _folder_without_links(root: Path, parts: Sequence[str]) -> Path | None:
    current = root
    for part in parts:
        current = current / part
        try:
            info = os.lstat(current)
        except OSError:
            return None
        if not stat.S_ISDIR(info.st_mode):
            return None
    return current


def find_leftovers(cwd: str, evidence: FileStateEvidence) -> list[Leftover]:
    """The temporary files of the evidence's write still in the target's folder (read-only)."""
    parts = relative_parts(evidence["path"])
    if parts is None:
        return []
    root = Path(os.path.realpath(cwd))
    folder = _folder_without_links(root, parts[:-1])
    if folder is None:
        return []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    expected = evidence["expectedAfter"]
    found: list[Leftover] = []
    for name in names:
        if not _is_temp_name(name, parts[-1]):
            continue
        path = folder / name
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode):
            continue
        seen = _digest(path, info)
        ours = seen is not None and seen == (expected["sha256"], expected["size"])
        relative = "/".join((*parts[:-1], name))
        found.append(Leftover(relative, path, ours))
    return found


def remove_our_leftovers(cwd: str, evidence: FileStateEvidence) -> tuple[list[str], list[str]]:
    """Remove the temporary files whose bytes are exactly the write's; returns (removed, kept)
    as paths relative to the session folder."""
    removed: list[str] = []
    kept: list[str] = []
    for leftover in find_leftovers(cwd, evidence):
        if leftover.ours:
            try:
                os.unlink(leftover.path)
            except FileNotFoundError:
                continue
            except OSError:
                kept.append(leftover.relative)
                continue
            removed.append(leftover.relative)
        else:
            kept.append(leftover.relative)
    if removed:
        with contextlib.suppress(OSError):
            _fsync_dir((Path(os.path.realpath(cwd)) / removed[0]).parent)
    return removed, kept


def _fsync_dir(folder: Path) -> None:
    if os.name == "nt":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class ParkedWrite:
    """A file write that recovery parked, with what is still beside its target."""

    tool_call_id: str
    tool_name: str
    reason: ResolverReason
    path: str
    leftovers: tuple[str, ...]
    # Of ``leftovers``, those holding exactly the bytes the write was putting in place.
    ours: frozenset[str] = frozenset()


def leftover_words(relative: str, ours: bool, target: str) -> str:
    """What is said of a temporary file of a parked write still beside its target."""
    if ours:
        return (
            f"{relative} is still in the folder: a temporary file of this write holding exactly "
            f"the bytes it was writing to {target} (it stopped before putting them in place); "
            f"Maka leaves it to you: remove it, or move it over {target} to finish that write"
        )
    return (
        f"{relative} is still in the folder: a temporary file of this write whose content is "
        "not what Maka was writing, left for you to check"
    )


def dispatch_evidence(dispatch: RuntimeEvent | None) -> FileStateEvidence | None:
    if dispatch is None:
        return None
    fact = cast(Mapping[str, Any], (dispatch.get("actions") or {}).get("toolDispatch") or {})
    evidence = fact.get("evidence")
    if not isinstance(evidence, Mapping) or evidence.get("kind") != "file_state_v1":
        return None
    return cast(FileStateEvidence, evidence)


def parked_writes(events: Sequence[RuntimeEvent], cwd: str) -> list[ParkedWrite]:
    """Every parked file write of one run, with the temporary files still in its folder."""
    _resolution, resolved = resolve_operations(events)
    found: list[ParkedWrite] = []
    for item in resolved:
        decision = item.decision
        if (
            decision.status is not ResolverStatus.PARKED
            or decision.reason not in _PARKED_WRITE_REASONS
        ):
            continue
        evidence = dispatch_evidence(item.operation.dispatch_event)
        if evidence is None:
            continue
        left = find_leftovers(cwd, evidence)
        found.append(
            ParkedWrite(
                decision.tool_call_id,
                decision.tool_name or "write_file",
                decision.reason,
                evidence["path"],
                tuple(leftover.relative for leftover in left),
                frozenset(leftover.relative for leftover in left if leftover.ours),
            )
        )
    return found
