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

A capture need not look at every entry again. A file's bits change only with its ``ctime``,
which Git's stat data holds and ``diff-files`` compares, so the capture's listing names every
file whose bits may have moved. What a capture found is kept beside the private index
(``<index>.bits``: the record before empty folders are added, the folders' bits, and the files
changed so shortly before Git looked at them that a chmod in the same tick of the file
system's clock would leave their ``ctime`` as Git recorded it), naming the index by its
trailing checksum. The next capture, if the index is still byte for byte that one and no entry
leaves it, looks again only at the paths it stages, those recent files and the folders
(``updated_record``); otherwise, and whenever the kept findings are absent or damaged, every
entry (``permission_record``, the full pass).
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import threading
from collections.abc import Set
from dataclasses import dataclass
from pathlib import Path

from runtime.ledger.checkpoint_ports import PathChange, TreeChange
from storage.checkpoints.checkpoint_empty_dirs import shown_path
from storage.checkpoints.checkpoint_git import GitRunner
from storage.checkpoints.checkpoint_objects import blob_id, plain_repository, write_object
from storage.private_files import private_opener

RECORD_DIR = ".maka"
RECORD_NAME = "permissions"
RECORD_PATH = f"{RECORD_DIR}/{RECORD_NAME}"
ROOT = "."
_LINK_MODE = b"120000"


@dataclass(frozen=True, slots=True)
class FoundBits:
    record: bytes  # the bits of the folder, the folders on the way to entries, regular files
    staged: str | None  # the blob id of the record the index holds now, if any
    # The files looked at whose ctime or mtime is recent, and their bits.
    recent: dict[bytes, bytes] | None = None
    # The bits of every folder on the way to an entry of the index, and of the folder
    # itself (``.``), as in the record.
    folders: dict[bytes, bytes] | None = None
    # The index's regular files over the size limit (the full pass only): the caller drops
    # their entries; they are in neither the record nor, through them, its folders.
    too_large: tuple[bytes, ...] = ()


def permission_record(
    runner: GitRunner,
    git_dir: Path,
    folder: Path,
    index: Path,
    *,
    recent_since: int = 0,
    limit: int | None = None,
) -> FoundBits:
    """The permission bits of the folder itself, every folder on the way to an entry of
    ``index`` and every regular file it holds (empty folders are not in the index: see
    ``add_folders``): the full pass, a ``stat`` of every entry. Files whose ``ctime`` or
    ``mtime`` is at or after ``recent_since`` are named in ``recent``; regular files over
    ``limit`` bytes in ``too_large`` (an index seeded from the user's names files the capture
    leaves out, and this pass looks at each file anyway)."""
    listed = runner.run(["ls-files", "-s", "-z"], git_dir=git_dir, index=index)
    return _bits_of(listed, folder, recent_since=recent_since, limit=limit)


class LookAhead:
    """The full pass over an index seeded from the user's (``checkpoint_borrow.seed``), made
    on a thread of its own while Git stages the folder. When the staging takes no entry out
    of the index, its answer stands for the previous capture's (``updated_record``: the files
    staged, those recent and the folders are looked at again); otherwise the full pass runs.
    Those entries hold the stat data the user's Git recorded before the seed was copied, and
    the look is made after it: a file's bits change only with its ``ctime``, so a file changed
    after the look differs from what the index records, and the next capture's listing names
    it and looks at it again, as it does for a file changed after any capture's look."""

    def __init__(
        self, folder: Path, listing: bytes, left_out: Set[bytes], *, recent_since: int, limit: int
    ) -> None:
        self._found: FoundBits | None = None
        self.recent_since = recent_since
        self._thread = threading.Thread(
            target=self._look,
            args=(folder, listing, left_out, recent_since, limit),
            name="maka-checkpoint-look-ahead",
            daemon=True,
        )
        self._thread.start()

    def _look(
        self, folder: Path, listing: bytes, left_out: Set[bytes], recent_since: int, limit: int
    ) -> None:
        try:
            self._found = _bits_of(
                listing,
                folder,
                recent_since=recent_since,
                limit=limit,
                tagged=True,
                left_out=left_out,
            )
        except Exception:  # any failure leaves the full pass to the capture
            self._found = None

    def result(self) -> FoundBits | None:
        """The full pass's answer for the seeded index (None: not to be had); waits for it."""
        self._thread.join()
        return self._found


def _bits_of(
    listed: bytes,
    folder: Path,
    *,
    recent_since: int,
    limit: int | None,
    tagged: bool = False,
    left_out: Set[bytes] = frozenset(),
) -> FoundBits:
    """``permission_record`` for an index listed as ``ls-files -z -s`` lists it (``tagged``:
    ``ls-files -z -s -v``, each entry after a tag), leaving out the entries ``left_out``.
    (Written for speed: it runs once per entry of big folders.)"""
    root = os.fsencode(folder) + b"/"
    record_name = RECORD_PATH.encode()
    passed = {record_name, *left_out}
    link = b"H " + _LINK_MODE if tagged else _LINK_MODE
    lstat = os.lstat
    is_reg = stat.S_ISREG
    largest = sys.maxsize if limit is None else limit
    octal: dict[int, bytes] = {}
    bits: dict[bytes, bytes] = {}  # name -> "<4 octal digits> "
    folders: set[bytes] = set()
    staged: str | None = None
    recent: dict[bytes, bytes] = {}
    too_large: list[bytes] = []
    for entry in listed.split(b"\0"):
        meta, _, raw = entry.partition(b"\t")
        if not raw:
            continue
        if raw in passed:
            if raw == record_name and not tagged:
                staged = meta.split(b" ")[1].decode()
            continue
        info = None
        if not meta.startswith(link):
            try:
                info = lstat(root + raw)
            except OSError:
                pass
            else:
                if info.st_size > largest and is_reg(info.st_mode):
                    too_large.append(raw)
                    continue
        parent = raw.rpartition(b"/")[0]
        while parent and parent not in folders:
            folders.add(parent)
            parent = parent.rpartition(b"/")[0]
        if info is not None and is_reg(info.st_mode):
            mode = info.st_mode & 0o7777
            line = octal.get(mode)
            if line is None:
                line = octal[mode] = b"%04o " % mode
            bits[raw] = line
            if info.st_ctime_ns >= recent_since or info.st_mtime_ns >= recent_since:
                recent[raw] = line[:4]
    folder_bits = _folder_bits(folder, folders)
    for name, value in folder_bits.items():
        bits[name + b"/"] = value + b" "
    record = b"".join([part for name in sorted(bits) for part in (bits[name], name, b"\0")])
    return FoundBits(record, staged, recent, folder_bits, tuple(too_large))


def _folder_bits(folder: Path, folders: set[bytes]) -> dict[bytes, bytes]:
    """The bits of ``folders`` that are folders and of the folder itself (``.``)."""
    root = os.fsencode(folder) + b"/"
    found: dict[bytes, bytes] = {}
    for name in folders:
        try:
            info = os.lstat(root + name)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode):
            found[name] = b"%04o" % stat.S_IMODE(info.st_mode)
    itself = _bits(folder, regular=False)
    if itself is not None:
        found[ROOT.encode()] = b"%04o" % itself
    return found


def updated_record(
    previous: CachedBits, folder: Path, names: set[bytes], *, recent_since: int
) -> FoundBits | None:
    """The full pass's answer derived from the previous capture's (``previous``, whose index
    is exactly the one this capture started from): only ``names`` (every path this capture
    staged, and the files the previous one found recent), the folders and the folder itself
    are looked at again. A file's permission bits change only with its ``ctime``, which Git's
    listing compares, so every other file has the bits it had. None when a path of ``names``
    is neither a file nor a link, or a folder is gone: an entry may have left the index, and
    only the full pass knows which folders still hold one."""
    lstat = os.lstat
    root = os.fsencode(folder) + b"/"
    changes: dict[bytes, bytes | None] = {}
    recent: dict[bytes, bytes] = {}
    known = previous.folders
    was_recent = previous.recent
    folders: dict[bytes, bytes] = {}
    new_folders: set[bytes] = set()
    for raw in names:
        try:
            info = lstat(root + raw)
        except OSError:
            return None
        if stat.S_ISREG(info.st_mode):
            bits = b"%04o" % stat.S_IMODE(info.st_mode)
            if was_recent.get(raw) != bits:
                changes[raw] = bits  # else the record holds these bits already
            if info.st_ctime_ns >= recent_since or info.st_mtime_ns >= recent_since:
                recent[raw] = bits
        elif stat.S_ISLNK(info.st_mode):
            changes[raw] = None
        else:
            return None
        parent = raw.rpartition(b"/")[0]
        while parent and parent not in known and parent not in new_folders:
            new_folders.add(parent)
            parent = parent.rpartition(b"/")[0]
    for name in [*known, *new_folders]:
        try:
            info = lstat(root + name if name != ROOT.encode() else os.fsencode(folder))
        except OSError:
            return None
        if not stat.S_ISDIR(info.st_mode):
            return None
        folders[name] = bits = b"%04o" % stat.S_IMODE(info.st_mode)
        if known.get(name) != bits:
            changes[name + b"/"] = bits
    if ROOT.encode() not in known:
        return None  # the folder itself was not looked at: only the full pass knows
    record = _patched(previous.base, changes)
    return FoundBits(record, None, recent, folders)


def _patched(record: bytes, changes: dict[bytes, bytes | None]) -> bytes:
    """``record`` (lines ``<4 octal digits> <name>`` ending in NUL, sorted by name) with each
    name of ``changes`` set to its bits, or left out for None. Bits that changed in place are
    written over their line; only an entry added or left out rebuilds the record."""
    body = bytearray(record)
    rebuild: dict[bytes, bytes | None] = {}
    for name, bits in changes.items():
        at = _line_of(record, name)
        if at is None:
            if bits is not None:
                rebuild[name] = bits
        elif bits is None:
            rebuild[name] = None
        elif record[at : at + 4] != bits:
            body[at : at + 4] = bits
    if not rebuild:
        return bytes(body)
    lines = {line[5:]: line[:4] for line in bytes(body).split(b"\0") if line}
    for name, bits in rebuild.items():
        if bits is None:
            lines.pop(name, None)
        else:
            lines[name] = bits
    return b"".join(lines[name] + b" " + name + b"\0" for name in sorted(lines))


def _line_of(record: bytes, name: bytes) -> int | None:
    """Where the line of ``name`` starts in ``record``, if it has one: the match must start a
    line (a NUL or the record's start before its four digits), since a name may hold spaces."""
    needle = b" " + name + b"\0"
    at = record.find(needle)
    while at != -1:
        start = at - 4
        if start >= 0 and (start == 0 or record[start - 1] == 0):
            return start
        at = record.find(needle, at + 1)
    return None


@dataclass(frozen=True, slots=True)
class CachedBits:
    """What the previous capture found (``permission_record`` or ``updated_record``), kept
    beside the private index and valid only while the index is byte for byte the one that
    capture left (its trailing checksum is named)."""

    base: bytes  # the record before empty folders were added
    staged: str  # the blob id of the record the index holds
    recent: dict[bytes, bytes]  # as ``FoundBits.recent``
    folders: dict[bytes, bytes]  # as ``FoundBits.folders``


_CACHE_MAGIC = b"maka-permissions-cache 1"


def index_checksum(index: Path) -> bytes | None:
    """The trailing checksum Git writes at the end of an index (over all of it); None when
    there is none."""
    try:
        with open(index, "rb") as handle:
            handle.seek(-20, os.SEEK_END)
            tail = handle.read(20)
    except OSError:
        return None
    return tail if len(tail) == 20 and tail != bytes(20) else None


def read_cached(cache: Path, index: Path) -> CachedBits | None:
    """The previous capture's findings when ``index`` is still the one it left, else None
    (a capture cut short, an index rebuilt or seeded, a cache damaged: the full pass)."""
    checksum = index_checksum(index)
    if checksum is None:
        return None
    try:
        data = cache.read_bytes()
    except OSError:
        return None
    head, _, body = data.partition(b"\n")
    fields = head.split(b" ")
    if len(fields) != 8 or b" ".join(fields[:2]) != _CACHE_MAGIC:
        return None
    digest, checked, staged, sizes = fields[2], fields[3], fields[4], fields[5:]
    if not _hex(checked) or bytes.fromhex(checked.decode()) != checksum:
        return None
    if not _hex(digest) or hashlib.sha1(body, usedforsecurity=False).hexdigest() != digest.decode():
        return None
    try:
        base_size, recent_size, folders_size = (int(size) for size in sizes)
    except ValueError:
        return None
    if base_size + recent_size + folders_size != len(body):
        return None
    base = body[:base_size]
    recent = body[base_size : base_size + recent_size]
    folders = body[base_size + recent_size :]
    return CachedBits(
        base,
        staged.decode("ascii", "replace"),
        {line[5:]: line[:4] for line in recent.split(b"\0") if line},
        {line[5:]: line[:4] for line in folders.split(b"\0") if line},
    )


def write_cached(cache: Path, index: Path, found: FoundBits, staged: str) -> None:
    """Keep ``found`` for the next capture, naming the index as it is now (after its last
    write by this capture). A cache that cannot be written only costs the next capture the
    full pass."""
    checksum = index_checksum(index)
    if checksum is None:
        cache.unlink(missing_ok=True)
        return
    recent = b"".join(bits + b" " + name + b"\0" for name, bits in (found.recent or {}).items())
    folders = b"".join(bits + b" " + name + b"\0" for name, bits in (found.folders or {}).items())
    body = found.record + recent + folders
    head = b" ".join(
        [
            _CACHE_MAGIC,
            hashlib.sha1(body, usedforsecurity=False).hexdigest().encode(),
            checksum.hex().encode(),
            staged.encode(),
            b"%d" % len(found.record),
            b"%d" % len(recent),
            b"%d" % len(folders),
        ]
    )
    scratch = cache.with_name(cache.name + ".new")
    try:
        with open(scratch, "wb", opener=private_opener) as out:
            out.write(head + b"\n" + body)
        os.replace(scratch, cache)
    except OSError:
        scratch.unlink(missing_ok=True)
        cache.unlink(missing_ok=True)


def _hex(text: bytes) -> bool:
    return bool(text) and all(c in b"0123456789abcdef" for c in text)


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
) -> str:
    """Put the record in ``index`` at ``.maka/permissions`` before its tree is written; an
    unchanged record is left as it is (Git's cached trees stay valid). Its blob id."""
    if staged is not None and staged == blob_id(record):
        return staged
    # Written as Git writes it, without a process start (Git does it in an unusual store).
    found = write_object(git_dir, "blob", record) if plain_repository(git_dir) else None
    if found is None:
        blob = runner.run(["hash-object", "-w", "--stdin"], git_dir=git_dir, stdin=record)
        found = blob.decode().strip()
    runner.run(
        ["update-index", "--add", "--cacheinfo", f"100644,{found},{RECORD_PATH}"],
        git_dir=git_dir,
        work_tree=folder,
        index=index,
    )
    return found


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
            found.append(TreeChange(shown_path(os.fsencode(name)), PathChange.MODIFIED))
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
