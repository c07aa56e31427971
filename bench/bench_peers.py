"""Benchmark: the durable cost of one step here and in two peers, side by side.

Three systems take steps in **one** long workflow each, all on SQLite in WAL mode with
``synchronous=FULL``:

- **maka**: one tool call through the store's writers, T1 (``commit_tool_prepared``: the call and
  its dispatch, validated, committed *before* the side effect) and T2 (``commit_tool_outcome``:
  the result, validated, committed after it): two validated commits per step, its three events
  built as the agent runtime builds them (``runtime/agent/event_builders.py``: the operation id,
  the arguments' hash, the call, its dispatch and its response), which the worker's CPU counts;
- **DBOS Transact** (``dbos``, SQLite system database): one ``@DBOS.step()`` inside a
  ``@DBOS.workflow()`` (the step's output is recorded after the step ran): one commit;
- **LangGraph** with ``SqliteSaver`` and ``durability="sync"``: one super-step of a one-node
  graph that loops (the checkpoint and the node's writes are committed before the next step).

Every system and condition runs in **its own process** (a worker), so no system's threads or
memory touch another's. The conditions:

- ``fresh``: empty databases;
- ``large``: databases already holding 100,000 operations of earlier workflows (maka: the
  385,000-event history of ``bench_store`` (b); DBOS: 50 workflows of 2,000 steps; LangGraph: 50
  threads of 2,000 super-steps), generated once with ``synchronous=OFF`` by the systems
  themselves and cached under ``/tmp/maka-bench-store-cache``.

All workers of a round are started together and paused at block boundaries (every ``--block``
steps, at the start of a step); the harness lets one worker at a time run its next block, the
order rotating block by block, so systems *and* conditions are interleaved and meet the same
load. A block's CPU is the worker process's whole CPU (user + system, every thread: DBOS's
background work included) from its previous pause to this one, so work a system leaves running
after a step is charged to it; its wall time runs from the harness's go to the pause. Each round
starts new workers on new copies of the databases; ``--rounds`` rounds (default 3) are reported
one by one with their spread.

Prints per system and condition: CPU per step (mean over the round; median of the blocks) and
the median and p95 of the blocks' wall time per step, for each round; the ratio maka / LangGraph
of CPU per step per round, the growth large / fresh; then what each records before the side
effect.

The peers are an optional extra: ``pip install -e '.[bench]'`` (in a separate environment; the
project's own environment and CI never install them). A peer that is not installed is left out
and named; maka then runs alone (fresh and large still interleaved).

Usage::

    python -m bench.bench_peers [--steps 2000] [--block 50] [--rounds 3]
        [--condition fresh|large|both] [--systems maka,dbos,langgraph] [--base DIR]

``--base DIR`` adds ``maka-base``: maka as the checkout in ``DIR`` has it (an earlier version),
run by that checkout's own worker in its own process, interleaved with the rest, so a change to
the step's cost is measured against what it replaced in the same run.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bench import store_long_run as long_run

HISTORY_STEPS = 100_000
HISTORY_WORKFLOWS = 50
SYSTEMS = ("maka", "dbos", "langgraph")

GUARANTEE_ROWS = (
    (
        "maka (T1 + T2)",
        "the model's function_call and the tool_dispatch (operation id, canonical args hash, "
        "recovery mode, file evidence), validated against the run's ledger, with the prepared "
        "operation row and its journal entry (T1, one transaction)",
        "the bound function_response, validated, and the operation moved to outcome_committed (T2)",
        "recovery finds the dispatch without its result: reconciled from the file or parked for "
        "the user, never silently run again",
    ),
    (
        "DBOS Transact (step)",
        "nothing for the step (the workflow's status row exists since the workflow started)",
        "the step's output (`operation_outputs`)",
        "the step runs again on recovery (at least once)",
    ),
    (
        "LangGraph (sync super-step)",
        "nothing for the node (the previous super-step's checkpoint names the next node)",
        "the checkpoint of the new state and the node's writes",
        "the node runs again from the last checkpoint (at least once)",
    ),
)
GUARANTEES = "\n".join(
    [
        "| system | recorded durably before the side effect | recorded after it | a crash "
        "during the side effect |",
        "|---|---|---|---|",
        *("| " + " | ".join(row) + " |" for row in GUARANTEE_ROWS),
    ]
)


def _peer(name: str) -> Any:
    """An optional peer module (the ``[bench]`` extra), typed as Any."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        raise SystemExit(
            f"{error.name} is not installed: pip install -e '.[bench]' (a separate environment)"
        ) from None


# ---- SQLite settings shared by all three ------------------------------------------------------

_SYNC = {"mode": "FULL"}


def _pragmas(conn: Any) -> None:
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {_SYNC['mode']}")


# ---- a worker's pauses: one block of steps at a time -------------------------------------------


class Pauses:
    """In a worker: ``step(index)`` is called at the start of every step (and once after the
    last, with ``index == steps``). Every ``block`` steps it reports the process's CPU so far and
    the wall time since the harness's last go on stdout, then waits for the next go on stdin."""

    def __init__(self, block: int, steps: int) -> None:
        self.block = block
        self.steps = steps
        self._go = time.perf_counter()

    def step(self, index: int) -> None:
        if index % self.block and index != self.steps:
            return
        now = time.perf_counter()
        # The whole process's CPU, every thread (CLOCK_PROCESS_CPUTIME_ID: not clock ticks).
        print(f"mark {time.process_time()!r} {now - self._go!r}", flush=True)
        if not sys.stdin.readline():
            raise SystemExit(0)  # the harness went away
        self._go = time.perf_counter()


def side_effect(index: int) -> int:
    """The 'tool' every system runs: nothing worth measuring."""
    return index * 2


# ---- maka -------------------------------------------------------------------------------------


def _maka_history(cache: Path) -> Path:
    from bench import bench_store

    template = bench_store._template(Path(tempfile.mkdtemp(prefix="maka-peers-template-")))
    from storage.ledger.ledger_schema import SCHEMA_VERSION

    # The rows are written in the schema of this tree: another schema is another history.
    key = b"".join(payload for _, _, _, payload in template.events)
    key += f"schema {SCHEMA_VERSION}".encode()
    events = 385_000
    return long_run.history_cache(
        key, events, lambda path: bench_store.generate_history(path, template, events)
    )


def _maka_worker(folder: Path, pauses: Pauses) -> None:
    from bench import bench_store
    from bench.tool_call_events import runtime_tool_call
    from runtime.agent.event_builders import EventBuilder, RunIdentity
    from storage.ledger.ledger_store import open_store
    from storage.ledger.sqlite_connection import Synchronous

    with open_store(folder) as store:
        store.set_synchronous(Synchronous(_SYNC["mode"]))
        ids = bench_store._fresh_run(store, "peers")
        builder = EventBuilder(
            RunIdentity(ids.session_id, ids.invocation_id, ids.run_id, ids.turn_id)
        )
        for index in range(pauses.steps):
            pauses.step(index)
            call, dispatch, response = runtime_tool_call(
                builder,
                f"bench-{index}",
                "Write",
                {"path": f"f{index}.txt", "content": "x" * 64},
                {"bytes": 64},
                recovery_mode="reconcile",
                ts=index,
            )
            store.commit_tool_prepared(call, dispatch)
            side_effect(index)
            store.commit_tool_outcome(response)
        pauses.step(pauses.steps)


# ---- DBOS -------------------------------------------------------------------------------------

_PAUSES: dict[str, Pauses] = {}


def _dbos_launch(database: Path) -> Any:
    dbos = _peer("dbos")
    sqlalchemy = _peer("sqlalchemy")
    sqlalchemy.event.listen(
        sqlalchemy.engine.Engine, "connect", lambda conn, record: _pragmas(conn)
    )
    app = dbos.DBOS(
        config={
            "name": "maka-peers",
            "system_database_url": f"sqlite:///{database}",
            "log_level": "WARNING",
        }
    )

    def step_body(index: int) -> int:
        return side_effect(index)

    dbos_step = dbos.DBOS.step()(step_body)

    def workflow_body(steps: int, pauses_key: str) -> int:
        pauses = _PAUSES.get(pauses_key)
        total = 0
        for index in range(steps):
            if pauses is not None:
                pauses.step(index)
            total += dbos_step(index)
        if pauses is not None:
            pauses.step(steps)
        return total

    dbos_workflow = dbos.DBOS.workflow()(workflow_body)
    dbos.DBOS.launch()
    return app, dbos_workflow


def _dbos_history(cache: Path) -> Path:
    def generate(folder: Path) -> None:
        script = (
            "import sys\n"
            "from pathlib import Path\n"
            "from bench import bench_peers as b\n"
            "b._SYNC['mode'] = 'OFF'\n"
            "app, workflow = b._dbos_launch(Path(sys.argv[1]))\n"
            "for _ in range(int(sys.argv[2])):\n"
            "    workflow(int(sys.argv[3]), '')\n"
            "b._peer('dbos').DBOS.destroy()\n"
        )
        steps = HISTORY_STEPS // HISTORY_WORKFLOWS
        subprocess.run(
            [sys.executable, "-c", script, str(folder / "dbos.sqlite"), str(HISTORY_WORKFLOWS),
             str(steps)],
            check=True,
        )  # fmt: skip

    return long_run.history_cache(b"dbos-history-v1", HISTORY_STEPS, generate)


def _dbos_worker(folder: Path, pauses: Pauses) -> None:
    _app, workflow = _dbos_launch(folder / "dbos.sqlite")
    _PAUSES["bench"] = pauses
    workflow(pauses.steps, "bench")
    _peer("dbos").DBOS.destroy()


# ---- LangGraph --------------------------------------------------------------------------------


def _langgraph_graph(database: Path) -> tuple[Any, sqlite3.Connection]:
    graph_module = _peer("langgraph.graph")
    saver_module = _peer("langgraph.checkpoint.sqlite")
    conn = sqlite3.connect(str(database), check_same_thread=False)
    _pragmas(conn)
    saver = saver_module.SqliteSaver(conn)
    saver.setup()

    def step(state: dict[str, Any]) -> dict[str, Any]:
        key = state.get("pauses")
        pauses = _PAUSES.get(key) if isinstance(key, str) else None
        index = int(state["index"])
        if pauses is not None:
            pauses.step(index)
        side_effect(index)
        return {"index": index + 1}

    def route(state: dict[str, Any]) -> str:
        return "step" if int(state["index"]) < int(state["steps"]) else graph_module.END

    typing_extensions = _peer("typing_extensions")
    state_type = typing_extensions.TypedDict(
        "LoopState", {"index": int, "steps": int, "pauses": str}
    )
    builder = graph_module.StateGraph(state_type)
    builder.add_node("step", step)
    builder.add_edge(graph_module.START, "step")
    builder.add_conditional_edges("step", route)
    return builder.compile(checkpointer=saver), conn


def _langgraph_run(graph: Any, thread: str, steps: int, pauses_key: str) -> None:
    graph.invoke(
        {"index": 0, "steps": steps, "pauses": pauses_key},
        config={"configurable": {"thread_id": thread}, "recursion_limit": steps + 10},
        durability="sync",
    )


def _langgraph_history(cache: Path) -> Path:
    def generate(folder: Path) -> None:
        _SYNC["mode"] = "OFF"
        graph, conn = _langgraph_graph(folder / "langgraph.sqlite")
        steps = HISTORY_STEPS // HISTORY_WORKFLOWS
        for index in range(HISTORY_WORKFLOWS):
            _langgraph_run(graph, f"history-{index}", steps, "")
        conn.close()
        _SYNC["mode"] = "FULL"

    return long_run.history_cache(b"langgraph-history-v1", HISTORY_STEPS, generate)


def _langgraph_worker(folder: Path, pauses: Pauses) -> None:
    graph, conn = _langgraph_graph(folder / "langgraph.sqlite")
    _PAUSES["bench"] = pauses
    _langgraph_run(graph, "bench", pauses.steps, "bench")  # a pause at each node's start
    pauses.step(pauses.steps)
    conn.close()


WORKERS: dict[str, Callable[[Path, Pauses], None]] = {
    "maka": _maka_worker,
    "dbos": _dbos_worker,
    "langgraph": _langgraph_worker,
}
HISTORIES: dict[str, Callable[[Path], Path]] = {
    "maka": _maka_history,
    "dbos": _dbos_history,
    "langgraph": _langgraph_history,
}
PEER_MODULES = {"dbos": "dbos", "langgraph": "langgraph.checkpoint.sqlite"}


def installed_systems() -> tuple[list[str], list[str]]:
    """The systems this environment can run, and the peers left out (not installed)."""
    missing = [
        name
        for name, module in PEER_MODULES.items()
        if importlib.util.find_spec(module.split(".")[0]) is None
        or importlib.util.find_spec(module) is None
    ]
    return [name for name in SYSTEMS if name not in missing], missing


# ---- the harness: workers in their own processes, blocks interleaved ----------------------------


@dataclass
class Worker:
    system: str
    condition: str
    process: subprocess.Popen[str]
    cpu_mark: float = 0.0
    block_cpu: list[float] = field(default_factory=list)
    block_wall: list[float] = field(default_factory=list)

    def _read_mark(self) -> tuple[float, float]:
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line.startswith("mark "):
            self.process.kill()
            raise SystemExit(f"the {self.system} worker ({self.condition}) failed: {line!r}")
        _, cpu, wall = line.split()
        return float(cpu), float(wall)

    def wait_ready(self) -> None:
        self.cpu_mark, _ = self._read_mark()

    def run_block(self) -> None:
        stdin: IO[str] | None = self.process.stdin
        assert stdin is not None
        stdin.write("go\n")
        stdin.flush()
        cpu, wall = self._read_mark()
        self.block_cpu.append(cpu - self.cpu_mark)
        self.block_wall.append(wall)
        self.cpu_mark = cpu

    def finish(self) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write("go\n")
        stdin.close()
        if self.process.wait(timeout=300) != 0:
            raise SystemExit(f"the {self.system} worker ({self.condition}) failed")


# ``--base DIR``: maka as another checkout has it, run from that folder by its own bench_peers.
BASE = "maka-base"
_BASE_TREE: dict[str, Path] = {}


def _start_worker(system: str, condition: str, folder: Path, steps: int, block: int) -> Worker:
    tree = _BASE_TREE.get(system)
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.bench_peers", "--worker", "maka" if tree else system,
         "--folder", str(folder), "--steps", str(steps), "--block", str(block)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)} if tree else None,
    )  # fmt: skip
    return Worker(system, condition, process)


def _base_history(cache: Path) -> Path:
    """The large history as the base checkout writes it (its own schema), cached like ours."""
    tree = _BASE_TREE[BASE]
    code = (
        "import sys; from pathlib import Path; from bench import bench_peers as p; "
        "print(p._maka_history(Path(sys.argv[1])))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(cache)],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(done.stdout.strip().splitlines()[-1])


def run_round(
    systems: list[str], conditions: tuple[str, ...], steps: int, block: int, work: Path
) -> dict[tuple[str, str], dict[str, float]]:
    """One round: a worker per system and condition, on new copies of the databases, their
    blocks interleaved; each one's summary per step."""
    workers: list[Worker] = []
    for condition in conditions:
        for system in systems:
            folder = work / f"{condition}-{system}"
            shutil.rmtree(folder, ignore_errors=True)
            if condition == "large":
                history = _base_history if system == BASE else HISTORIES[system]
                source = history(long_run.CACHE_ROOT)
                shutil.copytree(source, folder, ignore=shutil.ignore_patterns("complete"))
            else:
                folder.mkdir(parents=True)
            workers.append(_start_worker(system, condition, folder, steps, block))
    for worker in workers:
        worker.wait_ready()
    for index in range(-(-steps // block)):
        shift = index % len(workers)
        for worker in workers[shift:] + workers[:shift]:
            worker.run_block()
    for worker in workers:
        worker.finish()
    summaries: dict[tuple[str, str], dict[str, float]] = {}
    for worker in workers:
        sizes = [min(block, steps - start) for start in range(0, steps, block)]
        cpu = [used / size for used, size in zip(worker.block_cpu, sizes, strict=True)]
        wall = sorted(spent / size for spent, size in zip(worker.block_wall, sizes, strict=True))
        summaries[(worker.system, worker.condition)] = {
            "cpu_mean": sum(worker.block_cpu) / steps,
            "cpu_median": statistics.median(cpu),
            "median": statistics.median(wall),
            "p95": wall[int(0.95 * (len(wall) - 1))],
        }
    return summaries


def _spread(values: list[float]) -> str:
    middle = statistics.median(values)
    return f"spread {(max(values) - min(values)) / middle * 100:.0f}%" if middle else ""


def report(
    rounds: list[dict[tuple[str, str], dict[str, float]]],
    systems: list[str],
    conditions: tuple[str, ...],
    steps: int,
    block: int,
) -> str:
    lines = [
        f"{steps:,} steps per system and condition in one workflow, each in its own process, "
        f"blocks of {block} interleaved; {len(rounds)} rounds; SQLite WAL, synchronous=FULL; "
        f"load average {os.getloadavg()[0]:.2f}",
        "| system | condition | round | CPU/step mean | CPU/step median | wall/step median | "
        "wall/step p95 |",
        "|---|---|---|---|---|---|---|",
    ]
    for system in systems:
        for condition in conditions:
            for number, by_key in enumerate(rounds, 1):
                row = by_key[(system, condition)]
                lines.append(
                    f"| {system} | {condition} | {number} | {row['cpu_mean'] * 1e3:.3f} ms | "
                    f"{row['cpu_median'] * 1e3:.3f} ms | {row['median'] * 1e3:.3f} ms | "
                    f"{row['p95'] * 1e3:.3f} ms |"
                )
    lines.append("CPU per step (mean), rounds side by side:")
    for system in systems:
        for condition in conditions:
            values = [by_key[(system, condition)]["cpu_mean"] * 1e3 for by_key in rounds]
            shown = " / ".join(f"{value:.3f}" for value in values)
            lines.append(f"  {system:<10} {condition:<6} {shown} ms; {_spread(values)}")
    if "langgraph" in systems:
        for condition in conditions:
            ratios = [
                by_key[("maka", condition)]["cpu_mean"]
                / by_key[("langgraph", condition)]["cpu_mean"]
                for by_key in rounds
            ]
            shown = " / ".join(f"{ratio:.2f}" for ratio in ratios)
            lines.append(
                f"maka / LangGraph sync, CPU per step ({condition}), per round: {shown}; "
                f"{_spread(ratios)} (goal <= 0.8)"
            )
    if BASE in systems:
        for condition in conditions:
            ratios = [
                by_key[("maka", condition)]["cpu_mean"] / by_key[(BASE, condition)]["cpu_mean"]
                for by_key in rounds
            ]
            shown = " / ".join(f"{ratio:.2f}" for ratio in ratios)
            lines.append(
                f"maka / {BASE} ({_BASE_TREE[BASE]}), CPU per step ({condition}), per round: "
                f"{shown}; {_spread(ratios)}"
            )
    if conditions == ("fresh", "large"):
        lines.append("growth large / fresh per round (CPU mean; median wall):")
        for system in systems:
            growth = []
            for by_key in rounds:
                large, fresh = by_key[(system, "large")], by_key[(system, "fresh")]
                growth.append(
                    f"{large['cpu_mean'] / fresh['cpu_mean']:.2f}"
                    f"; {large['median'] / fresh['median']:.2f}"
                )
            lines.append(f"  {system:<10} " + " / ".join(growth))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2_000)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--condition", choices=("fresh", "large", "both"), default="both")
    parser.add_argument(
        "--systems",
        default=",".join(SYSTEMS),
        help="which systems, comma-separated (default: all three; maka is always run)",
    )
    parser.add_argument("--work", type=Path, help="where the databases go (default: a temp dir)")
    parser.add_argument(
        "--base",
        type=Path,
        help=f"another checkout of maka, run side by side as '{BASE}' (an earlier version)",
    )
    parser.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps < 1 or args.block < 1 or args.rounds < 1:
        parser.error("--steps, --block and --rounds must be positive")
    if args.worker:
        _SYNC["mode"] = "FULL"
        WORKERS[args.worker](args.folder, Pauses(args.block, args.steps))
        return
    systems, missing = installed_systems()
    wanted = {"maka", *args.systems.split(",")}
    if not wanted <= set(SYSTEMS):
        parser.error(f"--systems: choose among {', '.join(SYSTEMS)}")
    systems = [name for name in systems if name in wanted]
    if args.base is not None:
        _BASE_TREE[BASE] = args.base.resolve()
        systems.insert(1, BASE)
    if missing:
        print(
            f"not installed, left out: {', '.join(missing)} (pip install -e '.[bench]' in a "
            "separate environment)"
        )
    work = args.work or Path(tempfile.mkdtemp(prefix="maka-bench-peers-"))
    conditions = ("fresh", "large") if args.condition == "both" else (args.condition,)
    rounds = [
        run_round(systems, conditions, args.steps, args.block, work) for _ in range(args.rounds)
    ]
    print(report(rounds, systems, conditions, args.steps, args.block))
    print()
    print(GUARANTEES)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
