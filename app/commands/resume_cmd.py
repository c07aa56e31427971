"""``maka resume SESSION [--json] [--permission-mode ...]``: Safe resume from the terminal.

Plans like ``maka plan`` (after taking ownership and running startup recovery); when the plan
continues, executes it (revalidation, one-transaction admission, then the provider with the
replayed history and no new user message) and streams the continuation to its end. Exit 0 when
the continuation started and finished its turn, 3 with reasons when parked or refused, 1 when the
continuation ran but did not complete.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from typing import TYPE_CHECKING

from app.cli_errors import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_PARKED,
    EXIT_USAGE,
    CliError,
    refuse_before_a_ledger,
)
from app.data_paths import resolve_data_dir
from app.host.resume_decisions import restore_unavailable as _restore_unavailable
from app.host.resume_decisions import unanswered_decision as _unanswered_decision
from runtime.ledger.codes import HostCode, StoreCode

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.commands.cli_session_host import CliHost
    from app.commands.terminal_transcript import TerminalTranscript
    from runtime.agent.permission_policy import PermissionAsker, PermissionPolicy
    from runtime.continuation.workspace_decision import WorkspaceDecision


# ``--restore-to`` without DIR (no argument can hold a NUL): the default place, said as "".
_DEFAULT_PLACE = "\0"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from app.commands.run_cmd import add_max_steps, add_provider

    parser.add_argument("session", help="the session id (see 'maka sessions')")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    add_provider(parser)
    decision = parser.add_mutually_exclusive_group()
    decision.add_argument(
        "--rebaseline",
        action="store_true",
        help="when the files changed since the stop: continue with them as they are now "
        "(they become the new snapshot and the model is told which files changed, or that "
        "files may have changed when no snapshot is left to compare them with)",
    )
    decision.add_argument(
        "--restore-to",
        nargs="?",
        const=_DEFAULT_PLACE,
        metavar="DIR",
        help="when the files changed since the stop: continue in a copy of the folder as it was "
        "at the stop (or, when the last snapshot is older, as that snapshot holds it: maka plan "
        "says which), made in DIR (a new or empty folder; default: a sibling named "
        "<folder>-restored-<n>, or, for a folder inside a Git repository, "
        "<repository>-<path inside>-restored-<n> beside the repository); your folder is "
        "left as it is and the session lives in the copy "
        "(when the folder is a Git repository, the copy is a clone of it at your current commit "
        "with the snapshot's files on top, so git status and git diff show the same changes, none "
        "of them staged; paths Git ignores in the folder (its .gitignore files, "
        ".git/info/exclude, your excludes file) unless it tracks them, and files over 50 MiB "
        "are not in snapshots, so not in the copy)",
    )
    parser.add_argument(
        "--permission-mode",
        choices=("ask", "auto", "deny"),
        help="ask (default on a terminal), auto (commands can then change files anywhere "
        "your user account can), or deny (default without a terminal)",
    )
    add_max_steps(parser)


def run(args: argparse.Namespace) -> int:
    if args.restore_to is not None:
        if not args.restore_to.strip():
            raise CliError(
                HostCode.INVALID_ARGUMENT,
                "--restore-to was given an empty folder name; leave DIR out for the default "
                "place. Nothing was changed.",
                EXIT_USAGE,
            )
        if args.restore_to == _DEFAULT_PLACE:
            args.restore_to = ""
    from app.commands.cli_session_host import owned_session_host
    from app.commands.run_cmd import (
        note_refusals_without_terminal,
        permission_mode,
        run_settings,
    )
    from app.commands.terminal_transcript import StdinPermissionAsker, TerminalTranscript
    from app.host.host_client import attach
    from runtime.agent.permission_policy import PermissionMode, PermissionPolicy

    policy = PermissionPolicy(PermissionMode(permission_mode(args.permission_mode)))
    out = sys.stderr if args.json else sys.stdout
    transcript = TerminalTranscript(out)
    asker = StdinPermissionAsker(transcript)
    settings = run_settings(args.max_steps)
    data_dir = resolve_data_dir(args.data_dir)
    attached = attach(data_dir, command="resume")
    if attached is not None:  # the desktop or `maka host` owns the folder: it continues
        from app.commands.host_turn import resume_through_host

        with attached:
            return resume_through_host(
                args,
                attached,
                permission_mode(args.permission_mode),
                lambda: note_refusals_without_terminal(args.permission_mode),
            )
    refuse_before_a_ledger(data_dir, args.session)
    with owned_session_host(data_dir, args.provider, settings) as host:
        session = host.store.get_session(args.session)
        if session is None:
            raise CliError(StoreCode.SESSION_NOT_FOUND, f"no session {args.session}", EXIT_USAGE)
        return resume_session(
            host,
            args.session,
            session.cwd,
            policy=policy,
            asker=asker,
            transcript=transcript,
            as_json=args.json,
            decision=_decision(args),
            restore_to=args.restore_to or None,
            # Only a continuation that runs may meet a tool: a park says nothing about them.
            before_running=lambda: note_refusals_without_terminal(args.permission_mode),
        )


# A folder refused for the restored copy: the user can pick another one.
def _decision(args: argparse.Namespace) -> WorkspaceDecision | None:
    from runtime.continuation.workspace_decision import WorkspaceDecision

    if args.rebaseline:
        return WorkspaceDecision.REBASELINE
    if args.restore_to is not None:
        return WorkspaceDecision.RESTORE
    return None


# C901: plan, the terminal's workspace decision, settle advice, then run; one flow the CLI and the
# TUI share, each branch an early return with its exit code.
def resume_session(  # noqa: C901
    host: CliHost,
    session_id: str,
    cwd: str,
    *,
    policy: PermissionPolicy,
    asker: PermissionAsker,
    transcript: TerminalTranscript,
    as_json: bool = False,
    decision: WorkspaceDecision | None = None,
    restore_to: str | None = None,
    settle: Callable[[str, str, bool], str] | None = None,
    before_running: Callable[[], None] | None = None,
) -> int:
    """Plan and, when safe, execute; shared by ``maka resume`` and ``/resume`` in the TUI
    (``settle`` says how the terminal records a call's outcome: the TUI's ``/settle``;
    ``before_running`` is called once the continuation is about to run, never for a park)."""
    from app.commands.cancellable_turn import run_cancellable
    from app.host.plan_report import plan_json, plan_summary, settle_command
    from app.resume_composition import host_resume_service
    from runtime.base.cancel_token import OUTPUT_CLOSED
    from runtime.continuation.resume_service import ResumeRefused
    from runtime.ledger.store_ports import RunStatus

    service, cancel = host_resume_service(host, cwd, policy, asker, transcript)
    plan = service.plan_latest(session_id, decision=decision, restore_to=restore_to)
    if not plan.continues:
        from app.host.plan_report import resume_park_json, resume_park_lines

        refusal = _restore_unavailable(plan, decision)
        if as_json:
            body = resume_park_json(host.store, plan)
            if refusal is not None:
                body.update({"disposition": "refused", "code": refusal[0], "message": refusal[1]})
            print(json.dumps(body, ensure_ascii=False))
        else:
            said = resume_park_lines(
                host.store, host.service.checkpoints, plan, settle or settle_command
            )
            print("\n".join(said))
            if refusal is not None:
                print(f"Refused: [{refusal[0]}] {refusal[1]}")
            elif decision is not None:
                # The decision about the files was taken, but something else still parks: said,
                # so the user does not read the shorter list as the decision ignored.
                asked = "--restore-to" if decision.value == "isolated_restore" else "--rebaseline"
                print(
                    f"Your {asked} answers the question about the files, but Safe resume stays "
                    "parked for the reasons above: settle them first, then run maka resume again."
                )
        return EXIT_PARKED
    unanswered = _unanswered_decision(plan, decision, cwd)
    if unanswered is not None:
        # The user asked for a restored copy (or a rebaseline) and the plan would continue
        # without it, in their own folder: refuse rather than drop their decision silently.
        body = plan_json(plan, {"disposition": "refused", "code": unanswered[0]})
        body["message"] = unanswered[1]
        if as_json:
            print(json.dumps(body, ensure_ascii=False))
        else:
            print("\n".join(plan_summary(plan)))
            print(f"Refused: [{unanswered[0]}] {unanswered[1]}")
        return EXIT_PARKED
    if before_running is not None:  # (said before its first output: a refusal drops it)
        transcript.before_first_output(before_running)
    if plan.continuation is not None:
        transcript.name_calls(plan.continuation.restore_subjects)
    if not as_json:
        # Said once the continuation is admitted and runs: a refusal before that (a folder
        # refused for the restored copy, a changed source) is all that is printed.
        transcript.hold("\n".join(plan_summary(plan)) + "\n")
    try:
        # `maka resume ... | head`: end it cleanly, saying why (not the user's cancel)
        transcript.on_reader_gone = functools.partial(cancel.cancel, OUTPUT_CLOSED)
        result = run_cancellable(lambda: service.execute(plan), cancel)
    except ResumeRefused as refused:
        transcript.release(keep=False)
        body = plan_json(plan, {"disposition": "refused", "code": str(refused.code)})
        body["message"] = refused.message
        if as_json:
            print(json.dumps(body, ensure_ascii=False))
        else:
            print(
                f"Safe resume refused before the provider was called: [{refused.code}] "
                f"{refused.message}"
            )
            from app.host.terminal_turn import refusal_advice

            advice = refusal_advice(str(refused.code), session_id, cwd, restore_to)
            if advice is not None:
                print(advice)
        return EXIT_PARKED
    except BaseException:
        transcript.release(keep=False)
        raise
    transcript.release()
    target = host.store.read_run_header(result.target_run_id)
    moved = target is not None and target.cwd != cwd
    if as_json:
        extra: dict[str, object] = {
            "started": True,
            "runId": result.target_run_id,
            "status": result.status.value,
        }
        if target is not None:
            extra["workspacePath"] = target.cwd
        print(json.dumps(plan_json(plan, extra), ensure_ascii=False))
    else:
        if moved and target is not None:
            print(f"Continued in a restored copy at {target.cwd}; {cwd} was left as it is.")
            from app.host.copy_note import copy_repository_note

            note = copy_repository_note(cwd, target.cwd)
            if note is not None:
                print(note)
        print(f"\ncontinuation run {result.target_run_id} ended {result.status.value}")
    return EXIT_OK if result.status is RunStatus.COMPLETED else EXIT_ERROR
