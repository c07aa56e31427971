"""Permission bits in workspace checkpoints (docs/design/workspace.md section 1).

Git keeps two file modes (``100644`` and ``100755``) and none for folders, so a snapshot alone
would bring ``private.env`` 0600 back as 0644 and a 0700 folder as 0755, and a ``chmod`` would
not be drift. The checkpoint store therefore records every entry's permission bits (the folder
itself as ``.``, every folder, every file; links have none of their own) in one blob that each
snapshot tree carries at ``.maka/permissions`` (staged in the private index beside the
files): ``.maka`` at the top of the folder is the app's own and outside the policy, so the name
never meets a file of the user's. Lines are
``<octal bits> <path>`` separated by NUL (paths may hold any byte but NUL), sorted by path.

A comparison reports an entry whose bits changed as modified (a folder as ``name/``, the folder
itself as ``./``); a restore sets the recorded bits on the copy, the folder itself last, after
creating it private (0700) so nothing in it is readable by others while it is written.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from runtime.ledger.checkpoint_ports import PathChange, TreeChange
from storage.checkpoints.checkpoint_git import GitRunner

RECORD_DIR = ".maka"
RECORD_NAME = "permissions"
RECORD_PATH = f"{RECORD_DIR}/{RECORD_NAME}"
ROOT = "."
_LINK_MODE = b"120000"


@dataclass(frozen=True, slots=True)
class FoundBits:
    record: bytes
    staged: str | None  # the blob id of the record the index holds now, if any
    stat_dirty: bool  # a file not staged now changed its stat data since ``since``


def permission_record(
    runner: GitRunner,
    git_dir: Path,
    folder: Path,
    index: Path,
    *,
    since: int | None = None,
    staged_now: set[bytes] | None = None,
) -> FoundBits:
    """The permission bits of the folder itself, every folder on the way to an entry of
    ``index`` and every regular file it holds (empty folders are not in the index: see
    ``add_folders``); on the way, whether a file that is not in ``staged_now`` changed its
    ``ctime`` or ``mtime`` at or after ``since`` (a touch, a chmod: its stat data in the index
    is out of date though its content is not)."""
    listed = runner.run(["ls-files", "-s", "-z"], git_dir=git_dir, index=index)
    root = os.fsencode(folder) + b"/"
    record_name = RECORD_PATH.encode()
    staged_now = staged_now or set()
    lstat = os.lstat
    is_reg = stat.S_ISREG
    bits: dict[bytes, int] = {}
    folders: set[bytes] = set()
    staged: str | None = None
    stat_dirty = False
    for entry in listed.split(b"\0"):
        if not entry:
            continue
        meta, raw = entry.split(b"\t", 1)
        if raw == record_name:
            staged = meta.split(b" ")[1].decode()
            continue
        parent = raw.rpartition(b"/")[0]
        while parent and parent not in folders:
            folders.add(parent)
            parent = parent.rpartition(b"/")[0]
        if meta.startswith(_LINK_MODE):
            continue
        try:
            info = lstat(root + raw)
        except OSError:
            continue
        if is_reg(info.st_mode):
            bits[raw] = stat.S_IMODE(info.st_mode)
            if (
                since is not None
                and not stat_dirty
                and max(info.st_ctime_ns, info.st_mtime_ns) >= since
                and raw not in staged_now
            ):
                stat_dirty = True
    for name in folders:
        try:
            info = lstat(root + name)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode):
            bits[name + b"/"] = stat.S_IMODE(info.st_mode)
    found = _bits(folder, regular=False)
    if found is not None:
        bits[ROOT.encode() + b"/"] = found
    return FoundBits(_encode_raw(bits), staged, stat_dirty)


def add_folders(record: bytes, folder: Path, names: list[str]) -> bytes:
    """``record`` with the bits of the empty folders ``names`` (and the folders on their way)."""
    if not names:
        return record
    bits = decode_record(record)
    for name in names:
        parts = name.split("/")
        for n in range(1, len(parts) + 1):
            key = "/".join(parts[:n]) + "/"
            if key not in bits:
                found = _bits(folder / key.rstrip("/"), regular=False)
                if found is not None:
                    bits[key] = found
    return encode_record(bits)


def _bits(path: Path, *, regular: bool) -> int | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    wanted = stat.S_ISREG(info.st_mode) if regular else stat.S_ISDIR(info.st_mode)
    return stat.S_IMODE(info.st_mode) if wanted else None


def encode_record(bits: dict[str, int]) -> bytes:
    return _encode_raw({os.fsencode(name): value for name, value in bits.items()})


def _encode_raw(bits: dict[bytes, int]) -> bytes:
    return b"".join(b"%04o " % bits[name] + name + b"\0" for name in sorted(bits))


def decode_record(body: bytes) -> dict[str, int]:
    """The record's entries; lines that do not parse are left out (an older or damaged record
    restores what it can and compares as nothing known)."""
    found: dict[str, int] = {}
    for line in body.split(b"\0"):
        octal, _, raw = line.partition(b" ")
        if not raw:
            continue
        try:
            found[os.fsdecode(raw)] = int(octal, 8) & 0o7777
        except ValueError:
            continue
    return found


def stage_record(
    runner: GitRunner,
    git_dir: Path,
    folder: Path,
    index: Path,
    record: bytes,
    *,
    staged: str | None,
) -> None:
    """Put the record in ``index`` at ``.maka/permissions`` before its tree is written; an
    unchanged record is left as it is (Git's cached trees stay valid)."""
    if staged is not None and staged == _blob_id(record):
        return
    blob = runner.run(["hash-object", "-w", "--stdin"], git_dir=git_dir, stdin=record)
    runner.run(
        ["update-index", "--add", "--cacheinfo", f"100644,{blob.decode().strip()},{RECORD_PATH}"],
        git_dir=git_dir,
        work_tree=folder,
        index=index,
    )


def _blob_id(body: bytes) -> str:
    """The id Git gives ``body`` as a blob (SHA-1 repositories; another format never matches
    and the record is simply staged again)."""
    return hashlib.sha1(b"blob %d\0" % len(body) + body, usedforsecurity=False).hexdigest()


def read_record(runner: GitRunner, git_dir: Path, tree: str) -> dict[str, int] | None:
    """A snapshot's permission record; None when it has none (taken before they were kept)."""
    listed = runner.run(["ls-tree", "-z", tree, "--", RECORD_PATH], git_dir=git_dir)
    entry = listed.split(b"\0", 1)[0]
    if not entry:
        return None
    blob = entry.split(b"\t", 1)[0].split(b" ")[2].decode()
    return decode_record(runner.run(["cat-file", "blob", blob], git_dir=git_dir))


def permission_changes(old: dict[str, int] | None, new: dict[str, int] | None) -> list[TreeChange]:
    """Entries in both records whose bits differ, as modified paths (folders end in ``/``)."""
    if old is None or new is None:
        return []
    found: list[TreeChange] = []
    for name, bits in new.items():
        before = old.get(name)
        if before is not None and before != bits:
            found.append(TreeChange(name, PathChange.MODIFIED))
    return found


def apply_record(record: dict[str, int], target: Path) -> None:
    """Give the copy at ``target`` the recorded bits: files, then folders deepest first (a
    folder made read-only last of what is in it), the copy's own folder last of all."""
    files = [name for name in record if not name.endswith("/")]
    folders = sorted(
        (name for name in record if name.endswith("/") and name != ROOT + "/"),
        key=lambda name: name.count("/"),
        reverse=True,
    )
    for name in [*files, *folders]:
        _chmod(target / name.rstrip("/"), record[name], regular=not name.endswith("/"))


def apply_root(record: dict[str, int], target: Path) -> None:
    bits = record.get(ROOT + "/")
    if bits is not None:
        _chmod(target, bits, regular=False)


def _chmod(path: Path, bits: int, *, regular: bool) -> None:
    try:
        info = os.lstat(path)
    except OSError:
        return
    if (stat.S_ISREG(info.st_mode) if regular else stat.S_ISDIR(info.st_mode)) and (
        stat.S_IMODE(info.st_mode) != bits
    ):
        os.chmod(path, bits)
