"""A checkpoint's commit and ref (and its permission record's blob) written without starting
``git`` (docs/design/workspace.md section 1): the last steps of every capture, done as Git does
them, in the private repository only, under the workspace lock every capture holds.

- The commit is a loose object: ``commit <size>\\0`` and the commit's text (its tree, the
  store's author and committer with the time and the local offset, a blank line, the message),
  named by its SHA-1, zlib-compressed, written to a temporary file in its object folder and
  linked into place (an object that is already there is left as it is).
- The ref is a loose ref file written through ``<ref>.lock`` (created exclusively, as Git's
  ``update-ref`` takes it, so a Git command updating the same ref at the same time fails
  instead of being overwritten), then renamed over the ref.

Anything out of the ordinary is left to Git (the caller runs ``commit-tree`` / ``update-ref``
instead): a repository whose configuration names another object format or ref storage, a ref
name outside ``refs/maka/`` or with a character Git would question, a ref whose name meets a
packed ref's folder or file, any error of the file system.

A loose object of the private repository found damaged (its bytes no longer hash to its name)
is moved aside, never deleted, into ``<repository>/maka-damaged/<object id>``
(``set_aside``): Git never writes an object again that it believes it has, so only once the
damaged one is gone can a capture write the right bytes again under that name. Only the
repository's own ``objects/`` folder is ever touched (never a borrowed store it reads through
``objects/info/alternates``, nor a pack).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
import zlib
from pathlib import Path

IDENTITY = "Maka <checkpoints@maka.invalid>"
DAMAGED_DIR = "maka-damaged"
"""Where a private repository keeps the loose objects found damaged, each under its id."""
STANDS_FOR = "maka-stands-for"
"""In a look's stand-in for a private repository: the path of the repository it reads (its
objects are the stand-in's alternate), so a loose object of that repository is told as its own."""
_COMPONENT = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}$")
_OBJECT_MODE = 0o400  # as Git leaves its objects under the store's umask (0077)
_DIR_MODE = 0o700


def compact_config(git_dir: Path) -> str | None:
    """The private repository's configuration, lower case, without blanks (what the checks
    of its settings read); None when it cannot be read."""
    try:
        config = (git_dir / "config").read_text("utf-8", "replace").lower()
    except OSError:
        return None
    return config.replace(" ", "").replace("\t", "")


def plain_repository(git_dir: Path, compact: str | None = None) -> bool:
    """Whether the private repository keeps SHA-1 objects and loose ref files (Git's
    defaults, which ``git init`` gave it): anything else is left to Git. ``compact``: its
    configuration as ``compact_config`` read it, when the caller has it."""
    if compact is None:
        compact = compact_config(git_dir)
    return compact is not None and "objectformat" not in compact and "refstorage" not in compact


def blob_id(body: bytes) -> str:
    """The id Git gives ``body`` as a blob (SHA-1 repositories)."""
    return hashlib.sha1(b"blob %d\0" % len(body) + body, usedforsecurity=False).hexdigest()


def write_commit(git_dir: Path, tree: str, message: str) -> str | None:
    """Write a parentless commit of ``tree`` with ``message`` (used verbatim, as ``git
    commit-tree -F -`` uses it); its id, or None when it could not be written."""
    offset = time.localtime().tm_gmtoff
    sign = "+" if offset >= 0 else "-"
    stamp = f"{int(time.time())} {sign}{abs(offset) // 3600:02d}{abs(offset) % 3600 // 60:02d}"
    body = (
        f"tree {tree}\nauthor {IDENTITY} {stamp}\ncommitter {IDENTITY} {stamp}\n\n{message}"
    ).encode()
    return write_object(git_dir, "commit", body)


def write_object(git_dir: Path, kind: str, body: bytes) -> str | None:
    """Write ``body`` as a loose object of ``kind`` (``blob``, ``commit``), as ``git
    hash-object -w`` does; its id, or None when it could not be written. An object the store
    already holds as a loose object is left as it is (never rewritten, never touched)."""
    data = b"%s %d\0" % (kind.encode(), len(body)) + body
    object_id = hashlib.sha1(data, usedforsecurity=False).hexdigest()
    target = loose_path(os.fsencode(git_dir / "objects"), object_id)
    if os.path.exists(target):
        return object_id
    return object_id if put_loose(target, data) else None


def loose_path(objects: bytes, object_id: str) -> bytes:
    """Where the object ``object_id`` lies loose in the object folder ``objects``."""
    return os.path.join(objects, object_id[:2].encode(), object_id[2:].encode())


def own_loose(git_dir: Path, object_id: str) -> bool:
    """Whether ``object_id`` lies loose in the private repository ``git_dir`` itself (so a
    check can move it aside), or, for a look's stand-in (``STANDS_FOR``), in the repository
    it stands for; never one read from a store it borrows (the user's ``.git``)."""
    folders = [git_dir]
    with contextlib.suppress(OSError, UnicodeDecodeError):
        folders.append(Path((git_dir / STANDS_FOR).read_text("utf-8").strip()))
    return any(
        os.path.isfile(loose_path(os.fsencode(folder / "objects"), object_id)) for folder in folders
    )


def loose_intact(path: bytes | str, object_id: str) -> bool | None:
    """Whether the loose object file at ``path`` inflates to bytes that hash to
    ``object_id`` (read a megabyte at a time); False when it does not or cannot be read
    whole (not zlib, cut short), None when there is no such file."""
    algorithm = hashlib.sha256 if len(object_id) == 64 else hashlib.sha1
    digest = algorithm(usedforsecurity=False)
    inflate = zlib.decompressobj()
    try:
        with open(path, "rb") as handle:
            while piece := handle.read(1 << 20):
                digest.update(inflate.decompress(piece))
                if inflate.eof:
                    break
            digest.update(inflate.flush())
    except FileNotFoundError:
        return None
    except (OSError, zlib.error):
        return False
    return inflate.eof and not inflate.unused_data and digest.hexdigest() == object_id


def header_matches(path: bytes, data: bytes) -> bool:
    """Whether the loose object file at ``path`` begins, once inflated, with the header of
    ``data`` (``<kind> <size>\\0``): one read of its first bytes, no more. Git names an
    object by the hash of its header and body, so a file of that name with another header
    holds other bytes (a blob swapped for one of another size or kind, a file that no longer
    inflates); the same header does not prove the body (``loose_intact`` does). True when
    the file cannot be opened: never a reason to move a good object."""
    head = data[: data.index(b"\0") + 1]
    try:
        with open(path, "rb") as handle:
            start = handle.read(512)
        return zlib.decompressobj().decompress(start, len(head)) == head
    except zlib.error:
        return False
    except OSError:
        return True


def moved_aside(git_dir: Path, object_id: str) -> Path | None:
    """Where the damaged loose object ``object_id`` was moved aside (``set_aside``), if it
    was."""
    aside = git_dir / DAMAGED_DIR
    if aside.is_symlink():  # a look's stand-in names the private repository's own folder
        aside = Path(os.readlink(aside))
    path = aside / object_id
    return path if os.path.lexists(path) else None


def set_aside(git_dir: Path, object_id: str) -> Path | None:
    """Move the repository's own loose object ``object_id`` into ``DAMAGED_DIR`` when it is
    there and its bytes do not hash to its name (checked again here, so a good object is
    never moved); where it went, or None when nothing was moved (no loose file of that name,
    or one that is intact). Call under the workspace lock: a capture then never stages
    between the move and the index it must start again from. Raises ``OSError``."""
    source = loose_path(os.fsencode(git_dir / "objects"), object_id)
    if loose_intact(source, object_id) is not False:
        return None
    aside = git_dir / DAMAGED_DIR
    with contextlib.suppress(FileExistsError):
        os.mkdir(aside, _DIR_MODE)
    target = aside / object_id
    n = 0
    while os.path.lexists(target):  # moved aside before and come back: both kept
        n += 1
        target = aside / f"{object_id}.{n}"
    try:
        os.rename(source, target)
    except FileNotFoundError:
        return None  # packed and pruned meanwhile (a ``gc`` runs outside the lock)
    return target


def put_loose(target: bytes, data: bytes) -> bool:
    """Write ``data`` (an object's header and body) zlib-compressed at ``target``, as Git
    writes a loose object: into a scratch file of the object's folder (made on its first
    object), then linked into place (an object written meanwhile is the same bytes). False
    when the file system refused."""
    folder = os.path.dirname(target)
    scratch = os.path.join(folder, b"tmp_obj_maka_%d_%d" % (os.getpid(), time.monotonic_ns()))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    try:
        try:
            descriptor = os.open(scratch, flags, _OBJECT_MODE)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, _DIR_MODE)
            descriptor = os.open(scratch, flags, _OBJECT_MODE)
        with os.fdopen(descriptor, "wb") as out:
            out.write(zlib.compress(data, 1))
        with contextlib.suppress(FileExistsError):
            os.link(scratch, target)
        return True
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(scratch)


def set_ref(git_dir: Path, ref: str, commit: str) -> bool:
    """Point ``ref`` at ``commit`` as ``git update-ref`` does with loose refs; False when the
    ref is left to Git (its name, a packed ref it would meet, an error)."""
    parts = ref.split("/")
    if (
        len(parts) < 3
        or parts[:2] != ["refs", "maka"]
        or not all(_COMPONENT.match(part) for part in parts[2:])
        or any(part.endswith(".lock") or ".." in part for part in parts)
    ):
        return False
    try:
        packed = (git_dir / "packed-refs").read_bytes()
    except FileNotFoundError:
        packed = b""
    except OSError:
        return False
    if packed:
        # A packed ref named like one of this ref's folders, or inside the ref's name as a
        # folder: Git would refuse; so does this.
        names = {line.split(b" ", 1)[1] for line in packed.splitlines() if b" refs/" in line}
        prefixes = {"/".join(parts[:n]).encode() for n in range(3, len(parts))}
        inside = ref.encode() + b"/"
        if names & prefixes or any(name.startswith(inside) for name in names):
            return False
    path = git_dir.joinpath(*parts)
    lock = path.with_name(path.name + ".lock")
    try:
        for n in range(2, len(parts)):
            git_dir.joinpath(*parts[:n]).mkdir(mode=_DIR_MODE, exist_ok=True)
        descriptor = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return False
    try:
        with os.fdopen(descriptor, "wb") as out:
            out.write(commit.encode() + b"\n")
        os.replace(lock, path)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            lock.unlink()
        return False
