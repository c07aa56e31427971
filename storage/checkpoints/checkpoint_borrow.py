"""Borrowing what the user's Git already knows, read-only (docs/design/workspace.md section 1).

The first capture of a big folder hashes and compresses every file into the private repository.
When the folder is a Git repository, the user's Git has already done most of that work: its
index holds the stat data and object name of every tracked file, and its object store holds the
objects. So the first capture of such a folder:

- **seeds** the private index with a copy of the user's ``.git/index`` (read, never written; the
  copy keeps the original's modification time, so Git's racy-entry rule reads it as it reads the
  original), and then lists, stages and writes only what differs from it, as every capture does
  (a folder inside a repository, a package of a monorepo, is seeded with the repository's
  entries under it, named from the folder: ``checkpoint_subindex``; a linked worktree's or a
  submodule's ``.git`` file is followed to its index and objects);
- **borrows** the user's object store: the private repository names it in
  ``objects/info/alternates``, so the objects of unchanged files are read from there, never
  hashed or written again.

A seed is refused (the capture then starts from an empty index, as before) when the user's
index holds anything a snapshot could not take as it is: an unmerged entry, a submodule, a
``skip-worktree`` or ``assume-unchanged`` entry (Git would not look at those files), a split
index, a partial clone, another object format, or a ``filter`` / ``ident`` /
``working-tree-encoding`` attribute (the blob is not the file's bytes). With line-ending
conversion configured anywhere the user's Git reads, each entry whose recorded size differs from
its blob's is staged again from the folder.

The user's ``.git`` is only read: no Git command runs with it as its repository, and nothing is
written there, not even a file's time. Git, asked to write an object an alternate already holds,
sets the time of the user's file that holds it ("freshens" it); so while a store borrows, a file
whose object a store holds is staged without writing (``stage_held``: ``--info-only``, checked
after), and trees are written into an object folder of the store's own, which it reads as a
second alternate until it is self-contained (``write_tree``); the trees the user's index holds
valid are copied there first (``start_tree_copy``), so that only changed folders' are written.

A borrowed object must never be lost to the user's ``git gc``, a history rewrite or the
repository's deletion, so the store makes itself **self-contained** (``absorb``) soon after:
every object its refs and its index reach that it does not hold itself (loose, or in a pack of
its own: a copy an earlier process made counts) is copied in as one pack (``pack-objects``: the
user's packed data reused as it is, loose objects compressed fast), and only then, under the
workspace lock, is the alternate removed; it is put back should anything the store could read
with it be missing without it. Absorption starts in the background after each capture of a
borrowing store, and retention absorbs before it prunes. Until then a snapshot whose borrowed
object the user pruned reads missing (``has_snapshot`` walks every object), never restored wrong.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from runtime.ledger.checkpoint_ports import CheckpointError
from runtime.ledger.codes import CheckpointFailureCode
from runtime.ledger.crash_points import CrashPoint, failpoint
from storage.checkpoints.checkpoint_enclosing import enclosing_top, git_dirs
from storage.checkpoints.checkpoint_git import GitRunner, Started
from storage.checkpoints.checkpoint_objects import blob_id
from storage.checkpoints.checkpoint_subindex import (
    SIGNATURE,
    SPARSE_EXTENSION,
    read_entries,
    sub_index,
)
from storage.private_files import private_opener

ALTERNATES = Path("objects") / "info" / "alternates"
TREES_SCRATCH = "trees.scratch"
_GITLINK = b"160000"
_ATTRIBUTES = b".gitattributes"
_PACK_INDEX_V2 = b"\377tOc\0\0\0\2"
_PACK_NAMES_AT = 8 + 256 * 4  # after the magic, the version and the fan-out table
ALTERNATES_ASIDE = "alternates.absorbing"
# An index's cache of trees: its signature and size, then the root folder's line (an empty
# path, its entry count, its number of subtrees).
_TREE_EXTENSION = re.compile(rb"TREE(.{4})(?=\0(?:-1|\d+) \d+\n)", re.S)


@dataclass(frozen=True, slots=True)
class UserRepository:
    """What a seed reads of the folder's own Git: the index of the folder's work tree (in
    ``git_dir``), and the folder holding the object store, the configuration and ``info``
    (``common``: the main repository's ``.git`` for a linked worktree, else ``git_dir``)."""

    git_dir: Path
    common: Path

    @property
    def configs(self) -> list[Path]:
        """The repository's configuration files (a worktree's own one too, if any)."""
        return [self.common / "config", self.git_dir / "config.worktree"]


def user_repository(folder: Path) -> UserRepository | None:
    """The folder's own repository when it is a plain one: a ``.git`` folder, or the ``.git``
    file of a linked worktree or a submodule naming one (``git_dirs``), with an index and an
    object store of SHA-1 objects; None otherwise (no repository, a bare or odd layout, another
    object format, a partial clone)."""
    found = git_dirs(folder)
    if found is None:
        return None
    user = UserRepository(*found)
    try:
        if not (user.git_dir / "index").is_file() or not (user.common / "objects").is_dir():
            return None
        config = "".join(_read_text(path) for path in user.configs).lower()
        promisor = any((user.common / "objects" / "pack").glob("*.promisor"))
    except OSError:
        return None
    compact = config.replace(" ", "").replace("\t", "")
    if "objectformat" in compact:
        return None  # another object format than the private repository's
    if "partialclone" in compact or promisor:
        return None  # a partial clone: objects its index names may not be there
    return user


def enclosing_repository(folder: Path) -> tuple[UserRepository, Path] | None:
    """The repository whose work tree holds ``folder`` below its top (a package of a
    monorepo), with that top; None when the folder has a ``.git`` of its own, or no folder
    above it has one (``enclosing_top``), or that one is not a plain repository
    (``user_repository``)."""
    top = enclosing_top(Path(os.path.abspath(folder)))
    if top is None:
        return None
    user = user_repository(top)
    return None if user is None else (user, top)


def _attributes_above(top: Path, folder: Path) -> list[str]:
    """The ``.gitattributes`` files of the repository's folders from its top down to the
    folder's parent (they apply to the folder's files in the user's Git too)."""
    found: list[str] = []
    here = top
    for part in folder.relative_to(top).parts:
        if (here / ".gitattributes").is_file():
            found.append(str(here / ".gitattributes"))
        here = here / part
    return found


def _read_text(path: Path) -> str:
    try:
        return path.read_text("utf-8", "replace")
    except FileNotFoundError:
        return ""


def borrowed_from(git_dir: Path) -> Path | None:
    """The object store the private repository borrows from, if any."""
    try:
        text = (git_dir / ALTERNATES).read_text("utf-8").strip()
    except OSError:
        return None
    return Path(text.splitlines()[0]) if text else None


@dataclass(frozen=True, slots=True)
class Seeded:
    """What a seed made: the user's index as ``ls-files -z -s -v`` lists it (every entry
    ``H <mode> <object> 0``) and the entries then left out (stored converted: the staging
    adds them again from the folder)."""

    listing: bytes
    left_out: frozenset[bytes]
    trees: tuple[str, ...]
    # The file system's clock when the copy was written (its mtime before the original's
    # was set on it): what a look at the folder made right after the seed counts as recent
    # is reckoned from it, not from the time the user's Git last wrote its index.
    written_ns: int


def seed(runner: GitRunner, folder: Path, git_dir: Path, index: Path) -> Seeded | None:
    """Seed the (missing) private ``index`` from the user's and borrow their object store;
    None when no seed was made. Never raises for the user's side: a seed that cannot be made
    leaves no index and borrows nothing."""
    if index.exists():
        return None
    user, top = user_repository(folder), None
    if user is None:
        enclosing = enclosing_repository(folder)
        if enclosing is None:
            return None
        user, top = enclosing
    scratch = index.with_name(index.name + ".seed")
    try:
        info = os.stat(user.git_dir / "index")
        with open(user.git_dir / "index", "rb") as source:
            data = source.read()
        if not data.startswith(SIGNATURE):
            return None
        if SPARSE_EXTENSION in data:
            # A sparse index (a folder a sparse checkout leaves out is one entry): without
            # the user's objects the listing below leaves such folders out and shows every
            # entry plain, and with them they come back as skip-worktree entries the staging
            # never looks at, so the snapshots would hold files the folder does not have.
            # The signature is looked for anywhere (a name holding it only costs the seed).
            return None
        if top is not None:
            # A folder inside the repository: its part of the index, named from the folder
            # (not of a split index: most of its entries are in a shared file).
            if any(user.git_dir.glob("sharedindex.*")) or any(user.common.glob("sharedindex.*")):
                return None
            inside = os.fsencode(Path(os.path.abspath(folder)).relative_to(top).as_posix())
            inside += b"/"
            part = sub_index(data, inside)
            if part is None:
                return None
            data = part
        with open(scratch, "wb", opener=private_opener) as copy:
            copy.write(data)
            copy.flush()
            written_ns = os.fstat(copy.fileno()).st_mtime_ns
        # The original's time: Git's racy-entry rule compares entries with the index's mtime.
        os.utime(scratch, ns=(info.st_atime_ns, info.st_mtime_ns))
        # A split index (its shared part is not in the private repository) or a sparse one
        # (folders as entries) fails or shows skip-worktree entries here: refused below.
        listed = runner.run(["ls-files", "-z", "-s", "-v"], git_dir=git_dir, index=scratch)
    except (OSError, CheckpointError):
        scratch.unlink(missing_ok=True)
        return None
    above = [] if top is None else _attributes_above(top, Path(os.path.abspath(folder)))
    conversions = (
        _conversions(folder, user, [*above, *_attributes_paths(listed)])
        if _only_plain_entries(listed)
        else _REFUSE  # Git would not look at some file as a capture must
    )
    if conversions == _REFUSE:
        scratch.unlink(missing_ok=True)
        return None
    converted: list[bytes] | None = []
    try:
        alternates = git_dir / ALTERNATES
        alternates.parent.mkdir(parents=True, exist_ok=True)
        with open(alternates, "w", encoding="utf-8", opener=private_opener) as out:
            out.write(os.path.realpath(user.common / "objects") + "\n")
        if conversions == _SIZES:
            converted = _converted(runner, git_dir, scratch, _blobs(listed))
            if converted is None:
                raise OSError("the index's sizes cannot be read")
            if converted:
                # Stored converted (line endings): staged again from the folder, as they are.
                runner.remove_from_index(
                    converted, git_dir=git_dir, work_tree=folder, index=scratch
                )
        os.replace(scratch, index)
    except (OSError, CheckpointError):
        scratch.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            (git_dir / ALTERNATES).unlink()
        return None
    return Seeded(listed, frozenset(converted or ()), tuple(cached_trees(data)), written_ns)


def cached_trees(data: bytes) -> list[str]:
    """The trees an index's cache of trees (its ``TREE`` extension) holds as valid: for each
    folder whose entries are unchanged since its tree was written, that tree's object id.
    Found by its shape after the entries (a version 4 index compresses names, so the search
    starts where the shortest entries would end); [] when there is none, or nothing parses.
    What it names is only ever copied (``start_tree_copy``): Git reads the cache itself."""
    try:
        signature, version, count = struct.unpack_from(">4sLL", data, 0)
    except struct.error:
        return []
    if signature != SIGNATURE or version not in (2, 3, 4):
        return []
    end = len(data) - 20  # the index's checksum
    for found in _TREE_EXTENSION.finditer(data, 12 + 62 * count, end):
        size = int.from_bytes(found.group(1), "big")
        if found.end() + size <= end:
            ids = _tree_ids(data[found.end() : found.end() + size])
            if ids is not None:
                return ids
    return []


def _tree_ids(body: bytes) -> list[str] | None:
    """The valid trees of a ``TREE`` extension's body (each folder: its path, NUL, "<entries>
    <subtrees>" and a newline, then, unless <entries> is -1, its tree's 20 bytes); None when
    the body is not that."""
    ids: list[str] = []
    at = 0
    try:
        while at < len(body):
            path_end = body.index(b"\0", at)
            line = body.index(b"\n", path_end)
            entries, subtrees = body[path_end + 1 : line].split(b" ")
            if not subtrees.isdigit() or not entries.lstrip(b"-").isdigit():
                return None
            at = line + 1
            if int(entries) >= 0:
                if at + 20 > len(body):
                    return None
                ids.append(body[at : at + 20].hex())
                at += 20
    except ValueError:
        return None
    return ids


def start_tree_copy(runner: GitRunner, git_dir: Path, trees: Sequence[str]) -> Started | None:
    """Start copying the user's ``trees`` (``cached_trees`` of the seeded index) into the
    store's folder of trees as one pack, beside the staging: ``write_tree`` then finds every
    folder the capture left unchanged there and writes only the others (about 100 trees at
    10,000 files), instead of writing every folder's tree. Read from the user's store, as
    absorption reads it; nothing is written there. None: nothing to copy (or no process),
    and ``write_tree`` writes every tree as before."""
    if not trees:
        return None
    pack = git_dir / TREES_SCRATCH / "objects" / "pack"
    try:
        pack.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    started = runner.start_ahead(
        ["pack-objects", "-q", "--window=0", "--compression=1", str(pack / "pack")],
        git_dir=git_dir,
    )
    if started is not None:
        started.give("".join(f"{tree}\n" for tree in trees).encode())
    return started


def _only_plain_entries(listed: bytes) -> bool:
    """Whether every entry of an ``ls-files -z -s -v`` listing is tagged ``H`` (not
    ``skip-worktree`` ``S``, ``assume-unchanged`` ``h`` or unmerged ``M``: Git would not look
    at such a file as a capture must) and none is a submodule. Read over the bytes: a name
    holds no NUL, so each entry but the first starts right after one."""
    if not listed:
        return True
    if not listed.startswith(b"H ") or not listed.endswith(b"\0"):
        return False
    if listed.count(b"\0H ") != listed.count(b"\0") - 1:
        return False
    gitlink = b"H " + _GITLINK + b" "
    return not (listed.startswith(gitlink) or b"\0" + gitlink in listed)


def _attributes_paths(listed: bytes) -> list[str]:
    """The ``.gitattributes`` files an ``ls-files -z -s`` listing names (``-v`` or not)."""
    found: list[str] = []
    suffix = _ATTRIBUTES + b"\0"
    at = listed.find(suffix)
    while at != -1:
        end = at + len(_ATTRIBUTES)
        name = listed[listed.rfind(b"\0", 0, at) + 1 : end].partition(b"\t")[2]
        if name == _ATTRIBUTES or name.endswith(b"/" + _ATTRIBUTES):
            found.append(os.fsdecode(name))
        at = listed.find(suffix, end)
    return found


def _blobs(listed: bytes) -> dict[bytes, str]:
    """Each entry's object of an ``ls-files -z -s -v`` listing."""
    found: dict[bytes, str] = {}
    for raw in listed.split(b"\0"):
        meta, _, name = raw.partition(b"\t")
        fields = meta.split(b" ")
        if len(fields) == 4:
            found[name] = fields[2].decode("ascii", "replace")
    return found


_REFUSE = "refuse"
_SIZES = "sizes"
_CONVERTING_CONFIG = re.compile(r"^\s*(autocrlf|eol|attributesfile)\s*=\s*(.*?)\s*$", re.I | re.M)
_FILTERING = re.compile(rb"(?<![\w-])(filter|ident|working-tree-encoding)(?![\w-])")
_LINE_ENDINGS = re.compile(rb"(?<![\w-])(text|eol|crlf)(?![\w-])")


def _conversions(folder: Path, user: UserRepository, attributes_files: list[str]) -> str | None:
    """Whether the user's Git may have stored the index's files converted, so that a blob the
    index names is not the file's bytes: ``refuse`` (a filter, ``ident`` or an encoding: no
    seed), ``sizes`` (line endings: each entry whose recorded size differs from its blob's is
    staged again from the folder) or None (no conversion: the seed is used as it is). Read from
    the repository's, the user's and the system's configuration and attribute files, with
    ``attributes_files`` (the index's ``.gitattributes`` paths, relative to ``folder``)
    (conservatively: any mention counts; on Windows, where Git's own installation may convert
    line endings, always ``sizes``)."""
    home = Path(os.path.expanduser("~"))
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "git"
    configs = [*user.configs, home / ".gitconfig", xdg / "config", Path("/etc/gitconfig")]
    attributes = [user.common / "info" / "attributes", xdg / "attributes"]
    attributes += [folder / name for name in attributes_files]
    line_endings = sys.platform == "win32"
    for config in configs:
        try:
            text = config.read_text("utf-8", "replace")
        except OSError:
            continue
        for key, value in _CONVERTING_CONFIG.findall(text):
            if key.lower() == "attributesfile":
                attributes.append(Path(os.path.expanduser(value.strip('"'))))
            elif not (key.lower() == "autocrlf" and value.lower() == "false"):
                line_endings = True
    for path in attributes:
        try:
            lines = path.read_bytes().splitlines()
        except OSError:
            continue
        for line in lines:
            if line.lstrip().startswith(b"#"):
                continue
            if _FILTERING.search(line):
                return _REFUSE
            if _LINE_ENDINGS.search(line):
                line_endings = True
    return _SIZES if line_endings else None


def _converted(
    runner: GitRunner, git_dir: Path, index: Path, blobs: dict[bytes, str]
) -> list[bytes] | None:
    """The entries whose file size the index recorded differs from their blob's size (the
    file was stored converted); None when the sizes cannot be read."""
    sizes = _recorded_sizes(index)
    if sizes is None:
        return None
    ids = sorted(set(blobs.values()))
    query = "".join(f"{oid}\n" for oid in ids).encode()
    out = runner.run(
        ["cat-file", "--batch-check=%(objectname) %(objectsize)"], git_dir=git_dir, stdin=query
    )
    stored: dict[str, int] = {}
    for line in out.decode().splitlines():
        oid, _, size = line.partition(" ")
        if size.isdigit():
            stored[oid] = int(size)
    return [name for name, oid in blobs.items() if stored.get(oid) != sizes.get(name)]


def _recorded_sizes(index: Path) -> dict[bytes, int] | None:
    """Each entry's size as the index records it (32 bits: a file of 4 GiB or more reads
    small, but such a folder is over the size budget and never captured); None for an index
    that ``read_entries`` does not read."""
    try:
        entries = read_entries(index.read_bytes())
    except OSError:
        return None
    if entries is None:
        return None
    return {entry.name: int.from_bytes(entry.stat[36:40], "big") for entry in entries}


def stage_held(
    runner: GitRunner, folder: Path, git_dir: Path, index: Path, names: list[bytes]
) -> list[bytes]:
    """In a store that borrows, stage without writing the files whose objects a store already
    holds (a copy of a tracked file, an empty file, a file staged then changed back): Git,
    asked to write an object an alternate holds, sets the modification time of the user's file
    that holds it ("freshens" it). They are staged ``--info-only`` (their stat data and object
    name, nothing written), then checked: an entry whose object is not held after all (the
    file changed meanwhile) is left for the ordinary staging. Returns the names to stage that
    way."""
    ids: dict[bytes, str] = {}
    for raw in names:
        path = folder / os.fsdecode(raw)
        try:
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                ids[raw] = blob_id(os.fsencode(os.readlink(path)))
            elif stat.S_ISREG(info.st_mode):
                ids[raw] = _file_blob_id(path, info.st_size)
        except OSError:
            continue  # gone meanwhile: the ordinary staging reports it
    if not ids:
        return names
    absent = _missing(runner, git_dir, sorted(set(ids.values())))
    held = [raw for raw, oid in ids.items() if oid not in absent]
    if not held:
        return names
    runner.run(
        ["update-index", "-z", "--add", "--replace", "--info-only", "--stdin"],
        git_dir=git_dir,
        work_tree=folder,
        index=index,
        stdin=b"\0".join(held) + b"\0",
    )
    recorded = _index_ids(runner, git_dir, index)
    named = {recorded[raw] for raw in held if raw in recorded}
    gone = _missing(runner, git_dir, sorted(named))
    # An entry naming an object no store holds (the file changed meanwhile) is staged again,
    # written this time.
    done = {raw for raw in held if raw in recorded and recorded[raw] not in gone}
    return [raw for raw in names if raw not in done]


def _index_ids(runner: GitRunner, git_dir: Path, index: Path) -> dict[bytes, str]:
    listed = runner.run(["ls-files", "-z", "-s"], git_dir=git_dir, index=index)
    found: dict[bytes, str] = {}
    for raw in listed.split(b"\0"):
        if raw:
            meta, _, name = raw.partition(b"\t")
            found[name] = meta.split(b" ")[1].decode()
    return found


def write_tree(
    runner: GitRunner, git_dir: Path, index: Path, *, copying: Started | None = None
) -> str:
    """``write-tree`` in a store that borrows, without asking Git to write a tree a store
    already holds (a folder staged, then changed back; see ``stage_held``): the trees are
    written from a copy of the index into an object folder of their own (``trees.scratch``,
    no alternate there), which the store reads as its second alternate until it is
    self-contained (``absorb`` copies its trees in with the borrowed objects, then removes
    it); a tree the user's store holds too is a small duplicate there. The copy, its cache of
    trees brought up to date, then replaces the index. (The trees are not moved into the
    store's own object folder: one folder and one file fewer per tree.) ``copying``, the
    user's trees being copied into that folder (``start_tree_copy``), is waited for first;
    had it failed, every tree is written."""
    if copying is not None:
        with contextlib.suppress(CheckpointError):
            copying.finish(None)
    scratch = git_dir / TREES_SCRATCH
    objects = scratch / "objects"
    objects.mkdir(parents=True, exist_ok=True)
    _read_as_alternate(git_dir, objects)
    copy = scratch / "index"
    shutil.copyfile(index, copy)
    tree = (
        runner.with_objects(objects)
        .run(["write-tree", "--missing-ok"], git_dir=git_dir, index=copy)
        .decode()
        .strip()
    )
    os.replace(copy, index)
    return tree


def _read_as_alternate(git_dir: Path, objects: Path) -> None:
    """Name ``objects`` in the store's alternates (after the user's store, which
    ``borrowed_from`` reads first) unless it is named there already."""
    alternates = git_dir / ALTERNATES
    lines = alternates.read_text("utf-8").splitlines()
    line = os.path.realpath(objects)
    if line in lines:
        return
    scratch = alternates.with_name("alternates.new")
    with open(scratch, "w", encoding="utf-8", opener=private_opener) as out:
        out.write("".join(f"{name}\n" for name in [*lines, line]))
    os.replace(scratch, alternates)


def _file_blob_id(path: Path, size: int) -> str:
    digest = hashlib.sha1(b"blob %d\0" % size, usedforsecurity=False)
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


_EVERY_OBJECT = ("rev-list", "--objects", "--no-object-names", "--all", "--missing=print")
"""Every object the refs reach, ids only (a name may hold any byte), a missing one as ``?id``."""


def needed_objects(runner: GitRunner, git_dir: Path, index: Path | None) -> list[str]:
    """Every object the private repository's refs reach, and the blobs its index names."""
    out = runner.run(list(_EVERY_OBJECT), git_dir=git_dir)
    found = {line.split(" ", 1)[0] for line in out.decode().splitlines() if line[:1] not in "?"}
    found.update(_index_blobs(runner, git_dir, index))
    return sorted(found)


def _index_blobs(runner: GitRunner, git_dir: Path, index: Path | None) -> list[str]:
    """The blobs ``index`` names (none without one)."""
    if index is None or not index.is_file():
        return []
    listed = runner.run(["ls-files", "-z", "-s"], git_dir=git_dir, index=index)
    return sorted({raw.split(b" ", 2)[1].decode() for raw in listed.split(b"\0") if raw})


def copy_borrowed(runner: GitRunner, git_dir: Path, objects: list[str]) -> set[str]:
    """Copy into the private store, as one new pack, each of ``objects`` it does not hold
    itself (loose, or in a pack of its own); returns the objects it now holds itself. The pack
    reuses the packed data of the user's store as it is and compresses loose objects fast
    (level 1, no delta search): a copy of the tree, not an archive (retention's ``gc`` packs it
    well)."""
    local = git_dir / "objects"
    # Held already: in a pack of the store's own (an absorption interrupted after its copy, a
    # process that ended before its absorption did, retention's ``gc``) or loose.
    packed = own_packed(local / "pack")
    mine = {oid for oid in objects if oid in packed or (local / oid[:2] / oid[2:]).exists()}
    to_pack = [oid for oid in objects if oid not in mine]
    if to_pack:
        # Only what some store still holds (an object the user pruned before it was copied is
        # gone everywhere: the snapshots naming it read missing either way).
        to_pack = sorted(set(to_pack) - _missing(runner, git_dir, to_pack))
    if to_pack:
        runner.run(
            [
                "-c",
                "pack.compression=1",
                "pack-objects",
                "-q",
                "--window=0",
                str(local / "pack" / "pack"),
            ],
            git_dir=git_dir,
            stdin="".join(f"{oid}\n" for oid in to_pack).encode(),
        )
    return mine | set(to_pack)


def own_packed(pack_dir: Path) -> set[str]:
    """The objects of the packs in ``pack_dir`` (the store's own ``objects/pack``, never an
    alternate's), read from their index files (version 2, what Git writes; a pack whose data
    file is missing, or an index that is not whole, counts for nothing). A pack that a ``gc``
    removes meanwhile counts for nothing too; whatever is counted here, ``absorb`` still proves
    the store whole without the alternate before it stops borrowing."""
    found: set[str] = set()
    try:
        names = os.listdir(pack_dir)
    except OSError:
        return found
    for name in names:
        if not name.endswith(".idx") or not (pack_dir / f"{name[:-4]}.pack").is_file():
            continue
        try:
            data = (pack_dir / name).read_bytes()
        except OSError:
            continue
        if not data.startswith(_PACK_INDEX_V2) or len(data) < _PACK_NAMES_AT:
            continue
        (count,) = struct.unpack_from(">I", data, _PACK_NAMES_AT - 4)
        end = _PACK_NAMES_AT + 20 * count
        if len(data) < end + 8 * count + 40:  # names, CRCs, offsets, the two checksums
            continue
        names_bytes = data[_PACK_NAMES_AT:end]
        found.update(names_bytes[at : at + 20].hex() for at in range(0, len(names_bytes), 20))
    return found


def _missing(runner: GitRunner, git_dir: Path, objects: list[str]) -> set[str]:
    if not objects:
        return set()
    query = "".join(f"{oid}\n" for oid in objects).encode()
    out = runner.run(["cat-file", "--batch-check"], git_dir=git_dir, stdin=query)
    return {
        line.split(" ", 1)[0] for line in out.decode().splitlines() if line.endswith(" missing")
    }


def _unreadable(runner: GitRunner, git_dir: Path, index: Path | None) -> set[str]:
    """What the refs reach and the index names that the repository cannot read now."""
    out = runner.run(list(_EVERY_OBJECT), git_dir=git_dir)
    gone = {line[1:].split(" ", 1)[0] for line in out.decode().splitlines() if line[:1] == "?"}
    return gone | _missing(runner, git_dir, _index_blobs(runner, git_dir, index))


def absorb(
    runner: GitRunner,
    git_dir: Path,
    index: Path | None,
    *,
    locked: contextlib.AbstractContextManager[None],
) -> bool:
    """Make the private repository self-contained and stop borrowing (see the module's
    docstring); True when it borrows nothing any more. Raises ``CheckpointError`` when Git
    fails (the alternate then stays)."""
    source = borrowed_from(git_dir)
    if source is None:
        return True
    # Most of the copy without the lock: captures go on meanwhile; under it, what they added.
    held = copy_borrowed(runner, git_dir, needed_objects(runner, git_dir, index))
    failpoint(CrashPoint.ABSORB_AFTER_COPY)
    with locked:
        if borrowed_from(git_dir) is None:
            return True
        later = [oid for oid in needed_objects(runner, git_dir, index) if oid not in held]
        copy_borrowed(runner, git_dir, later)
        alternates = git_dir / ALTERNATES
        # An object gone from both stores (the user pruned it before it was copied) is missing
        # either way: the alternate is dropped when it no longer provides anything.
        gone_before = _unreadable(runner, git_dir, index)
        aside = alternates.with_name(ALTERNATES_ASIDE)
        os.replace(alternates, aside)
        failpoint(CrashPoint.ABSORB_ALTERNATE_ASIDE)
        try:
            whole = _unreadable(runner, git_dir, index) <= gone_before
        except CheckpointError:
            whole = False
        if not whole:
            os.replace(aside, alternates)
            raise CheckpointError(
                CheckpointFailureCode.CHECKPOINT_GIT_FAILED,
                "the checkpoint store still needs objects of the folder's own repository",
            )
        aside.unlink()
        failpoint(CrashPoint.ABSORB_ALTERNATE_REMOVED)
        shutil.rmtree(git_dir / TREES_SCRATCH, ignore_errors=True)
        if gone_before and index is not None and _index_names_missing(runner, git_dir, index):
            # Entries of the index name objects nothing holds now: a file whose stat data did
            # not change is never hashed again, so the next capture would name them too.
            # Without the index it hashes every file (or seeds again where the folder's
            # repository now is, and borrows from there). (Only the index's own: objects
            # only old snapshots reached are missing for good, and dropping the index for
            # them would make every later capture a first one.)
            index.unlink(missing_ok=True)
        return True


def _index_names_missing(runner: GitRunner, git_dir: Path, index: Path) -> bool:
    try:
        return bool(_missing(runner, git_dir, _index_blobs(runner, git_dir, index)))
    except CheckpointError:
        return True


def follow_the_folder(runner: GitRunner, git_dir: Path, index: Path, folder: Path) -> bool:
    """Before a capture (under the workspace lock): when the object store the private
    repository borrows from is no longer where it was (the folder was moved or renamed before
    absorption finished, or its ``.git`` deleted), borrow from the folder's repository where it
    is now; True when the private index cannot be trusted any more and must go (the next
    capture then hashes every file again). An object is named by its content, so any store
    that holds it serves; the index's entries are checked against the store as it then reads,
    because a file whose stat data did not change (a ``mv`` keeps it) is never hashed again,
    and its entry would otherwise name a blob nothing holds, in a snapshot recorded as taken."""
    source = borrowed_from(git_dir)
    if source is None or source.is_dir():
        return False
    user = user_repository(folder)
    if user is None:
        enclosing = enclosing_repository(folder)
        user = enclosing[0] if enclosing is not None else None
    objects = user.common / "objects" if user is not None else None
    if objects is None or not objects.is_dir():
        return True
    alternates = git_dir / ALTERNATES
    lines = alternates.read_text("utf-8").splitlines()
    lines[0] = os.path.realpath(objects)
    scratch = alternates.with_name("alternates.new")
    with open(scratch, "w", encoding="utf-8", opener=private_opener) as out:
        out.write("".join(f"{line}\n" for line in lines))
    os.replace(scratch, alternates)
    return _index_names_missing(runner, git_dir, index)


def settle_interrupted_absorption(git_dir: Path) -> None:
    """Put right what a process killed inside ``absorb`` left behind (under the workspace lock,
    where no absorption runs): an alternate set aside while the store was being proven whole
    without it is named again (the proof never finished; the next capture absorbs again), and
    the folder of trees of a store that borrows nothing any more (its trees were copied in
    before the alternate went) is removed."""
    alternates = git_dir / ALTERNATES
    aside = alternates.with_name(ALTERNATES_ASIDE)
    if aside.exists():
        if alternates.exists():
            aside.unlink()
        else:
            os.replace(aside, alternates)
    scratch = git_dir / TREES_SCRATCH
    if scratch.exists() and not alternates.exists():
        shutil.rmtree(scratch, ignore_errors=True)
