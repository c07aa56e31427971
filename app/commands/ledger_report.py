"""``maka ledger scan`` and ``maka ledger plan``: the resolver's view and the Phase 0 resume plan
of a RuntimeEvent JSONL file (docs/design/cli.md, "Ledger tools").

These make the recovery logic inspectable from outside, so the JSON shapes are a contract
(``ledger_json``). Every decodable line goes to the resolver as it is, in file order:
duplicated lines, partial events and events of other runs are facts the report shows, not
reasons to refuse the file. Only undecodable input (a torn or non-JSON line, an unknown key, a
wrong type) is refused, with exit 2 and the line number.

Start-up is part of the product here (the ledger benchmark times the whole command), so this
module imports only the pure ledger and recovery modules: no Qt, no SQLite, no storage.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from app.cli_errors import EXIT_OK, EXIT_USAGE, CliError
from app.commands.ledger_json import (
    JsonObject,
    plan_json,
    plan_json_text,
    scan_json,
    verdict_json,
)
from app.commands.ledger_lines import EMPTY_LEDGER_MESSAGE
from runtime.ledger.codes import HostCode
from runtime.ledger.collector_pause import collector_paused
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.ledger_file import LedgerFileError, read_file_bytes, read_ledger_events
from runtime.ledger.tool_ledger_scanner import ToolLedgerScan, scan_tool_ledger
from runtime.recovery.recovery_resolver import resolve_recovery
from runtime.recovery.resume_plan import plan_resume

R = TypeVar("R")


# ---- commands ---------------------------------------------------------------------------------


def read_and_build(path: Path, build: Callable[[Sequence[RuntimeEvent], ToolLedgerScan], R]) -> R:
    """Decode ``path`` strictly (an undecodable line exits 2 naming the line), scan it, then
    build."""
    try:
        events = read_ledger_events(read_file_bytes(path))
    except LedgerFileError as error:
        from app.commands.ledger_lines import reading_error  # only a refused file needs it

        raise reading_error(path, error) from None
    return build(events, scan_tool_ledger(events))


def _run(
    args: argparse.Namespace,
    build: Callable[[Sequence[RuntimeEvent], ToolLedgerScan], R],
    document: Callable[[R], JsonObject],
    json_text: Callable[[R], str],
) -> int:
    with collector_paused():
        result = read_and_build(args.file, build)
        if args.json:
            sys.stdout.write(json_text(result))
            sys.stdout.write("\n")
        else:
            _print_text(document(result))
    return EXIT_OK


def run_plan(args: argparse.Namespace) -> int:
    """``maka ledger plan FILE [--expected-high-water N] [--json]``."""
    expected: int | None = getattr(args, "expected_high_water", None)
    if expected is not None and expected < 0:
        raise CliError(HostCode.INVALID_ARGUMENT, "--expected-high-water must be >= 0", EXIT_USAGE)
    from app.commands.ledger_stream_plan import NotStreamable, write_streamed_plan

    path: Path = args.file
    write_streamed = write_streamed_plan if args.json else _write_streamed_plan_text
    # One streaming pass over the file in little memory (``ledger_stream_plan``); a ledger
    # that pass does not fold is planned on the general path, with the same output. The
    # general path reads the file again, so only a regular file is streamed (a pipe cannot be
    # read twice); anything else (a pipe, a missing file) takes the general path at once.
    if path.is_file():
        try:
            with collector_paused():  # each event is freed as soon as it is folded
                write_streamed(path, expected, sys.stdout.write)
            return EXIT_OK
        except LedgerFileError as error:
            from app.commands.ledger_lines import reading_error  # only a refused file needs it

            raise reading_error(path, error) from None
        except NotStreamable:
            pass
    return _run(
        args,
        lambda events, scan: plan_resume(events, expected, scan=scan),
        plan_json,
        plan_json_text,
    )


def run_scan(args: argparse.Namespace) -> int:
    """``maka ledger scan FILE [--json]``. A file without events is reported as such
    (``runtime_ledger_empty``, an issue without an event), as ``plan`` blocks it."""

    def build(events: Sequence[RuntimeEvent], scan: ToolLedgerScan) -> JsonObject:
        return scan_json(resolve_recovery(events, scan), empty=not events)

    return _run(
        args,
        build,
        lambda document: document,
        lambda document: json.dumps(document, ensure_ascii=False),
    )


def _status_text(operation: JsonObject) -> str:
    """An operation's status in words. A call the user settled was never seen to succeed or
    fail: it says what the user confirmed, and when, as ``maka plan`` and the desktop do."""
    if "attestation" not in operation:
        return str(operation["status"])
    from runtime.ledger.attestation import when_text

    what = "ran" if operation["attestation"] == "ran" else "did not run"
    return f"{what} (confirmed by you on {when_text(operation['attestedAt'])})"


def _sentence(code: str) -> str:
    """``: `` and the ledger check's sentence for ``code``, or nothing for another code."""
    from app.code_text import describe
    from app.park_guidance import LEDGER_CHECK_CODES

    return f": {describe(code).sentence}" if code in LEDGER_CHECK_CODES else ""


def _damage_words(message: str) -> str:
    """A corruption diagnostic's message ends with the ledger check's code only ("immutable
    tool ledger is corrupt: orphan_dispatch"): the code's sentence follows it."""
    code = message.rsplit(": ", 1)[-1] if ": " in message else ""
    return f"{message}{_sentence(code)}" if code else message


def _write_plan_text_tail(
    document: JsonObject, replay_count: int, write: Callable[[str], object]
) -> None:
    """The plan's text form after its operations: diagnostics, directive, high-water."""
    for diagnostic in document["diagnostics"]:
        where = f" at {diagnostic['eventId']}" if "eventId" in diagnostic else ""
        message = _damage_words(str(diagnostic["message"]))
        write(f"  ! {diagnostic['code']}{where}: {message}\n")
    if "directive" in document:
        write(f"directive: {document['directive']}\n")
    write(f"high-water: {document['sourceRuntimeEventHighWater']}, replay: {replay_count} events\n")


def _write_streamed_plan_text(
    path: Path, expected: int | None, write: Callable[[str], object]
) -> None:
    """The text form from one streaming pass (``ledger_stream_plan``), the same lines as
    ``_print_text`` of the document (no operation of a folded ledger is settled by the user)."""
    from app.commands.ledger_stream_plan import StreamPlan, no_text, operation_lines, stream_plan

    plan = stream_plan(path, StreamPlan(operation_lines, no_text))
    verdict, operations, _ = plan.finish(expected)
    document = verdict_json(verdict)
    reasons = ", ".join(document["rejectionReasons"]) or "none"
    write(f"disposition: {document['disposition']} (reasons: {reasons})\n")
    for piece in operations:
        write(piece)
    _write_plan_text_tail(document, plan.replayed, write)


def _print_text(document: JsonObject) -> None:
    """A short human reading of either document (the JSON form is the contract)."""
    out = sys.stdout
    if "disposition" in document:
        reasons = ", ".join(document["rejectionReasons"]) or "none"
        out.write(f"disposition: {document['disposition']} (reasons: {reasons})\n")
        for operation in document["operations"]:
            out.write(
                f"  {operation['toolName']} {operation['toolCallId']}: {_status_text(operation)}\n"
            )
            if "attestationNote" in operation:
                from app.visible_text import visible  # text from the file: shown as it is

                note = visible(operation["attestationNote"]).replace("\n", "\n      ")
                out.write(f"    your note: {note}\n")
        _write_plan_text_tail(document, len(document["replayRuntimeEventIds"]), out.write)
        return
    out.write(
        f"corruption: {'yes' if document['hasCorruption'] else 'no'}, reconciliation "
        f"required: {'yes' if document['requiresReconciliation'] else 'no'}\n"
    )
    for decision in document["operations"]:
        out.write(
            f"  {decision.get('toolName', '?')} {decision['toolCallId']}: "
            f"{decision['status']} ({decision['reason']})\n"
        )
    for issue in document["issues"]:
        if "eventId" not in issue:  # of the whole file: it holds no events
            out.write(f"  ! {issue['code']}: {EMPTY_LEDGER_MESSAGE}\n")
            continue
        out.write(f"  ! {issue['code']} at {issue['eventId']}{_sentence(str(issue['code']))}\n")
