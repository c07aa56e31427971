"""Benchmark: the first capture of a Git repository by two checkouts of this project, side by
side (docs/performance.md, "Workspace checkpoints").

The repository is generated once (``--files`` files of about ``--kb`` KB, committed, the user's
automatic ``gc`` finished, then 10 files changed and one added, and left to age past the
capture's recent-file window), as a session finds a user's repository. Each round starts one
fresh process per checkout, alternating which goes first; a process makes ``--captures`` first
captures of the repository, each into a new store under ``--store-dir`` (the store's own
writes, on a slow disk, would otherwise decide the figure; ``/dev/shm`` keeps them in memory),
with the background absorption left out, and reports their median. ``git status`` in the
repository is measured in every round too.

Prints the median of the rounds for each checkout, its ratio to ``git status`` (the goal of
issue "Snapshots you can rely on" is <= 2x), and every round's figure.

Usage::

    python -m bench.bench_first_capture OLD_CHECKOUT [NEW_CHECKOUT] [--files 10000] [--kb 20]
        [--rounds 15] [--captures 3] [--store-dir /dev/shm] [--worktree]

``--worktree`` captures a linked worktree of the repository (``git worktree add``) instead;
``--package`` a folder inside it (``pkg``, beside ``other`` as big; ``git status -- .`` there).

``NEW_CHECKOUT`` defaults to this checkout; ``git worktree add DIR COMMIT`` makes an old one.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_checkpoints import _user_git, edit, generate, timed

_AGE_S = 3.5  # the capture's recent-file window (3 s) and a little more

# Run in a fresh interpreter with the checkout first on its path, so that it measures that
# checkout's code (an older one has no copy of this file).
_WORKER = """
import os, shutil, statistics, sys, tempfile, time
from pathlib import Path
root, repo, captures, store_dir = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
sys.path.insert(0, root)
from storage.checkpoints import checkpoint_store
from storage.checkpoints.checkpoint_store import GitCheckpointStore
if not os.path.realpath(checkpoint_store.__file__).startswith(os.path.realpath(root)):
    raise SystemExit(f"measured {checkpoint_store.__file__}, not the checkout {root}")
WS = "workspace:v1:bench0000-0000-0000-0000-000000000000"
found = []
for _ in range(captures):
    folder = Path(tempfile.mkdtemp(prefix="maka-first-", dir=store_dir or None))
    try:
        store = GitCheckpointStore(folder / "data")
        store._absorb_later = lambda workspace_identity: None
        started = time.perf_counter()
        store.capture(repo, WS, "refs/maka/s/r/1", "bench")
        found.append((time.perf_counter() - started) * 1000)
    finally:
        shutil.rmtree(folder)
print(statistics.median(found))
"""


def _repository(work: Path, files: int, kb: int, linked: Path | None, package: bool) -> Path:
    """The repository, or with ``linked`` a linked worktree of it there (its ``.git`` a file
    naming the repository), with the changes; the folder the captures are of. With
    ``package`` the files are in its folder ``pkg`` (the folder captured) and as many again
    in ``other``, as in a monorepo."""
    work.mkdir()
    paths = generate(work / "pkg" if package else work, files, files * kb * 1024)
    if package:
        generate(work / "other", files, files * kb * 1024, seed=8)
    _user_git(work, "init", "-q")
    _user_git(work, "add", "-A")
    # Git's automatic gc runs to its end first (detached, it would run during the captures).
    _user_git(work, "-c", "gc.autoDetach=false", "commit", "-q", "-m", "bench")
    folder = work
    if linked is not None:
        _user_git(work, "worktree", "add", "-q", "--detach", str(linked))
        paths = [linked / path.relative_to(work) for path in paths]
        folder = linked
    if package:
        folder = folder / "pkg"
    edit(paths, 10, random.Random(1))
    (folder / "untracked.txt").write_text("new\n")
    time.sleep(_AGE_S)
    return folder


def _worker(root: Path, repo: Path, captures: int, store_dir: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", _WORKER, str(root), str(repo), str(captures), store_dir],
        cwd=tempfile.gettempdir(),
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path, help="the checkout measured first")
    parser.add_argument("new", type=Path, nargs="?", default=Path(__file__).resolve().parents[1])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--kb", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--captures", type=int, default=3)
    parser.add_argument("--store-dir", default="/dev/shm" if Path("/dev/shm").is_dir() else "")
    parser.add_argument(
        "--worktree", action="store_true", help="capture a linked worktree of the repository"
    )
    parser.add_argument(
        "--package",
        action="store_true",
        help="capture a folder inside the repository, beside another as big (a monorepo)",
    )
    args = parser.parse_args()
    roots = [args.old.resolve(), args.new.resolve()]
    with tempfile.TemporaryDirectory(prefix="maka-bench-first-") as scratch:
        linked = Path(scratch) / "linked" if args.worktree else None
        repo = _repository(Path(scratch) / "work", args.files, args.kb, linked, args.package)
        where = " in a linked worktree" if linked else ""
        where += " in a package folder beside another as big" if args.package else ""
        print(
            f"{args.files:,} files of about {args.kb} KB{where}; "
            f"stores in {args.store_dir or 'TMPDIR'};"
            f" load average {os.getloadavg()[0]:.2f}"
        )
        found: dict[Path, list[float]] = {root: [] for root in roots}
        status: list[float] = []
        for index in range(args.rounds):
            status.append(
                statistics.median(
                    timed(lambda: _user_git(repo, "status", "--porcelain", "--", "."))
                    for _ in range(3)
                )
            )
            for root in roots if index % 2 == 0 else roots[::-1]:
                found[root].append(_worker(root, repo, args.captures, args.store_dir))
    base = statistics.median(status)
    print(f"git status median {base:.1f} ms; load average {os.getloadavg()[0]:.2f}")
    for root in roots:
        median = statistics.median(found[root])
        rounds = " ".join(f"{value:.0f}" for value in found[root])
        print(f"  {root}: first capture median {median:.1f} ms = {median / base:.2f}x git status")
        print(f"    rounds: {rounds}")


if __name__ == "__main__":
    main()
