"""Benchmark: what the first capture of a Git repository costs, and the part of it no
reordering removes, side by side with ``git status`` in one run (docs/performance.md,
"The first capture's floor").

The repository is the one ``bench_first_capture`` makes (``--files`` files of about ``--kb``
KB, committed, 10 files changed and one added, aged past the recent-file window). Each round
measures, in this process (warm after the first round, as the app's is):

- ``git status --porcelain -- .`` in the repository: wall time (median of three) and CPU;
- the bare ``lstat`` of every tracked file from Python, one after the other: what the
  permission record needs at the least (Git records no permission bits but the owner's
  execute bit, so every file's are read);
- the permission record's full pass over the seeded index, as the first capture makes it
  (``LookAhead``: the ``lstat`` and its bookkeeping);
- a first capture into a new store under ``--store-dir``: wall time, the CPU of this process
  (all its threads) and the CPU of the Git processes it ran.

Prints each figure's median over the rounds and its ratio to ``git status``; the issue's goal
for the first capture is <= 2x.

Usage::

    python -m bench.bench_first_capture_floor [--files 10000] [--kb 20] [--rounds 9]
        [--store-dir /dev/shm]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.bench_checkpoints import _user_git, timed
from bench.bench_first_capture import _repository
from storage.checkpoints.checkpoint_permissions import _bits_of
from storage.checkpoints.checkpoint_store import MAX_FILE_BYTES, GitCheckpointStore

WS = "workspace:v1:bench0000-0000-0000-0000-00000000f100"


def _cpu(who: int) -> float:
    used = resource.getrusage(who)
    return (used.ru_utime + used.ru_stime) * 1000


def _status(repo: Path) -> tuple[float, float]:
    """``git status`` in ``repo``: the median wall time of three, and their mean CPU."""
    before = _cpu(resource.RUSAGE_CHILDREN)
    walls = [timed(lambda: _user_git(repo, "status", "--porcelain", "--", ".")) for _ in range(3)]
    return statistics.median(walls), (_cpu(resource.RUSAGE_CHILDREN) - before) / 3


def _capture(repo: Path, store_dir: str) -> tuple[float, float, float]:
    """One first capture into a new store: wall time, this process's CPU, its Git's CPU."""
    folder = Path(tempfile.mkdtemp(prefix="maka-floor-", dir=store_dir or None))
    try:
        store = GitCheckpointStore(folder / "data")
        store._absorb_later = lambda workspace_identity: None  # type: ignore[method-assign]
        mine, theirs = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        store.capture(repo, WS, "refs/maka/s/r/1", "bench")
        wall = (time.perf_counter() - started) * 1000
        return (
            wall,
            _cpu(resource.RUSAGE_SELF) - mine,
            _cpu(resource.RUSAGE_CHILDREN) - theirs,
        )
    finally:
        shutil.rmtree(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--kb", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--store-dir", default="/dev/shm" if Path("/dev/shm").is_dir() else "")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="maka-bench-floor-") as scratch:
        repo = _repository(Path(scratch) / "work", args.files, args.kb, None, False)
        listing = _user_git(repo, "ls-files", "-z", "-s")
        names = [entry.partition(b"\t")[2] for entry in listing.split(b"\0") if entry]
        root = os.fsencode(repo) + b"/"
        print(
            f"{args.files:,} files of about {args.kb} KB; stores in "
            f"{args.store_dir or 'TMPDIR'}; load average {os.getloadavg()[0]:.2f}"
        )
        rows: dict[str, list[float]] = {}

        def keep(name: str, value: float) -> None:
            rows.setdefault(name, []).append(value)

        for _ in range(args.rounds):
            wall, cpu = _status(repo)
            keep("git status: wall", wall)
            keep("git status: CPU", cpu)
            keep(
                "lstat of every tracked file (Python)",
                timed(lambda: [os.lstat(root + name) for name in names]),
            )
            keep(
                "the permission record's full pass",
                timed(lambda: _bits_of(listing, repo, recent_since=0, limit=MAX_FILE_BYTES)),
            )
            wall, mine, theirs = _capture(repo, args.store_dir)
            keep("first capture: wall", wall)
            keep("first capture: CPU of this process", mine)
            keep("first capture: CPU of its Git processes", theirs)
    base = statistics.median(rows["git status: wall"])
    print(f"load average {os.getloadavg()[0]:.2f}; medians of {args.rounds} rounds:")
    for name, values in rows.items():
        median = statistics.median(values)
        print(f"  {name:42s} {median:7.1f} ms = {median / base:5.2f}x git status")


if __name__ == "__main__":
    main()
