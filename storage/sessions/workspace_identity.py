"""The workspace identity marker ``.maka/workspace.json`` (docs/design/architecture.md, Data).

A session's working folder carries a marker holding a random UUID; the identity
``workspace:v1:<uuid>`` proves "the same logical workspace" across moves, renames and copies
(the path may change: that is only a diagnostic). Resume refuses to continue in a folder whose
identity differs from the one the run recorded.

Where it lives: in the app's own folder ``.maka`` at the top of the session folder, beside a
``.maka/.gitignore`` holding ``*`` (the folder ignores itself, as a virtualenv does), so the
marker never shows in the user's ``git status`` and ``git add -A`` never picks it up. The
checkpoint store leaves ``.maka`` at the top out of every snapshot (``checkpoint_store``), and
the model's file tools may not write anything in it (``runtime/tools/workspace_paths.py``).

Older versions kept the marker at ``.maka-workspace.json`` in the folder itself (the *legacy*
marker). It is still read: a folder with only a legacy marker is the same workspace. When the
identity is resolved (a run, Safe resume's inspector; never a read-only look such as a
relocation), the legacy marker is migrated: the same identity is written to
``.maka/workspace.json`` (atomically, never replacing one), read back, and only then the legacy
file is removed. A migration that cannot write (a read-only folder) leaves the legacy marker in
use. A folder holding both markers is fine while they name the same workspace (a migration cut
short); when they name different ones it is an error (``workspace_markers_disagree``): Maka never
chooses between two identities.

File: ``{"createdAt":<unix ms>,"version":1,"workspaceId":"<uuid4>"}`` (canonical JSON + newline),
mode 0600 (the ``.maka`` folder Maka creates is 0700). Rules:

- created atomically: a temp file in the same folder (``O_EXCL``, 0600), written, fsynced, then
  **hard-linked** to the marker name (``link`` never overwrites: if another process won the race,
  its marker is read and returned), the temp file removed, the folder fsynced; the
  ``.gitignore`` is published the same way first, and an existing one is never rewritten;
- an existing marker is authoritative and never rewritten; one that is a symlink, a directory or
  another non-regular file, larger than 4 KiB, not JSON, or not exactly the version-1 shape is an
  error with a ``WorkspaceMarkerCode``, never silently replaced (a damaged legacy marker too);
- a ``.maka`` that is a symbolic link or not a folder is never followed or written into: with
  a legacy marker the folder keeps using it, without one creating the marker fails.
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

MARKER_DIR = ".maka"
MARKER_FILE = "workspace.json"
MARKER_NAME = f"{MARKER_DIR}/{MARKER_FILE}"  # relative to the session folder
LEGACY_MARKER_NAME = ".maka-workspace.json"
IGNORE_FILE = ".gitignore"
IGNORE_BODY = b"*\n"
MARKER_VERSION = 1
IDENTITY_PREFIX = "workspace:v1:"
MARKER_MAX_BYTES = 4096
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_MAX_SAFE_INTEGER = 2**53 - 1


_REPLACEABLE = frozenset(
    {
        WorkspaceMarkerCode.WORKSPACE_MARKER_INVALID,
        WorkspaceMarkerCode.WORKSPACE_MARKER_NOT_FILE,
        WorkspaceMarkerCode.WORKSPACE_MARKER_SYMLINK,
    }
)


class WorkspaceMarkerError(LedgerError):
    """The marker cannot be read or created; ``code`` is a ``WorkspaceMarkerCode``."""

    def __init__(self, code: WorkspaceMarkerCode, message: str, path: Path) -> None:
        if code in _REPLACEABLE:
            # What the user can do: Maka never replaces a marker it cannot read as its own.
            message += (
                "; Maka does not replace it: put it back as it was, or remove it (the folder "
                "then gets a new workspace identity, and new messages carry on there)"
            )
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


def _read_file(path: Path, real: Path) -> WorkspaceIdentity | None:
    """The marker file at ``path`` (of the folder ``real``); None when there is none."""
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


def _app_dir(real: Path) -> bool:
    """Whether ``real/.maka`` is a folder Maka may use: False when it is missing, a symbolic
    link or not a folder (never followed, never written into)."""
    try:
        info = os.lstat(real / MARKER_DIR)
    except FileNotFoundError:
        return False
    except OSError as error:
        path = real / MARKER_DIR
        raise WorkspaceMarkerError(
            WorkspaceMarkerCode.WORKSPACE_MARKER_UNREADABLE, f"{path}: {error.strerror}", path
        ) from None
    return stat.S_ISDIR(info.st_mode)


def _read_both(real: Path) -> tuple[WorkspaceIdentity | None, WorkspaceIdentity | None]:
    """The marker in ``.maka`` and the legacy one; an error when they name different
    workspaces."""
    current = _read_file(real / MARKER_NAME, real) if _app_dir(real) else None
    legacy = _read_file(real / LEGACY_MARKER_NAME, real)
    if current is not None and legacy is not None and current.identity != legacy.identity:
        path = real / MARKER_NAME
        raise WorkspaceMarkerError(
            WorkspaceMarkerCode.WORKSPACE_MARKERS_DISAGREE,
            f"{path} names {current.identity} but the older marker "
            f"{real / LEGACY_MARKER_NAME} names {legacy.identity}; Maka will not choose between "
            "them: remove the one that is not this folder's",
            path,
        )
    return current, legacy


def _read_marker(real: Path) -> WorkspaceIdentity | None:
    """The folder's identity (the marker in ``.maka``, else the legacy one); None when it has
    none."""
    current, legacy = _read_both(real)
    return current if current is not None else legacy


def read_workspace_identity(folder: Path) -> WorkspaceIdentity | None:
    """The folder's identity without creating anything (None when it has no marker)."""
    return _read_marker(_folder(folder))


def resolve_workspace_identity(folder: Path) -> WorkspaceIdentity:
    """The folder's identity, creating the marker atomically when there is none (and moving a
    legacy marker into ``.maka`` when it can)."""
    real = _folder(folder)
    current, legacy = _read_both(real)
    if current is not None:
        if legacy is not None:
            _remove_legacy(real)  # a migration cut short: both name this workspace
        _ensure_ignore(real)
        return current
    if legacy is not None:
        return _migrate(real, legacy)
    _publish(real, marker_bytes(str(uuid.uuid4()), time.time_ns() // 1_000_000))
    created = _read_marker(real)
    if created is None:
        raise WorkspaceMarkerError(
            WorkspaceMarkerCode.WORKSPACE_MARKER_WRITE_FAILED,
            f"{real / MARKER_NAME} vanished right after it was created",
            real / MARKER_NAME,
        )
    return created


def give_back_marker(
    folder: Path, identity: str, replacing: WorkspaceIdentity | None
) -> WorkspaceIdentity:
    """Put ``identity`` back as the folder's marker: the folder has none (``replacing`` None:
    ``git clean -fdx`` deletes ``.maka``), or the one it has (``replacing``) was made after
    that and names a workspace nothing recorded (the caller checked both, and that the folder
    is the session's own). The marker replaced is removed only if it is still that one; the
    new one is published as any marker is (never over another)."""
    real = _folder(folder)
    if not identity.startswith(IDENTITY_PREFIX) or not _UUID.fullmatch(
        identity.removeprefix(IDENTITY_PREFIX)
    ):
        raise WorkspaceMarkerError(
            WorkspaceMarkerCode.WORKSPACE_MARKER_INVALID,
            f"{identity} is not a workspace identity a marker can hold",
            real / MARKER_NAME,
        )
    current, legacy = _read_both(real)
    found = current if current is not None else legacy
    if (found is None) != (replacing is None) or (
        found is not None and replacing is not None and found.identity != replacing.identity
    ):
        raise WorkspaceMarkerError(
            WorkspaceMarkerCode.WORKSPACE_MARKER_WRITE_FAILED,
            f"{real / MARKER_NAME} changed while it was being given back; nothing was replaced",
            real / MARKER_NAME,
        )
    try:
        if current is not None:
            os.unlink(real / MARKER_NAME)
        if legacy is not None:
            os.unlink(real / LEGACY_MARKER_NAME)
    except OSError as error:
        raise WorkspaceMarkerError(
            WorkspaceMarkerCode.WORKSPACE_MARKER_WRITE_FAILED,
            f"cannot remove {real / MARKER_NAME}: {error.strerror}",
            real / MARKER_NAME,
        ) from None
    _publish(real, marker_bytes(identity.removeprefix(IDENTITY_PREFIX), time.time_ns() // 10**6))
    given = _read_marker(real)
    if given is None or given.identity != identity:
        raise WorkspaceMarkerError(
            WorkspaceMarkerCode.WORKSPACE_MARKER_WRITE_FAILED,
            f"{real / MARKER_NAME} does not read back as {identity}",
            real / MARKER_NAME,
        )
    return given


def _migrate(real: Path, legacy: WorkspaceIdentity) -> WorkspaceIdentity:
    """Write the legacy marker's identity to ``.maka/workspace.json`` and, once it reads back
    the same, remove the legacy file. Whatever fails leaves the legacy marker in use: an
    identity is never lost."""
    try:
        _publish(real, marker_bytes(legacy.workspace_id, legacy.created_at))
    except WorkspaceMarkerError:
        return legacy
    current, _ = _read_both(real)  # raises if a concurrent creator wrote another identity
    if current is None or current.identity != legacy.identity:
        return legacy
    _remove_legacy(real)
    return current


def _remove_legacy(real: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(real / LEGACY_MARKER_NAME)
        _fsync_directory(real)


def marker_bytes(workspace_id: str, created_at: int) -> bytes:
    value = {"version": MARKER_VERSION, "workspaceId": workspace_id, "createdAt": created_at}
    return canonical_json_bytes(value) + b"\n"


def _publish(real: Path, data: bytes) -> None:
    """Write the marker ``data`` in ``.maka`` (created when missing, with its ``.gitignore``
    first) without ever replacing a marker (a concurrent creator may win)."""
    folder = real / MARKER_DIR
    marker = real / MARKER_NAME
    failed = WorkspaceMarkerCode.WORKSPACE_MARKER_WRITE_FAILED
    made = False
    try:
        os.mkdir(folder, 0o700)
        made = True
        _fsync_directory(real)
    except FileExistsError:
        pass
    except OSError as error:
        raise WorkspaceMarkerError(
            failed, f"cannot create {folder}: {error.strerror}", marker
        ) from None
    try:
        info = os.lstat(folder)
    except OSError as error:
        raise WorkspaceMarkerError(
            failed, f"cannot use {folder}: {error.strerror}", marker
        ) from None
    if stat.S_ISLNK(info.st_mode):
        raise WorkspaceMarkerError(
            WorkspaceMarkerCode.WORKSPACE_MARKER_SYMLINK,
            f"{folder} is a symbolic link; Maka keeps its workspace marker in a folder there",
            marker,
        )
    if not stat.S_ISDIR(info.st_mode):
        raise WorkspaceMarkerError(
            WorkspaceMarkerCode.WORKSPACE_MARKER_NOT_FILE,
            f"{folder} is not a folder; Maka keeps its workspace marker in a folder there",
            marker,
        )
    try:
        # The ignore file first: the marker never exists without it.
        _link_new(folder, IGNORE_FILE, IGNORE_BODY)
        _link_new(folder, MARKER_FILE, data)
    except WorkspaceMarkerError:
        if made and not os.path.lexists(marker):  # leave nothing of a failed first creation
            with contextlib.suppress(OSError):
                os.unlink(folder / IGNORE_FILE)
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        raise


def _ensure_ignore(real: Path) -> None:
    """Put back a missing ``.maka/.gitignore`` (best effort: the identity does not depend on
    it, and a read-only folder still has one)."""
    folder = real / MARKER_DIR
    if os.path.lexists(folder / IGNORE_FILE):
        return
    with contextlib.suppress(WorkspaceMarkerError):
        _link_new(folder, IGNORE_FILE, IGNORE_BODY)


def _link_new(folder: Path, name: str, data: bytes) -> None:
    """Publish ``folder/name`` holding ``data`` unless it exists (temp file, fsync, hard link:
    never overwrites), then fsync ``folder``."""
    target = folder / name
    temp = folder / f"{name}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
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
            os.link(temp, target)  # never overwrites: a concurrent winner's file stays
        _fsync_directory(folder)
    except OSError as error:
        raise WorkspaceMarkerError(
            WorkspaceMarkerCode.WORKSPACE_MARKER_WRITE_FAILED,
            f"cannot create {target}: {error.strerror}",
            target,
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
