"""The JSON documents of ``maka ledger plan`` and ``maka ledger scan`` (docs/design/cli.md,
"Ledger tools").

A contract: camelCase keys in a fixed order, optional keys omitted (never ``null``),
``directive`` only when verification is required. A plan operation the user settled
(docs/design/recovery.md section 8) keeps the ``status`` its recorded result gives (``succeeded``
for "it ran", ``failed`` for "it did not run") and adds ``attestation`` (``ran`` | ``not_run``),
``attestedAt`` (ms) and ``attestationNote`` when there is one, as the desktop's tool
cards carry them.

The plan's text is written directly for a long run (``plan_json_text``), byte for byte what
``json.dumps`` of the document gives.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from json.encoder import encode_basestring
from typing import Any

from app.commands.ledger_lines import EMPTY_LEDGER_MESSAGE
from runtime.ledger.codes import Disposition, ParkReason
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.tool_ledger_scanner import ScanIssue
from runtime.recovery.recovery_resolver import RecoveryResolution, ToolRecoveryDecision
from runtime.recovery.resume_plan import PlanVerdict, ResumeDiagnostic, ResumePlan, ToolOperation

JsonObject = dict[str, Any]


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
    if operation.attested is not None:
        # The status says how the recorded result reads; these say it is the user's word.
        ran, attestation = operation.attested
        document["attestation"] = "ran" if ran else "not_run"
        document["attestedAt"] = attestation.attested_at
        if attestation.note is not None:
            document["attestationNote"] = attestation.note
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


def empty_ledger(verdict: ResumePlan | PlanVerdict) -> bool:
    """The plan is of a ledger without events: nothing to continue from, so it is blocked with
    ``runtime_ledger_empty`` (an error), as Safe resume parks a stored run without events."""
    return verdict.source_runtime_event_high_water == 0


def verdict_json(verdict: ResumePlan | PlanVerdict) -> JsonObject:
    """The plan document's keys other than its two long lists, in document order."""
    disposition = verdict.disposition.value
    diagnostics = [diagnostic_json(diagnostic) for diagnostic in verdict.diagnostics]
    reasons = [reason.value for reason in verdict.rejection_reasons]
    if empty_ledger(verdict):
        disposition = Disposition.BLOCKED.value
        empty = ParkReason.RUNTIME_LEDGER_EMPTY.value
        diagnostics.append({"code": empty, "message": EMPTY_LEDGER_MESSAGE})
        reasons.append(empty)
    return _present(
        ("disposition", disposition),
        ("diagnostics", diagnostics),
        ("rejectionReasons", reasons),
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
    for operation in operations:
        call_id, name, _, status, call_event_id, response_id, is_error, attested = operation
        if attested is not None:  # rare: the user's word on an unknown outcome
            keep(_dumps(operation_json(operation)))
            continue
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
    return replay_ids_json_text([event["id"] for event in events])


def replay_ids_json_text(ids: Sequence[str]) -> str:
    """The items of the document's ``replayRuntimeEventIds`` list, given the ids, as JSON text."""
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
    parts: list[str] = []
    write_plan_json(verdict, (operations_text,), (replay_text,), parts.append)
    return "".join(parts)


def write_plan_json(
    verdict: ResumePlan | PlanVerdict,
    operations: Iterable[str],
    replay: Iterable[str],
    write: Callable[[str], Any],
) -> None:
    """Write the plan document's text through ``write`` a piece at a time, from its verdict and
    its two lists' items given in consecutive pieces (``operations_json_text``...; an empty
    piece adds nothing)."""
    document = verdict_json(verdict)
    write(f'{{"disposition": {_dumps(document.pop("disposition"))}, "operations": [')
    _write_items(operations, write)
    write("]")
    for key, value in document.items():
        write(f", {_dumps(key)}: {_dumps(value)}")
    write(', "replayRuntimeEventIds": [')
    _write_items(replay, write)
    write("]}")


def _write_items(pieces: Iterable[str], write: Callable[[str], Any]) -> None:
    separator = ""
    for piece in pieces:
        if piece:
            write(separator)
            write(piece)
            separator = ", "


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


def scan_json(resolution: RecoveryResolution, *, empty: bool = False) -> JsonObject:
    """The ``maka ledger scan --json`` document; ``empty``: the ledger holds no events, an issue
    of the whole ledger (``runtime_ledger_empty``, no ``eventId``)."""
    issues = [issue_json(issue) for issue in resolution.issues]
    if empty:
        issues.append({"code": ParkReason.RUNTIME_LEDGER_EMPTY.value})
    return {
        "operations": [decision_json(decision) for decision in resolution.decisions],
        "issues": issues,
        "hasCorruption": resolution.has_corruption,
        "requiresReconciliation": resolution.requires_reconciliation,
    }
