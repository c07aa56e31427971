"""The part of a Git index under one folder, as an index of its own (docs/design/workspace.md
section 1): the seed of a session folder inside a larger repository (a package of a monorepo).

The enclosing repository's index names ``pkg/a.txt``; the session folder ``pkg``'s private
index must name ``a.txt``, with the same stat data and object, so that Git finds the file
unchanged without hashing it. Git has no command that drops a path prefix from an index, and no
Git command runs with the user's repository as its own, so the index is read and written here:
versions 2, 3 and 4 are read (4 compresses each name against the one before), version 2 is
written, with no extension (the cache of trees, the untracked cache and the like are left out:
Git does without them). Anything out of the ordinary answers None and the capture starts from
an empty index, as without a seed: a split or sparse index (their entries are elsewhere, or
folders), an entry with an extended flag (``skip-worktree``, intent-to-add), one not at stage 0
(a conflict), one marked ``assume-unchanged``, or bytes that do not parse.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path

SIGNATURE = b"DIRC"
# Stat data and mode (ctime, mtime, dev, ino, mode, uid, gid, size: 40 bytes), object, flags.
_ENTRY = struct.Struct(">40s20sH")
_ASSUME_VALID = 0x8000
_EXTENDED = 0x4000
_STAGE = 0x3000
_NAME_MASK = 0x0FFF
SPARSE_EXTENSION = b"sdir"  # the extension a sparse index carries
_REFUSED_EXTENSIONS = (b"link", SPARSE_EXTENSION)  # a split index, a sparse one
# Past this many entries the walk would cost more than hashing a package's files.
MAX_ENTRIES = 500_000
_NO_CHECKSUM = bytes(20)


@dataclass(frozen=True, slots=True)
class IndexEntry:
    stat: bytes  # the 40 bytes of stat data and mode, as the index holds them
    oid: bytes
    flags: int
    name: bytes
    extended: int = 0  # the extended flags (version 3 and up): skip-worktree, intent-to-add


SKIP_WORKTREE = 0x4000  # of the extended flags: a sparse checkout's entry left out of the folder


def holds_skipped_entries(path: Path) -> bool:
    """Whether the index at ``path`` has an entry Git does not look at in the folder
    (skip-worktree, or a sparse index's folder entry): only an index of version 3 or 4 can,
    so most are answered from their first bytes."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(12)
            if len(head) < 12 or head[:4] != SIGNATURE:
                return False
            (version,) = struct.unpack_from(">L", head, 4)
            if version == 2:
                return False
            data = head + handle.read()
    except OSError:
        return False
    entries = read_entries(data, sparse=True)
    return entries is not None and any(entry.extended & SKIP_WORKTREE for entry in entries)


def read_entries(data: bytes, *, sparse: bool = False) -> list[IndexEntry] | None:
    """Every entry of an index of version 2, 3 or 4; None when it does not parse or holds an
    extension this module refuses (``sub_index``). With ``sparse``, a sparse index is read
    too: a folder a sparse checkout leaves out is then one entry, its name ending in ``/``."""
    try:
        signature, version, count = struct.unpack_from(">4sLL", data, 0)
        if signature != SIGNATURE or version not in (2, 3, 4) or not _checksum_ok(data):
            return None
        entries: list[IndexEntry] = []
        at = 12
        previous = b""
        for _ in range(count):
            stat_data = data[at : at + 40]
            _, oid, flags = _ENTRY.unpack_from(data, at)
            start = at + _ENTRY.size + (2 if flags & _EXTENDED else 0)
            if flags & _EXTENDED and version < 3:
                return None
            extended = (
                struct.unpack_from(">H", data, at + _ENTRY.size)[0] if flags & _EXTENDED else 0
            )
            if version == 4:
                strip, start = _varint(data, start)
                if strip > len(previous):
                    return None
                end = data.index(b"\0", start)
                name = previous[: len(previous) - strip] + data[start:end]
                at = end + 1
            else:
                end = data.index(b"\0", start)
                name = data[start:end]
                at += (end - at + 8) // 8 * 8
            if not name or flags & _NAME_MASK != min(len(name), _NAME_MASK):
                return None
            entries.append(IndexEntry(stat_data, oid, flags, name, extended))
            previous = name
        if _has_refused_extension(data, at, allowed=(SPARSE_EXTENSION,) if sparse else ()):
            return None
    except (struct.error, ValueError, IndexError):
        return None
    return entries


def _checksum_ok(data: bytes) -> bool:
    """Whether the index's trailing checksum is its SHA-1, or all zeros: Git 2.40 and later
    write zeros with ``index.skipHash`` (which ``feature.manyFiles`` turns on) and read such an
    index without checking it, as every Git reads an index."""
    if len(data) < 32:
        return False
    trailer = data[-20:]
    return trailer == _NO_CHECKSUM or hashlib.sha1(data[:-20]).digest() == trailer


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """Git's offset encoding (each continuation adds one before shifting)."""
    byte = data[at]
    at += 1
    value = byte & 0x7F
    while byte & 0x80:
        byte = data[at]
        at += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, at


def _has_refused_extension(data: bytes, at: int, allowed: tuple[bytes, ...] = ()) -> bool:
    end = len(data) - 20
    while at + 8 <= end:
        name = data[at : at + 4]
        (size,) = struct.unpack_from(">L", data, at + 4)
        if name in _REFUSED_EXTENSIONS and name not in allowed:
            return True
        at += 8 + size
    return False


def write_index(entries: list[IndexEntry]) -> bytes:
    """An index of version 2 holding ``entries`` (sorted by name, stage 0, no extended flag)."""
    parts = [struct.pack(">4sLL", SIGNATURE, 2, len(entries))]
    for entry in entries:
        flags = (entry.flags & ~_NAME_MASK) | min(len(entry.name), _NAME_MASK)
        body = entry.stat + entry.oid + struct.pack(">H", flags) + entry.name
        parts.append(body + b"\0" * (8 - len(body) % 8))
    data = b"".join(parts)
    return data + hashlib.sha1(data).digest()


def sub_index(data: bytes, prefix: bytes) -> bytes | None:
    """The entries of the index ``data`` under the folder ``prefix`` (``pkg/``, with its
    slash), that prefix dropped, as an index of version 2; None when the index does not parse,
    holds an entry that is not plain there, or holds nothing there. Entries are sorted by name,
    so those under the folder are one run: the walk stops after it (an extension is then not
    looked at; the caller refuses a split index by its shared file)."""
    try:
        signature, version, count = struct.unpack_from(">4sLL", data, 0)
    except struct.error:
        return None
    if signature != SIGNATURE or version not in (2, 3, 4) or count > MAX_ENTRIES:
        return None
    if not _checksum_ok(data):
        return None
    if version == 4:
        entries = read_entries(data)
        if entries is None:
            return None
        inside = [entry for entry in entries if entry.name.startswith(prefix)]
    else:
        found = _run_under(data, count, prefix)
        if found is None:
            return None
        inside = found
    chosen: list[IndexEntry] = []
    for entry in inside:
        if entry.flags & (_ASSUME_VALID | _EXTENDED | _STAGE):
            return None
        chosen.append(IndexEntry(entry.stat, entry.oid, entry.flags, entry.name[len(prefix) :]))
    return write_index(chosen) if chosen else None


def _run_under(data: bytes, count: int, prefix: bytes) -> list[IndexEntry] | None:
    """The entries of an index of version 2 or 3 whose names start with ``prefix``, read
    without building the others (each entry's length is in its flags)."""
    found: list[IndexEntry] = []
    at = 12
    end_of_entries = len(data) - 20
    try:
        for _ in range(count):
            (flags,) = struct.unpack_from(">H", data, at + 60)
            start = at + _ENTRY.size + (2 if flags & _EXTENDED else 0)
            length = flags & _NAME_MASK
            end = data.index(b"\0", start) if length == _NAME_MASK else start + length
            if end >= end_of_entries or data[end] != 0:
                return None
            if data.startswith(prefix, start, end):
                found.append(
                    IndexEntry(data[at : at + 40], data[at + 40 : at + 60], flags, data[start:end])
                )
            elif found:
                break  # past the folder's run of entries
            at += (end - at + 8) // 8 * 8
    except (struct.error, ValueError):
        return None
    return found
