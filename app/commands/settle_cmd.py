"""``maka settle SESSION OPERATION --ran|--not-run [--note TEXT] [--json]``: record what the user
checked about a tool call whose outcome is unknown (docs/design/recovery.md section 8).

A call interrupted between its start and its recorded result (a ``bash`` command, typically)
stays unknown forever, and Safe resume parks on it. The person at the keyboard can often check.
This command records their answer, on the record and once: a recovery bundle that says the user
confirmed it, when, with their note. ``OPERATION`` is the tool call id ``maka plan`` shows (or
the operation id). Like ``maka resume`` it owns the data directory and runs startup recovery
first; while the desktop is open, its main process (the host that owns the folder) records the
answer instead, and every open window shows it (docs/design/cli.md, "Beside the desktop"): same
output, same exit codes. Afterwards it says whether Safe resume can now continue.

Whether the call may be settled at all is decided from the run's committed events by the same
reading ``maka plan`` shows (``runtime.recovery.settle_verdict``): a run whose record of tool
calls is damaged is refused with ``tool_ledger_corruption`` (an answer cannot make it resumable).

Exit 0 when recorded (or already recorded the same way), 2 for an unknown session or call or a
bad note, 1 for any other refusal (its code on stderr: ``tool_ledger_corruption``,
``attestation_not_applicable``, ``operation_settled``, ``run_not_orphaned``,
``attestation_not_offered_for_reconcile``, ``background_operation_pending``, ``store_locked``...).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from app.cli_errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError, refuse_before_a_ledger
from app.data_paths import resolve_data_dir
from runtime.ledger.codes import HostCode, StoreCode
from runtime.ledger.command_words import maka_command

if TYPE_CHECKING:
    from runtime.recovery.settlement import Settled

_USAGE_CODES = frozenset(
    {"operation_not_found", "attestation_note_too_long", "attestation_note_empty"}
)


_PLACEHOLDER_NOTES = frozenset({"TEXT", "NOTE", "[TEXT]", "[NOTE]", "TEXT]", "NOTE]"})
_PLACEHOLDER_STARTS = (
    "[--note",
    "(or --not-run)",
    "(or not-run)",
    "(or --ran)",
    "[TEXT]",
    "[NOTE]",
)
"""Words of the usage text and of the advice's form (``--ran (or --not-run) [--note TEXT]``),
not of a user's note: pasted along with the command, as the TUI's ``/settle`` refuses them."""


def placeholder_note(note: str | None) -> str | None:
    """Why ``--note`` is refused (it is a placeholder of the command's usage text, or starts
    with one), or None: a note is kept for good, so a pasted form is not recorded as one."""
    if note is None:
        return None
    words = note.strip()
    if words not in _PLACEHOLDER_NOTES and not words.startswith(_PLACEHOLDER_STARTS):
        return None
    return (
        f"--note {words!r} is the usage text's placeholder, not a note of yours: give what you "
        "checked after --note, or leave --note out (nothing was recorded)"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", help="the session id (see 'maka sessions')")
    parser.add_argument("operation", help="the tool call id 'maka plan SESSION' shows")
    choice = parser.add_mutually_exclusive_group(required=True)
    choice.add_argument("--ran", action="store_true", help="you checked: it ran")
    choice.add_argument("--not-run", action="store_true", help="you checked: it did not run")
    parser.add_argument("--note", help="what you checked (at most 500 characters)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def run(args: argparse.Namespace) -> int:
    from app.commands.cli_session_host import owned_store
    from app.host.host_bootstrap import now_ms, startup_reconciler
    from app.host.host_client import attach
    from app.host.settle_folder import baseline_capture
    from app.resume_composition import build_resume_service
    from runtime.ledger.ledger_errors import LedgerError
    from runtime.recovery.settlement import settle
    from runtime.recovery.startup_recovery import run_startup_recovery
    from runtime.tools.process_tree import BackgroundShellRegistry
    from runtime.tools.tool_catalog import default_catalog
    from storage.checkpoints.checkpoint_store import GitCheckpointStore

    placeholder = placeholder_note(args.note)
    if placeholder is not None:
        raise CliError(HostCode.INVALID_ARGUMENT, placeholder, EXIT_USAGE)
    data_dir = resolve_data_dir(args.data_dir)
    host = attach(data_dir, command="settle")
    if host is not None:
        with host:
            return _through_host(args, host)

    refuse_before_a_ledger(data_dir, args.session)
    with owned_store(data_dir) as store:
        run_startup_recovery(store, now_ms, startup_reconciler(store))
        if store.get_session(args.session) is None:
            raise CliError(StoreCode.SESSION_NOT_FOUND, f"no session {args.session}", EXIT_USAGE)
        shells = BackgroundShellRegistry.in_data_dir(data_dir)
        carrier = GitCheckpointStore.from_environment(data_dir)
        try:
            settled = settle(
                store,
                args.session,
                args.operation,
                ran=bool(args.ran),
                note=args.note,
                shells=shells,
                baseline=baseline_capture(store, carrier, now_ms),
            )
        except LedgerError as refusal:
            exit_code = EXIT_USAGE if refusal.code in _USAGE_CODES else EXIT_ERROR
            raise CliError(refusal.code, refusal.message, exit_code) from None
        service = build_resume_service(store, data_dir, default_catalog().names, shells)
        plan = service.plan_latest(args.session)
    codes = [reason.value for reason in plan.rejection_reasons]
    return _report(
        args, settled.to_json(), plan.continues, codes, folder_lines(settled, args.session)
    )


def _report(
    args: argparse.Namespace,
    body: dict[str, Any],
    continues: bool,
    codes: list[str],
    folder: Sequence[str] = (),
) -> int:
    """What was recorded (``Settled.to_json``'s fields) and what Safe resume would do now."""
    from runtime.ledger.attestation import when_text

    if args.json:
        body["resume"] = {"continues": continues, "rejectionReasons": codes}
        print(json.dumps(body, ensure_ascii=False))
        return EXIT_OK
    what = "ran" if body["attestation"] == "ran" else "did not run"
    verb = "Recorded" if body["created"] else "Already recorded"
    print(
        f"{verb}: you confirmed that {body['toolName']} {body['toolCallId']} {what} "
        f"({when_text(body['attestedAt'])})."
    )
    if body.get("note") is not None:
        print(f"  Your note: {body['note']}")
    print("  The model will be told this, and that no output of the call was recorded.")
    if folder and "workspace_folder_missing" in codes:
        # Nothing of the folder can be taken while it is not there: where it went comes first.
        folder = [
            "  The folder is not there, so it could not be taken as the new starting point: "
            f"if it moved, {maka_command(f'sessions relocate {args.session} NEW_FOLDER')} points "
            "the session at it first."
        ]
    elif folder and "workspace_identity_mismatch" in codes:
        # Nor is a folder not shown to be the session's: its marker comes first.
        folder = [
            "  The folder is not shown to be the session's (its workspace marker is missing, or "
            "is not the session's), so it was not taken as the new starting point: if it is the "
            "session's "
            "folder and git clean -fdx deleted its marker, "
            f"{maka_command(f'sessions relocate {args.session} FOLDER')}, with this same folder, "
            "gives the marker back first."
        ]
    if folder:
        print("\n".join(folder))
    in_tui = bool(getattr(args, "in_tui", False))
    print("\n".join(_after_settling(continues, codes, args.session, in_tui)))
    return EXIT_OK


def _through_host(args: argparse.Namespace, host: Any) -> int:
    """The desktop owns the data folder: it records the answer (every window hears it)."""
    from pydantic import ValidationError

    from app.bridge_contract import AttestationChoice, ToolSettledPush, ToolsSettleRequest
    from app.host.host_client import HostRefusal
    from runtime.ledger.attestation import note_code, note_problem

    problem = note_problem(args.note)
    if problem is not None:
        raise CliError(note_code(args.note), problem, EXIT_USAGE)
    try:
        request = ToolsSettleRequest(
            session_id=args.session,
            tool_call_id=args.operation,
            outcome=AttestationChoice.RAN if args.ran else AttestationChoice.NOT_RUN,
            note=args.note,
        )
    except ValidationError:
        raise CliError(
            StoreCode.OPERATION_NOT_FOUND,
            f"no tool operation {args.operation} in session {args.session}",
            EXIT_USAGE,
        ) from None
    answer = host.ask(request)
    if not isinstance(answer, ToolSettledPush):
        raise CliError(HostCode.HOST_UNREACHABLE, "the running Maka answered something else")
    if not answer.recorded or answer.settlement is None:
        refusal = HostRefusal(answer.code or HostCode.INTERNAL_FAILURE, answer.message)
        usage = str(refusal.code) in _USAGE_CODES | {StoreCode.SESSION_NOT_FOUND}
        raise CliError(refusal.code, refusal.message, EXIT_USAGE if usage else EXIT_ERROR)
    body = answer.settlement.model_dump(mode="json", by_alias=True, exclude_none=True)
    folder = folder_words(body, args.session)
    if isinstance(body.get("workspace"), dict):
        body["workspace"].pop("changedCount", None)  # as the command prints it alone
    continues, reasons = answer.resume_available, list(answer.resume_reasons)
    from app.host.resume_switch import command_safe_resume

    own = command_safe_resume()
    if own is not None:
        # What maka resume with this command's MAKA_RUNTIME_SAFE_BOUNDARY_RESUME would do now
        # (the host planned with its own setting, which its windows go by).
        from app.bridge_contract import SessionPlannedPush, SessionsPlanRequest

        planned = host.ask(SessionsPlanRequest(session_id=args.session, safe_resume=own))
        if isinstance(planned, SessionPlannedPush):
            continues = planned.continues
            reasons = [str(r) for r in json.loads(planned.document).get("rejectionReasons", [])]
    return _report(args, body, continues, reasons, folder)


def folder_lines(settled: Settled, session_id: str) -> list[str]:
    """What the answer did to the folder's starting point (docs/design/workspace.md section 3)."""
    return folder_words(settled.to_json(), session_id)


def folder_words(body: Mapping[str, Any], session_id: str) -> list[str]:
    """``folder_lines`` from what ``maka settle --json`` prints (the host sends the same)."""
    from runtime.ledger.file_names import shown_name
    from runtime.ledger.workspace_facts import changed_count_words

    found = body.get("workspace")
    if not isinstance(found, Mapping) or not body.get("created"):
        return []
    if found.get("problem"):
        return [
            "  The folder could not be taken as the new starting point "
            f"({found['problem']}); its last snapshot stays behind it "
            f"({maka_command(f'resume {session_id} --rebaseline')} takes the files as they are)."
        ]
    if not found.get("baselineRecorded"):
        return ["  No file changed since the last snapshot."]
    paths = found.get("changedPaths")
    if not isinstance(paths, list):
        return [
            "  The folder as it is now is the new starting point "
            "(there was no snapshot to compare it with)."
        ]
    count = int(found.get("changedCount") or len(paths))
    words = changed_count_words(paths) if count == len(paths) else f"{count} files"
    lines = [
        "  The folder as it is now is the new starting point; "
        f"{words} changed since the last snapshot" + (":" if paths else ".")
    ]
    lines.extend(f"    {shown_name(str(path))}" for path in paths[:10])
    if count > 10:
        lines.append(f"    and {count - 10} more")
    return lines


def _after_settling(
    continues: bool, codes: list[str], session_id: str, in_tui: bool = False
) -> list[str]:
    """What the answer changed for Safe resume, in words: each reason that still holds with its
    sentence, or, when the session was already carried on by a new message, that the next
    message is where the model hears of it (``in_tui``: as ``maka tui``'s commands say it)."""
    from app.code_text import describe

    resume = "/resume" if in_tui else maka_command(f"resume {session_id}")
    if continues:
        return [f"Safe resume can now continue: {resume}"]
    if codes == ["resume_candidate_missing"]:
        message = (
            "your next message"
            if in_tui
            else f"your next message ({maka_command(f'run --session {session_id} MESSAGE')}, or "
            "the desktop)"
        )
        return [
            "Nothing in this session is left to resume (its latest turn finished): the model is "
            f"told your answer with {message}."
        ]
    if codes == ["continuation_already_exists"]:
        # Safe resume carried the run on (with this answer: it does not continue past a call
        # whose outcome is unknown), so nothing waits for it.
        return ["Safe resume already continued this run with that answer: nothing waits for it."]
    plan = "/resume says more" if in_tui else f"{maka_command(f'plan {session_id}')} says more"
    lines = [f"Safe resume is still on hold ({plan}):"]
    lines.extend(f"  - {code}: {describe(code).sentence}" for code in codes)
    return lines
