"""Benchmark: the ledger codec, the tool-ledger scanner and incremental write validation.

Generates a 100,000-event ledger (one run: user and model text, tool turns with call, T1
dispatch and T2 response, pre-T1 synthetic results, parked and completed recovery bundles) and
prints events per second for:

- decode + canonical encode: ``decode_event_json(line)`` then ``canonical_bytes(event)``
  (goal >= 20,000 events/s);
- the scanner over already-decoded events (goal >= 100,000 events/s);
- ``check_ledger_bytes`` end to end (decode, canonical check, scanner, recovery tails);
- one T1 validation with ``validate_candidates`` against 1,000 vs 100,000 events of history:
  the ratio shows the cost does not grow with history;
- the provider replay projection a Safe resume builds the model's history with
  (``project_provider_items`` over the decoded run), in CPU ms per 10,000 events against the plain
  decode of the same lines (``decode_event_json`` each, the collector paused as the ledger reader
  does), measured side by side in ``--rounds`` interleaved rounds: medians, and the median of
  the rounds' ratios.

Time is the process's CPU time (``time.process_time``), best of ``--repeat`` runs: other work on
the machine then changes the figures little; the wall-clock rate is printed alongside.

Usage::

    .venv/bin/python -m bench.bench_ledger [--events 100000] [--repeat 3] [--rounds 7]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from runtime.continuation.provider_replay import project_provider_items
from runtime.ledger.canonical_codec import canonical_bytes
from runtime.ledger.codes import TransitionKind
from runtime.ledger.collector_pause import collector_paused
from runtime.ledger.event_model import RuntimeEvent, decode_event_json
from runtime.ledger.ledger_file import check_ledger_bytes
from runtime.ledger.tool_ledger_scanner import ToolLedgerScanner
from runtime.ledger.transition_validator import validate_candidates
from tests.helpers.ledger_builders import (
    RunIds,
    call_event,
    dispatch_event,
    model_text,
    terminal,
    to_jsonl,
    tool_turn,
    user_text,
)

ENCODE_GOAL = 20_000
SCAN_GOAL = 100_000
IDS = RunIds("sess-bench", "inv-bench", "run-bench", "turn-bench")
# One cycle of 20 events: texts, three normal tool turns, one synthetic result, one bundle.
CYCLE = ("text", "response", "response", "synthetic", "response", "bundle")


def generate(count: int) -> list[RuntimeEvent]:
    events: list[RuntimeEvent] = [user_text(ids=IDS, marker=True)]
    index = 0
    while len(events) < count - 1:
        kind = CYCLE[index % len(CYCLE)]
        ts = 10 + index * 10
        if kind == "text":
            events.append(model_text(f"step {index}", event_id=f"m-{index}", ids=IDS, ts=ts))
        else:
            ending = kind if kind != "bundle" else ("parked", "completed")[index % 2]
            args = {"path": f"src/file_{index}.py", "content": f"line {index}\n" * 4}
            events.extend(tool_turn(f"call-{index}", ids=IDS, ts=ts, ending=ending, args=args))
        index += 1
    events = events[: count - 1]
    events.append(terminal(IDS, ts=10 + index * 10))
    return events


def best_rates(count: int, repeat: int, work: Callable[[], Any]) -> tuple[float, float]:
    """(events per CPU second, events per wall-clock second), best of ``repeat`` runs."""
    cpu = wall = float("inf")
    for _ in range(repeat):
        gc.collect()
        started_cpu, started_wall = time.process_time(), time.perf_counter()
        work()
        cpu = min(cpu, time.process_time() - started_cpu)
        wall = min(wall, time.perf_counter() - started_wall)
    return count / cpu, count / wall


def per_call_seconds(repeat: int, work: Callable[[], Any], calls: int = 2000) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for _ in range(calls):
            work()
        best = min(best, (time.process_time() - started) / calls)
    return best


def t1_validation_cost(events: list[RuntimeEvent], repeat: int) -> float:
    """Seconds for one T1 validation against ``events`` as history (scanner kept warm)."""
    history = events[:-1]  # leave the run open
    scanner = ToolLedgerScanner()
    scanner.feed_all(history)
    stored = {event["id"]: canonical_bytes(event) for event in history}
    call = call_event("call-new", ids=IDS, ts=10**9)
    candidates = [call, dispatch_event(call)]

    def validate() -> None:
        verdict = validate_candidates(scanner, candidates, TransitionKind.T1_PREPARE, stored.get)
        assert verdict.ok, verdict

    return per_call_seconds(repeat, validate)


def _cpu(work: Callable[[], Any]) -> float:
    gc.collect()
    started = time.process_time()
    work()
    return time.process_time() - started


def provider_replay_rounds(lines: list[bytes], rounds: int) -> tuple[float, float, float]:
    """(decode, projection) CPU seconds per 10,000 events, medians over ``rounds`` interleaved
    rounds, and the median of the rounds' projection/decode ratios."""
    decoded = tuple(decode_event_json(line) for line in lines)

    def decode() -> None:
        with collector_paused():
            for line in lines:
                decode_event_json(line)

    def project() -> None:
        project_provider_items(decoded)

    scale = 10_000 / len(lines)
    decodes: list[float] = []
    projections: list[float] = []
    for _ in range(rounds):
        decodes.append(_cpu(decode) * scale)
        projections.append(_cpu(project) * scale)
    ratios = [p / d for p, d in zip(projections, decodes, strict=True)]
    return statistics.median(decodes), statistics.median(projections), statistics.median(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=7)
    options = parser.parse_args()
    events = generate(options.events)
    data = to_jsonl(events)
    lines = data.split(b"\n")[:-1]
    count = len(lines)
    print(f"ledger: {count} events, {len(data) / 1e6:.1f} MB")

    def decode_and_encode() -> None:
        for line in lines:
            canonical_bytes(decode_event_json(line))

    def scan() -> None:
        scanner = ToolLedgerScanner()
        for event in events:
            scanner.feed(event)
        assert scanner.first_issue is None

    def check() -> None:
        assert check_ledger_bytes(data).clean

    encode_rate, encode_wall = best_rates(count, options.repeat, decode_and_encode)
    scan_rate, scan_wall = best_rates(count, options.repeat, scan)
    check_rate, check_wall = best_rates(count, options.repeat, check)
    small = t1_validation_cost(events[:1000], options.repeat)
    large = t1_validation_cost(events, options.repeat)
    print("events per CPU second (wall clock in brackets):")
    print(
        f"decode+canonical encode: {encode_rate:>9,.0f} ({encode_wall:>9,.0f}) "
        f"goal >= {ENCODE_GOAL:,}"
    )
    print(f"scanner:                 {scan_rate:>9,.0f} ({scan_wall:>9,.0f}) goal >= {SCAN_GOAL:,}")
    print(f"check_ledger_bytes:      {check_rate:>9,.0f} ({check_wall:>9,.0f})")
    print(
        f"T1 validation: {small * 1e6:.1f} us with 1,000 events of history, "
        f"{large * 1e6:.1f} us with {count:,} (ratio {large / small:.2f})"
    )
    decode_ms, project_ms, ratio = provider_replay_rounds(lines, options.rounds)
    print(
        f"provider replay (project_provider_items): {project_ms * 1e3:.1f} ms CPU per 10,000 "
        f"events, decode of the same {decode_ms * 1e3:.1f} ms (ratio {ratio:.2f}, medians of "
        f"{options.rounds} interleaved rounds)"
    )
    verdict = encode_rate >= ENCODE_GOAL and scan_rate >= SCAN_GOAL
    print("goals met" if verdict else "GOALS MISSED")


if __name__ == "__main__":
    main()
