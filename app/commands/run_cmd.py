"""``maka run``: one headless agent turn in a session, streaming the transcript.

``--permission-mode``: ``ask`` asks before tools that change something (on a terminal; with a
pipe, one answer line per question), ``auto`` allows every tool, ``deny`` refuses them with a
clear message (read-only tools still run). Without the option: ``ask`` on a terminal, ``deny``
otherwise. Ctrl+C cancels the turn (it ends ``cancelled``, its bash commands killed). Exit 0 when
the turn completed, 1 when it failed or was cancelled.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path
from typing import Any

from app.cli_errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError, refuse_before_a_ledger
from app.data_paths import resolve_data_dir
from runtime.ledger.codes import HostCode
from runtime.ledger.command_words import maka_command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cwd", help="the session folder (required for a new session)")
    parser.add_argument("--session", help="continue this session instead of creating one")
    add_provider(parser)
    parser.add_argument(
        "--permission-mode",
        choices=("ask", "auto", "deny"),
        help="ask (default on a terminal), auto (commands can then change files anywhere "
        "your user account can), or deny (default without a terminal)",
    )
    add_max_steps(parser)
    parser.add_argument("prompt", help="the message for the agent")


def add_provider(parser: argparse.ArgumentParser) -> None:
    """``--provider NAME`` (``run``, ``tui``, ``resume``)."""
    parser.add_argument(
        "--provider",
        type=provider_option,
        help="demo (default), openai or scripted (docs/providers.md)",
    )


def provider_option(text: str) -> str:
    """An empty name is a mistake, not the default: ``--provider ""`` ran the demo provider."""
    if not text.strip():
        raise argparse.ArgumentTypeError("a provider name is needed: demo, openai or scripted")
    return text


def add_max_steps(parser: argparse.ArgumentParser) -> None:
    """``--max-steps N`` (``run``, ``tui``, ``resume``): the turn's step limit."""
    from runtime.agent.run_loop import DEFAULT_MAX_STEPS

    parser.add_argument(
        "--max-steps",
        type=max_steps_option,
        metavar="N",
        help=f"model steps one turn may take before it stops (default {DEFAULT_MAX_STEPS})",
    )


def max_steps_option(text: str) -> int:
    from runtime.agent.run_loop import check_max_steps

    try:
        return check_max_steps(int(text))
    except ValueError as error:
        message = str(error) if text.strip().lstrip("+-").isdigit() else f"not a number: {text!r}"
        raise argparse.ArgumentTypeError(message) from None


def run_settings(max_steps: int | None) -> Any:
    """The ``RunSettings`` of a command's turns (``--max-steps`` or the default)."""
    from runtime.agent.run_loop import RunSettings

    return RunSettings() if max_steps is None else RunSettings(max_steps=max_steps)


def note_step_limit(result: Any, session_id: str) -> None:
    """Say on stderr, with its code, that a turn ended at the step limit or with an empty reply:
    the turn completed, but its work may not be done, so it must never look like an ordinary
    ending."""
    from runtime.agent.run_loop import EMPTY_REPLY, STEP_LIMIT

    if getattr(result, "stop_reason", None) == STEP_LIMIT:
        print(
            f"maka: notice [{STEP_LIMIT}]: the turn stopped at its step limit; continue it "
            f"({maka_command(f'run --session {session_id} PROMPT')}) and raise the limit with "
            "--max-steps N",
            file=sys.stderr,
        )
    if getattr(result, "stop_reason", None) == EMPTY_REPLY:
        print(f"maka: notice [{EMPTY_REPLY}]: {result.message}", file=sys.stderr)


def permission_mode(option: str | None) -> str:
    if option:
        return option
    return "ask" if sys.stdin is not None and sys.stdin.isatty() else "deny"


def note_auto_mode(mode: str) -> None:
    """With ``auto``, say once what it means: commands are not confined to the session folder."""
    from app.visible_text import AUTO_MODE_WARNING

    if mode == "auto":
        print(
            f"note: --permission-mode auto runs every tool without asking. {AUTO_MODE_WARNING}",
            file=sys.stderr,
        )


def note_refusals_without_terminal(option: str | None) -> None:
    """Say so when no ``--permission-mode`` was given and there is no terminal to ask on: tools
    that change something will be refused (``run`` and ``resume``); with ``auto``, what that
    means."""
    note_auto_mode(permission_mode(option))
    if permission_mode(option) == "deny" and not option:
        print(
            "note: no terminal to ask on, so tools that change files or run commands are "
            "refused; use --permission-mode auto to allow them (commands can then change "
            "files anywhere your user account can)",
            file=sys.stderr,
        )


def print_unsettled_calls(service: Any, session_id: str) -> None:
    """Tell the user what the model is told before a new turn: earlier tool calls whose
    outcome is unknown (a crash between dispatch and result), so nothing is repeated unseen.
    The notice is written to the model ("Do not retry it blindly"), so it is quoted as what the
    model is told, never printed as if it spoke to the user."""
    from app.host.terminal_turn import unsettled_call_notes

    for line in unsettled_call_notes(service, session_id):
        print(line, file=sys.stderr)


def refuse_leased_elsewhere(store: Any, session_id: str) -> None:
    """On a shared ledger (PostgreSQL), a session whose live lease another host holds is busy
    there: refused before anything is said about its history (a turn running there has calls
    without a result that are not interrupted), naming the host, as that host would."""
    from runtime.continuation.resume_gates import busy_elsewhere_words

    busy = busy_elsewhere_words(store, session_id)
    if busy is not None:
        raise CliError(HostCode.SESSION_BUSY, busy, EXIT_ERROR)


def require_same_folder(cwd: str, session_id: str, session_cwd: str) -> None:
    """``--cwd`` with ``--session`` must name the session's own folder: a session always works
    in the folder it was created for, so another folder is a mistake to report, not to ignore."""
    if os.path.realpath(cwd) != os.path.realpath(session_cwd):
        raise CliError(
            HostCode.SESSION_CWD_MISMATCH,
            f"session {session_id} works in {session_cwd}, not in {cwd}; leave out --cwd to "
            "continue it, or start a new session in that folder without --session",
            EXIT_USAGE,
        )


def run(args: argparse.Namespace) -> int:
    from app.commands.cancellable_turn import run_cancellable
    from app.commands.cli_session_host import owned_session_host
    from app.host.host_client import attach
    from app.host.terminal_transcript import StdinPermissionAsker, TerminalTranscript, left_running
    from runtime.agent.permission_policy import PermissionMode, PermissionPolicy
    from runtime.agent.session_service import require_utf8
    from runtime.base.cancel_token import OUTPUT_CLOSED, CancelToken
    from runtime.ledger.codes import WorkspaceMarkerCode
    from runtime.ledger.ledger_errors import LedgerError

    try:
        require_utf8(args.prompt, "the prompt")
        require_utf8(args.cwd or "", "--cwd")
    except LedgerError as error:
        raise CliError(error.code, error.message, EXIT_USAGE) from None
    if not args.prompt.strip():
        raise CliError(HostCode.PROMPT_EMPTY, "the prompt is empty", EXIT_USAGE)
    if not args.session and not args.cwd:
        raise CliError(HostCode.CWD_REQUIRED, "a new session needs --cwd DIR", EXIT_USAGE)
    if args.cwd and not Path(args.cwd).is_dir():
        raise CliError(HostCode.INVALID_CWD, f"{args.cwd} is not a folder", EXIT_USAGE)
    policy = PermissionPolicy(PermissionMode(permission_mode(args.permission_mode)))
    data_dir = resolve_data_dir(args.data_dir)
    attached = attach(data_dir, command="run")
    if attached is not None:  # the desktop or `maka host` owns the folder: it runs the turn
        from app.commands.host_turn import run_through_host

        with attached:
            mode = permission_mode(args.permission_mode)
            end = run_through_host(
                args, attached, mode, lambda: note_refusals_without_terminal(args.permission_mode)
            )
        return turn_ended(
            end.status, end.failure_class, end.stop_reason, end.message, end.session_id
        )
    if args.session:
        refuse_before_a_ledger(data_dir, args.session)
    transcript = TerminalTranscript()
    asker = StdinPermissionAsker(transcript)
    settings = run_settings(args.max_steps)
    with owned_session_host(data_dir, args.provider, settings) as host:
        service = host.service
        try:
            if args.session:
                session = service.get_session(args.session)
            else:
                session = service.create_session(Path(args.cwd), title=args.prompt)
        except LedgerError as error:
            # A folder whose workspace marker cannot be made is not a usage mistake (exit 1,
            # as when the turn met it); nothing was recorded either way.
            marker = isinstance(error.code, WorkspaceMarkerCode)
            raise CliError(
                error.code, error.message, EXIT_ERROR if marker else EXIT_USAGE
            ) from None
        if args.session and args.cwd:
            require_same_folder(args.cwd, session.session_id, session.cwd)
        if args.session:
            refuse_leased_elsewhere(service.store, session.session_id)
        print(
            f"session {session.session_id} in {session.cwd} ({host.provider_label}, "
            f"permission mode {policy.mode})",
            file=sys.stderr,
        )
        note_refusals_without_terminal(args.permission_mode)
        if args.session:
            print_unsettled_calls(service, session.session_id)
        cancel = CancelToken()
        # `maka run ... | head`: end it cleanly, saying why (not the user's cancel)
        transcript.on_reader_gone = functools.partial(cancel.cancel, OUTPUT_CLOSED)
        from app.commands.hangup import Hangup

        try:
            # The terminal closed (SIGHUP): the turn is cancelled as by Ctrl+C, so it ends
            # ``cancelled`` instead of the process dying mid-call (an outcome to settle).
            with Hangup():
                result = run_cancellable(
                    lambda: service.send_turn(
                        session.session_id,
                        args.prompt,
                        transcript,
                        policy,
                        asker=asker,
                        cancel=cancel,
                    ),
                    cancel,
                )
        except LedgerError as error:
            raise CliError(
                error.code,
                error.message + left_running(transcript, session.session_id),
                EXIT_ERROR,
            ) from None
        return turn_ended(
            result.status,
            result.failure_class,
            getattr(result, "stop_reason", None),
            # A call whose outcome could not be committed (T2 refused: the database went
            # away mid-call) ran all the same: said, as when the store stops the turn.
            (result.message or "") + left_running(transcript, session.session_id) or None,
            session.session_id,
        )


def turn_ended(
    status: str,
    failure_class: str | None,
    stop_reason: str | None,
    message: str | None,
    session_id: str,
) -> int:
    """What ``maka run`` says when its turn ended, and its exit code (whichever path ran it)."""
    from types import SimpleNamespace

    if status == "completed":
        note_step_limit(SimpleNamespace(stop_reason=stop_reason, message=message), session_id)
        return EXIT_OK
    print(turn_ended_words(status, failure_class, message), file=sys.stderr)
    return EXIT_ERROR


def turn_ended_words(status: str, failure_class: str | None, message: str | None) -> str:
    """How a turn that did not complete ended, as a terminal says it (``maka run``, and the
    TUI of a turn that failed)."""
    return (
        f"maka: the turn ended {status}"
        + (f" ({failure_class})" if failure_class else "")
        + (f": {message}" if message else "")
    )
