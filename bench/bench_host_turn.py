"""Benchmark: one ``maka run`` turn through a running host, side by side with the store opened
directly (docs/design/hosts.md section 1; goal: through the host <= 1.2x directly).

Each round runs the real ``maka run`` twice, interleaved so that load from other processes hits
both alike: once on a data folder nobody serves (the command takes the lock, opens the store,
runs startup recovery and the turn itself), once on a data folder served by a running ``maka
host`` (the command attaches, the host runs the turn and streams it back). The provider is the
scripted one: a turn of ``--steps`` model steps, each a ``read_file`` call, then a closing reply;
each round is a new session, so every turn is the script's first. Prints the median wall time of
each path and their ratio.

Usage::

    .venv/bin/python -m bench.bench_host_turn [--rounds 7] [--steps 50]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_RATIO = 1.2


def _maka() -> str:
    script = Path(sys.executable).with_name("maka")
    if not script.exists():
        raise SystemExit(f"no maka console script next to {sys.executable}; pip install -e . first")
    return str(script)


def _script(path: Path, steps: int) -> Path:
    calls = [
        {"toolCalls": [{"id": f"r{n}", "name": "read_file", "args": {"path": "notes.txt"}}]}
        for n in range(steps)
    ]
    path.write_text(json.dumps({"turns": [[*calls, {"text": "Read it all."}]]}), "utf-8")
    return path


def _run(data: Path, work: Path, env: dict[str, str]) -> float:
    argv = [_maka(), "--data-dir", str(data), "run", "--cwd", str(work)]
    argv += ["--permission-mode", "auto", "read the notes"]
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"maka run exited {done.returncode}: {done.stderr}")
    return wall


def _start_host(data: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    host = subprocess.Popen(
        [_maka(), "host", "--data-dir", str(data)],
        env={**env, "MAKA_NO_RENDERER": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert host.stdout is not None
    for line in host.stdout:
        if line.startswith("MAKA_MAIN_READY"):
            return host
    raise SystemExit("maka host did not start")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="maka-bench-host-") as scratch:
        root = Path(scratch)
        work = root / "work"
        work.mkdir()
        (work / "notes.txt").write_text("a line of notes\n" * 20, "utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("MAKA_")}
        env.update(
            {
                "MAKA_PROVIDER": "scripted",
                "MAKA_SCRIPT_FILE": str(_script(root / "script.json", args.steps)),
                "MAKA_WORKSPACE_CHECKPOINTS": "off",
                "QT_QPA_PLATFORM": "offscreen",
            }
        )
        direct_data, served_data = root / "direct", root / "served"
        _run(direct_data, work, env)  # creates the store; bytecode is written
        host = _start_host(served_data, env)
        try:
            _run(served_data, work, env)
            direct: list[float] = []
            served: list[float] = []
            for _ in range(args.rounds):
                direct.append(_run(direct_data, work, env))
                served.append(_run(served_data, work, env))
        finally:
            host.send_signal(signal.SIGTERM)
            host.wait(60)
    d, s = statistics.median(direct), statistics.median(served)
    print(f"maka run, {args.steps} tool steps, {args.rounds} rounds (median wall time):")
    print(f"  store opened directly: {d * 1000:8.1f} ms")
    print(f"  through maka host:     {s * 1000:8.1f} ms")
    print(f"  ratio host/direct:     {s / d:8.2f}  (goal <= {GOAL_RATIO})")
    return 0 if s / d <= GOAL_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
