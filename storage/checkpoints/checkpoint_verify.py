"""Checking a snapshot's stored bytes against its recorded tree (docs/design/workspace.md section
4).

Git names every object by the hash of its content but does not re-hash what it reads, so a blob
swapped in a private repository would land in a restored copy unnoticed. Before a restore
writes anything, and when ``maka doctor --verify-snapshots`` asks, every object under the
snapshot's tree (the tree itself, each folder, each file) is read once (``cat-file --batch``,
streamed: never the whole snapshot in memory) and hashed again; any object whose content does
not hash to its name, or that is gone, makes the snapshot damaged.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from runtime.ledger.checkpoint_ports import CheckpointError
from runtime.ledger.codes import CheckpointFailureCode
from storage.checkpoints.checkpoint_git import GitRunner

_PIECE = 1 << 20  # read and hashed a megabyte at a time


@dataclass(frozen=True, slots=True)
class DamagedObject:
    object_id: str
    path: str  # "" for the snapshot's own tree
    missing: bool


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
    folder and file (``ls-tree -r -t``); only the tree when the repository does not hold it."""
    objects = [(tree, "")]
    if not _missing(runner, git_dir, tree):
        listed = runner.run(["ls-tree", "-r", "-t", "-z", tree], git_dir=git_dir)
        for line in listed.split(b"\0"):
            if not line:
                continue
            meta, raw = line.split(b"\t", 1)
            mode, _kind, object_id = meta.decode().split(" ")
            if mode == "160000":
                continue  # a submodule's commit: not in this repository by design
            objects.append((object_id, os.fsdecode(raw)))
    return objects


def _missing(runner: GitRunner, git_dir: Path, object_id: str) -> bool:
    out = runner.run(
        ["cat-file", "--batch-check"], git_dir=git_dir, stdin=f"{object_id}\n".encode()
    )
    return out.decode().strip().endswith(" missing")


def _bad_objects(runner: GitRunner, git_dir: Path, object_ids: list[str]) -> dict[str, bool]:
    """The ids whose stored content does not hash to them (False) or that are gone (True).
    Read as Git prints them and hashed piece by piece: a snapshot of gigabytes is checked in
    a few megabytes of memory."""
    if not object_ids:
        return {}
    query = "".join(f"{object_id}\n" for object_id in object_ids).encode()

    def check(out: IO[bytes]) -> dict[str, bool]:
        bad: dict[str, bool] = {}
        for object_id in object_ids:
            header = out.readline().decode("utf-8", "replace").split(" ")
            if len(header) == 2 and header[1] == "missing\n":
                bad[object_id] = True
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
