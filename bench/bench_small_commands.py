"""Benchmark: start-up of the small commands, side by side with ``python -c pass``.

Runs, interleaved round by round so that load from other processes hits all alike (after
writing the product's bytecode, as an installed product has it), the installed ``maka`` console
script (the one next to this interpreter) for

- ``maka --version``,
- ``maka sessions`` on a data directory holding a few sessions (made with the real ``maka run``),
- ``maka sessions`` on a data directory holding 1,000 sessions of one completed run each
  (written through the store's own writers: a session, its run header, the opening user event,
  a model reply and the run ending; goal: <= 2.5x ``python -c pass`` in CPU),
- ``maka ledger plan FILE`` on an empty file,

and ``python -c pass`` with the same interpreter; prints the median wall time and CPU time
(user + system of the child) of each, and each command's median divided by the interpreter's
(goal: each command <= 80 ms median, issue 23), and each command's median CPU divided by the
interpreter's.

``--before DIR`` also runs every ``maka`` command from another checkout's ``app``, ``runtime`` and
``storage`` (put first on ``PYTHONPATH``, ahead of the editable install), interleaved with the
others in the same rounds: a side-by-side "before" in one run, e.g. after
``git archive BASE app runtime storage | tar -x -C DIR``.

Usage::

    .venv/bin/python -m bench.bench_small_commands [--rounds 21] [--before DIR]
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_MS = 80.0


def _maka() -> str:
    script = Path(sys.executable).with_name("maka")
    if not script.exists():
        raise SystemExit(f"no maka console script next to {sys.executable}; pip install -e . first")
    return str(script)


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    completed = subprocess.run(argv, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if completed.returncode != 0:
        raise SystemExit(f"{argv} exited {completed.returncode}: {completed.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def compile_product(root: Path | None = None) -> None:
    """Write the product's bytecode, as every installed form of it has (a wheel, the bundle, a
    source checkout run once without ``PYTHONDONTWRITEBYTECODE``): otherwise each start would
    compile every module it imports again, ~20 ms of the figures."""
    root = Path(__file__).resolve().parents[1] if root is None else root
    for package in ("app", "runtime", "storage", "main_process"):
        if (root / package).is_dir():
            compileall.compile_dir(root / package, quiet=1)


def _seed_sessions(data_dir: Path, count: int) -> None:
    """A data directory with ``count`` sessions of one completed run each (``maka run``)."""
    work = data_dir.parent / "work"
    work.mkdir(exist_ok=True)
    env = {**os.environ, "MAKA_DATA_DIR": str(data_dir)}
    for index in range(count):
        subprocess.run(
            [_maka(), "run", "--cwd", str(work), f"list files {index}"],
            env=env,
            capture_output=True,
            check=True,
        )


def _seed_many_sessions(data_dir: Path, count: int) -> None:
    """A data directory with ``count`` sessions of one completed run each, written in-process
    through the store's writers (``maka run`` a thousand times would take minutes)."""
    from runtime.ledger.store_ports import RunHeader, RunStatus, SessionRecord
    from storage.ledger.ledger_store import open_store
    from tests.helpers.ledger_builders import RunIds, model_text, terminal, user_text

    with open_store(data_dir) as store:
        for index in range(count):
            tag = f"{index:05}"
            ids = RunIds(f"sess-{tag}", f"inv-{tag}", f"run-{tag}", f"turn-{tag}")
            at = 1_700_000_000_000 + index * 1000
            store.create_session(SessionRecord(ids.session_id, "/tmp", f"task {index}", at))
            store.create_run(
                RunHeader(
                    run_id=ids.run_id,
                    session_id=ids.session_id,
                    invocation_id=ids.invocation_id,
                    turn_id=ids.turn_id,
                    status=RunStatus.CREATED,
                    cwd="/tmp",
                    owner_epoch=store.read_owner_epoch(),
                    created_at=at,
                    updated_at=at,
                )
            )
            store.mark_run_running(ids.run_id)
            store.append_event(user_text(ids=ids, marker=True, event_id=f"u-{index}", ts=at))
            store.append_event(model_text(ids=ids, event_id=f"m-{index}", ts=at + 1))
            store.commit_run_ending(
                terminal(ids, event_id=f"t-{index}", ts=at + 2), RunStatus.COMPLETED, None
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--many-sessions", type=int, default=1000)
    parser.add_argument("--before", type=Path, default=None, help="another checkout to compare")
    args = parser.parse_args()
    compile_product()
    if args.before is not None:
        compile_product(args.before.resolve())
    with tempfile.TemporaryDirectory(prefix="maka-bench-small-") as folder:
        root = Path(folder)
        data_dir = root / "data"
        _seed_sessions(data_dir, args.sessions)
        many_dir = root / "many"
        _seed_many_sessions(many_dir, args.many_sessions)
        empty = root / "empty.jsonl"
        empty.write_bytes(b"")
        env = {**os.environ, "MAKA_DATA_DIR": str(data_dir)}
        env.pop("MAKA_PROVIDER", None)
        maka = _maka()
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "maka --version": [maka, "--version"],
            f"maka sessions ({args.sessions} sessions)": [maka, "sessions"],
            f"maka sessions ({args.many_sessions:,} sessions)": [maka, "sessions"],
            "maka ledger plan EMPTY": [maka, "ledger", "plan", str(empty)],
        }
        envs = {name: env for name in commands}
        envs[f"maka sessions ({args.many_sessions:,} sessions)"] = {
            **env,
            "MAKA_DATA_DIR": str(many_dir),
        }
        if args.before is not None:
            before = str(args.before.resolve())
            for name in [name for name in commands if name.startswith("maka")]:
                commands[f"{name} BEFORE"] = commands[name]
                envs[f"{name} BEFORE"] = {**envs[name], "PYTHONPATH": before}
        for name, argv in commands.items():  # warm the file cache and the bytecode
            _timed(argv, envs[name])
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        names = list(commands)
        for round_index in range(args.rounds):
            order = names if round_index % 2 else names[::-1]
            for name in order:
                wall, cpu = _timed(commands[name], envs[name])
                walls[name].append(wall)
                cpus[name].append(cpu)
    base = statistics.median(walls["python -c pass"])
    base_cpu = statistics.median(cpus["python -c pass"])
    print(f"{args.rounds} interleaved rounds; load average {os.getloadavg()[0]:.2f}")
    for name in names:
        wall = statistics.median(walls[name]) * 1e3
        cpu = statistics.median(cpus[name]) * 1e3
        goal = "" if name.startswith("python") else f", goal <= {GOAL_MS:.0f} ms"
        print(
            f"  {name:<37} median {wall:6.1f} ms wall, {cpu:6.1f} ms CPU; "
            f"{wall / (base * 1e3):.2f}x python -c pass in wall, "
            f"{cpu / (base_cpu * 1e3):.2f}x in CPU{goal}"
        )


if __name__ == "__main__":
    main()
