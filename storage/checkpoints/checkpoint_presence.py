"""Whether snapshots are whole: their commit, their tree and every folder and file under it
exist in the workspace's private repository (docs/design/workspace.md sections 2, 3). One decision
for every surface (the resume planner, ``maka checkpoints``, ``maka doctor``), taken for many
snapshots in a few Git calls: one ``cat-file --batch-check`` for the commits and trees, one
``rev-list --objects --missing=print`` for everything under them, and only when something is
missing, one ``cat-file --batch`` per folder depth to tell which snapshots reach it."""

from __future__ import annotations

from pathlib import Path

from runtime.ledger.checkpoint_ports import CheckpointError
from storage.checkpoints.checkpoint_git import GitRunner

_TREE_MODE = b"40000"


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
    listed = runner.run(
        ["rev-list", "--objects", "--no-walk", "--missing=print", "--stdin"],
        git_dir=git_dir,
        stdin="".join(f"{commit}\n" for commit in commits).encode(),
    )
    missing = {line[1:].decode() for line in listed.splitlines() if line.startswith(b"?")}
    if not missing:
        return found
    broken = _trees_reaching(runner, git_dir, {tree for _, tree in found}, missing)
    return {pair for pair in found if pair[1] not in broken}


def _whole_at_once(runner: GitRunner, git_dir: Path, commit: str, tree: str) -> bool:
    """One snapshot in one Git call: the walk from its commit prints the commit first (a
    commit: no path), then its top tree (an empty path), and names nothing missing. False
    when that is not certain (a missing or odd object makes the walk fail): the full
    decision then tells."""
    try:
        listed = runner.run(
            ["rev-list", "--objects", "--no-walk", "--missing=print", "--stdin"],
            git_dir=git_dir,
            stdin=f"{commit}\n".encode(),
        )
    except CheckpointError:
        return False
    lines = listed.split(b"\n", 2)
    return (
        len(lines) >= 2
        and lines[0] == commit.encode()
        and lines[1] == tree.encode() + b" "
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
        for tree, body in _batch_objects(out):
            entries = list(_tree_entries(body, len(tree) // 2))
            children[tree] = [child for child, _ in entries]
            following.update(
                child for child, is_tree in entries if is_tree and child not in missing
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


def _batch_objects(out: bytes) -> list[tuple[str, bytes]]:
    """``cat-file --batch`` output as (id, content) for the objects it found."""
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


def _tree_entries(body: bytes, id_bytes: int) -> list[tuple[str, bool]]:
    """A tree object's entries as (object id, is a folder); submodule commits are skipped
    (they are never in the store)."""
    entries: list[tuple[str, bool]] = []
    position = 0
    while position < len(body):
        space = body.index(b" ", position)
        mode = body[position:space]
        nul = body.index(b"\0", space)
        raw = body[nul + 1 : nul + 1 + id_bytes]
        position = nul + 1 + id_bytes
        if mode != b"160000":
            entries.append((raw.hex(), mode == _TREE_MODE))
    return entries
