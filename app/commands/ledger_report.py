"""``maka ledger scan`` and ``maka ledger plan``: the resolver's view and the Phase 0 resume plan
of a RuntimeEvent JSONL file (CLI.md, "Ledger tools").

These make the recovery logic inspectable from outside, so the JSON shapes are a contract:
camelCase keys in a fixed order, optional keys omitted (never ``null``), ``directive`` only when
verification is required. Every decodable line goes to the resolver as it is, in file order:
duplicated lines, partial events and events of other runs are facts the report shows, not
reasons to refuse the file. Only undecodable input (a torn or non-JSON line, an unknown key, a
wrong type) is refused, with exit 2 and the line number.

Start-up is part of the product here (the ledger benchmark times the whole command), so this
module imports only the pure ledger and recovery modules: no Qt, no SQLite, no storage.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any, TypeVar

from app.cli_errors import EXIT_OK, EXIT_USAGE, CliError
from app.process_exit import fast_exit_requested, request_fast_exit
from runtime.fastplan.ledger_reading import LedgerReading
from runtime.fastplan.parallel_decode import TailHooks, decode_ledger_pieces
from runtime.fastplan.tail_scan import TAIL_START_MARKER, TAIL_START_NOT_AFTER, TailScan
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.ledger_file import LedgerFileError, read_file_bytes
from runtime.ledger.tool_ledger_scanner import ScanIssue, ToolLedgerScan
from runtime.recovery.recovery_resolver import (
    RecoveryResolution,
    ToolRecoveryDecision,
    resolve_recovery,
)
from runtime.recovery.resume_plan import (
    PlanVerdict,
    ResumeDiagnostic,
    ResumePlan,
    ToolOperation,
    plan_resume,
)

JsonObject = dict[str, Any]
R = TypeVar("R")


def _present(*pairs: tuple[str, Any]) -> JsonObject:
    """An object of the given keys, in order, leaving out the absent (None) ones."""
    return {key: value for key, value in pairs if value is not None}


# ---- plan -------------------------------------------------------------------------------------


def operation_json(operation: ToolOperation) -> JsonObject:
    # Built key by key rather than through ``_present``: a long run has tens of thousands.
    document: JsonObject = {
        "toolCallId": operation.tool_call_id,
        "toolName": operation.tool_name,
        "status": operation.status.value,
        "callRuntimeEventId": operation.call_runtime_event_id,
    }
    if operation.response_runtime_event_id is not None:
        document["responseRuntimeEventId"] = operation.response_runtime_event_id
    if operation.response_is_error is not None:
        document["responseIsError"] = operation.response_is_error
    return document


def diagnostic_json(diagnostic: ResumeDiagnostic) -> JsonObject:
    return _present(
        ("code", diagnostic.code.value),
        ("message", diagnostic.message),
        ("eventId", diagnostic.event_id),
        ("toolCallId", diagnostic.tool_call_id),
        ("toolName", diagnostic.tool_name),
        ("detail", dict(diagnostic.detail) if diagnostic.detail is not None else None),
    )


def verdict_json(verdict: ResumePlan | PlanVerdict) -> JsonObject:
    """The plan document's keys other than its two long lists, in document order."""
    return _present(
        ("disposition", verdict.disposition.value),
        ("diagnostics", [diagnostic_json(diagnostic) for diagnostic in verdict.diagnostics]),
        ("rejectionReasons", [reason.value for reason in verdict.rejection_reasons]),
        ("requiresVerification", verdict.requires_verification),
        ("sourceRuntimeEventHighWater", verdict.source_runtime_event_high_water),
        ("directive", verdict.directive),
    )


def plan_json(plan: ResumePlan) -> JsonObject:
    """The ``maka ledger plan --json`` document."""
    verdict = verdict_json(plan)
    document: JsonObject = {"disposition": verdict.pop("disposition")}
    document["operations"] = [operation_json(operation) for operation in plan.operations]
    document.update(verdict)
    document["replayRuntimeEventIds"] = [event["id"] for event in plan.replay_runtime_events]
    return document


# The plan's JSON text. A long run's plan lists tens of thousands of operations and a replay list
# of every event, so the two lists are written directly rather than through ``json.dumps``; the
# text is the same, byte for byte (a property test compares them). The direct form is taken
# only when no string it inserts needs a JSON escape (``_plain``); otherwise the list is dumped.
_OPERATION_HEAD = (
    '{"toolCallId": "%s", "toolName": "%s", "status": "%s", "callRuntimeEventId": "%s"'
)
_SETTLED_OPERATION = (
    _OPERATION_HEAD + ', "responseRuntimeEventId": "%s", "responseIsError": %s}'
)  # the usual case: a response is bound
_RESPONSE_ID = ', "responseRuntimeEventId": "%s"'
_IS_ERROR = {True: ', "responseIsError": true', False: ', "responseIsError": false'}
_JSON_BOOL = {True: "true", False: "false"}


def _plain(text: str) -> bool:
    """True when ``text`` holds no character JSON escapes (a quote, a backslash or a control
    character). The C string encoder escapes exactly those, each escape lengthening the text, so
    an unchanged length (plus the two quotes) proves it; faster than a regular expression."""
    return len(encode_basestring(text)) == len(text) + 2


def operations_json_text(operations: Sequence[ToolOperation]) -> str:
    """The items of the document's ``operations`` list as JSON text (no brackets)."""
    inserted: list[str] = []
    add = inserted.extend
    texts: list[str] = []
    keep = texts.append
    for call_id, name, _, status, call_event_id, response_id, is_error in operations:
        if response_id is not None and is_error is not None:
            keep(
                _SETTLED_OPERATION
                % (call_id, name, status.value, call_event_id, response_id, _JSON_BOOL[is_error])
            )
            add((call_id, name, call_event_id, response_id))
            continue
        text = _OPERATION_HEAD % (call_id, name, status.value, call_event_id)
        add((call_id, name, call_event_id))
        if response_id is not None:
            text += _RESPONSE_ID % response_id
            inserted.append(response_id)
        if is_error is not None:
            text += _IS_ERROR[is_error]
        keep(text + "}")
    if _plain("".join(inserted)):
        return ", ".join(texts)
    return _dumps([operation_json(operation) for operation in operations])[1:-1]


def replay_json_text(events: Sequence[RuntimeEvent]) -> str:
    """The items of the document's ``replayRuntimeEventIds`` list as JSON text."""
    ids = [event["id"] for event in events]
    if not ids:
        return ""
    text = '"' + '", "'.join(ids) + '"'
    # Its own quotes are escaped too: one character more for each of the 2 * len(ids).
    if len(encode_basestring(text)) == len(text) + 2 + 2 * len(ids):
        return text
    return _dumps(ids)[1:-1]


def join_json_items(*texts: str) -> str:
    """JSON list items from consecutive parts of one list (``operations_json_text``...)."""
    return ", ".join(text for text in texts if text)


def compose_plan_json_text(
    verdict: ResumePlan | PlanVerdict, operations_text: str, replay_text: str
) -> str:
    """The plan document's text from its verdict and its two lists' items."""
    document = verdict_json(verdict)
    parts = [f'{{"disposition": {_dumps(document.pop("disposition"))}, "operations": [']
    parts.append(operations_text)
    parts.append("]")
    parts.extend(f", {_dumps(key)}: {_dumps(value)}" for key, value in document.items())
    parts.append(', "replayRuntimeEventIds": [' + replay_text + "]}")
    return "".join(parts)


def plan_json_text(plan: ResumePlan) -> str:
    """``json.dumps(plan_json(plan), ensure_ascii=False)``, faster on a long plan."""
    return compose_plan_json_text(
        plan,
        operations_json_text(plan.operations),
        replay_json_text(plan.replay_runtime_events),
    )


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# ---- scan -------------------------------------------------------------------------------------


def decision_json(decision: ToolRecoveryDecision) -> JsonObject:
    origin = decision.settlement_origin
    return _present(
        ("toolCallId", decision.tool_call_id),
        ("toolName", decision.tool_name),
        ("operationId", decision.operation_id),
        ("status", decision.status.value),
        ("reason", decision.reason.value),
        ("settlementOrigin", origin.value if origin is not None else None),
        ("callRuntimeEventId", decision.call_runtime_event_id),
        ("dispatchRuntimeEventId", decision.dispatch_runtime_event_id),
        ("responseRuntimeEventId", decision.response_runtime_event_id),
        ("responseIsError", decision.response_is_error),
    )


def issue_json(issue: ScanIssue) -> JsonObject:
    return _present(
        ("code", issue.code.value),
        ("eventId", issue.event_id),
        ("operationId", issue.operation_id),
        ("toolCallId", issue.tool_call_id),
    )


def scan_json(resolution: RecoveryResolution) -> JsonObject:
    """The ``maka ledger scan --json`` document."""
    return {
        "operations": [decision_json(decision) for decision in resolution.decisions],
        "issues": [issue_json(issue) for issue in resolution.issues],
        "hasCorruption": resolution.has_corruption,
        "requiresReconciliation": resolution.requires_reconciliation,
    }


# ---- commands ---------------------------------------------------------------------------------


@contextmanager
def _bulk_allocation() -> Iterator[None]:
    """Pause the cyclic garbage collector while a whole ledger is decoded and planned.

    Decoding allocates hundreds of thousands of small containers and none of them form cycles,
    yet every allocation burst would trigger collections that re-walk everything decoded so far.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        # Re-enabled, the collector would at once walk everything allocated meanwhile; when the
        # process ends right after the command there is nothing left for it to find.
        if was_enabled and not fast_exit_requested():
            gc.enable()


def reading_error(path: Path, error: LedgerFileError) -> CliError:
    """The exit-2 refusal of a file that cannot be read or has a line that does not decode:
    ``maka: error [code]: FILE: line N: ...``. A line that is a ``maka export`` record is named
    as such, with the decoder's code (only here, when decoding already failed)."""
    message = error.message
    if error.line_number:
        from app.commands.ledger_cmd import export_record_kind, export_record_message, file_line

        raw = file_line(path, error.line_number)
        kind = export_record_kind(raw) if raw is not None else None
        if kind is not None:
            message = export_record_message(error.line_number, kind)
    return CliError(str(error.code), f"{path}: {message}", EXIT_USAGE)


def _read_and_build(path: Path, build: Callable[[Sequence[RuntimeEvent], ToolLedgerScan], R]) -> R:
    """Decode ``path`` strictly (an undecodable line exits 2 naming the line), then build. On a
    large file the scan overlaps with the decoding (``LedgerReading``)."""
    reading = LedgerReading()
    hooks = TailHooks(
        TailScan,
        reading.consume_tail,
        reading.take_summary,
        start_marker=TAIL_START_MARKER,
        start_not_after=TAIL_START_NOT_AFTER,
    )
    try:
        data = read_file_bytes(path)
        # Lingering (the child and the shared region left to the end of the process) and
        # keeping the file's bytes pays only when the process ends right after the command.
        exits = request_fast_exit(data)
        decode_ledger_pieces(data, reading.consume, tail_hooks=hooks, linger=exits)
    except LedgerFileError as error:
        raise reading_error(path, error) from None
    scanned = reading.finish()
    request_fast_exit(reading, scanned)  # freeing them at exit would only cost time
    return build(reading.events, scanned)


def _run(
    args: argparse.Namespace,
    build: Callable[[Sequence[RuntimeEvent], ToolLedgerScan], R],
    document: Callable[[R], JsonObject],
    json_text: Callable[[R], str],
) -> int:
    with _bulk_allocation():
        result = _read_and_build(args.file, build)
        request_fast_exit(result)
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
        raise CliError("invalid_argument", "--expected-high-water must be >= 0", EXIT_USAGE)
    if args.json:
        from app.commands.ledger_plan_parts import plan_json_text_in_parts

        with _bulk_allocation():
            sys.stdout.write(plan_json_text_in_parts(args.file, expected))
            sys.stdout.write("\n")
        return EXIT_OK
    return _run(
        args,
        lambda events, scan: plan_resume(events, expected, scan=scan),
        plan_json,
        plan_json_text,
    )


def run_scan(args: argparse.Namespace) -> int:
    """``maka ledger scan FILE [--json]``."""
    return _run(
        args,
        resolve_recovery,
        scan_json,
        lambda resolution: json.dumps(scan_json(resolution), ensure_ascii=False),
    )


def _print_text(document: JsonObject) -> None:
    """A short human reading of either document (the JSON form is the contract)."""
    out = sys.stdout
    if "disposition" in document:
        reasons = ", ".join(document["rejectionReasons"]) or "none"
        out.write(f"disposition: {document['disposition']} (reasons: {reasons})\n")
        for operation in document["operations"]:
            out.write(
                f"  {operation['toolName']} {operation['toolCallId']}: {operation['status']}\n"
            )
        for diagnostic in document["diagnostics"]:
            where = f" at {diagnostic['eventId']}" if "eventId" in diagnostic else ""
            out.write(f"  ! {diagnostic['code']}{where}: {diagnostic['message']}\n")
        if "directive" in document:
            out.write(f"directive: {document['directive']}\n")
        out.write(
            f"high-water: {document['sourceRuntimeEventHighWater']}, "
            f"replay: {len(document['replayRuntimeEventIds'])} events\n"
        )
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
        out.write(f"  ! {issue['code']} at {issue['eventId']}\n")
