"""Empty folders in workspace checkpoints (docs/design/workspace.md section 1: the policy covers
everything under the folder, and an empty folder is part of it).

Git's index holds files only, so a tree written from it has no empty folder. The checkpoint
store adds them after ``write-tree``: every empty folder the folder's own ignore rules do not
exclude becomes an entry naming the empty tree (``ls-tree`` + ``mktree`` of each folder on its
path). A restore creates them after ``checkout-index``, and a comparison reports them as
changed paths (``name/``), so a folder created or removed while the session was stopped is
drift like any file.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from runtime.ledger.checkpoint_ports import PathChange, TreeChange
from storage.checkpoints.checkpoint_git import GitRunner

_TREE_MODE = "040000"
# The empty tree's id (the private repositories keep SHA-1 objects).
EMPTY_TREE = hashlib.sha1(b"tree 0\0", usedforsecurity=False).hexdigest()


def empty_tree_id(runner: GitRunner, git_dir: Path) -> str:
    """The empty tree's id in this repository's hash, written to its object store."""
    return runner.run(["mktree", "-z"], git_dir=git_dir, stdin=b"").decode().strip()


def empty_dirs_under(
    runner: GitRunner, git_dir: Path, folder: Path, index: Path, tops: list[str]
) -> list[str]:
    """The empty folders (relative, ``/``-separated, sorted) at or under ``tops`` (folders
    holding no staged file, as ``ls-files --others --directory`` lists them) that the folder's
    ignore rules do not exclude."""
    found: list[str] = []
    for name in tops:
        top = folder / name.rstrip("/")
        if top.is_symlink() or not top.is_dir():
            continue
        for here, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if d != ".git"]
            if not dirs and not files and not os.listdir(here):
                found.append(Path(here).relative_to(folder).as_posix())
    if not found:
        return []
    # An empty folder under one the ignore rules exclude: ``--directory`` names the excluded
    # folders themselves, so a candidate at or under one of them is left out.
    listing = ["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"]
    ignored = runner.run(
        [*listing, "--", *tops],
        git_dir=git_dir,
        work_tree=folder,
        index=index,
    )
    excluded = {os.fsdecode(item).rstrip("/") for item in ignored.split(b"\0") if item}

    def dropped(path: str) -> bool:
        parts = path.split("/")
        return any("/".join(parts[:n]) in excluded for n in range(1, len(parts) + 1))

    return sorted(path for path in found if not dropped(path))


def graft_empty_dirs(runner: GitRunner, git_dir: Path, tree: str, paths: list[str]) -> str:
    """``tree`` with an empty-tree entry at each of ``paths`` (the folders on the way are
    added or rewritten); ``tree`` itself when there is none."""
    if not paths:
        return tree
    empty = empty_tree_id(runner, git_dir)
    return _graft(runner, git_dir, tree, paths, empty)


def _graft(runner: GitRunner, git_dir: Path, tree: str | None, paths: list[str], empty: str) -> str:
    below: dict[str, list[str]] = {}
    for path in paths:
        head, _, rest = path.partition("/")
        below.setdefault(head, [])
        if rest:
            below[head].append(rest)
    entries: dict[str, bytes] = {}
    if tree is not None:
        listed = runner.run(["ls-tree", "-z", tree], git_dir=git_dir)
        for line in listed.split(b"\0"):
            if line:
                entries[os.fsdecode(line.split(b"\t", 1)[1])] = line
    for name, inner in below.items():
        existing = entries.get(name)
        base: str | None = None
        if existing is not None:
            _mode, kind, object_id = existing.split(b"\t", 1)[0].decode().split(" ")
            if kind != "tree":
                continue  # a file took the name since the listing: the file stays
            base = object_id
        sub = _graft(runner, git_dir, base, inner, empty) if inner else (base or empty)
        entries[name] = f"{_TREE_MODE} tree {sub}\t".encode() + os.fsencode(name)
    body = b"".join(entries[name] + b"\0" for name in sorted(entries))
    return runner.run(["mktree", "-z"], git_dir=git_dir, stdin=body).decode().strip()


def create_empty_dirs(
    runner: GitRunner, git_dir: Path, objects: Iterable[tuple[str, str]], target: Path
) -> None:
    """After ``checkout-index`` into ``target``: the snapshot's empty folders, from every
    object under its tree with its path (``checkpoint_verify.tree_objects``)."""
    empty = empty_tree_id(runner, git_dir)
    for object_id, path in objects:
        if path and object_id == empty:
            (target / path).mkdir(parents=True, exist_ok=True)


COMPARE_OPTIONS = ("-r", "-t", "-z", "--no-renames", "--raw")


def shown_path(raw: bytes) -> str:
    """A changed path as the record and people read it: bytes that are not UTF-8 written as
    ``\\xNN``, as a tool's result writes a name (``lat\\xe9.txt``). A replacement character
    lost the name; a lone surrogate (``os.fsdecode``) is refused by every event, so a resume
    telling the model such a file changed ended with ``event_schema_invalid``."""
    return raw.decode("utf-8", "backslashreplace")


def tree_changes(
    runner: GitRunner, git_dir: Path, old_tree: str, new_tree: str, *, printed: bytes | None = None
) -> list[TreeChange]:
    """Every changed path between two snapshots: files, and empty folders as ``name/``.
    ``printed``: what ``diff-tree`` with ``COMPARE_OPTIONS`` printed for them already."""
    out = printed
    if out is None:
        out = runner.run(["diff-tree", *COMPARE_OPTIONS, old_tree, new_tree], git_dir=git_dir)
    parts = out.split(b"\0")
    found: list[TreeChange] = []
    for meta, raw in zip(parts[0::2], parts[1::2], strict=False):
        if not meta:
            continue
        old_mode, new_mode, old_id, new_id, status = meta.decode().lstrip(":").split(" ")
        path = shown_path(raw)
        kind = {"A": PathChange.ADDED, "D": PathChange.DELETED}.get(status[:1], PathChange.MODIFIED)
        if _TREE_MODE in (old_mode, new_mode):
            # A folder: only an empty one is a change of its own (a folder's files say the rest).
            empty = EMPTY_TREE  # compared only: nothing needs writing
            if (kind is PathChange.ADDED and new_id == empty) or (
                kind is PathChange.DELETED and old_id == empty
            ):
                found.append(TreeChange(f"{path}/", kind))
            continue
        found.append(TreeChange(path, kind))
    return sorted(found, key=lambda change: change.path)
