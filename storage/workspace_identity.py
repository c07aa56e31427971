"""The workspace identity marker ``.maka-workspace.json`` (docs/design/architecture.md, Data).

A session's working folder carries a marker holding a random UUID; the identity
``workspace:v1:<uuid>`` proves "the same logical workspace" across moves, renames and copies
(the path may change: that is only a diagnostic). Resume refuses to continue in a folder whose
identity differs from the one the run recorded.

File: ``{"createdAt":<unix ms>,"version":1,"workspaceId":"<uuid4>"}`` (canonical JSON + newline),
mode 0600. Rules:

- created atomically: a temp file in the same folder (``O_EXCL``, 0600), written, fsynced, then
  **hard-linked** to the marker name (``link`` never overwrites: if another process won the race,
  its marker is read and returned), the temp file removed, the folder fsynced;
- an existing marker is authoritative and never rewritten; one that is a symlink, a directory or
  another non-regular file, larger than 4 KiB, not JSON, or not exactly the version-1 shape is an
  error with a ``WorkspaceMarkerCode``, never silently replaced.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from runtime.ledger.canonical_codec import canonical_json_bytes
from runtime.ledger.codes import WorkspaceMarkerCode
from runtime.ledger.ledger_errors import LedgerError

MARKER_NAME = ".maka-workspace.json"
MARKER_VERSION = 1
IDENTITY_PREFIX = "workspace:v1:"
MARKER_MAX_BYTES = 4096
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_MAX_SAFE_INTEGER = 2**53 - 1


class WorkspaceMarkerError(LedgerError):
    """The marker cannot be read or created; ``code`` is a ``WorkspaceMarkerCode``."""

    def __init__(self, code: WorkspaceMarkerCode, message: str, path: Path) -> None:
        super().__init__(code, message)
        self.path = path


@dataclass(frozen=True, slots=True)
class WorkspaceIdentity:
    identity: str  # workspace:v1:<uuid>
    realpath: Path
    workspace_id: str
    created_at: int


def _folder(folder: Path) -> Path:
    try:
        real = Path(os.path.realpath(folder))
        info = real.stat()
    except OSError as error:
        raise WorkspaceMarkerError(
            WorkspaceMarkerCode.WORKSPACE_NOT_FOUND, f"{folder}: {error.strerror}", folder
        ) from None
    if not stat.S_ISDIR(info.st_mode):
        raise WorkspaceMarkerError(
            WorkspaceMarkerCode.WORKSPACE_NOT_FOUND, f"{folder} is not a directory", folder
        )
    return real


def _parse(data: bytes, path: Path, real: Path) -> WorkspaceIdentity:
    invalid = WorkspaceMarkerCode.WORKSPACE_MARKER_INVALID
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise WorkspaceMarkerError(invalid, f"{path} is not valid JSON", path) from None
    if not isinstance(value, dict) or set(value) != {"version", "workspaceId", "createdAt"}:
        raise WorkspaceMarkerError(
            invalid, f"{path} must hold exactly version, workspaceId and createdAt", path
        )
    version, workspace_id, created_at = value["version"], value["workspaceId"], value["createdAt"]
    if type(version) is not int or version != MARKER_VERSION:
        raise WorkspaceMarkerError(invalid, f"{path} has version {version!r}, not 1", path)
    if not isinstance(workspace_id, str) or _UUID.fullmatch(workspace_id) is None:
        raise WorkspaceMarkerError(invalid, f"{path} has no valid workspaceId", path)
    if type(created_at) is not int or not 0 <= created_at <= _MAX_SAFE_INTEGER:
        raise WorkspaceMarkerError(invalid, f"{path} has no valid createdAt", path)
    return WorkspaceIdentity(IDENTITY_PREFIX + workspace_id, real, workspace_id, created_at)


def _read_marker(real: Path) -> WorkspaceIdentity | None:
    """The marker in ``real``; None when there is none."""
    path = real / MARKER_NAME
    try:
        link_info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise WorkspaceMarkerError(
            WorkspaceMarkerCode.WORKSPACE_MARKER_UNREADABLE, f"{path}: {error.strerror}", path
        ) from None
    if stat.S_ISLNK(link_info.st_mode):
        raise WorkspaceMarkerError(
            WorkspaceMarkerCode.WORKSPACE_MARKER_SYMLINK, f"{path} is a symbolic link", path
        )
    if not stat.S_ISREG(link_info.st_mode):
        raise WorkspaceMarkerError(
            WorkspaceMarkerCode.WORKSPACE_MARKER_NOT_FILE, f"{path} is not a regular file", path
        )
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        handle = os.open(path, flags)
    except OSError as error:
        code = (
            WorkspaceMarkerCode.WORKSPACE_MARKER_SYMLINK
            if error.errno == errno.ELOOP
            else WorkspaceMarkerCode.WORKSPACE_MARKER_UNREADABLE
        )
        raise WorkspaceMarkerError(code, f"{path}: {error.strerror}", path) from None
    try:
        info = os.fstat(handle)
        if (info.st_dev, info.st_ino) != (link_info.st_dev, link_info.st_ino) or not stat.S_ISREG(
            info.st_mode
        ):
            raise WorkspaceMarkerError(
                WorkspaceMarkerCode.WORKSPACE_MARKER_NOT_FILE, f"{path} changed while read", path
            )
        if info.st_size > MARKER_MAX_BYTES:
            raise WorkspaceMarkerError(
                WorkspaceMarkerCode.WORKSPACE_MARKER_INVALID, f"{path} is too large", path
            )
        data = os.read(handle, MARKER_MAX_BYTES + 1)
    except OSError as error:
        raise WorkspaceMarkerError(
            WorkspaceMarkerCode.WORKSPACE_MARKER_UNREADABLE, f"{path}: {error.strerror}", path
        ) from None
    finally:
        os.close(handle)
    return _parse(data, path, real)


def read_workspace_identity(folder: Path) -> WorkspaceIdentity | None:
    """The folder's identity without creating anything (None when it has no marker)."""
    return _read_marker(_folder(folder))


def resolve_workspace_identity(folder: Path) -> WorkspaceIdentity:
    """The folder's identity, creating the marker atomically when there is none."""
    real = _folder(folder)
    existing = _read_marker(real)
    if existing is not None:
        return existing
    _publish(real)
    created = _read_marker(real)
    if created is None:
        raise WorkspaceMarkerError(
            WorkspaceMarkerCode.WORKSPACE_MARKER_WRITE_FAILED,
            f"{real / MARKER_NAME} vanished right after it was created",
            real / MARKER_NAME,
        )
    return created


def marker_bytes(workspace_id: str, created_at: int) -> bytes:
    value = {"version": MARKER_VERSION, "workspaceId": workspace_id, "createdAt": created_at}
    return canonical_json_bytes(value) + b"\n"


def _publish(real: Path) -> None:
    """Write a new marker without ever replacing one (a concurrent creator may win)."""
    marker = real / MARKER_NAME
    data = marker_bytes(str(uuid.uuid4()), time.time_ns() // 1_000_000)
    temp = real / f"{MARKER_NAME}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
    failed = WorkspaceMarkerCode.WORKSPACE_MARKER_WRITE_FAILED
    try:
        handle = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.fchmod(handle, 0o600)
            view = memoryview(data)
            while view:
                written = os.write(handle, view)
                view = view[written:]
            os.fsync(handle)
        finally:
            os.close(handle)
        with contextlib.suppress(FileExistsError):
            os.link(temp, marker)  # never overwrites: a concurrent winner's marker stays
        _fsync_directory(real)
    except OSError as error:
        raise WorkspaceMarkerError(
            failed, f"cannot create {marker}: {error.strerror}", marker
        ) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def _fsync_directory(real: Path) -> None:
    try:
        handle = os.open(real, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # platforms without directory handles (Windows)
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)
