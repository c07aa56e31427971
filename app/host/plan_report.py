"""What ``maka plan`` and ``maka resume`` say about a Safe resume plan: the summary in words, the
JSON document, and every tool call of the source run with the resolver's status and reason.

Qt-free and free of the commands, so the host that owns the data folder (the desktop's main
process) answers a terminal's ``maka plan`` with the same words and document the command prints
when it opens the folder itself (docs/design/cli.md, "Beside the desktop").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.code_text import DIAGNOSTICS, Severity, describe, highest_severity
from app.host.resume_wire import sub_code
from app.park_guidance import (
    DAMAGED_RECORD_REASON,
    HISTORY_REPLAY_CODES,
    LEDGER_CHECK_CODES,
    LEDGER_DAMAGED,
    ledger_check_code,
    park_severity,
    record_damaged,
)
from runtime.continuation.continuation_planner import ContinuationDetails, ContinuationPlan
from runtime.continuation.workspace_decision import WORKSPACE_DECISION_REASONS, WorkspaceDecision
from runtime.ledger.attestation import Attestation, when_text
from runtime.ledger.codes import (
    RESOLVER_REASON,
    DiagnosticCode,
    ParkReason,
    ResolverReason,
    ResolverStatus,
    SettlementOrigin,
)
from runtime.ledger.command_words import maka_command
from runtime.ledger.file_names import shown_name
from runtime.ledger.quarantined_runs import Quarantined, read_unless_quarantined
from runtime.ledger.restore_point_words import copy_reflects
from runtime.ledger.run_records import TERMINAL_RUN_STATUSES
from runtime.ledger.store_ports import LedgerReader
from runtime.ledger.timeline_events import stop_of, stopped_words
from runtime.ledger.workspace_facts import changed_count_words
from runtime.recovery.recovery_resolver import ToolRecoveryDecision, resolve_operations
from runtime.recovery.settle_verdict import settle_verdict
from runtime.recovery.write_leftovers import leftover_words, parked_writes

if TYPE_CHECKING:
    from typing import Protocol

    from app.host.settle_folder import SettleFolderStore
    from runtime.ledger.checkpoint_ports import CheckpointCarrier
    from runtime.ledger.event_model import RuntimeEvent

    class ParkStore(LedgerReader, SettleFolderStore, Protocol):
        """What a resume's park is said from: the ledger, and what settling would read."""


# What startup recovery decided about an interrupted tool call: the resolver's reasons (the
# parked ones are the recovery decision's reasonCode), worded in the renderer's one table.
RECOVERY_CODES = (
    "recovery_bundle_completed",
    "reconcile_matches_prior_state",
    "reconcile_diverged",
    "reconcile_unreadable",
    "dispatch_without_response",
    "user_attested_ran",
    "user_attested_not_run",
)


def recovery_sentence(code: str) -> str | None:
    """What recovery found about a tool call (``code``: the resolver's reason), or, for a
    damaged record, what is wrong with it."""
    if code in LEDGER_CHECK_CODES:
        return f"{describe(code).sentence} {LEDGER_DAMAGED}"
    if code not in RECOVERY_CODES or code not in DIAGNOSTICS:
        return None
    return DIAGNOSTICS[code][1]


@dataclass(frozen=True, slots=True)
class OperationView:
    """One tool call of the plan's source run, as the resolver sees it (for ``maka plan``)."""

    run_id: str
    decision: ToolRecoveryDecision
    # Temporary files of a parked write still in the folder (relative paths): not what Maka
    # was writing, so recovery left them for the user.
    leftovers: tuple[str, ...] = ()
    # What the user confirmed when they settled the call (docs/design/recovery.md section 8).
    attestation: Attestation | None = None
    # The run's facts let the user settle it (``runtime.recovery.settle_verdict``: the decision
    # ``maka settle`` applies), so the advice may name ``maka settle`` for it.
    settleable: bool = False
    # Only "it did not run" can be said: recovery found the file of this write untouched.
    not_run_only: bool = False
    # The run has not ended (it runs in this or another Maka process): a call without a result
    # may still be running, so nothing about it can be said yet.
    turn_running: bool = False
    # Its recorded result says it was stopped, not that it ran to its end: ``stop_of``'s
    # "cancelled" (Ctrl+C, Stop) or "host" (Maka ended it), and the words ``maka timeline``
    # gives its row ("stopped when the turn was cancelled").
    stopped: str | None = None
    stopped_words: str | None = None
    # Of ``leftovers``, those holding exactly what the write was writing; and its target.
    leftovers_ours: frozenset[str] = frozenset()
    target: str = ""

    def to_json(self) -> dict[str, Any]:
        d = self.decision
        body: dict[str, Any] = {
            "runId": self.run_id,
            "toolName": d.tool_name,
            "toolCallId": d.tool_call_id,
            "status": d.status.value,
            "reason": d.reason.value,
        }
        if d.operation_id is not None:
            body["operationId"] = d.operation_id
        if self.leftovers:
            body["temporaryFiles"] = list(self.leftovers)
        if d.settlement_origin is not None:
            body["settlementOrigin"] = d.settlement_origin.value
        if self.attestation is not None:
            body["attestation"] = self.attestation.fields()
        if self.turn_running:
            body["turnRunning"] = True
        if self.stopped is not None:
            body["stopped"] = self.stopped
        return body

    def line(self, holder_gone: bool = False) -> str:
        """``holder_gone``: the process that ran the turn is gone (its lease still stands), so
        a call without a result is not "still running"."""
        d = self.decision
        sentence = recovery_sentence(d.reason.value)
        if self.attestation is not None and sentence is not None:
            sentence = f"{sentence[:-1]} on {when_text(self.attestation.attested_at)}."
            if self.attestation.note is not None:
                sentence += f" Your note: {self.attestation.note}"
        # A call whose result says it was stopped has a whole record ("completed"), but did
        # not run to its end: say how it ended, as the timeline does.
        status = self.stopped_words or d.status.value
        if self.turn_running and d.status.value != "completed":
            status = "no result yet"  # not "indeterminate": its turn has not ended
        text = f"  {d.tool_name or 'tool'} {d.tool_call_id}: {status} ({d.reason.value})"
        if self.turn_running and d.status.value != "completed":
            sentence = "The turn that made this call has not ended: it may still be running."
            if holder_gone:
                sentence = (
                    "The Maka process that ran its turn is gone (killed or crashed): the call "
                    "did not finish there, and may have done part of its work."
                )
        text = f"{text}: {sentence}" if sentence else text
        for leftover in self.leftovers:
            text += "\n    " + leftover_words(
                leftover, leftover in self.leftovers_ours, self.target
            )
        return text


def _attestations(events: Sequence[RuntimeEvent]) -> dict[str, Attestation]:
    """The user's attestations in a run's events, by operation id."""
    # Imported here: the bundle rules cost a few milliseconds, and most plans hold no bundle.
    from runtime.ledger.recovery_bundle import parse_reconcile_fact

    found: dict[str, Attestation] = {}
    for event in events:
        actions: Any = event.get("actions") or {}
        fact = parse_reconcile_fact(actions.get("toolRecovery"))
        if fact is not None and fact.attestation is not None:
            found.setdefault(fact.operation_id, fact.attestation)
    return found


def source_operations(store: LedgerReader, plan: ContinuationPlan) -> tuple[OperationView, ...]:
    """The tool calls of the plan's source run (else the session's latest run), resolved."""
    run_id = plan.source_run_id
    if run_id is None:
        runs = sorted(store.list_session_runs(plan.session_id), key=lambda h: h.created_at)
        if not runs:
            return ()
        run_id = runs[-1].run_id
    rows = read_unless_quarantined(store, run_id)
    if isinstance(rows, Quarantined):
        # A run whose record no longer decodes: the plan says so (runtime_ledger_unreadable,
        # the run quarantined); it has no calls to list, and the session's other runs stay
        # readable (the plan's words are not lost to one damaged event).
        return ()
    events = [row.event for row in rows]
    header = store.read_run_header(run_id)
    running = header is not None and header.status not in TERMINAL_RUN_STATUSES
    session = store.get_session(plan.session_id)
    writes = {w.tool_call_id: w for w in parked_writes(events, session.cwd)} if session else {}
    resolution, resolved = resolve_operations(events)
    decisions = resolution.decisions
    attested = (
        _attestations(events)
        if any(d.settlement_origin is SettlementOrigin.USER_ATTESTATION for d in decisions)
        else {}
    )
    views: list[OperationView] = []
    for op in resolved:
        verdict = settle_verdict(resolution, op)
        write = writes.get(op.decision.tool_call_id)
        stopped: str | None = None
        words: str | None = None
        response = op.operation.response_event
        if op.decision.reason is ResolverReason.MATCHING_RESPONSE and response is not None:
            content: Any = response.get("content")
            words = stopped_words(content, op.operation.dispatch_event is not None)
            stopped = stop_of(content.get("result")) if words is not None else None
        views.append(
            OperationView(
                run_id,
                op.decision,
                write.leftovers if write is not None else (),
                attested.get(op.decision.operation_id or "")
                if op.decision.settlement_origin is SettlementOrigin.USER_ATTESTATION
                else None,
                verdict.open and not running,
                verdict.open and verdict.not_run_only and not running,
                running,
                stopped,
                words,
                write.ours if write is not None else frozenset(),
                write.path if write is not None else "",
            )
        )
    return tuple(views)


def _recovery_reason(
    detail: Mapping[str, Any], tool_call_id: str | None, reasons: Mapping[str, str]
) -> str:
    """The resolver's reason for a parked call: from the operations, else the diagnostic's own
    ``resolverReason`` field (never from its message)."""
    if tool_call_id is not None and tool_call_id in reasons:
        return reasons[tool_call_id]
    found = detail.get(RESOLVER_REASON)
    return found if isinstance(found, str) and found in RECOVERY_CODES else ""


_OFF = frozenset({"resume_feature_disabled"})


def park_lines(
    plan: ContinuationPlan,
    reasons: Mapping[str, str] | None = None,
    leave_out: frozenset[str] = frozenset(),
) -> list[str]:
    """One sentence per reason, then the diagnostics with their codes (for a terminal). A parked
    or unsettled tool call also gets a sentence saying what recovery found; ``reasons`` maps tool
    call ids to resolver reasons (else the reason code named in the diagnostic is used).
    ``leave_out``: codes not said (reasons and diagnostics), being beside the point."""
    lines: list[str] = []
    broken = damaged(plan)
    for reason in plan.rejection_reasons:
        if reason.value in leave_out:
            continue
        text = describe(reason.value)
        severity, sentence = text.severity, text.sentence
        if broken and reason.value == "dangling_tool_state":
            # Not an outcome to settle: a record Maka will not resume over.
            severity = park_severity(_codes(plan), (d.code for d in plan.diagnostics))
            sentence = DAMAGED_RECORD_REASON
        elif reason is ParkReason.SESSION_BUSY and _holder_gone(plan):
            # Not "running right now": the process that held it is gone (named below).
            sentence = "This session's lease is still held by a Maka process that is gone."
        elif reason is ParkReason.WORKSPACE_IDENTITY_MISMATCH and any(
            d.detail.get("markerMissing") for d in plan.diagnostics
        ):
            # Not "not the same workspace": nothing says which workspace it is (said below).
            sentence = (
                "This folder has no workspace marker, so it cannot be shown to be the "
                "workspace the session ran in."
            )
        elif reason is ParkReason.WORKSPACE_CHECKPOINT_MISSING and any(
            d.detail.get("keptElsewhere") for d in plan.diagnostics
        ):
            # Not "gone or damaged": on a shared ledger another host keeps it (said below).
            severity = Severity.WARN
            sentence = (
                "The snapshot of the folder taken at the stop is not in this data folder: "
                "another host keeps it."
            )
        lines.append(f"  [{severity}] {reason.value}: {sentence}")
    for diagnostic in plan.diagnostics:
        if diagnostic.code in leave_out:
            continue
        where = ""
        if diagnostic.tool_name or diagnostic.tool_call_id:
            where = f" ({diagnostic.tool_name or 'tool'} {diagnostic.tool_call_id or ''})".rstrip()
        code, message = diagnostic.code, diagnostic.message
        checked = ledger_check_code(diagnostic.code, sub_code(diagnostic.detail))
        if checked is not None:
            # A damaged record: the message names only the ledger check's code.
            code += f" [{checked}]" if checked != diagnostic.code else ""
            message = f"{describe(checked).sentence} {LEDGER_DAMAGED}"
        elif diagnostic.code in HISTORY_REPLAY_CODES:
            # The replay's message is only its code: say its sentence and the event instead.
            message = describe(diagnostic.code).sentence
        if checked is not None or diagnostic.code in HISTORY_REPLAY_CODES:
            where += f" (event {diagnostic.event_id})" if diagnostic.event_id else ""
        lines.append(f"    - {code}{where}: {message}")
        if diagnostic.code == "tool_recovery_parked":
            code = _recovery_reason(diagnostic.detail, diagnostic.tool_call_id, reasons or {})
            found = recovery_sentence(code)
            if found is not None:
                lines.append(f"      {found}")
        lines.extend(changed_path_lines(diagnostic.detail))
    return lines


def _codes(plan: ContinuationPlan) -> tuple[str, ...]:
    return tuple(reason.value for reason in plan.rejection_reasons)


def damaged(plan: ContinuationPlan) -> bool:
    """The park's unsettled tool state includes a damaged record of the history."""
    return record_damaged(_codes(plan), (d.code for d in plan.diagnostics))


def changed_path_lines(detail: Mapping[str, Any], limit: int | None = None) -> list[str]:
    """The changed files of a ``workspace_drift`` diagnostic, one a line (``limit`` of them,
    then "and N more")."""
    paths = detail.get("changedPaths")
    if not isinstance(paths, list):
        return []
    more = detail.get("moreChangedPaths", 0)
    more = more if isinstance(more, int) else 0
    shown = paths if limit is None else paths[:limit]
    listed = detail.get("leftOutPaths")
    left = set(listed) if isinstance(listed, list) else set()
    lines = [
        f"      {_change_word(entry, left):<8} {shown_name(str(entry.get('path', '?')))}"
        for entry in shown
        if isinstance(entry, dict)
    ]
    rest = len(paths) - len(shown) + more
    if rest:
        lines.append(f"      and {rest} more")
    if left:
        lines.append(
            "      (left out: still in the folder, but snapshots leave it out now: an ignore "
            "rule came in since or Git no longer tracks it (git rm --cached), or it grew over "
            "50 MiB)"
        )
    return lines


def _change_word(entry: Mapping[str, Any], left_out: set[str]) -> str:
    """How a changed path changed; a "deleted" one still in the folder is "left out"."""
    if entry.get("change") == "deleted" and entry.get("path") in left_out:
        return "left out"
    return str(entry.get("change", "?"))


def _folder_advice(plan: ContinuationPlan, turn_running: bool) -> list[str]:
    """A missing folder or Safe resume turned off: the command that changes it (not while
    the latest turn runs: there is nothing to resume yet, whatever the setting)."""
    codes = {reason.value for reason in plan.rejection_reasons}
    advice: list[str] = []
    if "workspace_folder_missing" in codes:
        advice.append(_relocate_words(plan.session_id))
    missing = any(d.detail.get("markerMissing") for d in plan.diagnostics)
    if "workspace_identity_mismatch" in codes:
        advice.append(
            (
                "Its workspace marker was deleted? If this is the folder the session ran in, "
                if missing
                else "Its workspace marker deleted (git clean -fdx deletes .maka) and made anew? "
                "If this is the folder the session ran in, "
            )
            + "and no other session has run here since, "
            "pointing the session at it gives the marker back: "
            f"{maka_command(f'sessions relocate {plan.session_id} FOLDER')}, with this same "
            "folder; Safe resume then compares its "
            "files with the last snapshot."
        )
    if "resume_feature_disabled" in codes and not turn_running:
        advice.append(
            "Turn Safe resume on in the desktop's Settings, or for one command with "
            "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME=1."
        )
    return advice


def _relocate_words(session_id: str) -> str:
    return (
        "The folder moved? Point the session at its new place: "
        f"{maka_command(f'sessions relocate {session_id} NEW_FOLDER')} (its "
        ".maka/workspace.json, or the older .maka-workspace.json, must match). Deleted? "
        f"{maka_command(f'branch {session_id}')} lists the points you can continue from in a "
        "new folder made from their snapshots, and says of each whether its snapshot is still "
        "whole here. Or remove the session (its history too; sessions branched from it must be "
        f"removed first): {maka_command(f'sessions remove {session_id} --yes')}."
    )


def session_folder_gone(store: LedgerReader, session_id: str) -> bool:
    """Whether the session's recorded folder is missing here (False for an unknown session)."""
    session = store.get_session(session_id)
    return session is not None and not Path(session.cwd).is_dir()


def _history_advice(plan: ContinuationPlan) -> list[str]:
    """The conversation no longer fits the model's context window: resuming would send it
    again, a new message leaves the oversized turn out."""
    if ParkReason.PROVIDER_HISTORY_TOO_LONG not in plan.rejection_reasons:
        return []
    return [
        "Send a new, shorter message to carry on "
        f"({maka_command(f'run --session {plan.session_id} MESSAGE')}, or the desktop): the "
        "turn that did not fit is left out from then on. If a short message fails the same "
        "way, start a new session or give the model server a larger context size."
    ]


def settle_command(session_id: str, tool_call_id: str, not_run_only: bool = False) -> str:
    """How a terminal says a call ran or not: ``maka settle`` (the TUI passes ``/settle``);
    ``not_run_only``: only "it did not run" can be said (a write recovery found not done)."""
    if not_run_only:
        return maka_command(f"settle {session_id} {tool_call_id} --not-run [--note TEXT]")
    return maka_command(f"settle {session_id} {tool_call_id} --ran (or --not-run) [--note TEXT]")


FolderWords = Callable[[str], str | None]
"""Given a tool call id, what answering about it also does to the folder (docs/design/workspace.md
section 3: ``app.host.settle_folder.preview_words``), or None."""


def settleable_calls(operations: Sequence[OperationView]) -> list[str]:
    """The tool call ids of the calls the user may settle."""
    return [
        op.decision.tool_call_id
        for op in operations
        if op.settleable and op.decision.tool_call_id is not None
    ]


@dataclass(frozen=True, slots=True)
class LeaseHolder:
    """Another process holding the session's lease on a shared ledger (``machine:pid:nonce``);
    ``gone``: a process of this computer that no longer runs (``holder_gone_here``)."""

    holder: str
    gone: bool

    def json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"leaseHeldBy": self.holder}
        if self.gone:
            body["leaseHolderGone"] = True
        return body


def lease_holder(store: object, session_id: str) -> LeaseHolder | None:
    """Who else holds the session's lease now (None: nobody, this process, or a ledger of the
    data folder's own)."""
    from runtime.continuation.resume_gates import holder_gone_here, other_lease_holder

    holder = other_lease_holder(store, session_id)
    return None if holder is None else LeaseHolder(holder, holder_gone_here(holder))


def resume_park_lines(
    store: ParkStore,
    checkpoints: CheckpointCarrier | None,
    plan: ContinuationPlan,
    settle: Callable[[str, str, bool], str] = settle_command,
) -> list[str]:
    """What a resume that parks says (``maka resume`` alone or through a host, the TUI's
    ``/resume``), as ``maka plan`` says it: with the source run's calls (a call with an unknown
    outcome names ``maka settle``), what answering it does to the folder, the session's folder
    looked at, and another process holding the session's lease named: its lease refuses the
    commands this park would otherwise advise."""
    from app.host.settle_folder import folder_words

    operations = source_operations(store, plan)
    folder = folder_words(store, checkpoints, plan, settleable_calls(operations))
    return plan_summary(
        plan,
        operations,
        settle,
        folder=folder.get,
        folder_gone=session_folder_gone(store, plan.session_id),
        lease=lease_holder(store, plan.session_id),
    )


def resume_park_json(store: object, plan: ContinuationPlan) -> dict[str, Any]:
    """A resume's park as its ``--json`` document: the plan, with ``leaseHeldBy`` as
    ``maka plan --json`` has it."""
    lease = lease_holder(store, plan.session_id)
    return plan_json(plan, lease.json() if lease is not None else None)


@dataclass(frozen=True, slots=True)
class PlanWords:
    """What ``maka plan`` prints: its lines, and its ``--json`` document."""

    summary: tuple[str, ...]
    document: dict[str, Any]


def plan_words(
    store: LedgerReader,
    plan: ContinuationPlan,
    operations: Sequence[OperationView],
    folder: FolderWords | None,
    extra: dict[str, Any],
) -> PlanWords:
    """``maka plan``'s words and document, the same whether the command opened the store or a
    running host answers it: with the session's folder looked at, and the process holding the
    session's lease named (``leaseHeldBy``) when it is not this one."""
    lease = lease_holder(store, plan.session_id)
    gone = session_folder_gone(store, plan.session_id)
    summary = plan_summary(plan, operations, folder=folder, folder_gone=gone, lease=lease)
    body = plan_json(plan, {**extra, **(lease.json() if lease is not None else {})}, operations)
    return PlanWords(tuple(summary), body)


def explained_plan(
    store: ParkStore,
    checkpoints: CheckpointCarrier | None,
    plan: ContinuationPlan,
    *,
    read_only: bool,
) -> PlanWords:
    """``maka plan``'s words for a plan made from a store the caller holds (the command alone,
    a running host answering it, the TUI's ``/plan``): the source run's calls resolved, what
    answering about each also does to the folder, then :func:`plan_words`."""
    from app.host.settle_folder import folder_words

    operations = source_operations(store, plan)
    folder = folder_words(store, checkpoints, plan, settleable_calls(operations))
    return plan_words(store, plan, operations, folder.get, {"readOnly": read_only})


def plan_summary(
    plan: ContinuationPlan,
    operations: Sequence[OperationView] | None = None,
    settle: Callable[[str, str, bool], str] = settle_command,
    folder: FolderWords | None = None,
    folder_gone: bool = False,
    *,
    lease: LeaseHolder | None = None,
) -> list[str]:
    """The plan in words (``folder_gone``: the session's folder is not there, which the planner
    checks only for an interrupted run: a new message cannot run either; ``lease``: another
    process holding the session's lease, whose commands here are refused)."""
    reasons = {op.decision.tool_call_id: op.decision.reason.value for op in operations or ()}
    gone = _holder_gone(plan) or (lease is not None and lease.gone)
    elsewhere = lease is not None and not lease.gone and not plan.continues
    if plan.continues and plan.continuation is not None:
        lines = _continue_lines(plan, plan.continuation, lease)
    else:
        # A session whose latest turn finished has nothing to resume: said as that, not as
        # Safe resume "parked" (the exit code stays the one for "does not continue").
        # So is one whose interruption was already resumed (its continuation ran or runs).
        finished = [reason.value for reason in plan.rejection_reasons] in (
            ["resume_candidate_missing"],
            ["continuation_already_exists"],
        )
        # A turn that has not ended: said first (Safe resume being off, say, is not why).
        running = not finished and _turn_running(plan, operations, gone)
        lines = [
            f"Nothing to resume in session {plan.session_id}:"
            if finished
            else f"The Maka process that ran session {plan.session_id}'s turn is gone:"
            if gone
            else f"A turn of session {plan.session_id} is still running:"
            if running
            else f"Safe resume is parked for session {plan.session_id}:",
            # (while it runs, Safe resume being off is beside the point: nothing to resume yet)
            *park_lines(plan, reasons, _OFF if running else frozenset()),
            *_stop_advice(plan),
            *_folder_advice(plan, _turn_running(plan, operations, gone)),
            *([] if elsewhere else _workspace_advice(plan)),
            *_history_advice(plan),
        ]
        unknown = [op.decision for op in operations or () if op.settleable]
        confirmable = [op.decision for op in operations or () if op.not_run_only]
        running = any(r.value == "background_operation_pending" for r in plan.rejection_reasons)
        answer: list[str] = []
        # Every call to settle is a write recovery found not done: confirming that is the way
        # Safe resume goes on, so it comes first and a new message is the other way.
        confirm_first = False
        if damaged(plan):
            # Saying whether a call ran cannot lift it, nor can clearing the other reasons.
            answer.append(
                f"{maka_command('doctor')} lists every damaged record in the data folder (it "
                "changes nothing); only a backup of the data folder from before the damage could "
                "resume this run."
            )
        elif unknown and running:
            answer.append(
                "Once it has ended you can say on the record whether the call ran: "
                f"{settle(plan.session_id, unknown[0].tool_call_id, False)}."
            )
        elif confirmable and len(confirmable) == len(unknown):
            confirm_first = (
                _parked_for_good(operations) is None
                and _unreadable(plan) is None
                and not folder_gone
            )
            answer.extend(_confirm_advice(plan, confirmable, settle, folder, confirm_first))
        elif unknown:
            answer.extend(
                _unknown_advice(plan, unknown[0].tool_call_id, len(unknown), settle, folder)
            )
        step = _next_step(
            plan, operations, folder_gone, len(confirmable) if confirm_first else 0, gone
        )
        if lease is not None and not _holder_gone(plan):
            # (a park of the planner's own that names the holder says it already)
            busy = ParkReason.SESSION_BUSY in plan.rejection_reasons
            if lease.gone:
                step = [*_held_by_gone_words(lease.holder), *step]
            elif not _turn_running(plan, operations):
                # Settling, a new message, a resume: refused with this data folder.
                answer, step = [], _held_elsewhere_words(lease.holder)
            elif not busy:
                step = [*step, *_held_elsewhere_words(lease.holder)]
        lines.extend([*answer, *step] if confirm_first else [*step, *answer])
        if not damaged(plan) and _parked_for_good(operations) is None:
            # (a call parked for good keeps the run parked: no folder decision would follow)
            lines.extend(_later_workspace_advice(plan))
    if plan.transitions:
        lines.append("Workspace decisions in this lineage:")
        lines.extend(f"  run {t['runId']}: {t['text']}" for t in plan.transitions)
    if operations:
        lines.append(f"Tool calls of run {operations[0].run_id}:")
        lines.extend(op.line(holder_gone=gone) for op in operations)
    return lines


def _parked_for_good(operations: Sequence[OperationView] | None) -> OperationView | None:
    """A call recovery parked that no answer can settle (a write whose file someone else
    changed since, say): Safe resume can never continue its run."""
    for op in operations or ():
        if (
            op.decision.status.value == "parked"
            and not op.settleable
            and not op.not_run_only
            and not op.turn_running
        ):
            return op
    return None


_UNREADABLE = ("workspace_marker_unreadable", "checkpoint_folder_unreadable")


def _unreadable(plan: ContinuationPlan) -> str | None:
    """The code of a folder Maka could not read, when that is what kept it from looking at
    the session's folder (the observation's failure names it)."""
    for diagnostic in plan.diagnostics:
        if diagnostic.code == ParkReason.SAFETY_OBSERVATION_UNAVAILABLE.value:
            for code in _UNREADABLE:
                if code in diagnostic.message:
                    return code
    return None


def _turn_running(
    plan: ContinuationPlan, operations: Sequence[OperationView] | None, gone: bool = False
) -> bool:
    """The session's latest turn has not ended (here or in another Maka process); not when
    the process holding it is known to be gone (``_holder_gone``, or ``gone``: its lease says
    so)."""
    if gone or _holder_gone(plan):
        return False
    return ParkReason.SESSION_BUSY in plan.rejection_reasons or any(
        op.turn_running for op in operations or ()
    )


def _holder_gone(plan: ContinuationPlan) -> bool:
    """The session's lease is held by a Maka process of this computer that is gone (a shared
    ledger, a killed ``maka run``): its turn runs nowhere, and waits for the lease to run out."""
    return any(
        d.code == ParkReason.SESSION_BUSY.value and (d.detail or {}).get("holderGone")
        for d in plan.diagnostics
    )


def _held_elsewhere_words(holder: str) -> list[str]:
    return [
        f"Host {holder} holds this session's lease now: maka settle, maka run and maka resume "
        "with this data folder are refused until it gives the session up or its lease runs "
        "out; answer there (its data folder, or its desktop window)."
    ]


def _continue_lines(
    plan: ContinuationPlan, details: ContinuationDetails, lease: LeaseHolder | None
) -> list[str]:
    """A plan that continues, in words: what it replays, its notes, and where it continues."""
    lines = [
        f"Safe resume can continue session {plan.session_id} from run {plan.source_run_id}",
        f"  as a new run, replaying {len(details.runtime_context)} committed events "
        f"over {len(details.lineage_run_ids)} generation(s), with no new user message.",
    ]
    lines.extend(f"  note: {d.code}: {d.message}" for d in plan.diagnostics)
    if lease is not None:  # (the resume itself is refused with session_busy)
        lines.extend(_continue_elsewhere_words(lease))
    if details.workspace_decision is WorkspaceDecision.RESTORE:
        holds = copy_reflects(details.restore_fields, details.restore_subjects)
        lines.append(
            f"  Continuing in a restored copy holding {holds}; your folder is left as it is."
        )
    elif details.workspace_decision is not None:
        changes = details.decision_changes
        said = (
            f"{changed_count_words([c.path for c in changes])} changed"
            if changes is not None
            else "no snapshot to compare them with"
        )
        lines.append(
            f"  Continuing with your current files ({said}); the model is told to re-read "
            "what changed."
        )
    return lines


def _continue_elsewhere_words(lease: LeaseHolder) -> list[str]:
    """A plan that would continue, while another process holds the session's lease: a resume
    here is refused (``session_busy``) until that lease is given up or runs out."""
    from runtime.continuation.resume_gates import gone_holder_words, lease_wait_words

    if lease.gone:
        return [
            f"  But {gone_holder_words(lease.holder)} still holds this session's lease: maka "
            f"resume is refused until it runs out ({lease_wait_words()})."
        ]
    return [
        f"  But host {lease.holder} holds this session's lease now: maka resume with this data "
        "folder is refused until it gives the session up or its lease runs out (a running "
        "host keeps it: stop that host for the lease to run out); resume there (its data "
        "folder, or its desktop window)."
    ]


def _held_by_gone_words(holder: str) -> list[str]:
    from runtime.continuation.resume_gates import gone_holder_words

    return [
        f"{gone_holder_words(holder)} still holds this session's lease: maka settle, maka run "
        "and maka resume are refused until it runs out."
    ]


def _next_step(
    plan: ContinuationPlan,
    operations: Sequence[OperationView] | None,
    folder_gone: bool,
    confirmed_writes: int = 0,
    gone: bool = False,
) -> list[str]:
    """A parked plan's "what next" line: carry on with a new message, when one can run
    (``confirmed_writes``: the lines above advise confirming that many writes recovery found
    not done, so a new message is the other way, not the first step; ``gone``: the process
    holding the session's lease is gone)."""
    from runtime.continuation.resume_gates import lease_wait_words

    if gone or _holder_gone(plan):
        return [
            "What next: wait for the gone process's lease to run out "
            f"({lease_wait_words()}), then ask again: {maka_command(f'plan {plan.session_id}')}."
        ]
    if _turn_running(plan, operations):
        return [
            "What next: the session's latest turn has not ended (it runs in this or another "
            "Maka process); wait for it to end, or stop it where it runs, then ask again: "
            f"{maka_command(f'plan {plan.session_id}')}."
        ]
    only_history = plan.rejection_reasons == (ParkReason.PROVIDER_HISTORY_TOO_LONG,)
    if only_history or "workspace_folder_missing" in {r.value for r in plan.rejection_reasons}:
        return []  # (a new message cannot run in a folder that is gone: the advice above says so)
    # The calls the model is told about with a new message (``outcome_notices``): an unknown
    # or parked outcome; a call never dispatched did not run, and nothing is said of it.
    unsettled = any(
        op.decision.status in (ResolverStatus.INDETERMINATE, ResolverStatus.PARKED)
        for op in operations or ()
    )
    told = "; the model is told which calls are unsettled" if unsettled else ""
    if plan.workspace_options:
        return [
            "Or carry on with a new message "
            f"({maka_command(f'run --session {plan.session_id} MESSAGE')}, or the desktop){told}."
        ]
    if folder_gone:
        return [
            "What next: the session's folder is not there, so a new message cannot run "
            "either. " + _relocate_words(plan.session_id)
        ]
    if highest_severity(r.value for r in plan.rejection_reasons) is Severity.INFO:
        # Nothing was interrupted (the latest turn finished, say): no calls to check.
        return [
            "What next: carry on with a new message "
            f"({maka_command(f'run --session {plan.session_id} MESSAGE')}, or the desktop)."
        ]
    unread = _unreadable(plan)
    if unread is not None:
        # Nothing was found changed: the folder could not be looked at. Its permissions are
        # what to change (a new message cannot even start while the marker cannot be read).
        carry = (
            "; or carry on with a new message "
            f"({maka_command(f'run --session {plan.session_id} MESSAGE')}, or the desktop), "
            "whose snapshots are not taken while "
            "it cannot be read"
            if unread == "checkpoint_folder_unreadable"
            else ""
        )
        return [
            "What next: Maka cannot read part of the session's folder (named above). Give it "
            "back the permissions it had (a folder's mode is part of its snapshot: another "
            "mode shows as a change), then ask again: "
            f"{maka_command(f'plan {plan.session_id}')}{carry}."
        ]
    final = _parked_for_good(operations)
    if final is not None and not damaged(plan):
        return [
            f"What next: Safe resume cannot continue this run: recovery parked "
            f"{final.decision.tool_name} {final.decision.tool_call_id} for good "
            f"({final.decision.reason.value}), and no answer changes that. Carry on with a new "
            f"message ({maka_command(f'run --session {plan.session_id} MESSAGE')}, or the "
            f"desktop){told}. Or continue from an earlier point in a new folder "
            f"({maka_command(f'branch {plan.session_id}')} lists them)."
        ]
    if confirmed_writes:
        writes, them, told_of = (
            ("that write", "it", "the write")
            if confirmed_writes == 1
            else ("those writes", "them", "the writes")
        )
        return [
            "Or carry on with a new message "
            f"({maka_command(f'run --session {plan.session_id} MESSAGE')}, or the desktop), "
            f"and ask for {writes} again if you still want {them}; the model is told {told_of} "
            "did not happen."
        ]
    # A damaged record stays: the line below says what can and cannot help.
    until = "" if damaged(plan) else " Safe resume stays parked until the reasons above change."
    # (every call of the run has its outcome: none is "interrupted", the folder is what to look at)
    check = "what the interrupted calls may have changed" if unsettled else "the session's folder"
    return [
        f"What next: check {check}, then carry on with a new message "
        f"({maka_command(f'run --session {plan.session_id} MESSAGE')}, or the desktop)"
        f"{told}.{until}"
    ]


def _after_answer(plan: ContinuationPlan, said: str | None, count: int) -> str:
    """What holds Safe resume once the user has answered about a call (``said``: what the
    answer also does to the folder; ``count``: the calls there are to answer about)."""
    lifted = {"dangling_tool_state"}
    if said is not None and count == 1:
        lifted.add("workspace_checkpoint_stale")  # the answer takes the folder as it is now
        if plan.answers_take_folder:  # whatever holds the files, the answer clears it
            lifted |= {reason.value for reason in WORKSPACE_DECISION_REASONS}
    if not {r.value for r in plan.rejection_reasons} <= lifted:
        return "The other reasons above still hold after that."
    if count > 1:
        return f"Safe resume can continue once each of the {count} calls below is settled."
    return "Safe resume can then continue from there."


def _confirm_advice(
    plan: ContinuationPlan,
    confirmable: Sequence[ToolRecoveryDecision],
    settle: Callable[[str, str, bool], str],
    folder: FolderWords | None,
    first: bool,
) -> list[str]:
    """Confirming on the record that a write recovery found not done did not run (the one
    answer there is), and what that answer also does to the folder; ``first``: said as the
    park's next step."""
    found = confirmable[0]
    said = folder(found.tool_call_id) if folder is not None else None
    start = "What next: recovery" if first else "Recovery"
    lines = [
        f"{start} found the file of {found.tool_name} {found.tool_call_id} as it was before "
        "the write, so the write did not happen. Confirm that on the record (the model is "
        f"then told so): {settle(plan.session_id, found.tool_call_id, True)}. "
        f"{_after_answer(plan, said, len(confirmable))}"
    ]
    if said is not None:
        lines.append(said)  # what confirming also does to the folder
    return lines


def _unknown_advice(
    plan: ContinuationPlan,
    call_id: str,
    count: int,
    settle: Callable[[str, str, bool], str],
    folder: FolderWords | None,
) -> list[str]:
    """Saying on the record whether a call with an unknown outcome ran; for a call that may
    write, what the answer also does to the folder (docs/design/workspace.md section 3)."""
    said = folder(call_id) if folder is not None else None
    then = _after_answer(plan, said, count)
    lines = [
        "If you can check whether a call with an unknown outcome ran, say so on the "
        f"record: {settle(plan.session_id, call_id, False)}. {then}"
    ]
    if said is not None:
        lines.append(said)
    return lines


def _workspace_advice(plan: ContinuationPlan) -> list[str]:
    """The user's ways forward when only the files stand in the way (docs/design/workspace.md 4)."""
    lines: list[str] = []
    if "isolated_restore" in plan.workspace_options:
        point = plan.restore_point
        reflects = point.reflects if point is not None else copy_reflects({})
        skipped = [str(p) for p in (point.checkpoint.get("skippedPaths") or [])] if point else []
        named = ", ".join(skipped[:3]) + (
            f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        )
        note = next(
            (
                d.detail
                for d in plan.diagnostics
                if d.code == DiagnosticCode.WORKSPACE_RESTORE_PLACE.value and d.detail.get("path")
            ),
            None,
        )
        place = str(note["path"]) if note is not None else ""
        where = f"in DIR or, without one, in {place}" if place else "in DIR or a new folder"
        clone = (
            " It is a clone of your Git repository at its current commit with the snapshot's "
            "files on top, so git status and git diff there show the same changes, none of "
            "them staged."
            if note is not None and note.get("clone") is True
            else ""
        )
        lines.append(
            "Continue in a restored copy: "
            f"{maka_command(f'resume {plan.session_id} --restore-to [DIR]')} "
            f"(made {where}; your folder is left as it is and the "
            f"session lives in the copy). The copy holds {reflects}.{clone} Snapshots leave out "
            "paths Git ignores in the folder (its .gitignore files, .git/info/exclude, your "
            "excludes file) unless it "
            "tracks them, and files over 50 MiB"
            + (f" (here: {named})" if skipped else "")
            + ", so the copy does not have them."
        )
    if "rebaseline" in plan.workspace_options:
        uncompared = any(
            d.code == DiagnosticCode.WORKSPACE_REBASELINE_UNCOMPARED.value for d in plan.diagnostics
        )
        told = (
            "that files may have changed, with no snapshot to tell which,"
            if uncompared
            else "which files changed"
        )
        uncaptured = next(
            (
                d
                for d in plan.diagnostics
                if d.code == DiagnosticCode.WORKSPACE_REBASELINE_UNCAPTURED.value
            ),
            None,
        )
        if uncaptured is not None:
            why = str((uncaptured.detail or {}).get("message") or "")
            lines.append(
                "Continue with your current files: "
                f"{maka_command(f'resume {plan.session_id} --rebaseline')} (the files as they "
                "are now cannot be "
                f"snapshotted{f' ({why})' if why else ''}, so the continuation has no snapshot "
                "until that is removed; the model is told that files may have changed, with "
                "no snapshot to tell which, and to re-read them)."
            )
        else:
            lines.append(
                "Continue with your current files: "
                f"{maka_command(f'resume {plan.session_id} --rebaseline')} (the files as they "
                "are now become the new "
                f"snapshot; the model is told {told} and to re-read them)."
            )
    return lines


def _later_workspace_advice(plan: ContinuationPlan) -> list[str]:
    """The files' ways forward when other reasons park too: said now, so clearing those is not
    followed by a surprise (a decision never waives another gate)."""
    later = plan.later_workspace_options
    if not later:
        return []
    ways = []
    if "isolated_restore" in later:
        ways.append(
            f"in a restored copy ({maka_command(f'resume {plan.session_id} --restore-to [DIR]')})"
        )
    if "rebaseline" in later:
        ways.append(
            f"with your current files ({maka_command(f'resume {plan.session_id} --rebaseline')})"
        )
    return [
        "The folder needs your decision too: once the other reasons above are cleared, "
        f"continue {' or '.join(ways)}."
    ]


def _stop_advice(plan: ContinuationPlan) -> list[str]:
    """A command still running from before the restart: say so first, and how to stop it."""
    if not any(r.value == "background_operation_pending" for r in plan.rejection_reasons):
        return []
    return [
        "A command started before Maka stopped is still running and may still change files. "
        "Stop it with the command shown above (or wait for it to end), then run "
        f"{maka_command(f'plan {plan.session_id}')} again."
    ]


def plan_json(
    plan: ContinuationPlan,
    extra: dict[str, Any] | None = None,
    operations: Sequence[OperationView] | None = None,
) -> dict[str, Any]:
    body = plan.to_json()
    if operations is not None:
        body["operations"] = [op.to_json() for op in operations]
    if extra:
        body.update(extra)
    return body
