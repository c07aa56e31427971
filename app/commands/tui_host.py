"""``maka tui`` through the running host of its data folder (docs/design/hosts.md section 1).

The host (the desktop's main process, or ``maka host``) owns the folder, so the chat's turns run
in it: each message is ``turns.run`` as ``maka run`` sends it (``host_turn.run_through_host``),
``/resume``, ``/rebaseline`` and ``/restore [DIR]`` are ``turns.resume`` as ``maka resume`` sends
it, ``/sessions`` is the host's sessions overview (``maka sessions``) and ``/settle`` its
``tools.settle`` (``maka settle``). Permission questions are answered here (a window may answer
first: the first answer counts); Ctrl+C during a turn cancels the turn this TUI started.

``/transcript`` and ``/branch [ARGS]`` are served by the host too (``terminal.command``): it
writes the lines the TUI prints when it opens the store itself, with the same code
(``app.host.tui_reads``), and a branch made there is where the chat goes on.

The TUI views its session (``tui_viewer``): a turn of it driven by another client (a window,
another terminal, Safe resume) shows here as it happens, saying who drives it, and its
permission questions may be answered here. A host that stops while the chat is open ends it
with ``host_stopped`` (exit 1).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from app.cli_errors import EXIT_OK, EXIT_PARKED, EXIT_USAGE, CliError, say_error
from app.commands.hangup import Hangup
from app.host.host_client import HostClient
from runtime.ledger.codes import HostCode, StoreCode
from runtime.ledger.command_words import maka_command

INTERRUPTED_NOTE = (
    "This session's last turn ended before it finished. Check your files, then type /resume: "
    "the running Maka continues it safely from the last step known to be complete, or says what "
    "holds it ({plan} explains it without running anything). Or send a new message."
)

INTERRUPTED_RESUME_OFF_NOTE = (
    "This session's last turn ended before it finished. Safe resume is turned off {where}, so "
    "it cannot be continued from where it stopped: check your files, then send a new message "
    "to carry on (turn Safe resume on in the desktop's Settings, or with "
    "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME=1)."
)
"""Opening an interrupted session when ``/resume`` could only answer that Safe resume is off
(as the TUI alone says it)."""

HELD_ELSEWHERE_PREFIX = "Another Maka process holds this session: "
HELD_ELSEWHERE_SUFFIX = (
    ". Until it lets go, /resume, a message and /settle here are refused (session_busy)."
)
"""Opening a session another Maka process holds the lease of (a shared ledger), alone and
beside a running host: the holder named, as ``maka plan`` names it."""

TUI_HOST_PARK_NOTE = (
    "(In this TUI a message is simply typed here, changed files are answered with /rebaseline "
    "or /restore [DIR], and /settle CALL ran|not-run records what you checked. The maka "
    "commands above work in another terminal too: the running Maka serves them.)"
)


NO_ARGUMENT = ("/help", "/quit", "/exit", "/sessions", "/transcript", "/plan", "/timeline")
"""The TUI's commands that take no argument: one given is refused, not "unknown command"."""


def message_or_command(text: str) -> tuple[str, str]:
    """A typed line as ``(text, command)``: ``//TEXT`` is the message ``/TEXT`` (no command);
    otherwise the command is the first word when it starts with "/" ("" for a message)."""
    if text.startswith("//"):
        return text[1:], ""
    return text, text.split(maxsplit=1)[0] if text.startswith("/") else ""


class ChatLine(NamedTuple):
    """A line the chat takes: ``line`` as typed (without its newline), ``text`` the message or
    the command with its arguments, ``command`` the command ("" for a message)."""

    line: str
    text: str
    command: str


TYPED_AHEAD_ANSWERS = ("y", "yes", "n", "no", "allow", "deny")
"""Lines that answer a permission question: typed ahead of the prompt, they are not sent."""


def next_chat_line(
    lines: Any,
    hangup: Hangup,
    show_prompt: Callable[[], None],
    taken: Callable[[str | None], bool] | None = None,
) -> ChatLine | None:
    """The next line the chat acts on, read at its prompt (the one prompt loop of the TUI,
    alone and through a running Maka); None at the end of input or on a hangup. ``taken``:
    whether a line read was used up elsewhere (an answer to a question of a viewed turn).
    Empty lines are skipped, and a command that takes no argument refuses one here.

    A line typed during a turn waits for the prompt: it is shown after the prompt that takes
    it, so the prompt is not left bare with the next turn's output running on along it."""
    from app.commands.cancellable_turn import LATE_CTRL_C_WORDS, LateInterrupt, reading_at_prompt
    from app.visible_text import visible

    while not hangup.hung:
        waiting = lines.typed_ahead()
        try:
            with reading_at_prompt():  # (from the prompt's first character on)
                show_prompt()
                read = lines.read_line()
        except LateInterrupt:
            # Pressed to stop a turn that ended just then: it left the chat without a word.
            print(f"\n{LATE_CTRL_C_WORDS}", flush=True)
            continue
        except KeyboardInterrupt:
            read = None
        if taken is not None and taken(read):
            continue
        if read is None:
            print()
            return None
        line = read.rstrip("\n")
        if waiting:
            print(visible(line), flush=True)
        stripped = line.strip()
        if not stripped:
            continue
        if waiting and stripped.lower() in TYPED_AHEAD_ANSWERS:
            # A "y" typed while a command ran, for a question that never came: a model reads
            # a bare "yes" as consent to whatever it proposed last. Not sent unless typed now.
            print(
                f"(not sent: {visible(stripped)!r} was typed while the turn ran, as an answer "
                "to a question that did not come; type it again to send it as a message)"
            )
            continue
        text, command = message_or_command(stripped)
        if command in NO_ARGUMENT and text != command:
            print(f"{command} takes no argument; /help lists the commands")
            continue
        return ChatLine(line, text, command)
    return None


NO_SESSIONS = "  no sessions yet: a message you send here starts one"
"""``/sessions`` in a data folder without any (alone and beside a running Maka)."""


def no_session_yet() -> str:
    """A chat's session is made by its first message: what a command about it says before then."""
    return (
        "no session yet: send a message first (or open one with "
        f"{maka_command('tui --session ID')})"
    )


def chat_through_host(
    args: argparse.Namespace, host: HostClient, cwd: str, mode: str, help_text: str
) -> int:
    """The TUI's read-eval loop when a host owns the folder; returns the exit code."""
    from app.commands.terminal_transcript import InputLines
    from app.commands.tui_viewer import TuiViewer

    viewer = TuiViewer(host)
    host.listen(viewer.take, viewer.stopped)
    session_id: str | None = None
    opening: str | None = None  # said after the header naming the session and its server
    if args.session:
        session_id, opening = _known_session(host, args.session, args.cwd)
        opening = held_elsewhere_note(args.data_dir, session_id, host.host_pid) or opening
    if isinstance(sys.stdin, io.TextIOWrapper):
        sys.stdin.reconfigure(errors="surrogateescape")
    lines = InputLines.of(sys.stdin)
    _greet(args, host, session_id, cwd, mode)
    if opening is not None:
        print(opening)
    viewer.watch(session_id)
    from app.commands.cancellable_turn import chat_interrupts

    with Hangup() as hangup, chat_interrupts():
        return _chat(
            args,
            host,
            viewer=viewer,
            lines=lines,
            session_id=session_id,
            cwd=cwd,
            mode=mode,
            help_text=help_text,
            hangup=hangup,
        )


# C901: the terminal's one read-eval loop (as tui_cmd's); each slash command is a short branch.
def _chat(  # noqa: C901
    args: argparse.Namespace,
    host: HostClient,
    *,
    viewer: Any,
    lines: Any,
    session_id: str | None,
    cwd: str,
    mode: str,
    help_text: str,
    hangup: Hangup,
) -> int:
    from app.host.terminal_transcript import cut_by_terminal, cut_line_words

    while True:
        # (a line that answers a question of a turn another client drives is the viewer's)
        chat_line = next_chat_line(lines, hangup, viewer.prompt, viewer.line_read)
        if chat_line is None:
            return EXIT_OK
        line, text, command = chat_line
        if command in ("/quit", "/exit"):
            return EXIT_OK
        if command == "/help":
            print(help_text)
        elif command == "/transcript":
            _terminal_text(host, session_id, "transcript", "")
        elif command in ("/plan", "/timeline"):
            if session_id is None:
                print(no_session_yet())
            elif command == "/plan":
                _plan(host, session_id)
            else:
                timeline(args.data_dir, session_id)
        elif command == "/branch":
            branched = _terminal_text(host, session_id, "branch", text[len("/branch") :])
            if branched is not None and session_id is not None:
                source_id, session_id = session_id, branched
                print(f"(the source goes on with: {maka_command(f'tui --session {source_id}')})")
        elif command == "/sessions":
            said(lambda: _sessions(host))  # (an unreachable database is said; the chat goes on)
        elif command in ("/resume", "/rebaseline", "/restore"):
            viewer.driving(True)
            try:
                _resume(args, host, session_id, text, mode, on_closed=viewer.closed_elsewhere)
            finally:
                viewer.driving(False)
        elif command == "/settle":
            _settle(host, session_id, text)
        elif command:
            print(f"unknown command {command}; /help lists the commands")
        elif cut_by_terminal(line):
            print(cut_line_words(session_id))
        else:
            viewer.driving(True)
            try:
                session_id = _turn(
                    args,
                    host,
                    session_id,
                    text,
                    cwd=cwd,
                    mode=mode,
                    on_closed=viewer.closed_elsewhere,
                )
            finally:
                viewer.driving(False)
        viewer.watch(session_id)


def _plan(host: HostClient, session_id: str) -> None:
    """``/plan``: what ``maka plan SESSION`` prints, planned by the running Maka."""
    from app.commands.plan_cmd import plan_through_host

    said(lambda: plan_through_host(argparse.Namespace(session=session_id, json=False), host))


def said(command: Callable[[], object]) -> None:
    """Run a command of the TUI that prints what the same ``maka`` command prints; its refusal
    (or the host's: a database it cannot reach) is printed as that command prints it, and the
    chat goes on."""
    from app.host.host_client import HostRefusal

    try:
        command()
    except (CliError, HostRefusal) as error:
        say_error(error.code, error.message)


def timeline(data_dir: Path | None, session_id: str) -> None:
    """``/timeline``: what ``maka timeline SESSION`` prints (read-only, so the same alone and
    beside a running Maka)."""
    from app.commands import timeline_cmd

    said(
        lambda: timeline_cmd.run(
            argparse.Namespace(
                data_dir=data_dir, session=session_id, run=None, only_problems=False, json=False
            )
        )
    )


def _terminal_text(
    host: HostClient, session_id: str | None, command: str, arguments: str
) -> str | None:
    """``/transcript`` or ``/branch [ARGS]``, served by the host: print its lines (as the TUI
    prints them alone); the new session's id when a branch was made."""
    from app.bridge_contract import MAX_PATH_CHARS, TerminalCommandRequest, TerminalTextPush
    from app.host.host_client import HostRefusal
    from app.host.tui_reads import BRANCH_USAGE

    if session_id is None:
        print(no_session_yet())
        return None
    if len(arguments) > MAX_PATH_CHARS + 400:  # the contract's bound: a folder's path and more
        print(BRANCH_USAGE)
        return None
    try:
        answer = host.ask(
            TerminalCommandRequest(session_id=session_id, command=command, arguments=arguments)
        )
        while isinstance(answer, TerminalTextPush):
            if answer.text:
                print(answer.text)
            if answer.done:
                return answer.branched_to
            correlation = answer.correlation_id
            answer = host.receive()
            while answer.correlation_id != correlation:
                answer = host.receive()
    except HostRefusal as refused:
        say_error(refused.code, refused.message)
        return None
    raise CliError(HostCode.HOST_UNREACHABLE, "the running Maka answered something else")


def _greet(
    args: argparse.Namespace, host: HostClient, session_id: str | None, cwd: str, mode: str
) -> None:
    who = f"{host.host_kind} (pid {host.host_pid or 'unknown'})"
    if session_id is not None:
        print(f"maka tui: session {session_id}, served by the running Maka: {who}")
    else:
        print(f"maka tui: a new session in {cwd}, served by the running Maka: {who}")
    print(f"permission mode {mode}; /help for help")
    if args.provider:
        print(
            "note: the running Maka runs the turns with its own provider settings; --provider "
            "applies when no Maka serves this data folder",
            file=sys.stderr,
        )


def held_elsewhere_note(
    data_dir: str | None, session_id: str, serving_pid: int | None = None
) -> str | None:
    """On a shared ledger (PostgreSQL): what opening an interrupted session says when another
    Maka process holds its lease (``/resume``, a message and ``/settle`` are refused there with
    ``session_busy`` until it lets go), else None. ``serving_pid``: the running Maka this TUI
    goes through, on this computer: its lease is not another's. Read-only; SQLite has no
    leases, so nothing is opened for it."""
    import socket

    from app.data_paths import resolve_data_dir
    from runtime.continuation.resume_gates import held_elsewhere_words, other_lease_holder
    from storage.ledger.store_open import database_url

    folder = resolve_data_dir(data_dir)
    try:
        if database_url(folder) is None:
            return None
        from storage.ledger.ledger_store import open_store

        store = open_store(folder, read_only=True)
    except Exception:  # the chat says what the store answers when it is used
        return None
    try:
        holder = other_lease_holder(store, session_id)
    finally:
        store.close()
    if holder is None:
        return None
    parts = holder.split(":")  # machine:pid:nonce
    if (
        serving_pid is not None
        and len(parts) >= 3
        and parts[-2] == str(serving_pid)
        and ":".join(parts[:-2]) == socket.gethostname()
    ):
        return None  # the running Maka this TUI goes through holds it
    return (
        f"{HELD_ELSEWHERE_PREFIX}{held_elsewhere_words(session_id, holder)}{HELD_ELSEWHERE_SUFFIX}"
    )


def _known_session(
    host: HostClient, session_id: str, cwd_option: str | None
) -> tuple[str, str | None]:
    """``--session`` must name a session of this folder (as when the TUI opens the store); with
    what to say when its last turn was cut off: what ``/resume`` through the host will do (this
    command's MAKA_RUNTIME_SAFE_BOUNDARY_RESUME when set, else the host's setting)."""
    from app.commands.run_cmd import require_same_folder
    from app.host.resume_switch import command_safe_resume

    rows, host_resume = _overview(host)
    for row in rows:
        if row["sessionId"] == session_id:
            if cwd_option:
                require_same_folder(cwd_option, session_id, row["cwd"])
            if not row.get("resumable"):
                return session_id, None
            own = command_safe_resume()
            enabled = own if own is not None else host_resume
            if enabled is False:
                where = "for this terminal" if own is not None else "in the running Maka"
                return session_id, INTERRUPTED_RESUME_OFF_NOTE.format(where=where)
            return session_id, INTERRUPTED_NOTE.format(plan=maka_command(f"plan {session_id}"))
    raise CliError(StoreCode.SESSION_NOT_FOUND, f"no session {session_id}", EXIT_USAGE)


def _rows(host: HostClient) -> list[dict[str, Any]]:
    return _overview(host)[0]


def _overview(host: HostClient) -> tuple[list[dict[str, Any]], bool | None]:
    """The host's sessions overview, and its Safe resume setting (None: not said)."""
    from app.bridge_contract import SessionsOverviewedPush, SessionsOverviewRequest
    from app.host.session_rows import rows_from_wire

    answer = host.ask(SessionsOverviewRequest())
    if not isinstance(answer, SessionsOverviewedPush):
        raise CliError(HostCode.HOST_UNREACHABLE, "the running Maka answered something else")
    return rows_from_wire(answer.rows), answer.safe_resume


def _sessions(host: HostClient) -> None:
    """``/sessions``: the lines the TUI prints alone, from the host's overview."""
    rows = _rows(host)
    for row in rows:
        status = row.get("lastRunStatus") or "no runs"
        print(f"  {row['sessionId']}  {status}  {row['cwd']}")
    if not rows:
        print(NO_SESSIONS)


def _turn(
    args: argparse.Namespace,
    host: HostClient,
    session_id: str | None,
    text: str,
    *,
    cwd: str,
    mode: str,
    on_closed: Callable[[str], None] | None = None,
) -> str | None:
    """One message: ``turns.run``; the session it ran in (a new one the first time)."""
    from app.commands.host_turn import run_through_host

    request = argparse.Namespace(
        session=session_id,
        cwd=None if session_id else cwd,
        prompt=text,
        provider=None,
        max_steps=args.max_steps,
    )
    try:
        end = run_through_host(request, host, mode, lambda: None, on_closed)
    except CliError as refused:
        say_error(refused.code, refused.message)
        return session_id
    say_turn_failed(end.status, end.failure_class, end.message)
    return str(end.session_id)


def say_turn_failed(status: str, failure_class: str | None, message: str | None) -> None:
    """A turn that ended ``failed`` (its store went away mid-call, say), in the words ``maka
    run`` uses: its class and what to check (a call started with no outcome recorded). The
    TUI said only the transcript's line, with no class and no way on. A completed or
    cancelled turn says its own ending in the transcript."""
    from app.commands.run_cmd import turn_ended_words

    if str(status) != "failed":
        return
    print(turn_ended_words("failed", failure_class, message), file=sys.stderr, flush=True)


def _resume(
    args: argparse.Namespace,
    host: HostClient,
    session_id: str | None,
    text: str,
    mode: str,
    *,
    on_closed: Callable[[str], None] | None = None,
) -> None:
    """``/resume``, ``/rebaseline``, ``/restore [DIR]``: ``maka resume`` through the host."""
    from app.commands.host_turn import resume_through_host

    command, _, rest = text.partition(" ")
    rest = rest.strip()
    if (command != "/restore" and rest) or command not in ("/resume", "/rebaseline", "/restore"):
        print(f"usage: {command}" + (" [DIR]" if command == "/restore" else ""))
        return
    if session_id is None:
        print(no_session_yet())
        return
    restore_to: str | None = None
    if command == "/restore":
        # maka resume --restore-to without DIR: a new folder beside the session's.
        restore_to = os.path.abspath(rest) if rest else ""
    request = argparse.Namespace(
        session=session_id,
        rebaseline=command == "/rebaseline",
        restore_to=restore_to,
        json=False,
        provider=None,
        max_steps=args.max_steps,
    )
    try:
        code = resume_through_host(request, host, mode, lambda: None, on_closed)
    except CliError as refused:
        say_error(refused.code, refused.message)
        return
    if code == EXIT_PARKED:
        print(TUI_HOST_PARK_NOTE)


SETTLE_USAGE = "usage: /settle CALL ran|not-run [NOTE]  (CALL as /transcript or maka plan shows)"
"""The TUI's ``/settle`` usage, alone and beside a running Maka (both serve /transcript)."""


SETTLE_PLACEHOLDERS = ("(or not-run)", "[NOTE]")
"""Words of the settle advice's form, not of a user's note: pasted along with the command."""


def placeholder_note(note: str | None) -> str | None:
    """Why ``/settle``'s ``note`` is refused (it is, or starts with, the form's placeholder
    text), or None: a note is kept for good, so a pasted form is not recorded as one."""
    if note is None or not note.startswith(SETTLE_PLACEHOLDERS):
        return None
    return (
        f"not recorded: {note!r} is the form's placeholder, not a note of yours; type "
        "/settle CALL ran or /settle CALL not-run, then your own note if you have one "
        "(nothing was recorded)"
    )


def _settle(host: HostClient, session_id: str | None, text: str) -> None:
    """``/settle``: ``maka settle`` through the host; a refusal prints its code."""
    from app.commands.settle_cmd import _through_host

    parts = text.split(maxsplit=3)
    if len(parts) < 3 or parts[2] not in ("ran", "not-run"):
        print(SETTLE_USAGE)
        return
    if session_id is None:
        print(no_session_yet())
        return
    placeholder = placeholder_note(parts[3] if len(parts) == 4 else None)
    if placeholder is not None:
        print(placeholder)
        return
    request = argparse.Namespace(
        session=session_id,
        operation=parts[1],
        ran=parts[2] == "ran",
        note=parts[3] if len(parts) == 4 else None,
        json=False,
        in_tui=True,  # its advice names /resume, as the TUI alone does
    )
    try:
        _through_host(request, host)
    except CliError as refused:
        print(f"not recorded [{refused.code}]: {refused.message}")
