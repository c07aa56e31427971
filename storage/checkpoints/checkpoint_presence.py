"""Whether snapshots are whole: their commit, their tree and every folder and file under it
exist in the workspace's private repository (docs/design/workspace.md sections 2, 3). One decision
for every surface (the resume planner, ``maka checkpoints``, ``maka doctor``), taken for many
snapshots in a few Git calls: one ``cat-file --batch-check`` for the commits and trees, one
``rev-list --objects --no-object-names --missing=print`` for everything under them (object ids
only: a file's name, which may hold any byte, a newline or a leading ``?`` included, never
reaches the parser), and only when something is missing, one ``cat-file --batch`` per folder
depth to tell which snapshots reach it."""

from __future__ import annotations

import contextlib
import re
import threading
import time
from pathlib import Path

from runtime.ledger.checkpoint_ports import CheckpointError
from storage.checkpoints.checkpoint_git import GitRunner
from storage.private_files import private_opener

_TREE_MODE = b"40000"

_CORRUPT = re.compile(r"(?:packed|loose) object ([0-9a-f]{40}(?:[0-9a-f]{24})?) \(stored in ")
"""How Git names an object whose stored bytes it cannot even read (a damaged pack entry or
loose file: ``fatal: packed object <id> (stored in <pack>) is corrupt``)."""


def corrupt_object(error: CheckpointError) -> str | None:
    """The object Git stopped at because its stored bytes cannot be read, else None."""
    found = _CORRUPT.search(error.message)
    return found.group(1) if found is not None else None


def snapshots_whole(
    runner: GitRunner, git_dir: Path, snapshots: list[tuple[str, str]]
) -> set[tuple[str, str]]:
    """The (commit, tree) pairs that are whole. Raises ``CheckpointError`` when Git cannot
    tell (a snapshot that cannot be looked up now is not a missing one)."""
    pairs = list(dict.fromkeys(snapshots))
    if not pairs:
        return set()
    if len(pairs) == 1 and _whole_at_once(runner, git_dir, *pairs[0]):
        return set(pairs)
    query = "".join(f"{commit}\n{tree}\n" for commit, tree in pairs)
    out = runner.run(
        ["cat-file", "--batch-check=%(objecttype)"], git_dir=git_dir, stdin=query.encode()
    )
    # One line per object: its type, or "<id> missing" for one the repository lacks.
    kinds = out.decode().splitlines()
    found = {
        pair
        for index, pair in enumerate(pairs)
        if kinds[2 * index : 2 * index + 2] == ["commit", "tree"]
    }
    if not found:
        return found
    commits = sorted({commit for commit, _ in found})
    listed, unreadable = _walked_objects(runner, git_dir, commits)
    found = {pair for pair in found if pair[0] not in unreadable}
    missing = {line[1:].decode() for line in listed.splitlines() if line.startswith(b"?")}
    if not missing:
        return found
    broken = _trees_reaching(runner, git_dir, {tree for _, tree in found}, missing)
    return {pair for pair in found if pair[1] not in broken}


def _walked_objects(runner: GitRunner, git_dir: Path, commits: list[str]) -> tuple[bytes, set[str]]:
    """Every object under ``commits`` (``rev-list``), and apart those of the commits whose walk
    Git cannot finish because an object under them has stored bytes it cannot read (damaged,
    not whole): one such snapshot no longer leaves every other one undecided."""
    command = ["rev-list", "--objects", "--no-object-names", "--no-walk", "--missing=print"]
    try:
        return runner.run(
            [*command, "--stdin"],
            git_dir=git_dir,
            stdin="".join(f"{commit}\n" for commit in commits).encode(),
        ), set()
    except CheckpointError as error:
        if corrupt_object(error) is None:
            raise
    listed: list[bytes] = []
    unreadable: set[str] = set()
    for commit in commits:  # (one at a time: which of them reach the damage)
        try:
            listed.append(runner.run([*command, commit], git_dir=git_dir))
        except CheckpointError as error:
            if corrupt_object(error) is None:
                raise
            unreadable.add(commit)
    return b"".join(listed), unreadable


def tree_whole(runner: GitRunner, git_dir: Path, tree: str) -> bool:
    """Whether a tree and every folder and file under it exist (no commit needed: the walk
    starts at the tree and names no missing object); False when Git cannot tell."""
    try:
        listed = runner.run(
            ["rev-list", "--objects", "--no-object-names", "--missing=print", "--stdin"],
            git_dir=git_dir,
            stdin=f"{tree}\n".encode(),
        )
    except CheckpointError:
        return False
    return listed.startswith(tree.encode()) and b"\n?" not in listed


def _whole_at_once(runner: GitRunner, git_dir: Path, commit: str, tree: str) -> bool:
    """One snapshot in one Git call: the walk from its commit prints the commit first, then
    its top tree, and names nothing missing. False
    when that is not certain (a missing or odd object makes the walk fail): the full
    decision then tells."""
    try:
        listed = runner.run(
            [
                "rev-list",
                "--objects",
                "--no-object-names",
                "--no-walk",
                "--missing=print",
                "--stdin",
            ],
            git_dir=git_dir,
            stdin=f"{commit}\n".encode(),
        )
    except CheckpointError:
        return False
    lines = listed.split(b"\n", 2)
    return (
        len(lines) >= 2
        and lines[0] == commit.encode()
        and lines[1] == tree.encode()
        and b"\n?" not in listed
        and not listed.startswith(b"?")
    )


def _trees_reaching(
    runner: GitRunner, git_dir: Path, roots: set[str], missing: set[str]
) -> set[str]:
    """Which of the trees ``roots`` have a missing object somewhere under them."""
    children: dict[str, list[str]] = {}
    frontier = roots - missing
    while frontier:
        query = "".join(f"{tree}\n" for tree in sorted(frontier))
        out = runner.run(["cat-file", "--batch"], git_dir=git_dir, stdin=query.encode())
        following: set[str] = set()
        for tree, body in batch_trees(out):
            # (submodule commits are never in the store: skipped)
            entries = [e for e in tree_entries(body, len(tree) // 2) if e[0] != b"160000"]
            children[tree] = [child for _, _, child in entries]
            following.update(
                child for mode, _, child in entries if mode == _TREE_MODE and child not in missing
            )
        for tree in frontier - children.keys():
            missing.add(tree)  # not readable after all: nothing under it can be copied
        frontier = following - children.keys() - missing

    verdict: dict[str, bool] = {}

    def reaches(tree: str) -> bool:
        if tree in missing:
            return True
        known = verdict.get(tree)
        if known is None:
            known = any(reaches(child) for child in children.get(tree, ()))
            verdict[tree] = known
        return known

    return {tree for tree in roots if reaches(tree)}


def batch_trees(out: bytes) -> list[tuple[str, bytes]]:
    """``cat-file --batch`` output as (id, content) for the trees it found (a missing object,
    or one of another kind, is left out)."""
    found: list[tuple[str, bytes]] = []
    position = 0
    while position < len(out):
        end = out.index(b"\n", position)
        header = out[position:end].split()
        position = end + 1
        if len(header) != 3:  # "<id> missing"
            continue
        size = int(header[2])
        if header[1] == b"tree":
            found.append((header[0].decode(), out[position : position + size]))
        position += size + 1
    return found


def tree_entries(body: bytes, id_bytes: int) -> list[tuple[bytes, bytes, str]]:
    """A tree object's entries as (mode, name, object id), in the tree's order."""
    entries: list[tuple[bytes, bytes, str]] = []
    position = 0
    while position < len(body):
        space = body.index(b" ", position)
        nul = body.index(b"\0", space)
        entries.append(
            (body[position:space], body[space + 1 : nul], body[nul + 1 : nul + 1 + id_bytes].hex())
        )
        position = nul + 1 + id_bytes
    return entries


# ---- a decision started ahead of need ---------------------------------------------------------
#
# A resume plan observes the folder (a capture without a ref) and then asks whether the boundary
# snapshot is whole: two independent pieces of Git work, one after the other. The boundary of a
# crashed run is nearly always the last snapshot its workspace took, so the observation starts
# that snapshot's presence decision on a thread of its own beside its own Git calls, and the
# next ``has_snapshot`` for that very snapshot takes the answer instead of walking it again.
# Only "whole" is taken: it is what a fresh walk at the time of the observation said, and the
# observation only adds objects; it is used within ``EARLY_ANSWER_FRESH_S`` of the walk, never
# after the store dropped objects (retention, a prune, a ref deleted, an absorption:
# ``forget``). "Missing" (the observation may have written the missing object again) and a
# walk that failed are decided afresh.

EARLY_ANSWER_FRESH_S = 5.0
_LAST_SUFFIX = ".last"
_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def last_snapshot_path(index: Path) -> Path:
    """Where the (commit, tree) of the workspace's last capture is kept beside its index."""
    return index.with_name(index.name + _LAST_SUFFIX)


def remember_last(index: Path, commit: str, tree: str) -> None:
    """Note the capture just written (a hint only: a garbled or stale note costs one walk)."""
    with (
        contextlib.suppress(OSError),
        open(last_snapshot_path(index), "w", opener=private_opener) as out,
    ):
        out.write(f"{commit} {tree}\n")


def read_last(index: Path) -> tuple[str, str] | None:
    try:
        text = last_snapshot_path(index).read_text("ascii")
    except (OSError, UnicodeDecodeError):
        return None
    parts = text.split()
    if len(parts) != 2 or not all(_OBJECT_ID.fullmatch(part) for part in parts):
        return None
    return parts[0], parts[1]


class _Early:
    __slots__ = ("answer", "finished", "pair", "thread")

    def __init__(self, pair: tuple[str, str]) -> None:
        self.pair = pair
        self.thread: threading.Thread | None = None
        self.answer: bool | None = None  # None: the walk failed
        self.finished = 0.0


class EarlyAnswers:
    """Presence decisions started ahead of need, one per repository, each taken once."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._started: dict[Path, _Early] = {}

    def start(self, runner: GitRunner, git_dir: Path, pair: tuple[str, str]) -> None:
        early = _Early(pair)

        def walk() -> None:
            try:
                early.answer = pair in snapshots_whole(runner, git_dir, [pair])
            except CheckpointError:
                early.answer = None
            early.finished = time.monotonic()

        early.thread = threading.Thread(target=walk, name="maka-presence", daemon=True)
        with self._guard:
            self._started[git_dir] = early
        early.thread.start()

    def take(self, git_dir: Path, pair: tuple[str, str]) -> bool:
        """Whether a walk started for ``pair`` in ``git_dir`` found it whole, and recently
        enough (waited for); False: decide afresh (none was started, it failed, it found
        something missing, or it is no longer fresh)."""
        with self._guard:
            early = self._started.get(git_dir)
            if early is None or early.pair != pair:
                return False
            del self._started[git_dir]
        assert early.thread is not None
        early.thread.join()
        fresh = time.monotonic() - early.finished <= EARLY_ANSWER_FRESH_S
        return fresh and early.answer is True

    def forget(self, git_dir: Path | None = None) -> None:
        """Objects may have left ``git_dir`` (every repository when None): no answer started
        before counts."""
        with self._guard:
            if git_dir is None:
                self._started.clear()
            else:
                self._started.pop(git_dir, None)
