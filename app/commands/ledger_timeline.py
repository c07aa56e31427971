"""``maka ledger timeline FILE.jsonl [--only-problems] [--json]``: the timeline of a RuntimeEvent
JSONL file, with the reasons of the same plan ``maka ledger plan`` prints pinned to its rows.

A pure file tool like the other ``ledger`` commands: it never opens a database. The file is
decoded as strictly as by ``maka ledger plan`` (an undecodable line exits 2 naming the line).
A file has no ``event_seq``: an event's place in its run is its position among that run's
lines, which is what ``maka export`` writes and ``maka import`` assigns.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from app.cli_errors import EXIT_OK
from app.commands.ledger_json import empty_ledger
from app.commands.ledger_lines import EMPTY_LEDGER_MESSAGE
from runtime.ledger.codes import Disposition, ParkReason
from runtime.ledger.event_model import TERMINAL_STATUSES, RuntimeEvent
from runtime.ledger.timeline_model import RunSource, TimelineRun, build_timeline
from runtime.ledger.timeline_pins import (
    ParkHeader,
    ResumeMarks,
    TimelineReason,
    only_problems,
    pin_reasons,
)
from runtime.ledger.tool_ledger_scanner import ToolLedgerScan
from runtime.recovery.resume_plan import ResumePlan, plan_resume


def file_runs(events: Sequence[RuntimeEvent]) -> list[RunSource]:
    """The file's runs in the order their first lines appear; each event numbered within its
    run; the source run and boundary read from the run's continuation start."""
    grouped: dict[str, list[tuple[int, RuntimeEvent]]] = {}
    for event in events:
        run = grouped.setdefault(event["runId"], [])
        run.append((len(run) + 1, event))
    return [_source(run_id, pairs) for run_id, pairs in grouped.items()]


def _source(run_id: str, pairs: list[tuple[int, RuntimeEvent]]) -> RunSource:
    parent: str | None = None
    high_water: int | None = None
    start = (pairs[0][1].get("actions") or {}).get("continuationStart")
    if start is not None:
        parent = start["immediateSource"]["runId"]
        high_water = start["immediateSource"]["highWater"]
    status = "unfinished"  # no ending in the file: interrupted, or still being written
    failure: str | None = None
    for _, event in pairs:
        actions = event.get("actions") or {}
        if event.get("status") in TERMINAL_STATUSES or actions.get("endInvocation"):
            status = event.get("status", "completed")
            failure = (actions.get("stateDelta") or {}).get("failureClass")
    return RunSource(run_id, pairs, status, parent, failure, high_water)


def plan_header(runs: Sequence[TimelineRun], plan: ResumePlan, run_id: str | None) -> ParkHeader:
    """The plan's verdict, its reasons pinned to ``runs``; the boundary on ``run_id`` (the run
    of the file's last line, the one ``maka ledger plan`` explains, unless it completed)."""
    diagnostics = [
        TimelineReason(d.code.value, d.message, d.event_id, d.tool_call_id, d.tool_name)
        for d in plan.diagnostics
    ]
    reasons = tuple(reason.value for reason in plan.rejection_reasons)
    disposition = plan.disposition
    if empty_ledger(plan):
        disposition = Disposition.BLOCKED
        empty = ParkReason.RUNTIME_LEDGER_EMPTY.value
        diagnostics.append(TimelineReason(empty, EMPTY_LEDGER_MESSAGE, None, None, None))
        reasons += (empty,)
    marks = None
    if run_id is not None:
        marks = ResumeMarks(
            run_id,
            plan.source_runtime_event_high_water,
            frozenset(event["id"] for event in plan.replay_runtime_events),
            len(plan.replay_runtime_events),
        )
    return ParkHeader(disposition, reasons, pin_reasons(runs, diagnostics, reasons), marks)


def runs_by_id(runs: Sequence[TimelineRun]) -> dict[str, TimelineRun]:
    return {run.run_id: run for run in runs}


def run_timeline(args: argparse.Namespace) -> int:
    from app.commands.ledger_report import read_and_build
    from app.commands.timeline_text import write_timeline, write_timeline_json

    def build(events: Sequence[RuntimeEvent], scan: ToolLedgerScan) -> Any:
        return events, plan_resume(events, None, scan=scan)

    events, plan = read_and_build(args.file, build)
    runs = build_timeline(file_runs(events))
    last = runs_by_id(runs).get(events[-1]["runId"]) if events else None
    header = plan_header(runs, plan, last.run_id if last and last.status != "completed" else None)
    if args.only_problems:
        runs = only_problems(runs, header.pins)
    if args.json:
        write_timeline_json(runs, header, {"file": str(args.file)})
    else:
        write_timeline(runs, header, only_problems=args.only_problems)
    return EXIT_OK
