"""``maka ledger``: pure tools over a RuntimeEvent JSONL file (they never open a database).

- ``check FILE [--json]``: decoding, canonical form, lanes, scanner and recovery tails; exit 0 for
  a clean ledger, 1 listing each problem with its line and code (a line that does not decode is
  one: ``torn_last_line``, ``json_invalid``, ``event_schema_invalid``...), 2 with
  ``maka: error [ledger_file_unreadable]`` only when the file cannot be read at all;
- ``scan FILE --json`` and ``plan FILE [--expected-high-water N] --json``: the resolver's view
  and the Phase 0 resume plan, implemented in ``app.commands.ledger_report`` (imported only when
  used); they refuse undecodable input with exit 2 and ``maka: error [code]: FILE: line N...``;
- ``timeline FILE [--only-problems] [--json]``: the runs and events, tool calls grouped, the
  plan's reasons pinned to their rows (``app.commands.ledger_timeline``), as strict as ``plan``.

Every subcommand accepts ``--data-dir`` (docs/design/cli.md) and ignores it: these tools never open
a database. A line that is one of ``maka export``'s own records (the session line, a run header, a
continuation claim) is named as such (``export_record_message``) instead of the decoder's
complaint about a missing ``id`` (``ledger_lines``); its code stays the decoder's.
"""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli_errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError
from runtime.ledger.codes import HostCode

if TYPE_CHECKING:
    from runtime.ledger.ledger_file import LedgerProblem


def add_arguments(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="ledger_command", metavar="COMMAND", required=True)
    check = commands.add_parser(
        "check", help="check that a JSONL file is a clean ledger (exit 0 clean, 1 problems)"
    )
    _add_file_arguments(check)
    scan = commands.add_parser("scan", help="print the recovery resolver's view of a ledger")
    _add_file_arguments(scan)
    plan = commands.add_parser("plan", help="print the Phase 0 resume plan of one run's ledger")
    _add_file_arguments(plan)
    plan.add_argument(
        "--expected-high-water",
        type=int,
        metavar="N",
        help="the committed high-water the checkpoint expects",
    )
    timeline = commands.add_parser(
        "timeline",
        help="print the ledger's runs and events, tool calls grouped, park reasons pinned",
    )
    _add_file_arguments(timeline)
    timeline.add_argument(
        "--only-problems", action="store_true", help="only rows that failed, parked or are unknown"
    )


def _add_file_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE.jsonl", type=Path)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    # Accepted after the subcommand too, as by every command (docs/design/cli.md). SUPPRESS: absent
    # here, it leaves the value given before the subcommand (or the default) in place.
    parser.add_argument(
        "--data-dir",
        default=argparse.SUPPRESS,
        help="checked as every command checks it, then unused: the ledger tools read FILE and "
        "never open a data folder or a database",
    )


def run(args: argparse.Namespace) -> int:
    command: str = args.ledger_command
    if command == "check":
        return run_check(args)
    if command == "timeline":
        from app.commands.ledger_timeline import run_timeline

        return run_timeline(args)
    report = _report_module()
    if command == "scan":
        result: int = report.run_scan(args)
        return result
    result = report.run_plan(args)
    return result


def _report_module() -> Any:
    try:
        return importlib.import_module("app.commands.ledger_report")
    except ModuleNotFoundError as error:
        if error.name != "app.commands.ledger_report":
            raise
        raise CliError(
            HostCode.COMMAND_UNAVAILABLE, "this build has no ledger report commands", EXIT_ERROR
        ) from None


def run_check(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from app.commands.ledger_lines import export_record_kind, export_record_message
    from runtime.ledger.ledger_file import LedgerFileError, check_ledger_bytes, read_file_bytes

    path: Path = args.file
    try:
        data = read_file_bytes(path)
    except LedgerFileError as error:
        raise CliError(error.code, error.message, EXIT_USAGE) from None
    report = check_ledger_bytes(data)
    if report.clean and not report.event_count:
        report = replace(report, problems=(_empty_ledger_problem(),))
    problems = report.problems
    if report.unreadable:
        # Only the lines that do not decode are listed; say which ones are export records.
        lines = data.split(b"\n")
        problems = tuple(
            replace(problem, message=export_record_message(problem.line_number, kind), field=None)
            if (kind := export_record_kind(lines[problem.line_number - 1])) is not None
            else problem
            for problem in problems
        )
    if args.json:
        document = {
            "file": str(path),
            "clean": report.clean,
            "readable": not report.unreadable,
            "eventCount": report.event_count,
            "problems": [
                {
                    key: value
                    for key, value in (
                        ("line", problem.line_number or None),
                        ("code", problem.code),
                        ("eventId", problem.event_id),
                        ("field", problem.field),
                        ("message", problem.message),
                    )
                    if value is not None
                }
                for problem in problems
            ],
        }
        print(json.dumps(document, ensure_ascii=False, indent=2))
    else:
        from app.code_text import describe
        from app.park_guidance import LEDGER_CHECK_CODES

        for problem in problems:
            where = f" (field {problem.field})" if problem.field else ""
            event = f" event {problem.event_id}" if problem.event_id else ""
            line = f":{problem.line_number}" if problem.line_number else ""
            text = f"{path}{line}: {problem.code}{where}:{event}"
            message = problem.message
            if problem.code in LEDGER_CHECK_CODES:
                # The scanner's message only names the call: say what is wrong first.
                sentence = describe(problem.code).sentence
                message = f"{sentence} ({message})" if message else sentence
            if message:
                text += f"{':' if event else ''} {message}"
            print(text)
        if report.unreadable:
            print(
                f"{path}: not a readable ledger: {len(problems)} line(s) do not decode, so "
                "canonical form, lanes and the scanner were not checked"
            )
        elif report.clean:
            print(f"{path}: clean ledger, {report.event_count} events")
    return EXIT_OK if report.clean else EXIT_ERROR


def _empty_ledger_problem() -> LedgerProblem:
    """A file without events is no clean ledger: the problem of the whole file (no line)."""
    from app.commands.ledger_lines import EMPTY_LEDGER_MESSAGE
    from runtime.ledger.codes import ParkReason
    from runtime.ledger.ledger_file import LedgerProblem

    return LedgerProblem(0, ParkReason.RUNTIME_LEDGER_EMPTY.value, EMPTY_LEDGER_MESSAGE)
