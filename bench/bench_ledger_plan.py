"""Benchmark: ``maka ledger plan FILE --json`` on a 100,000-event run ledger.

The ledger is one T1 run (the marker on its first user event) with model text and thinking, 22,000
call/dispatch/response triples over five tools, and a final call whose dispatch has no response
(so the plan is blocked with one indeterminate operation, the worst case for the report: every
operation is projected and the directive is printed). Lines are canonical bytes.

The figure is wall-clock time of the real command in a fresh process, interpreter start-up
included, median of several runs. Goal: under 0.9 s on the project's 2-core reference machine.

Usage::

    .venv/bin/python -m bench.bench_ledger_plan [--runs 5] [--events N] [--keep FILE [--reuse]]
        [--baseline DIR]

``--baseline DIR``: a source tree of the product (its ``app/`` and ``runtime/``, for example
``git archive REV app runtime | tar -x -C DIR``) timed in the same run, round by round
interleaved with this tree, both through ``python -m app.cli``; prints the ratio of the medians.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from runtime.ledger.canonical_codec import canonical_args_hash, canonical_bytes, operation_id
from runtime.ledger.event_model import RuntimeEvent, decode_event_json

EVENT_COUNT = 100_000
TRIPLES = 22_000
GOAL_SECONDS = 0.9
IDS = {"sessionId": "sess-bench", "invocationId": "inv-bench", "runId": "run-bench"}
TURN = "turn-bench"

TOOLS: tuple[tuple[str, Any], ...] = (
    ("Read", lambda i: {"path": f"src/module_{i % 400}.py"}),
    ("Write", lambda i: {"path": f"out/file_{i}.txt", "content": f"line {i}\n" * 3}),
    ("Edit", lambda i: {"path": f"src/module_{i % 400}.py", "old": "x = 1", "new": f"x = {i}"}),
    ("Bash", lambda i: {"command": f"pytest -q tests/test_{i % 50}.py", "timeoutMs": 120000}),
    ("Glob", lambda i: {"pattern": f"**/*_{i % 10}.py"}),
)


def _event(event_id: str, ts: int, role: str, author: str, **rest: Any) -> RuntimeEvent:
    event: dict[str, Any] = {
        "id": event_id,
        **IDS,
        "turnId": TURN,
        "ts": ts,
        "partial": False,
        "role": role,
        "author": author,
        **rest,
    }
    return event  # type: ignore[return-value]


def _triple(index: int, ts: int, *, respond: bool = True) -> list[RuntimeEvent]:
    name, make_args = TOOLS[index % len(TOOLS)]
    args = make_args(index)
    call_id = f"call_{index:06d}"
    op = operation_id(IDS["invocationId"], call_id)
    call = _event(
        f"evt-call-{index}",
        ts,
        "model",
        "agent",
        content={"kind": "function_call", "id": call_id, "name": name, "args": args},
    )
    dispatch = _event(
        f"{op}_dispatch",
        ts + 1,
        "system",
        "system",
        actions={
            "toolDispatch": {
                "protocol": "t1_after_preflight_v1",
                "operationId": op,
                "providerToolCallId": call_id,
                "toolName": name,
                "canonicalArgsHash": canonical_args_hash(name, args),
                "recoveryMode": "reconcile" if name in ("Write", "Edit") else "never_auto_retry",
            }
        },
        refs={"operationId": op, "toolCallId": call_id},
    )
    if not respond:
        return [call, dispatch]
    response = _event(
        f"{op}_response",
        ts + 2,
        "tool",
        "tool",
        content={
            "kind": "function_response",
            "id": call_id,
            "name": name,
            "result": {"ok": True, "output": f"result of {name} #{index}"},
        },
        actions={"stateDelta": {"durationMs": 3 + index % 40}},
        refs={"operationId": op, "toolCallId": call_id},
    )
    return [call, dispatch, response]


def _filler(index: int, ts: int) -> RuntimeEvent:
    if index % 2:
        return _event(
            f"evt-think-{index}",
            ts,
            "model",
            "agent",
            content={"kind": "thinking", "text": f"Considering step {index}.", "signature": "sig"},
        )
    return _event(
        f"evt-text-{index}",
        ts,
        "model",
        "agent",
        content={"kind": "text", "text": f"Step {index} looks fine; continuing."},
    )


def triples_for(event_count: int) -> int:
    """The call/dispatch/response triples of a ledger of ``event_count`` events (22 % of it,
    as in the 100,000-event ledger)."""
    return event_count * TRIPLES // EVENT_COUNT


def iter_ledger(event_count: int = EVENT_COUNT) -> Iterator[RuntimeEvent]:
    """The benchmark ledger: exactly ``event_count`` events of one T1 run, one at a time."""
    triples = triples_for(event_count)
    fillers = event_count - 1 - 3 * triples - 2
    ts = 1_767_225_600_000
    yield _event(
        "evt-user",
        ts,
        "user",
        "user",
        content={"kind": "text", "text": "Refactor the project and run the tests."},
        actions={"runtimeProtocol": {"toolBoundary": "t1_after_preflight_v1"}},
    )
    placed = 0
    for index in range(triples):
        # Spread the text/thinking events evenly between the triples.
        due = (index + 1) * fillers // (triples + 1)
        while placed < due:
            ts += 1
            yield _filler(placed, ts)
            placed += 1
        ts += 3
        yield from _triple(index, ts)
    while placed < fillers:
        ts += 1
        yield _filler(placed, ts)
        placed += 1
    yield from _triple(triples, ts + 1, respond=False)


def generate_ledger(event_count: int = EVENT_COUNT) -> list[RuntimeEvent]:
    """The benchmark ledger as a list."""
    events = list(iter_ledger(event_count))
    assert len(events) == event_count
    return events


def write_ledger(path: Path, event_count: int = EVENT_COUNT) -> None:
    with path.open("wb") as out:
        for event in iter_ledger(event_count):
            out.write(canonical_bytes(event) + b"\n")


def _maka() -> list[str]:
    script = Path(sys.executable).with_name("maka")
    return [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]


def _check_output(path: Path, event_count: int) -> None:
    done = subprocess.run(
        [*_maka(), "ledger", "plan", str(path), "--json"],
        check=True,
        capture_output=True,
    )
    plan = json.loads(done.stdout)
    assert plan["sourceRuntimeEventHighWater"] == event_count, plan["sourceRuntimeEventHighWater"]
    assert plan["disposition"] == "blocked"
    assert len(plan["operations"]) == triples_for(event_count) + 1
    assert [op["status"] for op in plan["operations"][-1:]] == ["indeterminate"]
    assert len(plan["replayRuntimeEventIds"]) == event_count - 1  # the unpaired last call


def compile_product(root: Path | None = None) -> None:
    """Write the product's bytecode, as every installed form of it has (wheel, bundle, .deb):
    a development checkout run with ``PYTHONDONTWRITEBYTECODE`` would otherwise compile every
    module of the command again at each start."""
    root = root or Path(__file__).resolve().parents[1]
    for package in ("app", "runtime"):
        compileall.compile_dir(root / package, quiet=1)


def _reap_orphans_here() -> bool:
    """Become the reaper of this process's orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``).
    The command leaves its forked child to the system when it exits; reaped here instead, the
    child's CPU time is counted with the command's."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(36, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _reap_orphans() -> None:
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _tree_command(tree: Path) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run the product in source tree ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("MAKA_FAILPOINT", None)
    return [sys.executable, "-m", "app.cli"], env


class Measured(NamedTuple):
    wall: float
    cpu: float
    """User + system seconds of the command and every child it waited for (or this process
    reaped)."""
    peak_rss: int
    """Bytes: the largest sum of the resident sets of the command's processes, sampled every
    ``RSS_SAMPLE_SECONDS`` from /proc (0 where there is no /proc)."""
    max_rss: int
    """Bytes: the kernel's peak resident set of the largest single process of the command
    (``wait4``'s ``ru_maxrss``), exact but not a sum."""


RSS_SAMPLE_SECONDS = 0.01


def _tree_rss(pid: int) -> int:
    """The resident bytes of ``pid`` and its descendants now (0 once they are gone)."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            with open(f"/proc/{current}/statm", "rb") as statm:
                total += int(statm.read().split()[1]) * resource.getpagesize()
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children", "rb") as children:
                    pending.extend(int(child) for child in children.read().split())
        except (OSError, ValueError, IndexError):
            continue
    return total


def _time_once(command: list[str], path: Path, env: dict[str, str], cwd: Path | None) -> Measured:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    process = subprocess.Popen(
        [*command, "ledger", "plan", str(path), "--json"],
        stdout=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
    )
    peak = 0
    sample = Path("/proc").is_dir()
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG if sample else 0)
        if pid:
            break
        peak = max(peak, _tree_rss(process.pid))
        time.sleep(RSS_SAMPLE_SECONDS)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, process.args)
    _reap_orphans()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Measured(wall, cpu, peak, usage.ru_maxrss * 1024)


def time_trees(path: Path, runs: int, trees: list[Path]) -> tuple[list[list[Measured]], bool]:
    """(wall, CPU) per run of each source tree, the trees interleaved round by round (after
    one untimed warm-up round), so that the machine's load falls on all of them alike."""
    whole = _reap_orphans_here()
    commands = [_tree_command(tree) for tree in trees]
    timings: list[list[Measured]] = [[] for _ in trees]
    for round_index in range(runs + 1):
        for index, (command, env) in enumerate(commands):
            measured = _time_once(command, path, env, trees[index])
            if round_index:
                timings[index].append(measured)
    return timings, whole


def time_plan(path: Path, runs: int) -> tuple[list[Measured], bool]:
    """(wall seconds, CPU seconds of the command) per run, and whether the CPU time includes
    the forked child's. CPU time is reported too because wall time on a shared 2-core machine
    also measures whatever else is running; it adds up both processes of the command (on a
    large file a forked child decodes and plans part of it), so it is larger than the wall time
    when the command uses both cores."""
    env = {**os.environ}
    env.pop("MAKA_FAILPOINT", None)
    whole = _reap_orphans_here()
    timings = [_time_once(_maka(), path, env, None) for _ in range(runs)]
    return timings, whole


def _ledger(args: argparse.Namespace, scratch: str) -> Path:
    """The benchmark ledger: ``--keep FILE`` when it exists and ``--reuse`` is given, else
    written (there, or in ``scratch``)."""
    path: Path = args.keep or Path(scratch) / f"bench-{args.events}.jsonl"
    if not (args.reuse and path.exists()):
        write_ledger(path, args.events)
    return path


def _mb(size: float) -> str:
    return f"{size / 1e6:.1f} MB"


def _report_memory(name: str, timings: list[Measured], size: int) -> None:
    peak = max(measured.peak_rss for measured in timings)
    largest = max(measured.max_rss for measured in timings)
    print(
        f"{name}peak RSS, all processes of the command (sampled): {_mb(peak)}"
        f" ({peak / size:.2f}x the file); largest process (ru_maxrss): {_mb(largest)}"
        f" ({largest / size:.2f}x)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--events", type=int, default=EVENT_COUNT, help="ledger size in events")
    parser.add_argument("--keep", type=Path, help="write the ledger here and keep it")
    parser.add_argument(
        "--reuse", action="store_true", help="with --keep: use the file there if it exists"
    )
    parser.add_argument("--baseline", type=Path, help="a source tree to time against this one")
    args = parser.parse_args(argv)
    if args.baseline is not None:
        return _compare(args.baseline.resolve(), args)
    with tempfile.TemporaryDirectory() as scratch:
        path = _ledger(args, scratch)
        with path.open("rb") as first:
            decode_event_json(first.readline().rstrip(b"\n"))  # the generator speaks v1
        size = path.stat().st_size
        compile_product()
        _check_output(path, args.events)
        load = os.getloadavg()
        timings, whole = time_plan(path, args.runs)
    walls = [measured.wall for measured in timings]
    cpus = [measured.cpu for measured in timings]
    median = statistics.median(walls)
    print(f"ledger: {args.events} events, {_mb(size)}")
    print("wall (s): " + ", ".join(f"{t:.3f}" for t in walls))
    counted = "both processes" if whole else "the command's own process only"
    print(f"cpu  (s, {counted}): " + ", ".join(f"{t:.3f}" for t in cpus))
    print(f"load average before timing: {load[0]:.2f}")
    print(
        f"median wall: {median:.3f} s (goal < {GOAL_SECONDS} s on 100,000 events, ratio"
        f" {median / GOAL_SECONDS:.2f}); median cpu: {statistics.median(cpus):.3f} s"
    )
    _report_memory("", timings, size)
    return 0


def _compare(baseline: Path, args: argparse.Namespace) -> int:
    """This tree against ``baseline``, interleaved in one run."""
    here = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as scratch:
        path = _ledger(args, scratch)
        size = path.stat().st_size
        for tree in (baseline, here):
            compile_product(tree)
        load = os.getloadavg()
        (before, after), whole = time_trees(path, args.runs, [baseline, here])
    counted = "both processes" if whole else "the command's own process only"
    print(
        f"ledger: {args.events} events, {_mb(size)}; cpu counts {counted};"
        f" load before: {load[0]:.2f}"
    )
    medians = {}
    for name, timings in (("baseline", before), ("this tree", after)):
        walls = [measured.wall for measured in timings]
        cpus = [measured.cpu for measured in timings]
        medians[name] = (statistics.median(walls), statistics.median(cpus))
        print(f"{name:>9}: cpu (s) " + ", ".join(f"{t:.3f}" for t in cpus))
        print(f"{'':>9}  wall (s) " + ", ".join(f"{t:.3f}" for t in walls))
        _report_memory(f"{'':>9}  ", timings, size)
    (wall_0, cpu_0), (wall_1, cpu_1) = medians["baseline"], medians["this tree"]
    print(
        f"median cpu: baseline {cpu_0:.3f} s, this tree {cpu_1:.3f} s (ratio {cpu_1 / cpu_0:.3f});"
        f" median wall: {wall_0:.3f} s, {wall_1:.3f} s (ratio {wall_1 / wall_0:.3f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
