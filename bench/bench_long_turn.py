"""Benchmark: one long turn, step by step (issue 23, goal 2).

Drives the real session service and run loop, with the real tools and the real SQLite store, through
one turn of 2,000 model steps, each a ``list_dir`` call, against a provider that answers at once
(it reads nothing of the request and streams one tool call). A step is the time between two
provider calls, less the provider's own time: building the request from the turn's history, the
T1/T2 of the call, the tool, the step's events. Prints the median of the first and of the last
500 steps (wall and CPU) and their ratio (goal: last <= 2x first).

Usage::

    .venv/bin/python -m bench.bench_long_turn [--steps 2000] [--window 500] [--sync FULL|OFF]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from runtime.agent.permission_policy import PermissionMode, PermissionPolicy
from runtime.agent.run_loop import RunSettings
from runtime.agent.session_service import SessionService
from runtime.base.cancel_token import CancelToken
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import RunStatus
from runtime.providers.provider_port import (
    Finished,
    ProviderRequest,
    StreamEvent,
    TextDelta,
    ToolCallReady,
)
from storage.ledger.ledger_store import open_store
from storage.ledger.sqlite_connection import Synchronous


class InstantProvider:
    """Answers each request at once: a ``list_dir`` call for ``steps`` steps, then a text.
    Notes when each request arrived and how long it spent itself."""

    name = "instant"
    label = "instant bench provider"

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.calls = 0
        self.arrivals: list[tuple[float, float]] = []
        self.own: list[tuple[float, float]] = []
        self.history_lengths: list[int] = []

    def stream(self, request: ProviderRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        started = (time.perf_counter(), time.process_time())
        self.arrivals.append(started)
        self.history_lengths.append(len(request.history))
        self.calls += 1
        if self.calls <= self.steps:
            events: list[StreamEvent] = [
                ToolCallReady(f"c{self.calls}", "list_dir", {"path": "."}),
                Finished("tool_use"),
            ]
        else:
            events = [TextDelta("done"), Finished("end_turn")]
        self.own.append((time.perf_counter() - started[0], time.process_time() - started[1]))
        yield from events


class QuietObserver:
    def text_delta(self, text: str) -> None:
        del text

    def thinking_delta(self, text: str) -> None:
        del text

    def committed(self, event: RuntimeEvent) -> None:
        del event

    def run_status(self, run_id: str, status: RunStatus, failure_class: str | None) -> None:
        del run_id, status, failure_class


def run_turn(steps: int, sync: str, folder: Path) -> InstantProvider:
    provider = InstantProvider(steps)
    work = folder / "work"
    work.mkdir()
    for index in range(20):
        (work / f"file{index:02d}.txt").write_text("x\n")
    with open_store(folder / "data") as store:
        store.set_synchronous(Synchronous(sync))
        service = SessionService(
            store=store,
            provider_factory=lambda: provider,
            owner_epoch=1,
            settings=RunSettings(max_steps=steps + 1),
        )
        session = service.create_session(work)
        outcome = service.send_turn(
            session.session_id,
            "list the folder, many times",
            QuietObserver(),
            PermissionPolicy(PermissionMode.AUTO),
        )
        if outcome.status is not RunStatus.COMPLETED or provider.calls != steps + 1:
            raise SystemExit(f"the turn did not run to its end: {outcome}")
    return provider


def step_times(provider: InstantProvider) -> tuple[list[float], list[float]]:
    """Wall and CPU of each step: from one request to the next, less the provider's own time."""
    walls: list[float] = []
    cpus: list[float] = []
    for index in range(1, len(provider.arrivals)):
        wall = provider.arrivals[index][0] - provider.arrivals[index - 1][0]
        cpu = provider.arrivals[index][1] - provider.arrivals[index - 1][1]
        walls.append(wall - provider.own[index - 1][0])
        cpus.append(cpu - provider.own[index - 1][1])
    return walls, cpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2_000)
    parser.add_argument("--window", type=int, default=500)
    parser.add_argument("--sync", choices=("FULL", "OFF"), default="FULL")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="maka-bench-turn-") as folder:
        provider = run_turn(args.steps, args.sync, Path(folder))
    walls, cpus = step_times(provider)
    window = args.window
    first_wall, last_wall = statistics.median(walls[:window]), statistics.median(walls[-window:])
    first_cpu, last_cpu = statistics.median(cpus[:window]), statistics.median(cpus[-window:])
    print(
        f"one turn of {args.steps:,} list_dir steps (synchronous={args.sync}); history at the last "
        f"request: {provider.history_lengths[-1]:,} items"
    )
    print(
        f"  median step, first {window}: {first_wall * 1e3:.3f} ms wall, "
        f"{first_cpu * 1e3:.3f} ms CPU; last {window}: {last_wall * 1e3:.3f} ms wall, "
        f"{last_cpu * 1e3:.3f} ms CPU"
    )
    print(
        f"  last / first: wall {last_wall / first_wall:.2f}, CPU {last_cpu / first_cpu:.2f} "
        f"(goal <= 2)"
    )


if __name__ == "__main__":
    main()
