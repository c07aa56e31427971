"""What one durable tool step writes: pages, ``pwrite64`` calls and ``fdatasync`` per T1 + T2.

Each condition runs in a child process under ``strace -f`` (``pwrite64``, ``fdatasync``,
``fsync``, ``openat``); only the calls between two marker files count, so opening the store and
the warm-up calls are left out. Per step it prints:

- ``pwrite64`` calls to the WAL and to the database file. SQLite writes a WAL frame as two calls
  (its 24-byte header, then the page), so this is about twice the pages;
- pages written: bytes written to the WAL and by checkpoints to the database, over 4 KiB;
- ``fdatasync`` calls;
- in a second, unmeasured pass: the WAL frames each commit appends (T1 and T2 apart, after a
  truncating checkpoint) and the B-trees those pages belong to (SQLite's ``dbstat``).

Conditions, side by side in one run: ``store`` (the store's writers, as the runtime calls them)
and ``raw`` (the same rows in two plain transactions with no validation: the floor) in this
tree, and, with ``--base DIR``, the store of another checkout (an earlier version, say) run the
same way from its own folder, so a change is measured against what it replaced.

    python -m bench.bench_step_writes --steps 2000 --base ../maka-before

Needs ``strace`` (Debian package ``strace``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

PAGE = 4096
ROOT = Path(__file__).resolve().parent.parent

# Runs in the child, from the folder of the tree measured: it uses only what ``bench_store`` has
# had since schema 4 (``open_store``, ``_fresh_run``, ``_tool_call``, ``RawBaseline``), so an
# earlier checkout runs it too.
_CHILD = r"""
import collections, json, os, sqlite3, struct, sys
from pathlib import Path
sys.path.insert(0, os.getcwd())
from bench import bench_store as b
kind, data, steps, markers = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
with_trees = sys.argv[5] == "trees"  # dbstat reads the whole file: not on a large history
WARM = 50
def trees(database, monitor):
    raw = (database.parent / (database.name + "-wal")).read_bytes()
    size = int(monitor.execute("PRAGMA page_size").fetchone()[0])
    pages = [struct.unpack(">I", raw[o:o + 4])[0] for o in range(32, len(raw) - 23, size + 24)]
    owner = dict(monitor.execute("SELECT pageno, name FROM dbstat").fetchall())
    return [owner.get(page, "?") for page in pages]
if kind == "store":
    store_cm = b.open_store(data)
    store = store_cm.__enter__()
    ids = b._fresh_run(store, "w")
    def step(i):
        c = b._tool_call(ids, i)
        store.commit_tool_prepared(c[0], c[1])
        store.commit_tool_outcome(c[2])
    def halves(i):
        c = b._tool_call(ids, i)
        return (lambda: store.commit_tool_prepared(c[0], c[1]),
                lambda: store.commit_tool_outcome(c[2]))
    database = Path(store.path)
else:
    b.open_store(data).close()  # the schema, as the store makes it
    raw = b.RawBaseline(data)
    ids = b.RunIds("sess-w", "inv-w", "run-w", "turn-w")
    raw.start(ids)
    def step(i):
        raw.t1_t2(*b._tool_call(ids, i))
    halves = None
    database = data / b.DATABASE_NAME
for i in range(WARM):
    step(i)
open(markers + ".start", "w").close()
for i in range(WARM, WARM + steps):
    step(i)
open(markers + ".end", "w").close()
report = {}
if halves is not None and with_trees:
    monitor = sqlite3.connect(database)
    counts = {"T1": collections.Counter(), "T2": collections.Counter()}
    n = 200
    for i in range(WARM + steps, WARM + steps + n):
        first, second = halves(i)
        for name, action in (("T1", first), ("T2", second)):
            monitor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            action()
            counts[name].update(trees(database, monitor))
    monitor.close()
    report = {half: {tree: count / n for tree, count in c.items()} for half, c in counts.items()}
print(json.dumps(report))
"""


def _count(trace: Path, markers: str, steps: int) -> dict[str, float]:
    """Per-step figures from the strace log, between the two markers."""
    names: dict[str, str] = {}
    counting = False
    calls: dict[str, int] = {}
    written: dict[str, int] = {}
    sync_seconds: list[float] = []
    for line in trace.read_text(errors="replace").splitlines():
        opened = re.search(r'openat\(.*"([^"]+)".*= (\d+)(?: <[0-9.]+>)?$', line)
        if opened:
            names[opened.group(2)] = opened.group(1)
            if opened.group(1) == markers + ".start":
                counting = True
            elif opened.group(1) == markers + ".end":
                counting = False
            continue
        call = re.search(r"(pwrite64|fdatasync|fsync)\((\d+)(?:, .*, (\d+), \d+\))?", line)
        if not counting or call is None:
            continue
        target = "wal" if names.get(call.group(2), "").endswith("-wal") else "db"
        key = f"{call.group(1)}_{target}"
        calls[key] = calls.get(key, 0) + 1
        if call.group(3):
            written[target] = written.get(target, 0) + int(call.group(3))
        spent = re.search(r"<([0-9.]+)>$", line)
        if call.group(1) == "fdatasync" and spent:
            sync_seconds.append(float(spent.group(1)))
    figures = {key: value / steps for key, value in calls.items()}
    figures["fdatasync_us"] = 1e6 * sum(sync_seconds) / max(1, len(sync_seconds))
    figures["pages_wal"] = written.get("wal", 0) / PAGE / steps
    figures["pages_db"] = written.get("db", 0) / PAGE / steps
    return figures


def measure(
    tree: Path, kind: str, steps: int, work: Path, history: Path | None = None
) -> dict[str, Any]:
    name = f"{tree.name}-{kind}-{'large' if history else 'fresh'}"
    data = work / name
    shutil.rmtree(data, ignore_errors=True)
    if history is not None:
        shutil.copytree(history, data, ignore=shutil.ignore_patterns("complete"))
    else:
        data.mkdir(parents=True)
    markers = str(work / f"{name}.marker")
    trace = work / f"{name}.strace"
    command = [
        "strace", "-f", "-qq", "-T", "-e", "trace=pwrite64,fdatasync,fsync,openat",
        "-o", str(trace),
        sys.executable, "-c", _CHILD, kind, str(data), str(steps), markers,
        "no-trees" if history else "trees",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=True)
    figures: dict[str, Any] = _count(trace, markers, steps)
    figures["trees"] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def _large_history() -> Path:
    from bench import bench_store
    from bench import store_long_run as long_run
    from storage.ledger.ledger_schema import SCHEMA_VERSION

    template = bench_store._template(Path(tempfile.mkdtemp(prefix="maka-step-writes-template-")))
    key = b"".join(payload for _, _, _, payload in template.events)
    key += f"schema {SCHEMA_VERSION}".encode()
    events = 385_000
    return long_run.history_cache(
        key, events, lambda path: bench_store.generate_history(path, template, events)
    )


def _row(label: str, figures: dict[str, Any]) -> str:
    pages = figures["pages_wal"] + figures["pages_db"]
    pwrites = figures.get("pwrite64_wal", 0.0) + figures.get("pwrite64_db", 0.0)
    syncs = figures.get("fdatasync_wal", 0.0) + figures.get("fdatasync_db", 0.0)
    return (
        f"| {label} | {pages:.1f} ({figures['pages_wal']:.1f} WAL + {figures['pages_db']:.1f}"
        f" checkpoint) | {pwrites:.1f} ({figures.get('pwrite64_wal', 0.0):.1f} +"
        f" {figures.get('pwrite64_db', 0.0):.1f}) | {syncs:.2f} |"
        f" {figures['fdatasync_us']:.0f} us |"
    )


def _trees(label: str, figures: dict[str, Any]) -> list[str]:
    lines = []
    for half in ("T1", "T2"):
        counts: dict[str, float] = figures["trees"].get(half, {})
        if not counts:
            continue
        listed = ", ".join(f"{name} {count:.2f}" for name, count in sorted(counts.items()))
        lines.append(f"- {label} {half}: {sum(counts.values()):.2f} frames: {listed}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--base", type=Path, help="another checkout, measured side by side")
    parser.add_argument(
        "--large",
        action="store_true",
        help="also the store in a copy of bench_store's 385,000-event history (100,000 tool"
        " operations), generated once and cached",
    )
    args = parser.parse_args()
    if shutil.which("strace") is None:
        sys.exit("bench_step_writes: strace is not installed (Debian package strace)")
    runs: list[tuple[str, Path, str, Path | None]] = [
        ("store", ROOT, "store", None),
        ("raw rows", ROOT, "raw", None),
    ]
    if args.large:
        runs.insert(1, ("store, 385,000 events before", ROOT, "store", _large_history()))
    if args.base is not None:
        runs.insert(0, (f"store of {args.base.name}", args.base.resolve(), "store", None))
    results: list[tuple[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="maka-step-writes-") as work:
        for label, tree, kind, history in runs:
            results.append((label, measure(tree, kind, args.steps, Path(work), history)))
    print(f"per T1 + T2, {args.steps} steps after 50 warm-up steps, synchronous=FULL\n")
    print("| condition | pages written | pwrite64 calls | fdatasync | fdatasync mean (strace -T) |")
    print("|---|---|---|---|---|")
    for label, figures in results:
        print(_row(label, figures))
    print("\nWAL frames per commit and the B-trees they belong to (200 more steps):\n")
    for label, figures in results:
        for line in _trees(label, figures):
            print(line)


if __name__ == "__main__":
    main()
