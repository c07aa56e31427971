"""The transcript a person reads, projected from committed events (no Qt, no wire types).

User and assistant messages, thinking, one tool card per call (name, argument summary, status,
result summary) and notices for run endings. A tool card's status comes from committed facts:
a response settles it (``succeeded`` / ``failed``), a recovery decision settles it
(``completed_after_recovery`` / ``parked``); a dispatch without a response is ``running`` while the
run is live and ``indeterminate`` ("outcome unknown") once the run has ended; a call that never
crossed T1 in an ended run is ``not_dispatched``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from runtime.agent.text_limits import shorten
from runtime.ledger.event_model import RuntimeEvent, is_terminal
from runtime.ledger.restore_point_words import call_subjects
from runtime.ledger.workspace_facts import decision_mark, uncaptured_decision
from runtime.recovery.settle_verdict import verdicts_by_call

CARD_ARGS_CHARS = 300


@dataclass(frozen=True, slots=True)
class TranscriptEntry:
    """``type``: user_message, assistant_message, thinking, tool_card or notice. ``code``: a
    notice's failure class or stop reason; a failed tool card's ``result_code``."""

    type: str
    item_id: str
    run_id: str
    text: str = ""
    tool_call_id: str = ""
    tool_name: str = ""
    args_summary: str = ""
    status: str = ""
    result_summary: str = ""
    park_reason: str | None = None
    level: str = "info"
    code: str | None = None
    # A call whose outcome is unknown and that the user may settle (docs/design/recovery.md section
    # 8): its run ended with the call dispatched and no result, and the run's facts let the user
    # settle it (``runtime.recovery.settle_verdict``: not a file write, not a damaged record).
    # (Whether the run belongs to an earlier start of the host is the host's to add.)
    settleable: bool = False
    # What the user confirmed about it: "ran" / "not_run", when (ms), and their note.
    attestation: str | None = None
    attested_at: int | None = None
    attestation_note: str | None = None
    args_full: str = ""
    """The call's arguments in full (a command as typed), for the card that asks the user."""


def full_args(name: str, args: Any) -> str:
    """A call's arguments in full: a command as typed, anything else as JSON."""
    if name == "bash" and isinstance(args, dict) and isinstance(args.get("command"), str):
        return str(args["command"])
    return json.dumps(args, ensure_ascii=False, sort_keys=True, indent=1)


def summarize_args(name: str, args: Any) -> str:
    """A card's one-line view of a call's arguments; a longer one says how much is not shown."""
    if isinstance(args, dict):
        if name == "bash" and "command" in args:
            return shorten(str(args["command"]), CARD_ARGS_CHARS)
        if "path" in args:
            return shorten(str(args["path"]), CARD_ARGS_CHARS)
        if "pattern" in args:
            return shorten(str(args["pattern"]), CARD_ARGS_CHARS)
    return shorten(json.dumps(args, ensure_ascii=False, sort_keys=True), CARD_ARGS_CHARS)


def result_code(result: Any, is_error: bool) -> str | None:
    """Why an error result has no outcome of its own, as committed: the refusal ``code`` of a
    call refused before it ran (``permission_denied``, ``cancelled``...), or ``cancelled`` for a
    command stopped while it ran (its result is flagged ``cancelled``)."""
    if not is_error or not isinstance(result, dict):
        return None
    code = result.get("code")
    if isinstance(code, str):
        return code
    return "cancelled" if result.get("cancelled") is True else None


def _plural(count: int, word: str) -> str:
    return word if count == 1 else f"{word}s"


OUTPUT_CHARS = 2000
"""How much of a command's output a transcript card carries (the window shows its first lines
and expands to the rest)."""


def _stopped_note(result: dict[str, Any]) -> str:
    """ " · N background processes stopped" for a command whose leftover processes were stopped
    when its call ended (``backgroundStopped``), else ""."""
    count = result.get("backgroundStopped")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        return ""
    noun = "process" if count == 1 else "processes"
    return f" · {count} background {noun} stopped"


def summarize_result(result: Any, is_error: bool, *, whole_output: bool = False) -> str:
    """A tool result in a line (the terminal), or for a command with ``whole_output`` its exit
    code on the first line and its output below (up to ``OUTPUT_CHARS``; the transcript card).
    The exit code is followed by " · N background processes stopped" when the command left
    processes running that were stopped as its call ended."""
    if isinstance(result, dict):
        if is_error and "error" in result:
            return shorten(str(result["error"]), 300)
        if "exitCode" in result:
            stopped = _stopped_note(result)
            if whole_output:
                text = str(result.get("output", "")).strip("\n")
                if len(text) > OUTPUT_CHARS:
                    # Cut at a line end and say so: the card must not pass a part for the whole.
                    kept = text[:OUTPUT_CHARS].rsplit("\n", 1)[0]
                    rest = text[len(kept) :].strip("\n")
                    lines = rest.count("\n") + 1
                    text = f"{kept}\n[{lines} more {_plural(lines, 'line')} not shown here]"
                return f"exit code {result['exitCode']}{stopped}" + (f"\n{text}" if text else "")
            output = str(result.get("output", "")).strip().splitlines()
            tail = f": {output[-1][:200]}" if output else ""
            return f"exit code {result['exitCode']}{stopped}{tail}"
        if "bytesWritten" in result:
            return f"wrote {result['bytesWritten']} bytes to {result.get('path')}"
        if "content" in result:
            return f"read {result.get('path')} ({result.get('totalLines', '?')} lines)"
        if "entries" in result:
            count = len(result["entries"])
            return f"{count} {'entry' if count == 1 else 'entries'}"
        if "matches" in result:
            count = len(result["matches"])
            return f"{count} {'match' if count == 1 else 'matches'}"
    return shorten(json.dumps(result, ensure_ascii=False, sort_keys=True), 300)


ABORTED_FINISHES = ("abort", "aborted", "error", "cancelled", "canceled")
"""Finish reasons some servers (vLLM, SGLang, proxies) send for a request they aborted or that
failed while generating: never a normal end (the turn's ending says the reply was cut off)."""
CUT_OFF_ENDINGS = ("length", "content_filter", *ABORTED_FINISHES)
"""``stopReason`` s of a completed turn whose reply was cut before it finished (it says so)."""

CODED_ENDINGS = frozenset({"step_limit", "provider_empty_reply"})
"""``stopReason`` s of a completed turn that are shown with their code (the step limit, a reply
with neither text nor a tool call): the turn's work may not be done."""


def _ending_notice(event: RuntimeEvent, run_id: str) -> TranscriptEntry | None:
    status = event.get("status")
    delta = (event.get("actions") or {}).get("stateDelta") or {}
    content = event.get("content")
    message = content["message"] if content is not None and content["kind"] == "error" else ""
    failure = delta.get("failureClass")
    if status == "completed" and delta.get("stopReason") not in (
        *CODED_ENDINGS,
        *CUT_OFF_ENDINGS,
    ):
        return None
    level = "error" if status == "failed" else "warn"
    code = str(failure) if failure else (str(delta.get("stopReason")) or None)
    if not message:
        message = {
            # The desktop, a ``maka run`` or a host: whichever ran the turn, Maka stopped.
            "app_restarted": "Maka stopped while this turn was running",
        }.get(str(failure), f"the turn ended: {status}")
    return TranscriptEntry("notice", event["id"], run_id, text=message, level=level, code=code)


def _host_notice(event: RuntimeEvent, run_id: str) -> TranscriptEntry:
    """A host-authored message in the user's seat: the user reads it as a notice."""
    delta = (event.get("actions") or {}).get("stateDelta") or {}
    code = "context_overflow" if "providerHistoryOmits" in delta else "host_notice"
    text = event["content"]["text"] if event.get("content") else ""  # type: ignore[typeddict-item]
    return TranscriptEntry("notice", event["id"], run_id, text=text, level="info", code=code)


# C901: one pass over the ledger, one branch per content kind, so the order of entries is plain.
def transcript_of_run(  # noqa: C901
    events: Sequence[RuntimeEvent], subjects: Mapping[str, str] | None = None
) -> list[TranscriptEntry]:
    """Entries of one run, in ledger order; ``subjects``: the session's earlier calls as people
    know them (``call_subjects``), so a restored copy's mark names them by what they did."""
    known = {**(subjects or {}), **call_subjects(events)}
    entries: list[TranscriptEntry] = []
    cards: dict[str, int] = {}
    ended = any(is_terminal(event) for event in events)
    for event in events:
        if event["partial"]:
            continue
        run_id = event["runId"]
        content = event.get("content")
        actions = event.get("actions") or {}
        if content is not None and content["kind"] == "text" and content["text"]:
            if event["role"] == "user" and event["author"] == "host":
                entries.append(_host_notice(event, run_id))
            elif event["role"] == "user":
                entries.append(
                    TranscriptEntry("user_message", event["id"], run_id, content["text"])
                )
            elif event["role"] == "model":
                entries.append(
                    TranscriptEntry("assistant_message", event["id"], run_id, content["text"])
                )
        elif content is not None and content["kind"] == "thinking":
            entries.append(TranscriptEntry("thinking", event["id"], run_id, content["text"]))
        elif content is not None and content["kind"] == "function_call":
            cards[content["id"]] = len(entries)
            entries.append(
                TranscriptEntry(
                    "tool_card",
                    event["id"],
                    run_id,
                    tool_call_id=content["id"],
                    tool_name=content["name"],
                    args_summary=summarize_args(content["name"], content["args"]),
                    args_full=full_args(content["name"], content["args"]),
                    status="not_dispatched" if ended else "pending",
                )
            )
        elif content is not None and content["kind"] == "function_response":
            index = cards.get(content["id"])
            if index is not None:
                is_error = content.get("isError", False)
                entries[index] = replace(
                    entries[index],
                    settleable=False,
                    status="failed" if is_error else "succeeded",
                    code=result_code(content["result"], is_error),
                    result_summary=summarize_result(content["result"], is_error, whole_output=True),
                )
        elif "toolDispatch" in actions:
            fact = actions["toolDispatch"]
            index = cards.get(fact["providerToolCallId"])
            if index is not None:
                status = "indeterminate" if ended else "running"
                # (a candidate: the run's facts decide below)
                entries[index] = replace(entries[index], status=status, settleable=ended)
        elif "toolRecovery" in actions:
            _apply_recovery(entries, cards, event)
        elif "workspaceCheckpointFailed" in actions and uncaptured_decision(actions) is None:
            # (a decision to continue with files that could not be snapshotted is marked below)
            failed = actions["workspaceCheckpointFailed"]
            entries.append(
                TranscriptEntry(
                    "notice",
                    event["id"],
                    run_id,
                    text="A snapshot of the folder could not be taken after this step; Safe "
                    "resume will not continue from here without you.",
                    level="warn",
                    code=failed["reasonCode"],
                )
            )
        elif is_terminal(event):
            notice = _ending_notice(event, run_id)
            if notice is not None:
                entries.append(notice)
        mark = decision_mark(actions, known)
        if mark is not None:
            entries.append(
                TranscriptEntry(
                    "notice", f"{event['id']}_workspace", run_id, text=mark + ".", level="info"
                )
            )
        protocol: Mapping[str, Any] = actions.get("runtimeProtocol") or {}
        mode = protocol.get("workspaceCheckpoints")
        if isinstance(mode, Mapping) and mode.get("mode") == "unavailable":
            code = str(mode.get("reasonCode", "unavailable"))
            if code != "checkpoint_turned_off":  # the user's own choice: not said every turn
                entries.append(
                    TranscriptEntry(
                        "notice",
                        f"{event['id']}_checkpoints",
                        run_id,
                        text="This run takes no snapshots of its folder, so Safe resume cannot "
                        "tell whether files changed after a crash.",
                        level="info",
                        code=code,
                    )
                )
    if any(entry.settleable for entry in entries):
        _settleable_by_the_facts(entries, events)
    return entries


def _settleable_by_the_facts(
    entries: list[TranscriptEntry], events: Sequence[RuntimeEvent]
) -> None:
    """A card asks "Did it run?" only when the run's committed facts let the user settle the
    call: the one decision ``maka settle`` and ``maka plan`` use (not on a damaged record, not
    for a file write, not once it is settled)."""
    verdicts = verdicts_by_call(events)
    for index, entry in enumerate(entries):
        verdict = verdicts.get(entry.tool_call_id) if entry.settleable else None
        if entry.settleable and (verdict is None or not verdict.open):
            entries[index] = replace(entry, settleable=False)


def _apply_recovery(
    entries: list[TranscriptEntry], cards: dict[str, int], event: RuntimeEvent
) -> None:
    recovery = (event.get("actions") or {}).get("toolRecovery")
    refs = event.get("refs") or {}
    index = cards.get(refs.get("toolCallId", ""))
    if recovery is None or index is None:
        return
    payload = recovery["payload"]
    if recovery["kind"] != "maka.tool.recovery_decision":
        attestation = _attestation(recovery)
        if attestation is not None:
            ran, at, note = attestation
            entries[index] = replace(
                entries[index],
                attestation="ran" if ran else "not_run",
                attested_at=at,
                attestation_note=note,
                settleable=False,
            )
        return
    if entries[index].attestation is not None:
        # Settled on the user's word: no output was recorded, nothing else to show.
        entries[index] = replace(
            entries[index], status="completed_after_recovery", result_summary="", code=None
        )
    elif payload.get("disposition") == "completed":
        entries[index] = replace(entries[index], status="completed_after_recovery")
    else:
        reason = payload.get("reasonCode")
        entries[index] = replace(
            entries[index], status="parked", park_reason=str(reason) if reason else None
        )


def _attestation(tool_recovery: Any) -> tuple[bool, int, str | None] | None:
    """(ran, attestedAt, note) of a valid reconcile observation that is the user's attestation."""
    from runtime.ledger.recovery_bundle import parse_reconcile_fact

    fact = parse_reconcile_fact(tool_recovery)
    if fact is None or fact.attestation is None:
        return None
    ran = fact.observation.value == "user_attested_ran"
    return ran, fact.attestation.attested_at, fact.attestation.note
