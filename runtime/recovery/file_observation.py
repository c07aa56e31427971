"""Observing the target of an interrupted file write (docs/design/recovery.md section 5),
without writing.

The reconciler must decide what happened to a ``write_file`` / ``edit_file`` whose process died
between T1 and T2, from the file as it is *now*. This module produces that observation and
nothing else: it never creates, changes or deletes anything (not even the workspace marker: the
identity reader it is given must only read).

Why the checks are this strict:

- *Workspace identity first.* The evidence names the workspace the write happened in. If the
  session folder now carries another identity (or none), the bytes found at the path prove nothing
  about that write: ``unreadable``.
- *No symlinks, anywhere on the path.* T1 recorded the path with links already resolved, so a
  link found now (on the file or on a folder leading to it) was put there afterwards; following it
  would observe someone else's file. A directory, a FIFO or a device is not a regular file.
  Either is ``unreadable``.
- *Absent is an observation, not an error.* A missing file (or a missing folder on its way)
  means "the file does not exist", which matches the prior state of a write that created it.

The observation is summarised as ``state_identity_v1``: a canonical JSON document of exactly what
was seen (identity, existence, SHA-256 and size, or the problem), whose digest the reconcile fact
records.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from runtime.ledger.canonical_codec import canonical_json_bytes, sha256_digest
from runtime.ledger.codes import ReconcileObservation
from runtime.ledger.event_model import FileStateEvidence
from runtime.tools.workspace_paths import is_protected

OBSERVATION_SCHEMA = "state_identity_v1"
_CHUNK = 1024 * 1024


class HasIdentity(Protocol):
    """What the identity reader returns: ``identity`` is ``workspace:v1:<uuid>``."""

    @property
    def identity(self) -> str: ...


# Reads (never creates) the workspace marker of a folder; None when the folder has none.
IdentityReader = Callable[[Path], HasIdentity | None]


class ObservationProblem(StrEnum):
    """Why a target could not be observed (recorded in the observation document)."""

    WORKSPACE_UNREADABLE = "workspace_unreadable"
    WORKSPACE_IDENTITY_MISSING = "workspace_identity_missing"
    WORKSPACE_IDENTITY_CHANGED = "workspace_identity_changed"
    PATH_INVALID = "path_invalid"
    SYMLINK = "symlink"
    NOT_A_REGULAR_FILE = "not_a_regular_file"
    READ_FAILED = "read_failed"


@dataclass(frozen=True, slots=True)
class FileObservation:
    """What recovery saw at the evidence's path. ``problem`` set = nothing reliable was seen;
    otherwise ``exists`` is known, with ``sha256`` and ``size`` for an existing file."""

    path: str
    workspace_identity: str | None
    exists: bool = False
    sha256: str | None = None
    size: int | None = None
    problem: ObservationProblem | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``state_identity_v1`` document (absent facts are omitted, never null)."""
        body: dict[str, Any] = {"schema": OBSERVATION_SCHEMA, "path": self.path}
        if self.workspace_identity is not None:
            body["workspaceIdentity"] = self.workspace_identity
        if self.problem is not None:
            body["problem"] = str(self.problem)
            return body
        body["exists"] = self.exists
        if self.exists:
            body["sha256"] = self.sha256
            body["size"] = self.size
        return body

    @property
    def digest(self) -> str:
        """``observationDigest``: SHA-256 over the canonical JSON of ``to_json()``."""
        return sha256_digest(canonical_json_bytes(self.to_json()))


def classify(observation: FileObservation, evidence: FileStateEvidence) -> ReconcileObservation:
    """The table of docs/design/recovery.md section 5. Expected-after is checked first: a write
    whose new bytes equal its old ones did happen as far as anyone can tell, and completing
    it is true."""
    if observation.problem is not None:
        return ReconcileObservation.UNREADABLE
    after = evidence["expectedAfter"]
    if (
        observation.exists
        and observation.sha256 == after["sha256"]
        and observation.size == after["size"]
    ):
        return ReconcileObservation.MATCHES_EXPECTED_STATE
    before = evidence["before"]
    if not before["exists"]:
        if not observation.exists:
            return ReconcileObservation.MATCHES_PRIOR_STATE
    elif (
        observation.exists
        and observation.sha256 == before.get("sha256")
        and observation.size == before.get("size")
    ):
        return ReconcileObservation.MATCHES_PRIOR_STATE
    return ReconcileObservation.DIVERGED


def relative_parts(relative: str) -> tuple[str, ...] | None:
    """The components of an evidence path, or None when it is not a plain path inside the
    folder (T1 only ever records such paths; anything else is not trustworthy)."""
    if not relative or "\x00" in relative or "\\" in relative:
        return None
    pure = PurePosixPath(relative)
    parts = pure.parts
    if pure.is_absolute() or not parts or any(part in ("", ".", "..") for part in parts):
        return None
    if relative != pure.as_posix() or is_protected(relative):
        return None
    return parts


def observe_write_target(
    cwd: str, evidence: FileStateEvidence, read_identity: IdentityReader
) -> FileObservation:
    """Observe ``evidence['path']`` under the session folder ``cwd``; read-only."""
    relative = evidence["path"]
    root = Path(os.path.realpath(cwd))
    try:
        marker = read_identity(root)
    except Exception:  # any failure to read the marker means: the identity cannot be checked
        return FileObservation(relative, None, problem=ObservationProblem.WORKSPACE_UNREADABLE)
    if marker is None:
        return FileObservation(
            relative, None, problem=ObservationProblem.WORKSPACE_IDENTITY_MISSING
        )
    identity = marker.identity
    if identity != evidence["workspaceIdentity"]:
        return FileObservation(
            relative, identity, problem=ObservationProblem.WORKSPACE_IDENTITY_CHANGED
        )
    parts = relative_parts(relative)
    if parts is None:
        return FileObservation(relative, identity, problem=ObservationProblem.PATH_INVALID)
    return _observe_path(root, parts, relative, identity)


def observe_in_folder(cwd: str, relative: str, identity: str) -> FileObservation:
    """Observe ``relative`` under ``cwd``, a folder whose workspace identity the caller already
    checked (the resume's expected tree); read-only, with the same strict checks."""
    parts = relative_parts(relative)
    if parts is None:
        return FileObservation(relative, identity, problem=ObservationProblem.PATH_INVALID)
    return _observe_path(Path(os.path.realpath(cwd)), parts, relative, identity)


def _observe_path(
    root: Path, parts: tuple[str, ...], relative: str, identity: str
) -> FileObservation:
    current = root
    for index, part in enumerate(parts):
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            return FileObservation(relative, identity, exists=False)
        except OSError:
            return FileObservation(relative, identity, problem=ObservationProblem.READ_FAILED)
        if stat.S_ISLNK(info.st_mode):
            return FileObservation(relative, identity, problem=ObservationProblem.SYMLINK)
        last = index == len(parts) - 1
        wanted = stat.S_ISREG(info.st_mode) if last else stat.S_ISDIR(info.st_mode)
        if not wanted:
            return FileObservation(
                relative, identity, problem=ObservationProblem.NOT_A_REGULAR_FILE
            )
    return _read_regular(current, info, relative, identity)


def _read_regular(
    path: Path, link_info: os.stat_result, relative: str, identity: str
) -> FileObservation:
    """Hash the file through a descriptor opened without following links, and check that it is
    the very file ``lstat`` saw (a swap in between is reported, not followed)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    flags |= getattr(os, "O_BINARY", 0)
    try:
        handle = os.open(path, flags)
    except FileNotFoundError:
        return FileObservation(relative, identity, exists=False)
    except OSError as error:
        problem = (
            ObservationProblem.SYMLINK
            if error.errno == errno.ELOOP
            else ObservationProblem.READ_FAILED
        )
        return FileObservation(relative, identity, problem=problem)
    try:
        info = os.fstat(handle)
        same = (info.st_dev, info.st_ino) == (link_info.st_dev, link_info.st_ino)
        if not same or not stat.S_ISREG(info.st_mode):
            return FileObservation(
                relative, identity, problem=ObservationProblem.NOT_A_REGULAR_FILE
            )
        hasher = hashlib.sha256()
        size = 0
        while chunk := os.read(handle, _CHUNK):
            hasher.update(chunk)
            size += len(chunk)
    except OSError:
        return FileObservation(relative, identity, problem=ObservationProblem.READ_FAILED)
    finally:
        os.close(handle)
    return FileObservation(
        relative, identity, exists=True, sha256="sha256:" + hasher.hexdigest(), size=size
    )
