"""``maka ledger``: pure tools over a RuntimeEvent JSONL file (they never open a database).

- ``check FILE [--json]``: decoding, canonical form, lanes, scanner and recovery tails; exit 0 for
  a clean ledger, 1 listing each problem with its line and code, 2 when the file cannot be read or
  a line does not decode (a torn last line is reported as ``torn_last_line``);
- ``scan FILE --json`` and ``plan FILE [--expected-high-water N] --json``: the resolver's view
  and the Phase 0 resume plan, implemented in ``app.commands.ledger_report`` (imported only when
  used).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

from app.cli_errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="ledger_command", metavar="COMMAND", required=True)
    check = commands.add_parser(
        "check", help="check that a JSONL file is a clean ledger (exit 0 clean, 1 problems)"
    )
    check.add_argument("file", metavar="FILE.jsonl", type=Path)
    check.add_argument("--json", action="store_true", help="print one JSON document")
    scan = commands.add_parser("scan", help="print the recovery resolver's view of a ledger")
    scan.add_argument("file", metavar="FILE.jsonl", type=Path)
    scan.add_argument("--json", action="store_true", help="print one JSON document")
    plan = commands.add_parser("plan", help="print the Phase 0 resume plan of one run's ledger")
    plan.add_argument("file", metavar="FILE.jsonl", type=Path)
    plan.add_argument(
        "--expected-high-water",
        type=int,
        metavar="N",
        help="the committed high-water the checkpoint expects",
    )
    plan.add_argument("--json", action="store_true", help="print one JSON document")


def run(args: argparse.Namespace) -> int:
    command: str = args.ledger_command
    if command == "check":
        return run_check(args)
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
            "command_unavailable", "this build has no ledger report commands", EXIT_ERROR
        ) from None


def run_check(args: argparse.Namespace) -> int:
    from runtime.ledger.ledger_file import LedgerFileError, check_ledger_file

    path: Path = args.file
    try:
        report = check_ledger_file(path)
    except LedgerFileError as error:
        raise CliError(str(error.code), error.message, EXIT_USAGE) from None
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
                        ("line", problem.line_number),
                        ("code", problem.code),
                        ("eventId", problem.event_id),
                        ("field", problem.field),
                        ("message", problem.message),
                    )
                    if value is not None
                }
                for problem in report.problems
            ],
        }
        print(json.dumps(document, ensure_ascii=False, indent=2))
    else:
        for problem in report.problems:
            where = f" (field {problem.field})" if problem.field else ""
            event = f" event {problem.event_id}" if problem.event_id else ""
            text = f"{path}:{problem.line_number}: {problem.code}{where}:{event}"
            if problem.message:
                text += f"{':' if event else ''} {problem.message}"
            print(text)
        if report.clean:
            print(f"{path}: clean ledger, {report.event_count} events")
    if report.unreadable:
        print(f"maka: error: {path} is not a readable ledger", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK if report.clean else EXIT_ERROR
