"""Checking a snapshot's stored bytes against its recorded tree (docs/design/workspace.md section
4).

Git names every object by the hash of its content but does not re-hash what it reads, so a blob
swapped in a private repository would land in a restored copy unnoticed. Before a restore
writes anything, and when ``maka doctor --verify-snapshots`` asks, every object under the
snapshot's tree (the tree itself, each folder, each file) is read once (``cat-file --batch``,
streamed: never the whole snapshot in memory) and hashed again; any object whose content does
not hash to its name, or that is gone, makes the snapshot damaged.

What a check finds damaged is not left to spread (``set_damaged_aside``, under the workspace
lock): Git never writes an object again that it believes it has, and the private index names
the objects of unchanged files, so every later capture would reuse a damaged object and be
damaged too. Each damaged loose object of the repository's own object folder is moved aside
(``checkpoint_objects.set_aside``: kept, never deleted), and the caller makes the next capture
stage the folder from the start, which writes every object it lacks from the folder's bytes:
the snapshots that named a moved object are whole and right again once a capture has found
those bytes in the folder (an object's name is the hash of its content). A damaged object in
a pack, or in a store the repository borrows from, is left where it is and said so.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TypeVar

from runtime.ledger.checkpoint_ports import CheckpointError
from runtime.ledger.codes import CheckpointFailureCode
from storage.checkpoints.checkpoint_empty_dirs import shown_path
from storage.checkpoints.checkpoint_git import GitRunner
from storage.checkpoints.checkpoint_objects import (
    DAMAGED_DIR,
    moved_aside,
    own_loose,
    set_aside,
)
from storage.checkpoints.checkpoint_presence import batch_trees, corrupt_object, tree_entries

_log = logging.getLogger(f"maka.{__name__}")  # the host logs "maka" to its log file

_T = TypeVar("_T")

_PIECE = 1 << 20  # read and hashed a megabyte at a time


@dataclass(frozen=True, slots=True)
class DamagedObject:
    object_id: str
    path: str  # "" for the snapshot's own tree
    missing: bool  # gone, and no bytes of it kept (else: other bytes under its name)
    # Where its (other) bytes lie now when they were moved aside as damaged, by this check
    # or an earlier one; "" when they were not.
    moved_to: str = ""
    # Damaged where it cannot be moved aside: not a loose object of the repository's own
    # (packed, or read from a store it borrows), so a capture cannot write it again.
    packed: bool = False


@dataclass(frozen=True, slots=True)
class TreeCheck:
    """One snapshot tree checked: every object under it with its path (``tree_objects``), and
    those missing or not hashing to their names (empty: the bytes are what it recorded)."""

    objects: list[tuple[str, str]]
    damaged: list[DamagedObject]


def verify_trees(
    runner: GitRunner, git_dir: Path, trees: Iterable[str]
) -> dict[str, list[DamagedObject]]:
    """For each tree id, the objects under it that are missing or do not hash to their name
    (an empty list: the snapshot's bytes are what it recorded)."""
    return {tree: check.damaged for tree, check in check_trees(runner, git_dir, trees).items()}


def check_trees(runner: GitRunner, git_dir: Path, trees: Iterable[str]) -> dict[str, TreeCheck]:
    """Each tree checked (``TreeCheck``); objects shared between the trees are read once."""
    wanted = {tree: tree_objects(runner, git_dir, tree) for tree in dict.fromkeys(trees)}
    every: dict[str, str] = {}
    for objects in wanted.values():
        for object_id, path in objects:
            every.setdefault(object_id, path)
    bad = _bad_objects(runner, git_dir, list(every))
    return {
        tree: TreeCheck(
            objects,
            [
                DamagedObject(object_id, path, bad[object_id])
                for object_id, path in objects
                if object_id in bad
            ],
        )
        for tree, objects in wanted.items()
    }


def tree_objects(runner: GitRunner, git_dir: Path, tree: str) -> list[tuple[str, str]]:
    """Every object under ``tree`` with its path: the tree itself first (path ""), then each
    folder and file (``ls-tree -r -t``); only the tree when the repository does not hold it.
    A folder's tree that is gone (moved aside as damaged, say) is listed without what was
    under it (``ls-tree`` fails there: the tree is then walked a depth at a time)."""
    objects = [(tree, "")]
    if not _missing(runner, git_dir, tree):
        try:
            listed = runner.run(["ls-tree", "-r", "-t", "-z", tree], git_dir=git_dir)
        except CheckpointError:
            return _walked(runner, git_dir, tree)
        for line in listed.split(b"\0"):
            if not line:
                continue
            meta, raw = line.split(b"\t", 1)
            mode, _kind, object_id = meta.decode().split(" ")
            if mode == "160000":
                continue  # a submodule's commit: not in this repository by design
            objects.append((object_id, shown_path(raw)))
    return objects


def _walked(runner: GitRunner, git_dir: Path, tree: str) -> list[tuple[str, str]]:
    """``tree_objects`` for a tree some folder of which is gone: each depth's trees read in one
    ``cat-file --batch``; a tree that is not there is listed, and nothing under it."""
    objects = [(tree, "")]
    frontier: list[tuple[str, bytes]] = [(tree, b"")]
    while frontier:
        bodies = _readable_trees(runner, git_dir, [object_id for object_id, _ in frontier])
        following: list[tuple[str, bytes]] = []
        for object_id, prefix in frontier:
            for mode, name, child in tree_entries(bodies.get(object_id, b""), len(object_id) // 2):
                if mode == b"160000":
                    continue  # a submodule's commit: not in this repository by design
                objects.append((child, shown_path(prefix + name)))
                if mode == b"40000":
                    following.append((child, prefix + name + b"/"))
        frontier = following
    return objects


def _readable_trees(runner: GitRunner, git_dir: Path, trees: list[str]) -> dict[str, bytes]:
    """The bodies of those of ``trees`` Git can read (one ``cat-file --batch``); one it
    cannot read (damaged stored bytes) is left out, as one that is gone is, and so is what
    lies under it: the check then finds it damaged."""

    def read(left: list[str]) -> dict[str, bytes]:
        query = "".join(f"{object_id}\n" for object_id in left).encode()
        return dict(batch_trees(runner.run(["cat-file", "--batch"], git_dir=git_dir, stdin=query)))

    return _past_unreadable(trees, read)[0] or {}


def _past_unreadable(
    object_ids: Iterable[str], read: Callable[[list[str]], _T]
) -> tuple[_T | None, list[str]]:
    """``read(object_ids)``, read again without each object Git stops at because its stored
    bytes cannot be read (a damaged pack entry or loose file); with those objects. None when
    every one of them stopped it."""
    left = list(dict.fromkeys(object_ids))
    skipped: list[str] = []
    while left:
        try:
            return read(left), skipped
        except CheckpointError as error:
            unreadable = corrupt_object(error)
            if unreadable is None or unreadable not in left:
                raise
            left.remove(unreadable)
            skipped.append(unreadable)
    return None, skipped


@dataclass(frozen=True, slots=True)
class SetAside:
    """What ``set_damaged_aside`` did: the checks with each damaged object told as it now
    stands, the objects it moved aside, and whether the next capture must stage the folder
    from the start (its index may name an object that is no longer here)."""

    checks: dict[str, TreeCheck]
    moved: list[DamagedObject]
    start_again: bool


def set_damaged_aside(git_dir: Path, checks: dict[str, TreeCheck]) -> SetAside:
    """Move aside each damaged object the ``checks`` found that is a loose object of the
    repository's own and still does not hash to its name (``checkpoint_objects.set_aside``;
    never one of a pack or of a store it borrows from). Call under the workspace lock, and
    when ``start_again``, remove the private index before letting it go: no capture then
    stages between the move and its start from the folder's files."""
    first: dict[str, DamagedObject] = {}
    for check in checks.values():
        for damaged in check.damaged:
            first.setdefault(damaged.object_id, damaged)
    now: dict[str, DamagedObject] = {}
    moved: list[DamagedObject] = []
    start_again = False
    for object_id, damaged in first.items():
        try:
            went = set_aside(git_dir, object_id)
        except OSError as error:
            _log.warning("a damaged object %s could not be moved aside: %s", object_id, error)
            went = None
        if went is not None:
            now[object_id] = replace(damaged, missing=False, moved_to=str(went))
            moved.append(now[object_id])
            start_again = True
            continue
        earlier = moved_aside(git_dir, object_id)
        if damaged.missing and earlier is not None:
            now[object_id] = replace(damaged, missing=False, moved_to=str(earlier))
        elif damaged.missing:
            now[object_id] = damaged
            # Gone without a check moving it (removed by hand): the index may still name it.
            start_again = True
        else:
            now[object_id] = replace(damaged, packed=True)
    told = {
        tree: TreeCheck(
            check.objects,
            [replace(now[damaged.object_id], path=damaged.path) for damaged in check.damaged],
        )
        for tree, check in checks.items()
    }
    return SetAside(told, moved, start_again)


def damage_told(damaged: Iterable[DamagedObject]) -> str:
    """What became of ``damaged`` (``set_damaged_aside``), in words to follow a sentence
    about the damage (it starts with "; "); "" when nothing was moved or left packed."""
    objects = list(dict((damaged.object_id, damaged) for damaged in damaged).values())
    aside = [damaged for damaged in objects if damaged.moved_to]
    packed = [damaged for damaged in objects if damaged.packed]
    told = ""
    if aside:
        folder = os.path.dirname(aside[0].moved_to)
        told += (
            f"; {len(aside)} damaged object(s) moved aside to {folder} (kept, not deleted): "
            "the next capture of the folder writes them again from its files if it still "
            "holds those bytes, and the snapshot is whole again then"
        )
    if packed:
        told += (
            f"; {len(packed)} damaged object(s) packed (or read from a store it borrows), "
            "which cannot be moved aside: the snapshot stays damaged"
        )
    return told


def known_damaged_objects(
    runner: GitRunner, git_dir: Path, trees: Iterable[str]
) -> dict[str, list[DamagedObject]]:
    """For each tree (of a snapshot that is not whole), the objects under it that make it
    damaged rather than lost: those not in the repository because a check moved them aside as
    damaged (a capture of a folder still holding those bytes writes them again; looked for
    only when something was ever moved aside), and the folders whose stored bytes Git cannot
    read (a damaged pack entry: ``packed``, or a loose file a check has not moved yet). No
    file is read whole: a listing of each tree, one ``--batch-check``, and its folders."""
    found: dict[str, list[DamagedObject]] = {}
    moved_before = (git_dir / DAMAGED_DIR).is_dir()
    for tree in dict.fromkeys(trees):
        objects = tree_objects(runner, git_dir, tree)
        query = "".join(f"{object_id}\n" for object_id, _ in objects).encode()
        out = runner.run(["cat-file", "--batch-check"], git_dir=git_dir, stdin=query)
        lines = out.decode("utf-8", "replace").splitlines()
        listed: list[DamagedObject] = []
        folders: list[tuple[str, str]] = []
        for (object_id, path), line in zip(objects, lines, strict=False):
            if line.endswith(" missing"):
                earlier = moved_aside(git_dir, object_id) if moved_before else None
                if earlier is not None:
                    listed.append(DamagedObject(object_id, path, False, str(earlier)))
                elif own_loose(git_dir, object_id):  # there, but Git cannot read its header
                    listed.append(DamagedObject(object_id, path, False))
            elif line.split(" ")[1:2] == ["tree"]:
                folders.append((object_id, path))
        bad = _bad_objects(runner, git_dir, [object_id for object_id, _ in folders])
        listed.extend(
            DamagedObject(object_id, path, False, packed=not own_loose(git_dir, object_id))
            for object_id, path in folders
            if bad.get(object_id) is False
        )
        found[tree] = listed
    return found


def _missing(runner: GitRunner, git_dir: Path, object_id: str) -> bool:
    out = runner.run(
        ["cat-file", "--batch-check"], git_dir=git_dir, stdin=f"{object_id}\n".encode()
    )
    return out.decode().strip().endswith(" missing")


def _bad_objects(runner: GitRunner, git_dir: Path, object_ids: list[str]) -> dict[str, bool]:
    """The ids whose stored content does not hash to them or cannot be read at all (False) or
    that are gone (True). Read as Git prints them and hashed piece by piece: a snapshot of
    gigabytes is checked in a few megabytes of memory. Git stops at an object it cannot read
    (a damaged pack entry): that one is damaged, and the rest are read again without it."""
    bad, unreadable = _past_unreadable(
        object_ids, lambda left: _hashed_again(runner, git_dir, left)
    )
    return {**(bad or {}), **dict.fromkeys(unreadable, False)}


def _hashed_again(runner: GitRunner, git_dir: Path, object_ids: list[str]) -> dict[str, bool]:
    """``_bad_objects`` in one ``cat-file --batch``; raises when Git stops part way."""
    if not object_ids:
        return {}
    query = "".join(f"{object_id}\n" for object_id in object_ids).encode()

    def check(out: IO[bytes]) -> dict[str, bool]:
        bad: dict[str, bool] = {}
        for object_id in object_ids:
            header = out.readline().decode("utf-8", "replace").split(" ")
            if len(header) == 2 and header[1] == "missing\n":
                # (gone, unless its loose file is there and Git cannot read even its header)
                bad[object_id] = not own_loose(git_dir, object_id)
                continue
            if len(header) != 3 or not header[2].endswith("\n"):
                raise CheckpointError(
                    CheckpointFailureCode.CHECKPOINT_GIT_FAILED,
                    f"git cat-file printed no object for {object_id}",
                )
            kind, size = header[1], int(header[2])
            algorithm = hashlib.sha256 if len(object_id) == 64 else hashlib.sha1
            digest = algorithm(f"{kind} {size}\0".encode(), usedforsecurity=False)
            left = size
            while left:
                piece = out.read(min(left, _PIECE))
                if not piece:
                    raise CheckpointError(
                        CheckpointFailureCode.CHECKPOINT_GIT_FAILED,
                        f"git cat-file ended inside {object_id}",
                    )
                digest.update(piece)
                left -= len(piece)
            out.read(1)  # the newline after the content
            if digest.hexdigest() != object_id:
                bad[object_id] = False
        return bad

    return runner.stream(["cat-file", "--batch"], git_dir=git_dir, stdin=query, consume=check)
