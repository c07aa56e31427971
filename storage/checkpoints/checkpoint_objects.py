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
_COMPONENT = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}$")
_OBJECT_MODE = 0o400  # as Git leaves its objects under the store's umask (0077)
_DIR_MODE = 0o700


def plain_repository(git_dir: Path) -> bool:
    """Whether the private repository keeps SHA-1 objects and loose ref files (Git's
    defaults, which ``git init`` gave it): anything else is left to Git."""
    try:
        config = (git_dir / "config").read_text("utf-8", "replace").lower()
    except OSError:
        return False
    compact = config.replace(" ", "").replace("\t", "")
    return "objectformat" not in compact and "refstorage" not in compact


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
    folder = git_dir / "objects" / object_id[:2]
    target = folder / object_id[2:]
    if target.exists():
        return object_id
    scratch = folder / f"tmp_obj_maka_{os.getpid()}_{time.monotonic_ns()}"
    try:
        folder.mkdir(mode=_DIR_MODE, exist_ok=True)
        descriptor = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _OBJECT_MODE)
        with os.fdopen(descriptor, "wb") as out:
            out.write(zlib.compress(data, 1))
        with contextlib.suppress(FileExistsError):  # written meanwhile: the same bytes
            os.link(scratch, target)
        return object_id
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            scratch.unlink()


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
