"""Benchmark: the cost of verifying ``runtime.sqlite`` before the first write, against the
desktop's start time, on a database of about 1,000,000 events.

Measured side by side in one run, on one copy of the database:

1. **Desktop start** (the real two-process app on Xvfb, as in ``bench_startup``): ``maka`` on the
   1,000,000-event data directory, *window* = main window mapped, *ready* = the main process's
   "ready" log line (store opened and verified, startup recovery done). Every start after the
   first finds the stamp of the previous clean exit, so it takes the everyday path.
2. **The check on the everyday path** (``verify_before_write`` with a valid stamp: the header, the
   small tables, the owner epoch), in this process, median of many.
3. **The whole-file check** (``PRAGMA quick_check``), paid only when the file changed behind
   Maka's back (another program, a restored copy, a crash with an unfinished WAL).

Goal: (2) under 10% of (1)'s start-to-window median.

Usage::

    .venv/bin/python -m bench.bench_store_verify [--rounds 5] [--events 1000000]
        [--cache /tmp/maka-bench-verify]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

GOAL_RATIO = 0.10


def _database(cache: Path, events: int) -> Path:
    from bench.bench_store import _template, generate_history

    target = cache / f"history-{events}"
    if not (target / "runtime.sqlite").exists():
        started = time.perf_counter()
        template = _template(cache)
        generate_history(target, template, events)
        print(f"generated ~{events:,} events in {time.perf_counter() - started:.0f} s")
    return target


def _start(data: Path) -> dict[str, float]:
    from bench.bench_startup import DISPLAY, _windows
    from tests.helpers.maka_process import maka_executable

    env = dict(os.environ, MAKA_DATA_DIR=str(data), DISPLAY=DISPLAY, QT_QPA_PLATFORM="xcb")
    for key in ("MAKA_NO_RENDERER", "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME", "MAKA_FAILPOINT"):
        env.pop(key, None)
    log = data / "logs" / "main.log"
    offset = log.stat().st_size if log.exists() else 0
    wall0 = time.time()
    t0 = time.perf_counter()
    main = subprocess.Popen(maka_executable(), env=env)
    result: dict[str, float] = {}
    try:
        while time.perf_counter() - t0 < 120 and "window" not in result:
            for title, area in _windows():
                if area > 10_000 and title.endswith("Maka"):
                    result["window"] = time.perf_counter() - t0
            time.sleep(0.005)
        deadline = time.perf_counter() + 60
        while time.perf_counter() < deadline:
            text = log.read_bytes()[offset:].decode("utf-8", "replace") if log.exists() else ""
            ready = re.search(r"^(\S+ \S+) \d+ maka.main INFO main process ready", text, re.M)
            if ready:
                stamp = datetime.strptime(ready.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                result["ready"] = stamp - wall0
                for key, words in (("check-start", "started"), ("check-passed", "passed")):
                    found = re.search(
                        rf"^(\S+ \S+) \d+ maka.main INFO whole-file check of the database {words}",
                        text,
                        re.M,
                    )
                    if found:
                        at = datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f")
                        result[key] = at.timestamp() - wall0
                break
            time.sleep(0.02)
    finally:
        main.send_signal(signal.SIGTERM)
        try:
            main.wait(60)
        except subprocess.TimeoutExpired:
            main.kill()
            main.wait(10)
    return result


def _check_costs(data: Path, repeats: int) -> tuple[list[float], float]:
    from storage.ledger.sqlite_connection import DATABASE_NAME, connect_writer
    from storage.ledger.store_verification import forget_verified, verify_before_write

    path = data / DATABASE_NAME
    conn = connect_writer(path)
    try:
        everyday = []
        for _ in range(repeats):
            started = time.perf_counter()
            full = verify_before_write(path, conn)
            everyday.append(time.perf_counter() - started)
            assert not full, "the stamp of the last clean exit should vouch for the file"
        forget_verified(path)
        started = time.perf_counter()
        full = verify_before_write(path, conn)
        whole = time.perf_counter() - started
        assert full
    finally:
        conn.close()
    return everyday, whole


def main(argv: list[str]) -> int:
    from bench.bench_startup import xvfb

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "maka-bench-verify"
    )
    parser.add_argument("--database-dir", type=Path, help="an existing data directory to copy")
    args = parser.parse_args(argv)
    for tool in ("Xvfb", "xwininfo"):
        if shutil.which(tool) is None:
            print(f"{tool} is required", file=sys.stderr)
            return 1
    args.cache.mkdir(parents=True, exist_ok=True)
    source = args.database_dir or _database(args.cache, args.events)
    with tempfile.TemporaryDirectory(prefix="maka-bench-verify-", dir=args.cache) as temp:
        data = Path(temp) / "data"
        data.mkdir()
        shutil.copy2(source / "runtime.sqlite", data / "runtime.sqlite")
        size = (data / "runtime.sqlite").stat().st_size
        print(f"database: {size / 1e9:.2f} GB")
        rounds = []
        with xvfb():
            first = _start(data)  # a copy: the first start checks the whole file
            print("first start (whole-file check): " + _fmt(first))
            if "check-passed" in first and "window" in first:
                print(
                    f"the window was up {first['check-passed'] - first['window']:.3f} s before "
                    "the whole-file check passed (its progress shown meanwhile)"
                )
            for n in range(args.rounds):
                rounds.append(_start(data))
                print(f"round {n + 1}: " + _fmt(rounds[-1]))
        everyday, whole = _check_costs(data, args.repeats)
    window = statistics.median(r["window"] for r in rounds if "window" in r)
    ready = statistics.median(r["ready"] for r in rounds if "ready" in r)
    check = statistics.median(everyday)
    print(f"desktop start to window: median {window:.3f} s; to main process ready {ready:.3f} s")
    print(
        f"check before the first write, everyday path: median {check * 1e3:.2f} ms "
        f"(max {max(everyday) * 1e3:.2f} ms); ratio to start-to-window {check / window:.3f} "
        f"(goal < {GOAL_RATIO})"
    )
    print(
        f"whole-file check (after a change behind Maka's back): {whole:.2f} s; "
        f"ratio to start-to-window {whole / window:.2f}"
    )
    return 0


def _fmt(result: dict[str, float]) -> str:
    return ", ".join(f"{key} {value:.3f}" for key, value in sorted(result.items()))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
