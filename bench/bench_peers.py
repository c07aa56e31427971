"""Benchmark: the durable cost of one step here and in two peers, side by side (issue 23).

Three systems take 2,000 steps each in **one** long workflow, interleaved step by step in one
process, all on SQLite in WAL mode with ``synchronous=FULL``:

- **maka**: one tool call through the store's writers, T1 (``commit_tool_prepared``: the call and
  its dispatch, validated, committed *before* the side effect) and T2 (``commit_tool_outcome``:
  the result, validated, committed after it);
- **DBOS Transact** (``dbos``, SQLite system database): one ``@DBOS.step()`` inside a
  ``@DBOS.workflow()`` (the step's output is recorded after the step ran);
- **LangGraph** with ``SqliteSaver`` and ``durability="sync"``: one super-step of a one-node
  graph that loops (the checkpoint and the node's writes are committed before the next step).

A step is measured from its start to the start of the next one, inside the workflow's own
thread, so each system's bookkeeping between steps counts; CPU is the whole process's
(``time.process_time``: every thread, DBOS's background threads included), wall is the thread's.
Each condition runs in its own child process (DBOS allows one instance per process):

- ``fresh``: empty databases;
- ``large``: databases already holding 100,000 operations of earlier workflows (maka: the
  385,000-event history of ``bench_store`` (b); DBOS: 50 workflows of 2,000 steps; LangGraph: 50
  threads of 2,000 super-steps), generated once with ``synchronous=OFF`` by the systems
  themselves and cached under ``/tmp/maka-bench-store-cache``.

Prints per system and condition: CPU per step (mean and median), median and p95 wall time,
and the growth large / fresh; then what each records before the side effect.

The peers are an optional extra: ``pip install -e '.[bench]'`` (in a separate environment; the
project's own environment and CI never install them).

Usage::

    python -m bench.bench_peers [--steps 2000] [--condition fresh|large|both]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import store_long_run as long_run

HISTORY_STEPS = 100_000
HISTORY_WORKFLOWS = 50
SYSTEMS = ("maka", "dbos", "langgraph")

GUARANTEE_ROWS = (
    (
        "maka (T1 + T2)",
        "the model's function_call and the tool_dispatch (operation id, canonical args hash, "
        "recovery mode, file evidence), validated against the run's ledger, with the prepared "
        "operation and journal rows (T1, one transaction)",
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


# ---- stepping: one step of one system at a time -----------------------------------------------


class Stepper:
    """Runs a workflow in its own thread; the workflow calls ``tick()`` at the start of each
    step (and once after the last). ``advance()`` lets it run exactly one step. The time between
    two ticks, less the wait for ``advance``, is the step's cost."""

    def __init__(self, name: str, body: Callable[[Stepper], None]) -> None:
        self.name = name
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self._go = threading.Semaphore(0)
        self._arrived = threading.Semaphore(0)
        self._started: tuple[float, float] | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(body,), daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._arrived.acquire()  # the first tick

    def _run(self, body: Callable[[Stepper], None]) -> None:
        try:
            body(self)
        except BaseException as error:  # reported by the harness
            self.error = error
            self._arrived.release()

    def tick(self) -> None:
        now = (time.perf_counter(), time.process_time())
        if self._started is not None:
            self.wall.append(now[0] - self._started[0])
            self.cpu.append(now[1] - self._started[1])
        self._arrived.release()
        self._go.acquire()
        self._started = (time.perf_counter(), time.process_time())

    def advance(self) -> None:
        self._go.release()
        self._arrived.acquire()
        if self.error is not None:
            raise RuntimeError(f"{self.name} failed") from self.error

    def finish(self) -> None:
        self._go.release()
        self._thread.join(60)


# ---- maka -------------------------------------------------------------------------------------


def _maka_history(cache: Path) -> Path:
    from bench import bench_store

    template = bench_store._template(Path(tempfile.mkdtemp(prefix="maka-peers-template-")))
    key = b"".join(payload for _, _, _, payload in template.events)
    events = 385_000
    return long_run.history_cache(
        key, events, lambda path: bench_store.generate_history(path, template, events)
    )


def _maka_body(folder: Path, steps: int) -> Callable[[Stepper], None]:
    from bench import bench_store
    from storage.ledger_store import open_store
    from storage.sqlite_connection import Synchronous

    def body(stepper: Stepper) -> None:
        with open_store(folder) as store:
            store.set_synchronous(Synchronous(_SYNC["mode"]))
            ids = bench_store._fresh_run(store, "peers")
            for index in range(steps):
                stepper.tick()
                call, dispatch, response = bench_store._tool_call(ids, index)
                store.commit_tool_prepared(call, dispatch)
                side_effect(index)
                store.commit_tool_outcome(response)
            stepper.tick()

    return body


def side_effect(index: int) -> int:
    """The 'tool' every system runs: nothing worth measuring."""
    return index * 2


# ---- DBOS -------------------------------------------------------------------------------------

_DBOS_STEPPERS: dict[str, Stepper] = {}


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

    def workflow_body(steps: int, stepper_key: str) -> int:
        stepper = _DBOS_STEPPERS.get(stepper_key)
        total = 0
        for index in range(steps):
            if stepper is not None:
                stepper.tick()
            total += dbos_step(index)
        if stepper is not None:
            stepper.tick()
        return total

    dbos_workflow = dbos.DBOS.workflow()(workflow_body)
    dbos.DBOS.launch()
    return app, dbos_workflow


def _dbos_history(cache: Path) -> Path:
    def generate(folder: Path) -> None:
        _SYNC["mode"] = "OFF"
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


def _dbos_body(database: Path, steps: int) -> Callable[[Stepper], None]:
    _app, workflow = _dbos_launch(database)

    def body(stepper: Stepper) -> None:
        _DBOS_STEPPERS["bench"] = stepper
        workflow(steps, "bench")

    return body


# ---- LangGraph --------------------------------------------------------------------------------


def _langgraph_graph(database: Path) -> tuple[Any, sqlite3.Connection]:
    graph_module = _peer("langgraph.graph")
    saver_module = _peer("langgraph.checkpoint.sqlite")
    conn = sqlite3.connect(str(database), check_same_thread=False)
    _pragmas(conn)
    saver = saver_module.SqliteSaver(conn)
    saver.setup()

    def step(state: dict[str, Any]) -> dict[str, Any]:
        ticker = state.get("ticker")
        stepper = _LG_STEPPERS.get(ticker) if isinstance(ticker, str) else None
        if stepper is not None:
            stepper.tick()
        index = int(state["index"])
        side_effect(index)
        return {"index": index + 1}

    def route(state: dict[str, Any]) -> str:
        return "step" if int(state["index"]) < int(state["steps"]) else graph_module.END

    typing_extensions = _peer("typing_extensions")
    state_type = typing_extensions.TypedDict(
        "LoopState", {"index": int, "steps": int, "ticker": str}
    )
    builder = graph_module.StateGraph(state_type)
    builder.add_node("step", step)
    builder.add_edge(graph_module.START, "step")
    builder.add_conditional_edges("step", route)
    return builder.compile(checkpointer=saver), conn


_LG_STEPPERS: dict[str, Stepper] = {}


def _langgraph_run(graph: Any, thread: str, steps: int, ticker: str) -> None:
    graph.invoke(
        {"index": 0, "steps": steps, "ticker": ticker},
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


def _langgraph_body(database: Path, steps: int) -> Callable[[Stepper], None]:
    graph, _conn = _langgraph_graph(database)

    def body(stepper: Stepper) -> None:
        # The stepper's tick at each node start; one more once the loop has ended.
        _LG_STEPPERS["bench"] = stepper
        _langgraph_run(graph, "bench", steps, "bench")
        stepper.tick()

    return body


# ---- one condition, in this process -----------------------------------------------------------


def _summary(stepper: Stepper) -> dict[str, float]:
    ordered = sorted(stepper.wall)
    return {
        "steps": len(stepper.wall),
        "cpu_mean": statistics.fmean(stepper.cpu),
        "cpu_median": statistics.median(stepper.cpu),
        "median": statistics.median(stepper.wall),
        "p95": ordered[int(0.95 * (len(ordered) - 1))],
    }


def run_condition(condition: str, steps: int, work: Path) -> dict[str, dict[str, float]]:
    """All three systems, ``steps`` steps each, interleaved; returns each one's summary."""
    work.mkdir(parents=True, exist_ok=True)
    folders = {name: work / f"{condition}-{name}" for name in SYSTEMS}
    for folder in folders.values():
        shutil.rmtree(folder, ignore_errors=True)
    if condition == "large":
        sources = {
            "maka": _maka_history(long_run.CACHE_ROOT),
            "dbos": _dbos_history(long_run.CACHE_ROOT),
            "langgraph": _langgraph_history(long_run.CACHE_ROOT),
        }
        for name, source in sources.items():
            shutil.copytree(source, folders[name], ignore=shutil.ignore_patterns("complete"))
    else:
        for folder in folders.values():
            folder.mkdir(parents=True)
    _SYNC["mode"] = "FULL"
    steppers = [
        Stepper("maka", _maka_body(folders["maka"], steps)),
        Stepper("dbos", _dbos_body(folders["dbos"] / "dbos.sqlite", steps)),
        Stepper("langgraph", _langgraph_body(folders["langgraph"] / "langgraph.sqlite", steps)),
    ]
    for stepper in steppers:
        stepper.start()
    for index in range(steps):
        order = steppers[index % 3 :] + steppers[: index % 3]
        for stepper in order:
            stepper.advance()
    for stepper in steppers:
        stepper.finish()
    _peer("dbos").DBOS.destroy()
    return {stepper.name: _summary(stepper) for stepper in steppers}


def _child(condition: str, steps: int, work: Path) -> dict[str, dict[str, float]]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.bench_peers", "--child", condition, "--steps", str(steps),
         "--work", str(work)],
        check=True,
        capture_output=True,
        text=True,
    )  # fmt: skip
    result: dict[str, dict[str, float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def report(results: dict[str, dict[str, dict[str, float]]], steps: int) -> str:
    lines = [
        f"{steps:,} steps per system in one workflow, interleaved; SQLite WAL, synchronous=FULL; "
        f"load average {os.getloadavg()[0]:.2f}",
        "| system | condition | CPU/step mean | CPU/step median | median wall | p95 wall |",
        "|---|---|---|---|---|---|",
    ]
    for name in SYSTEMS:
        for condition, by_system in results.items():
            row = by_system[name]
            lines.append(
                f"| {name} | {condition} | {row['cpu_mean'] * 1e3:.3f} ms | "
                f"{row['cpu_median'] * 1e3:.3f} ms | {row['median'] * 1e3:.3f} ms | "
                f"{row['p95'] * 1e3:.3f} ms |"
            )
    if "fresh" in results and "large" in results:
        lines.append("growth large / fresh (CPU mean, CPU median, median wall):")
        for name in SYSTEMS:
            fresh, large = results["fresh"][name], results["large"][name]
            lines.append(
                f"  {name:<10} {large['cpu_mean'] / fresh['cpu_mean']:.2f}, "
                f"{large['cpu_median'] / fresh['cpu_median']:.2f}, "
                f"{large['median'] / fresh['median']:.2f}"
            )
    for condition, by_system in results.items():
        ours, lg = by_system["maka"], by_system["langgraph"]
        lines.append(
            f"maka / LangGraph sync, CPU per step ({condition}): mean "
            f"{ours['cpu_mean'] / lg['cpu_mean']:.2f}, median "
            f"{ours['cpu_median'] / lg['cpu_median']:.2f} (goal <= 1)"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2_000)
    parser.add_argument("--condition", choices=("fresh", "large", "both"), default="both")
    parser.add_argument("--work", type=Path, help="where the databases go (default: a temp dir)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = run_condition(args.child, args.steps, args.work)
        print(json.dumps(result))
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="maka-bench-peers-"))
    conditions = ("fresh", "large") if args.condition == "both" else (args.condition,)
    results = {condition: _child(condition, args.steps, work) for condition in conditions}
    print(report(results, args.steps))
    print()
    print(GUARANTEES)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
