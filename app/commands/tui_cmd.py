"""``maka tui [--session ID]``: a line-based chat in the terminal.

Type a message and press Enter; the reply streams with tool cards and permission questions.
Ctrl+C cancels a running turn (and at the prompt, leaves). Commands: ``/help``, ``/transcript``,
``/sessions``, ``/resume``, ``/rebaseline``, ``/restore``, ``/settle``, ``/branch`` and ``/quit``.

``/settle CALL ran|not-run [NOTE]`` records what the user checked about a tool call whose outcome
is unknown (docs/design/recovery.md section 8), through the same seam as ``maka settle``.

``/resume`` runs the safe-boundary resume of this session through the same plan/execute seam as
``maka resume`` and the desktop banner: it prints the reasons when the plan parks, otherwise it
streams the continuation. ``/rebaseline`` and ``/restore [DIR]`` answer a park on changed files
as ``maka resume --rebaseline`` / ``--restore-to [DIR]`` do (continue with the files as they are
now, or in a copy of the folder as it was at the stop), so the decision a park asks for can be
made without leaving the TUI (which holds the data folder ``maka`` would need).

Beside a running host (the desktop or ``maka host``) the TUI does not open the store: its chat
goes through the host (``app.commands.tui_host``, docs/design/hosts.md section 1), and turns of
its session driven by other clients show in it as they happen (``app.commands.tui_viewer``).
"""

from __future__ import annotations

import argparse
import functools
import io
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.cli_errors import EXIT_OK, EXIT_USAGE, CliError, refuse_before_a_ledger, say_error
from app.commands.tui_host import HELD_ELSEWHERE_PREFIX, HELD_ELSEWHERE_SUFFIX
from app.data_paths import resolve_data_dir
from runtime.ledger.codes import HostCode
from runtime.ledger.command_words import maka_command

HELP = """commands:
  /transcript   show this session's transcript
  /plan         whether Safe resume can continue this session, and why (as maka plan)
  /timeline     this session's record: runs, events, tool calls (as maka timeline)
  /sessions     list sessions
  /resume       resume the latest interrupted run of this session (Safe resume)
  /rebaseline   when the files changed since the stop: resume with them as they are now
  /restore [DIR]
                when the files changed since the stop: resume in a copy of the folder as it
                was at the stop (or as an older last snapshot holds it: /resume says which),
                made in DIR (default: a new folder beside it, or beside the Git repository
                it is in); yours stays
  /settle CALL ran|not-run [NOTE]
                you checked what an interrupted call (outcome unknown) did: record it
  /branch [EVENT [DIR] [--current-files]]
                without EVENT: list the points this session can be branched from; with it:
                a new session continuing from there, in a copy of the folder as it was
                there (made in DIR, default a new folder beside it or beside the Git
                repository it is in); this one stays as it is.
                --current-files: copy the files as they are now (no snapshot kept there)
  /quit         leave (Ctrl+D works too)
  //TEXT        send /TEXT to the agent (a message that starts with /)
anything else is sent to the agent"""


HOST_HELP = """
beside a running Maka (the desktop or maka host) everything is served by it; a turn of this
session driven by another client (a window, another terminal) shows here as it happens, and
its permission questions may be answered here (the first answer counts)"""


def _tui_settle(_session: str, call: str, not_run_only: bool) -> str:
    """How the TUI says a call ran or not (``/settle``), for the park's advice: each command
    whole on a line of its own, so the line pasted is the answer (a placeholder pasted with it
    was recorded as the user's note)."""
    if not_run_only:
        return f"this line\n  /settle {call} not-run\n(a note of yours may follow it on that line)"
    return (
        f"one of these lines\n  /settle {call} ran\n  /settle {call} not-run\n"
        "(a note of yours may follow either on its line)"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from app.commands.run_cmd import add_max_steps, add_provider

    parser.add_argument("--session", help="continue this session")
    parser.add_argument("--cwd", help="folder for a new session (default: current folder)")
    add_provider(parser)
    parser.add_argument(
        "--permission-mode",
        choices=("ask", "auto", "deny"),
        default="ask",
        help="default: ask; with auto, commands can change files anywhere your user account can",
    )
    add_max_steps(parser)


def run(args: argparse.Namespace) -> int:
    from app.commands.cli_session_host import owned_session_host
    from app.commands.run_cmd import (
        note_auto_mode,
        print_unsettled_calls,
        require_same_folder,
        run_settings,
    )
    from app.commands.terminal_transcript import (
        InputLines,
        StdinPermissionAsker,
        TerminalTranscript,
    )
    from app.host import tui_reads
    from runtime.agent.permission_policy import PermissionMode, PermissionPolicy
    from runtime.agent.session_service import require_utf8
    from runtime.ledger.ledger_errors import LedgerError

    try:
        require_utf8(args.cwd or "", "--cwd")
    except LedgerError as error:
        raise CliError(error.code, error.message, EXIT_USAGE) from None
    cwd = Path(args.cwd or ".")
    if not cwd.is_dir():
        raise CliError(HostCode.INVALID_CWD, f"{cwd} is not a folder", EXIT_USAGE)
    policy = PermissionPolicy(PermissionMode(args.permission_mode))
    note_auto_mode(args.permission_mode)
    transcript = TerminalTranscript()
    asker = StdinPermissionAsker(transcript)
    settings = run_settings(args.max_steps)
    data_dir = resolve_data_dir(args.data_dir)
    from app.host.host_client import attach

    attached = attach(data_dir, command="tui")
    if attached is not None:  # the desktop or `maka host` owns the folder: it runs the turns
        from app.commands.tui_host import chat_through_host

        with attached:
            return chat_through_host(
                args, attached, str(cwd.resolve()), str(policy.mode), HELP + HOST_HELP
            )
    if args.session:
        refuse_before_a_ledger(data_dir, args.session)
    with owned_session_host(data_dir, args.provider, settings) as host:
        service = host.service
        # A new chat's session is made by its first message (as through a running Maka): a
        # chat ended before it (/quit, end of input) leaves no empty session behind.
        session = None
        if args.session:
            try:
                session = service.get_session(args.session)
            except LedgerError as error:
                raise CliError(error.code, error.message, EXIT_USAGE) from None
            if args.cwd:
                require_same_folder(args.cwd, session.session_id, session.cwd)
        if isinstance(sys.stdin, io.TextIOWrapper):
            # A line with bytes that are not UTF-8 reaches the turn, which refuses it with
            # ``text_not_utf8`` (nothing written), instead of ending the chat with a decode error.
            sys.stdin.reconfigure(errors="surrogateescape")
        # The prompt and the permission questions read the same lines (one reader, no line lost).
        lines = InputLines.of(sys.stdin)
        if session is None:
            print(f"maka tui: a new session in {cwd.resolve()}")
        else:
            print(f"maka tui: session {session.session_id} in {session.cwd}")
            if not Path(session.cwd).is_dir():
                print(
                    f"note: the session's folder {session.cwd} is not there (moved or deleted), "
                    "so a message cannot run: /quit, then point the session at its new place "
                    f"with {maka_command(f'sessions relocate {session.session_id} NEW_FOLDER')}"
                )
        if host.repaired_runs:  # before what it led to: the session's interrupted turn
            print(f"startup recovery closed {host.repaired_runs} interrupted run(s)")
        if session is not None:
            tui_reads.say_if_branched(host, session.session_id)
            _say_if_interrupted(service, session.session_id, host)
            print_unsettled_calls(service, session.session_id)
        print(f"provider: {host.provider_label}; permission mode {policy.mode}; /help for help")
        from app.commands.cancellable_turn import chat_interrupts
        from app.commands.hangup import Hangup

        with Hangup() as hangup, chat_interrupts():
            return _chat(
                host,
                session,
                cwd=cwd,
                lines=lines,
                policy=policy,
                asker=asker,
                transcript=transcript,
                hangup=hangup,
            )


# C901: the terminal's one read-eval loop; each slash command is a short branch of it.
def _chat(  # noqa: C901
    host: Any,
    session: Any,
    *,
    cwd: Path,
    lines: Any,
    policy: Any,
    asker: Any,
    transcript: Any,
    hangup: Any,
) -> int:
    from app.commands.tui_host import (
        SETTLE_USAGE,
        next_chat_line,
        no_session_yet,
        timeline,
    )
    from app.host import tui_reads
    from app.host.terminal_transcript import cut_by_terminal, cut_line_words
    from runtime.agent.session_service import require_utf8
    from runtime.ledger.ledger_errors import LedgerError

    service = host.service
    while True:
        chat_line = next_chat_line(lines, hangup, lambda: print("you> ", end="", flush=True))
        if chat_line is None:
            return EXIT_OK
        line, text, command = chat_line
        if command in ("/quit", "/exit"):
            return EXIT_OK
        needs_session = command in (
            "/transcript",
            "/plan",
            "/timeline",
            "/resume",
            "/rebaseline",
            "/restore",
            "/settle",
            "/branch",
        )
        if command == "/help":
            print(HELP)
        elif session is None and needs_session and (command != "/settle" or _settle_form(text)):
            print(no_session_yet())
        elif command == "/transcript" and session is not None:
            _read(functools.partial(tui_reads.transcript, host, session.session_id))
        elif command == "/plan" and session is not None:
            _plan(host, session.session_id)
        elif command == "/timeline" and session is not None:
            timeline(host.data_dir, session.session_id)
        elif command == "/sessions":
            _read(lambda: _list_sessions(service))
        elif command in ("/resume", "/rebaseline", "/restore") and session is not None:
            _resume(
                host,
                session.session_id,
                session.cwd,
                text,
                policy=policy,
                asker=asker,
                transcript=transcript,
            )
        elif command == "/settle":
            if session is None:
                print(SETTLE_USAGE)
            else:
                _settle(host, session.session_id, text)
        elif command == "/branch" and session is not None:
            branched = tui_reads.branch(host, session.session_id, text)
            if branched is not None:
                # The chat goes on in the branch, as the desktop opens it.
                source_id, session = session.session_id, branched
                print(f"maka tui: session {session.session_id} in {session.cwd}")
                tui_reads.say_if_branched(host, session.session_id)
                print(f"(the source goes on with: {maka_command(f'tui --session {source_id}')})")
        elif command:
            print(f"unknown command {command}; /help lists the commands")
        elif cut_by_terminal(line):
            print(cut_line_words(None if session is None else session.session_id))
            # (this chat holds the data folder: the command it names is refused until /quit)
            print(HOLDS_THE_FOLDER)
        else:
            if session is None:
                try:
                    # Bytes that are not UTF-8 are the message's (it is the title too).
                    require_utf8(text, "the message")
                    # Titled by its first message, as through a running Maka or maka run.
                    session = service.create_session(cwd, title=text)
                except LedgerError as error:
                    say_error(error.code, error.message)
                    continue
                print(f"(session {session.session_id})")
            _turn(
                service,
                session.session_id,
                text,
                transcript=transcript,
                policy=policy,
                asker=asker,
            )


def _resume(
    host: Any,
    session_id: str,
    cwd: str,
    text: str,
    *,
    policy: Any,
    asker: Any,
    transcript: Any,
) -> None:
    """``/resume``, ``/rebaseline``, ``/restore [DIR]``: the same plan/execute seam as
    ``maka resume`` (with ``--rebaseline`` / ``--restore-to``) and the desktop banner."""
    from app.commands.resume_cmd import resume_session
    from runtime.continuation.workspace_decision import WorkspaceDecision

    command, _, rest = text.partition(" ")
    rest = rest.strip()
    decision: WorkspaceDecision | None = None
    if command == "/rebaseline" and not rest:
        decision = WorkspaceDecision.REBASELINE
    elif command == "/restore":
        decision = WorkspaceDecision.RESTORE
    elif command != "/resume" or rest:
        print(f"usage: {command}" + (" [DIR]" if command == "/restore" else ""))
        return
    from app.cli_errors import EXIT_PARKED

    parked = resume_session(
        host,
        session_id,
        cwd,
        policy=policy,
        asker=asker,
        transcript=transcript,
        decision=decision,
        restore_to=rest or None,
        settle=_tui_settle,
    )
    if parked == EXIT_PARKED:
        print(TUI_PARK_NOTE)


HOLDS_THE_FOLDER = "(/quit first: while this chat runs, it holds the data folder)"
TUI_CONTINUE_NOTE = (
    "(In this TUI, /resume continues it. The maka commands above need the data folder, which "
    "this TUI holds: /quit first, or they are refused with store_locked.)"
)
TUI_PARK_NOTE = (
    "(In this TUI a message is simply typed here, and changed files are answered with "
    "/rebaseline or /restore [DIR] (maka resume --rebaseline / --restore-to). The maka "
    "commands above need the data folder, which this TUI holds: /quit first, or they are "
    "refused with store_locked.)"
)
"""After a park in the TUI: its advice names maka commands another terminal cannot run while
the TUI is open."""


def _settle_form(text: str) -> bool:
    """``/settle CALL ran|not-run [NOTE]``: the form ``_settle`` takes."""
    parts = text.split(maxsplit=3)
    return len(parts) >= 3 and parts[2] in ("ran", "not-run")


def _settle(host: Any, session_id: str, text: str) -> None:
    """``/settle``: the same seam as ``maka settle``; a refusal prints its code."""
    from app.commands.tui_host import SETTLE_USAGE, placeholder_note
    from app.host.host_bootstrap import now_ms
    from app.host.settle_folder import baseline_capture
    from runtime.ledger.attestation import when_text
    from runtime.ledger.ledger_errors import LedgerError
    from runtime.recovery.settlement import settle

    if not _settle_form(text):
        print(SETTLE_USAGE)
        return
    parts = text.split(maxsplit=3)
    note = parts[3] if len(parts) == 4 else None
    refused = placeholder_note(note)
    if refused is not None:
        print(refused)
        return
    checkpoints = host.service.checkpoints
    try:
        settled = settle(
            host.store,
            session_id,
            parts[1],
            ran=parts[2] == "ran",
            note=note,
            shells=host.shells,
            baseline=baseline_capture(host.store, checkpoints, now_ms),
        )
    except LedgerError as refusal:
        print(f"not recorded [{refusal.code}]: {refusal.message}")
        return
    what = "ran" if settled.ran else "did not run"
    verb = "recorded" if settled.created else "already recorded"
    print(
        f"{verb}: you confirmed that {settled.tool_name} {settled.tool_call_id} {what} "
        f"({when_text(settled.attested_at)}); /resume continues from there, or says what "
        "still holds it (changed files: /rebaseline or /restore [DIR])"
    )
    from app.commands.settle_cmd import folder_lines

    for line in folder_lines(settled, session_id):
        print(line.removeprefix("  "))  # (the files listed stay indented under it)


def _say_if_interrupted(service: Any, session_id: str, host: Any) -> None:
    """Opening a session whose last turn was cut off (by a crash, a failed model server, a stop)
    says so, like the desktop's banner, and names the command that continues it; Safe resume's
    own decision (``resumable``) says which sessions. /resume is offered only when the planner
    (read-only, as ``maka plan``) would continue: a park (a damaged record, an unsettled call,
    changed files) is shown as ``/resume`` would show it. Off, only a crash is mentioned
    (/resume could only answer that it is off)."""
    from app.code_text import describe
    from app.host.resume_switch import resume_enabled
    from runtime.agent.session_overview import session_overview

    data_dir: Path = host.data_dir
    overview = session_overview(service.store, service.get_session(session_id))
    from runtime.continuation.resume_gates import busy_elsewhere_words

    held = busy_elsewhere_words(service.store, session_id)  # a shared ledger: another's lease
    if held is not None:
        print(f"{HELD_ELSEWHERE_PREFIX}{held}{HELD_ELSEWHERE_SUFFIX}")
        return
    if not overview.resumable:
        return
    if resume_enabled(data_dir) and _say_if_parked(host, session_id):
        return
    if not overview.interrupted:
        code = overview.failure_class or str(overview.last_run_status)
        ending = f" ({code})"
        if overview.failure_class is not None and describe(overview.failure_class).known:
            # The ending in words, its code after it (as maka plan lists codes).
            ending = f": {describe(code).sentence[:-1]} ({code})"
        if resume_enabled(data_dir):
            print(
                f"This session's last turn ended before it finished{ending}. Once the cause "
                "is dealt with (a model server that is back, for one), type /resume to "
                "continue it from the last step known to be complete (or send a new message)."
            )
        return
    if resume_enabled(data_dir):
        print(
            "This session was interrupted: Maka stopped before its last turn finished. Check "
            "your files, then type /resume to continue it safely from the last step known to "
            "be complete (or send a new message)."
        )
    else:
        print(
            "This session was interrupted: Maka stopped before its last turn finished. Safe "
            "resume is turned off, so it cannot be continued from where it stopped: check your "
            "files, then send a new message to carry on (turn Safe resume on in the desktop's "
            "Settings, or with MAKA_RUNTIME_SAFE_BOUNDARY_RESUME=1)."
        )


def _planner(host: Any) -> Any:
    """The planner of ``maka plan``, on the store this TUI holds (read-only: looking is not
    planning; the lifecycle log is left alone)."""
    from app.resume_composition import build_resume_service

    return build_resume_service(
        host.store, host.data_dir, host.service.catalog.names, host.shells, processes=host.store
    )


def _plan(host: Any, session_id: str) -> None:
    """``/plan``: what ``maka plan SESSION`` prints, planned from the store this TUI holds."""
    from app.host.plan_report import explained_plan
    from runtime.ledger.ledger_errors import LedgerError

    try:
        plan = _planner(host).plan_latest(session_id)
        words = explained_plan(host.store, host.service.checkpoints, plan, read_only=False)
    except LedgerError as error:
        say_error(error.code, error.message)
        return
    print("\n".join(words.summary))
    # Its advice names maka commands, which this chat's hold on the data folder refuses.
    print(TUI_PARK_NOTE if not plan.continues else TUI_CONTINUE_NOTE)


def _say_if_parked(host: Any, session_id: str) -> bool:
    """Say what holds Safe resume when the planner would park (as /resume prints it); True
    when it parks."""
    from app.host.plan_report import resume_park_lines
    from runtime.ledger.ledger_errors import LedgerError

    try:
        plan = _planner(host).plan_latest(session_id)
    except LedgerError:
        return False  # /resume says what went wrong, as maka resume would
    if plan.continues:
        return False
    print("This session's last turn ended before it finished, and Safe resume cannot continue it:")
    # What answering about a call also does to the folder, as /resume and maka plan say it.
    print("\n".join(resume_park_lines(host.store, host.service.checkpoints, plan, _tui_settle)))
    print(TUI_PARK_NOTE)
    return True


def _list_sessions(service: Any) -> None:
    from app.commands.tui_host import NO_SESSIONS

    overviews = service.list_sessions()
    for overview in overviews:
        status = overview.last_run_status or "no runs"
        print(f"  {overview.session.session_id}  {status}  {overview.session.cwd}")
    if not overviews:
        print(NO_SESSIONS)


def _read(command: Callable[[], object]) -> None:
    """A command that reads the ledger (``/sessions``, ``/transcript``): a store that cannot
    be read (a database server gone away) is said, and the chat goes on. It ended the TUI."""
    from runtime.ledger.ledger_errors import LedgerError

    try:
        command()
    except LedgerError as error:
        say_error(error.code, error.message)


def _turn(
    service: Any, session_id: str, text: str, *, transcript: Any, policy: Any, asker: Any
) -> None:
    from app.commands.cancellable_turn import run_cancellable
    from app.commands.run_cmd import refuse_leased_elsewhere
    from app.commands.tui_host import say_turn_failed
    from app.host.terminal_transcript import left_running
    from runtime.base.cancel_token import CancelToken
    from runtime.ledger.ledger_errors import LedgerError

    cancel = CancelToken()
    try:
        # A session another host holds is busy there, as maka run --session says (a turn sent
        # regardless was refused at its first write, with session_lease_lost).
        refuse_leased_elsewhere(service.store, session_id)
    except CliError as busy:
        say_error(busy.code, busy.message)
        return
    try:
        result = run_cancellable(
            lambda: service.send_turn(
                session_id, text, transcript, policy, asker=asker, cancel=cancel
            ),
            cancel,
        )
        say_turn_failed(
            str(result.status),
            result.failure_class,
            (result.message or "") + left_running(transcript, session_id) or None,
        )
    except LedgerError as error:
        say_error(error.code, error.message)
        if str(error.code) == "invalid_cwd":
            # maka sessions relocate needs the data folder, which this chat holds.
            print(HOLDS_THE_FOLDER, file=sys.stderr)
