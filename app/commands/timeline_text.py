"""The terminal reading of a ledger timeline (``maka timeline``, ``maka ledger timeline``).

One line per row, indented by the run's lineage depth; a tool operation's facts indented under
it; each pinned reason right under its row, the outside lane and the verdict in a header.
Colour (by status) only when standard output is a terminal and ``NO_COLOR`` is not set.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

from runtime.ledger.command_words import maka_command
from runtime.ledger.timeline_model import TimelineKind, TimelineRow, TimelineRun, TimelineStatus
from runtime.ledger.timeline_pins import ParkHeader, PinnedReason, TimelineReason, timeline_json

_COLOURS = {
    TimelineStatus.FAILED: "31",
    TimelineStatus.DAMAGED: "31",
    TimelineStatus.PARKED: "33",
    TimelineStatus.UNKNOWN: "33",
    TimelineStatus.CANCELLED: "2",
    TimelineStatus.NOT_RUN: "2",
}
_MARKS = {
    TimelineStatus.FAILED: "✗",
    TimelineStatus.DAMAGED: "✗",
    TimelineStatus.PARKED: "‖",
    TimelineStatus.UNKNOWN: "?",
}


def use_colour(out: TextIO) -> bool:
    return out.isatty() and not os.environ.get("NO_COLOR")


def _paint(text: str, code: str | None, colour: bool) -> str:
    if not colour:
        return text  # the stream shows what the text hides (app.visible_text.VisibleStream)
    from app.visible_text import visible

    shown = visible(text)  # written past that guard, so that its colour codes work
    return f"\033[{code}m{shown}\033[0m" if code else shown


def reason_words(reason: TimelineReason) -> str:
    """``code: sentence`` for a reason; the planner's own message when the code has none."""
    from app.code_text import describe

    sentence = describe(reason.code).sentence
    words = sentence or reason.message
    return f"{reason.code}: {words}" if words else reason.code


# A reason's severity (``app.code_text``), tagged as ``maka plan`` tags its reasons ("[warn]"),
# and painted as the rows of that weight: news that holds nothing up (``workspace_verified``)
# reads as information, not as a warning.
_SEVERITY_COLOURS = {"info": None, "warn": "33", "error": "31"}


def _pin_line(reason: TimelineReason) -> tuple[str, str | None]:
    """A pinned reason's line (without its indentation) and its colour."""
    from app.code_text import describe

    severity = describe(reason.code).severity.value
    return f"[{severity}] {reason_words(reason)}", _SEVERITY_COLOURS.get(severity, "31")


def write_timeline(
    runs: Sequence[TimelineRun],
    header: ParkHeader | None,
    out: TextIO | None = None,
    *,
    only_problems: bool = False,
    branched: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """The timeline as text; ``only_problems``: the runs keep only their problem rows (every
    run stays, so the lineage reads), and a run left with none says so; ``branched``: the
    sessions branched from this one, by the event each was branched after, said under it."""
    out = out if out is not None else sys.stdout
    colour = use_colour(out)
    if colour:
        from app.visible_text import unguarded

        out = unguarded(out)  # every line below is painted, so shown through ``visible``
    pins: dict[tuple[str, int], list[PinnedReason]] = {}
    if header is not None:
        _write_header(header, out, colour)
        for pin in header.pins:
            if pin.run_id is not None and pin.seq is not None:
                pins.setdefault((pin.run_id, pin.seq), []).append(pin)
    marks = header.marks if header is not None else None
    for run in runs:
        pad = "  " * run.depth
        ending = f", {_ending_class(run)}" if run.failure_class else ""
        line = f"{pad}run {run.run_id} [{run.status}{ending}] {run.event_count} events"
        if run.parent_run_id is not None:
            line += f" (continues {run.parent_run_id} after event {run.source_high_water})"
        out.write(_paint(line, "1", colour) + "\n")
        if run.failure_class == "runtime_ledger_unreadable" and not run.rows:
            out.write(
                f"{pad}  (its saved record cannot be read: an event of it no longer decodes, so "
                "startup recovery set it aside; the session's other runs are shown, and a new "
                "message carries the session on without it)\n"
            )
        if only_problems and not run.rows and run.failure_class != "runtime_ledger_unreadable":
            out.write(f"{pad}  (no problem in this run)\n")
        for row in run.rows:
            _write_row(row, pad + "  ", pins.get((run.run_id, row.seq), ()), out, colour)
            if branched:
                _write_branches(row, branched, pad + "    ", out)
        if marks is not None and marks.run_id == run.run_id:
            replay = marks.replay_count
            words = f", replaying {replay} events" if replay else ""
            out.write(
                f"{pad}  -- resume boundary: a continuation starts after event "
                f"{marks.high_water}{words}\n"
            )


def _write_branches(
    row: TimelineRow, branched: Mapping[str, Sequence[str]], pad: str, out: TextIO
) -> None:
    """Under the row of the event a session was branched after, that session."""
    for entry in row.entries:
        for new in branched.get(entry.event_id, ()):
            out.write(
                f"{pad}-- branched here into session {new} ({maka_command(f'timeline {new}')})\n"
            )


def _write_header(header: ParkHeader, out: TextIO, colour: bool) -> None:
    reasons = ", ".join(header.rejection_reasons) or "none"
    code = None if header.disposition in ("continue", "safe_replay") else "33"
    out.write(_paint(f"Safe resume: {header.disposition} (reasons: {reasons})", code, colour))
    out.write("\n")
    outside = [pin for pin in header.pins if pin.run_id is None]
    if outside:
        out.write("outside the record:\n")
        for pin in outside:
            line, code = _pin_line(pin.reason)
            out.write(_paint(f"  {line}", code, colour) + "\n")


def _write_row(
    row: TimelineRow, pad: str, pins: Sequence[PinnedReason], out: TextIO, colour: bool
) -> None:
    mark = _MARKS.get(row.status, " ")
    text = f"{pad}{mark} #{row.seq:<5} {row.kind.value:<13} {row.summary}"
    out.write(_paint(text, _COLOURS.get(row.status), colour) + "\n")
    for pin in pins:
        line, code = _pin_line(pin.reason)
        out.write(_paint(f"{pad}    {line}", code, colour) + "\n")
    if row.kind is not TimelineKind.TOOL:
        return
    for entry in row.entries:
        line = f"{pad}    #{entry.seq:<5} {entry.kind.value:<13} {entry.summary}"
        out.write(_paint(line, _COLOURS.get(entry.status), colour) + "\n")


def write_timeline_json(
    runs: Sequence[TimelineRun], header: ParkHeader | None, extra: dict[str, object]
) -> None:
    document = {**extra, **timeline_json(runs, header)}
    sys.stdout.write(json.dumps(document, ensure_ascii=False, indent=2))
    sys.stdout.write("\n")


def _ending_class(run: TimelineRun) -> str:
    """The run's failure class as its header shows it: a run Maka stopped is recorded with the
    class every cancelled run has (``cancelled_by_user``), but its ending says Maka stopped
    it, and so does the header."""
    failure = str(run.failure_class)
    if failure == "cancelled_by_user" and run.rows:
        last = run.rows[-1]
        if last.kind is TimelineKind.RUN_END and "stopped by Maka" in last.summary:
            return "stopped by Maka"
    return failure
