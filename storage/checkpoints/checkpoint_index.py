"""A small private index staged and its tree written in this process (docs/design/workspace.md
section 2, "Small folders"): up to some thousands of files, where a capture's Git calls are
mostly process starts, the staging (``update-index``) and the tree (``write-tree``) are done
here, as Git does them, instead of in two more Git processes.

Only what is ordinary is done here; anything else is left to Git, before this module has
written anything to the index (objects it wrote meanwhile are ordinary loose objects, kept or
pruned like any other):

- the private repository keeps SHA-1 objects in its own object folder (no alternates, no other
  object format), and its configuration says ``filemode = true``;
- the index is version 2 or 3, at most ``SMALL_INDEX`` entries, every entry at stage 0 with no
  flag beyond its name's length (no assume-valid, skip-worktree or intent-to-add entry), its
  checksum right, and no extension but the cached trees (``TREE``) and the end-of-entries
  marker (``EOIE``; ``IEOT``, Git's optional table for reading the entries on several
  threads, is not written back: Git reads the index without it);
- every path staged is a regular file or a symbolic link that reads without error.

What is done as Git does it:

- **Staging a path** (``update-index --add --remove --replace``): ``lstat``, then the content
  (a file's bytes, a link's target) hashed as a blob and written as a loose object unless the
  store holds it (then it is freshened, as Git freshens it, so a prune running meanwhile cannot
  take it; a loose one whose header, once inflated, is not the blob's is damaged, and is moved
  aside and written again: ``checkpoint_objects.set_aside``); the entry gets the ``lstat``
  data truncated to 32 bits and mode ``100755`` when the owner may execute, ``100644``
  otherwise, ``120000`` for a link. A path that is gone removes
  its entry; an entry in the way of a new one (a file where a folder now is, or the reverse)
  is removed. Every cached tree on a changed path is invalidated.
- **Racy entries**: an entry carried over unchanged whose time is not older than the index
  being replaced (to the second) may have changed in that same second without its stat data
  showing it; as Git does when it writes an index, its content is looked at, and when it
  differs its size is set to 0 ("smudged"), so the next listing sees it changed.
- **The tree** (``write-tree``): every invalidated folder's tree is written from its entries
  (each object named must be in the store, or the capture fails as ``write-tree`` fails and
  the index is rebuilt from the folder); a valid cached tree is reused when its object is in
  the store. The index is written through ``<index>.lock`` (created exclusively, as Git takes
  it) and renamed into place, with its cached trees and a new checksum.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import logging
import os
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from storage.checkpoints.checkpoint_objects import (
    blob_id,
    compact_config,
    header_matches,
    loose_path,
    plain_repository,
    put_loose,
    set_aside,
)

_log = logging.getLogger(f"maka.{__name__}")  # the host logs "maka" to its log file

SMALL_INDEX = 16_000
"""The most entries an index may hold to be staged here. Measured (docs/performance.md): at
1,000 and 10,000 entries staging here is faster than the two Git processes it replaces; at
50,000 reading and writing the whole index in Python costs more than they do."""

_HEADER = 62  # ten 32-bit stat fields, the object id, the flags
_NAME_MASK = 0x0FFF
_OTHER_FLAGS = 0xF000  # assume-valid, extended, stage
_MASK32 = 0xFFFFFFFF
_SIZE_AT = slice(36, 40)
_TREE_MODE = 0o40000
_GITLINK = 0o160000
_OBJECT_MODE = 0o400
_DIR_MODE = 0o700
_PADS = [b"\0" * size for size in range(9)]


@dataclass(slots=True)
class _Node:
    """A cached tree: how many entries it covers (-1: invalid) and its object id."""

    count: int
    oid: bytes | None
    children: dict[bytes, _Node] = field(default_factory=dict)


@dataclass(slots=True)
class _Index:
    version: int
    names: list[bytes]  # sorted, as Git sorts them
    records: list[bytes]  # each entry as the file holds it: 62 bytes, its name, padding
    tree: _Node | None
    eoie: bool
    mtime_s: int  # the index file's time when it was read
    recent: set[bytes]  # every entry whose time (seconds) is not older than recent_since
    recent_since: int


class _Unsupported(Exception):
    """Left to Git: something this module does not do."""


class MissingObject(Exception):
    """The index names an object the store no longer holds (``write-tree`` fails the same)."""


_KEY = "last"
_memo: dict[str, tuple[bytes, _Index]] = {}  # the index this process last wrote or read


def index_here(git_dir: Path, index: Path) -> bool:
    """Whether staging ``index`` here may be tried: a plain SHA-1 store of its own, with
    ``filemode = true`` and names taken as they are (no case folding, no Unicode
    composition), and an index file small enough (its version and entries are checked when
    it is read)."""
    if sys.platform == "win32":
        return False
    try:
        size = index.stat().st_size
    except OSError:
        return False
    compact = compact_config(git_dir)
    if (
        compact is None
        or size > SMALL_INDEX * 160
        or (git_dir / "objects" / "info" / "alternates").exists()
    ):
        return False
    return (
        plain_repository(git_dir, compact)
        and "filemode=true" in compact
        and "splitindex" not in compact
        and "ignorecase=true" not in compact  # Git folds names' case there
        and "precomposeunicode=true" not in compact
    )


def stage_paths(
    git_dir: Path, folder: Path, index: Path, stage: Iterable[bytes], gone: Iterable[bytes]
) -> bool:
    """Stage ``stage`` (files and links, as the folder holds them now) and drop ``gone``
    (deleted paths) in ``index``; False when it is left to Git (the index is then as it was)."""
    try:
        data, state = _read(index)
        objects = _Objects(git_dir)
        names, records = state.names, state.records
        changed: list[bytes] = []
        staged: set[bytes] = set()
        for raw in stage:
            head = _staged_head(folder, raw, objects)
            at = bisect.bisect_left(names, raw)
            there = at < len(names) and names[at] == raw
            if head is None:
                if there:
                    del names[at], records[at]
                    changed.append(raw)
                continue
            if not there:
                _make_room(names, records, raw)
                at = bisect.bisect_left(names, raw)
                names.insert(at, raw)
                records.insert(at, b"")
            records[at] = _record(head, raw)
            staged.add(raw)
            changed.append(raw)
        for raw in gone:
            try:
                os.lstat(folder / os.fsdecode(raw))
            except (FileNotFoundError, NotADirectoryError):
                at = bisect.bisect_left(names, raw)
                if at < len(names) and names[at] == raw:
                    del names[at], records[at]
                    changed.append(raw)
            except OSError as error:
                raise _Unsupported(str(error)) from None
            else:
                raise _Unsupported("a path listed as gone is there")
        if not changed:
            _keep(data, state)
            return True
        _smudge(folder, state, staged)
        for raw in changed:
            _invalidate(state.tree, raw)
        _write(index, state)
        return True
    except _Unsupported:
        return False


def record_and_tree(
    git_dir: Path, folder: Path, index: Path, record: tuple[str, str] | None
) -> str | None:
    """Put ``record`` (its path and blob id) in ``index`` when given, then write the index's
    tree and every invalidated folder's; the root tree's id, or None when it is left to Git
    (the index is then as it was). Raises ``MissingObject`` as ``write-tree`` fails. When the
    index is written, its racy entries are looked at as ``write-tree`` looks at them, those
    just staged included (``_smudge``)."""
    try:
        data, state = _read(index)
        objects = _Objects(git_dir)
        names, records = state.names, state.records
        dirty = False
        if record is not None:
            path, blob = record[0].encode(), bytes.fromhex(record[1])
            at = bisect.bisect_left(names, path)
            there = at < len(names) and names[at] == path
            inside = bisect.bisect_left(names, path + b"/")
            if any(True for _ in _in_the_way(names, path)) or (
                inside < len(names) and names[inside].startswith(path + b"/")
            ):
                raise _Unsupported("the record's path is in the way of an entry")
            head = bytes(24) + (0o100644).to_bytes(4, "big") + bytes(12)  # as --cacheinfo
            if not there:
                names.insert(at, path)
                records.insert(at, b"")
            records[at] = _record(head + blob, path)
            _invalidate(state.tree, path)
            dirty = True
        root = state.tree if state.tree is not None else _Node(-1, None)
        built = _Builder(names, records, objects)
        tree, end = built.build(0, b"", root)
        if end != len(names):
            raise _Unsupported("the cached trees do not cover the index")
        if dirty or built.wrote or state.tree is None:
            state.tree = tree
            _smudge(folder, state, set())
            _write(index, state)
        else:
            _keep(data, state)
        assert tree.oid is not None
        return tree.oid.hex()
    except _Unsupported:
        return None


def _record(head: bytes, name: bytes) -> bytes:
    """An entry as the index file holds it: its first 60 bytes (stat data, mode, object id),
    its flags (the name's length), its name, and 1 to 8 NULs up to a multiple of 8."""
    flags = min(len(name), _NAME_MASK).to_bytes(2, "big")
    return head + flags + name + _PADS[8 - (_HEADER + len(name)) % 8]


def _staged_head(folder: Path, raw: bytes, objects: _Objects) -> bytes | None:
    """The first 60 bytes of ``raw``'s new entry (stat data, mode, object id) with its blob
    in the store; None when the path is gone."""
    path = os.path.join(os.fsencode(folder), raw)
    try:
        info = os.lstat(path)
        mode = _mode(info)
        if mode is None:
            raise _Unsupported("not a file or a link")
        body = os.readlink(path) if mode == 0o120000 else _file_bytes(path, info)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        raise _Unsupported(str(error)) from None
    oid = objects.write(b"blob", body)
    fields = (
        (info.st_ctime_ns // 1_000_000_000) & _MASK32,
        info.st_ctime_ns % 1_000_000_000,
        (info.st_mtime_ns // 1_000_000_000) & _MASK32,
        info.st_mtime_ns % 1_000_000_000,
        info.st_dev & _MASK32,
        info.st_ino & _MASK32,
        mode,
        info.st_uid & _MASK32,
        info.st_gid & _MASK32,
        info.st_size & _MASK32,
    )
    return b"".join(value.to_bytes(4, "big") for value in fields) + oid


def _in_the_way(names: list[bytes], name: bytes) -> Iterable[int]:
    """The positions of the entries named like one of ``name``'s folders."""
    at = name.find(b"/")
    while at > 0:
        found = bisect.bisect_left(names, name[:at])
        if found < len(names) and names[found] == name[:at]:
            yield found
        at = name.find(b"/", at + 1)


def _make_room(names: list[bytes], records: list[bytes], name: bytes) -> None:
    """``--replace``: drop the entries a new entry ``name`` would meet (a file named like one
    of its folders, or entries inside a folder named like it)."""
    for at in sorted(_in_the_way(names, name), reverse=True):
        del names[at], records[at]
    inside = name + b"/"
    at = bisect.bisect_left(names, inside)
    end = at
    while end < len(names) and names[end].startswith(inside):
        end += 1
    del names[at:end], records[at:end]


def _smudge(folder: Path, state: _Index, staged: set[bytes]) -> None:
    """Git's racy-entry rule, as Git applies it when it writes an index: a carried-over entry
    whose time is not older than the index being replaced (to the second) may have changed
    in the same tick without its stat data showing it; when its stat data still matches the
    file and its content does not, its size is set to 0 ("smudged"), so the next listing sees
    it changed. No more fields are compared than any Git compares (mtime to the second, size,
    kind), so an entry Git would trust is always looked at here. Only entries in
    ``state.recent`` can be such entries; those still recent stay there, with the staged."""
    root = os.fsencode(folder)
    names, records = state.names, state.records
    recent = set(staged)
    for name in state.recent:
        at = bisect.bisect_left(names, name)
        if name in staged or at == len(names) or names[at] != name:
            continue
        record = records[at]
        if int.from_bytes(record[8:12], "big") < state.mtime_s:
            continue
        recent.add(name)
        if record[_SIZE_AT] == b"\0\0\0\0":
            continue
        path = os.path.join(root, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue  # gone or unreadable: the listing sees it changed
        if _basic(info) != (record[8:12], record[24:28], record[36:40]):
            continue  # its stat data already shows a change
        try:
            same = _content_id(path, info) == record[40:60]
        except OSError:
            same = False
        if not same:
            records[at] = record[:36] + b"\0\0\0\0" + record[40:]
    state.recent = recent
    state.recent_since = state.mtime_s


def _mode(info: os.stat_result) -> int | None:
    if stat.S_ISLNK(info.st_mode):
        return 0o120000
    if stat.S_ISREG(info.st_mode):
        return 0o100755 if info.st_mode & stat.S_IXUSR else 0o100644
    return None


def _basic(info: os.stat_result) -> tuple[bytes, bytes, bytes]:
    """The stat fields Git compares whatever its configuration (``core.checkStat=minimal``,
    ``core.trustctime=false``): mtime seconds, mode, size."""
    return (
        ((info.st_mtime_ns // 1_000_000_000) & _MASK32).to_bytes(4, "big"),
        (_mode(info) or 0).to_bytes(4, "big"),
        (info.st_size & _MASK32).to_bytes(4, "big"),
    )


def _file_bytes(path: bytes, info: os.stat_result) -> bytes:
    """The bytes of the regular file ``lstat`` found at ``path``; an ``OSError`` when anything
    else is there now (never a wait on a fifo put in its place, never a link followed) or it
    grew since (Git is left to read it)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    descriptor = os.open(path, flags)
    with os.fdopen(descriptor, "rb") as handle:
        opened = os.fstat(descriptor)
        if not stat.S_ISREG(opened.st_mode) or opened.st_ino != info.st_ino:
            raise OSError(f"{os.fsdecode(path)} changed while it was read")
        body = handle.read(info.st_size + 1)  # a file growing meanwhile is not read on
        if len(body) > info.st_size:
            raise OSError(f"{os.fsdecode(path)} grew while it was read")
        return body


def _content_id(path: bytes, info: os.stat_result) -> bytes:
    body = os.readlink(path) if stat.S_ISLNK(info.st_mode) else _file_bytes(path, info)
    return bytes.fromhex(blob_id(body))


def _invalidate(tree: _Node | None, name: bytes) -> None:
    node = tree
    parts = name.split(b"/")[:-1]
    while node is not None:
        node.count = -1
        node.oid = None
        if not parts:
            return
        node = node.children.get(parts.pop(0))


class _Builder:
    """Every invalidated folder's tree written from the index's entries."""

    def __init__(self, names: list[bytes], records: list[bytes], objects: _Objects) -> None:
        self.names = names
        self.records = records
        self.objects = objects
        self.wrote = False

    def build(self, start: int, prefix: bytes, node: _Node) -> tuple[_Node, int]:
        names, records = self.names, self.records
        if (
            node.count > 0
            and node.oid is not None
            and self._covers(start, prefix, node.count)
            and self.objects.has(node.oid)
        ):
            return node, start + node.count
        body: list[bytes] = []
        children: dict[bytes, _Node] = {}
        at = start
        size = len(prefix)
        end = len(names)
        while at < end:
            name = names[at]
            if not name.startswith(prefix):
                break
            rest = name[size:]
            slash = rest.find(b"/")
            if slash < 0:
                record = records[at]
                mode = int.from_bytes(record[24:28], "big")
                oid = record[40:60]
                if mode != _GITLINK and not self.objects.has(oid):
                    raise MissingObject(f"invalid object {oid.hex()} for '{os.fsdecode(name)}'")
                body.append(b"%o %s\0%s" % (mode, rest, oid))
                at += 1
                continue
            part = rest[:slash]
            child, at = self.build(
                at, prefix + part + b"/", node.children.get(part) or _Node(-1, None)
            )
            assert child.oid is not None
            children[part] = child
            body.append(b"%o %s\0%s" % (_TREE_MODE, part, child.oid))
        oid = self.objects.write(b"tree", b"".join(body))
        self.wrote = True
        return _Node(at - start, oid, children), at

    def _covers(self, start: int, prefix: bytes, count: int) -> bool:
        """Whether the ``count`` entries from ``start`` are exactly those under ``prefix``
        (a damaged count is never trusted: the folder's tree is written again)."""
        last = start + count - 1
        if last >= len(self.names) or not self.names[last].startswith(prefix):
            return False
        return last + 1 == len(self.names) or not self.names[last + 1].startswith(prefix)


_PACKED: dict[bytes, tuple[tuple[int, int], frozenset[bytes]]] = {}
"""Each pack index read, by path: its size and time, and the ids it lists (a pack's objects
never change; a pack gone is simply not listed any more)."""
_PACKED_IDS = 250_000  # about 25 MB of ids kept at most (95 bytes each)


class _Objects:
    """The store's objects: whether one is there (its packs' indexes, then its loose
    objects), and writing a loose one (an object already there is freshened instead)."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self.root = os.fsencode(git_dir / "objects")
        self._packs: list[tuple[bytes, frozenset[bytes]]] | None = None

    def packs(self) -> list[tuple[bytes, frozenset[bytes]]]:
        if self._packs is None:
            folder = os.path.join(self.root, b"pack")
            try:
                names = sorted(os.listdir(folder))
            except FileNotFoundError:
                names = []
            except OSError as error:
                raise _Unsupported(str(error)) from None
            self._packs = [
                (os.path.join(folder, name[: -len(b".idx")] + b".pack"), _pack_ids(folder, name))
                for name in names
                if name.endswith(b".idx")
            ]
        return self._packs

    def _packed(self, oid: bytes) -> bytes | None:
        for pack, ids in self.packs():
            if oid in ids:
                return pack
        return None

    def _loose(self, oid: bytes) -> bytes:
        return loose_path(self.root, oid.hex())

    def has(self, oid: bytes) -> bool:
        return self._packed(oid) is not None or os.path.lexists(self._loose(oid))

    def write(self, kind: bytes, body: bytes) -> bytes:
        data = b"%s %d\0" % (kind, len(body)) + body
        oid = hashlib.sha1(data, usedforsecurity=False).digest()
        pack = self._packed(oid)
        target = self._loose(oid)
        loose = pack is None and os.path.lexists(target)
        if loose and not header_matches(target, data):
            # The loose object of this name holds other bytes (swapped for an object of
            # another size or kind, or no longer inflating): freshened, it would stand in
            # every snapshot from now on. Moved aside (checked in full first), its right
            # bytes are written below. One read of its first bytes: the cost of the look
            # is an open, paid only for content the store already holds.
            with contextlib.suppress(OSError):
                moved = set_aside(self.git_dir, oid.hex())
                if moved is not None:
                    loose = False
                    _log.warning("a damaged object was moved aside to %s", moved)
        if pack is not None or loose:
            with contextlib.suppress(OSError):  # freshened, as Git does
                os.utime(pack if pack is not None else target)
            return oid
        if not put_loose(target, data):
            raise _Unsupported("the store refused an object")
        return oid


def _pack_ids(folder: bytes, name: bytes) -> frozenset[bytes]:
    """The object ids a pack index (version 2) lists, read once per pack."""
    path = os.path.join(folder, name)
    try:
        info = os.stat(path)
        key = (info.st_size, info.st_mtime_ns)
        kept = _PACKED.get(path)
        if kept is not None and kept[0] == key:
            return kept[1]
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise _Unsupported(str(error)) from None
    if data[:8] != b"\377tOc\0\0\0\2" or len(data) < 8 + 1024:
        raise _Unsupported("a pack index of another version")
    count = int.from_bytes(data[8 + 1020 : 8 + 1024], "big")
    table = data[8 + 1024 : 8 + 1024 + 20 * count]
    if len(table) != 20 * count:
        raise _Unsupported("a damaged pack index")
    ids = frozenset(table[at : at + 20] for at in range(0, len(table), 20))
    if len(_PACKED) >= 64 or sum(len(kept[1]) for kept in _PACKED.values()) > _PACKED_IDS:
        _PACKED.clear()  # a few packs' ids are kept, never every store's the host has seen
    _PACKED[path] = (key, ids)
    return ids


def _read(index: Path) -> tuple[bytes, _Index]:
    """The index as parsed; what this process last wrote there is taken as it was kept (the
    file's bytes compared), once: the caller changes it and writes it back, or puts it back
    with ``_keep``."""
    try:
        with open(index, "rb") as handle:
            data = handle.read()
            mtime_s = int(os.fstat(handle.fileno()).st_mtime)
    except OSError as error:
        raise _Unsupported(str(error)) from None
    kept = _memo.pop(_KEY, None)  # any name: a second name (hard link) reads the same
    if kept is None or kept[0] != data:
        return data, _parse(data, mtime_s)
    state = kept[1]
    state.mtime_s = mtime_s
    if mtime_s < state.recent_since:
        # The index's time was set back: what counts as recent is looked for again.
        state.recent = {
            name
            for name, record in zip(state.names, state.records, strict=True)
            if int.from_bytes(record[8:12], "big") >= mtime_s
        }
        state.recent_since = mtime_s
    return data, state


def _keep(data: bytes, state: _Index) -> None:
    _memo[_KEY] = (data, state)


def _parse(data: bytes, mtime_s: int) -> _Index:
    if len(data) < 32 or data[:4] != b"DIRC":
        raise _Unsupported("not an index")
    if hashlib.sha1(data[:-20], usedforsecurity=False).digest() != data[-20:]:
        raise _Unsupported("the index's checksum is wrong")
    version = int.from_bytes(data[4:8], "big")
    count = int.from_bytes(data[8:12], "big")
    if version not in (2, 3) or count > SMALL_INDEX:
        raise _Unsupported("an index of another version, or a large one")
    names: list[bytes] = []
    records: list[bytes] = []
    recent: set[bytes] = set()
    at = 12
    end = len(data) - 20
    for _ in range(count):
        flags = int.from_bytes(data[at + 60 : at + 62], "big")
        if flags & _OTHER_FLAGS:
            raise _Unsupported("an entry with flags")
        size = flags & _NAME_MASK
        start = at + _HEADER
        stop = data.index(b"\0", start) if size == _NAME_MASK else start + size
        following = at + ((_HEADER + (stop - start) + 8) & ~7)
        if following > end:
            raise _Unsupported("a damaged index")
        name = data[start:stop]
        names.append(name)
        records.append(data[at:following])
        if int.from_bytes(data[at + 8 : at + 12], "big") >= mtime_s:
            recent.add(name)
        at = following
    if any(names[n] >= names[n + 1] for n in range(len(names) - 1)):
        raise _Unsupported("entries out of order")
    tree: _Node | None = None
    eoie = False
    while at < end:
        signature = data[at : at + 4]
        length = int.from_bytes(data[at + 4 : at + 8], "big")
        body = data[at + 8 : at + 8 + length]
        if signature == b"TREE":
            tree, used = _parse_tree(body, 0)
            if used != len(body):
                raise _Unsupported("a damaged tree cache")
        elif signature == b"EOIE":
            eoie = True
        elif signature != b"IEOT":
            raise _Unsupported(f"the index extension {signature!r}")
        at += 8 + length
    if at != end:
        raise _Unsupported("a damaged index")
    return _Index(version, names, records, tree, eoie, mtime_s, recent, mtime_s)


def _parse_tree(body: bytes, at: int) -> tuple[_Node, int]:
    nul = body.index(b"\0", at)
    line = body.index(b"\n", nul)
    counts = body[nul + 1 : line].split(b" ")
    count, subtrees = int(counts[0]), int(counts[1])
    at = line + 1
    oid = None
    if count >= 0:
        oid = body[at : at + 20]
        at += 20
    node = _Node(count, oid)
    for _ in range(subtrees):
        start = at
        end = body.index(b"\0", start)
        child, at = _parse_tree(body, start)
        node.children[body[start:end]] = child
    return node, at


def _tree_bytes(name: bytes, node: _Node, out: list[bytes]) -> None:
    out.append(b"%s\0%d %d\n" % (name, node.count, len(node.children)))
    if node.count >= 0 and node.oid is not None:
        out.append(node.oid)
    # Git keeps a folder's cached subtrees ordered by name length, then by bytes.
    for child in sorted(node.children, key=lambda part: (len(part), part)):
        _tree_bytes(child, node.children[child], out)


def _write(index: Path, state: _Index) -> None:
    entries = b"".join(
        [
            b"DIRC",
            state.version.to_bytes(4, "big"),
            len(state.names).to_bytes(4, "big"),
            *state.records,
        ]
    )
    out = [entries]
    headers: list[bytes] = []
    if state.tree is not None:
        parts: list[bytes] = []
        _tree_bytes(b"", state.tree, parts)
        tree = b"".join(parts)
        header = b"TREE" + len(tree).to_bytes(4, "big")
        headers.append(header)
        out += [header, tree]
    if state.eoie:
        mark = hashlib.sha1(b"".join(headers), usedforsecurity=False).digest()
        out += [b"EOIE", (24).to_bytes(4, "big"), len(entries).to_bytes(4, "big"), mark]
    data = b"".join(out)
    data += hashlib.sha1(data, usedforsecurity=False).digest()
    lock = index.with_name(index.name + ".lock")
    try:
        descriptor = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as error:
        raise _Unsupported(str(error)) from None
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.replace(lock, index)
    except OSError as error:
        with contextlib.suppress(OSError):
            lock.unlink()
        raise _Unsupported(str(error)) from None
    _keep(data, state)
