"""``maka run`` through the running host of its data folder (docs/design/hosts.md section 1).

The host (the desktop's main process, or ``maka host``) owns the folder, so it runs the turn:
the command sends ``turns.run`` and prints what the host sends back, the lines ``maka run``
prints when it opens the store itself (the host renders them with the same code, from the same
committed events), so the output, the exit codes and the notes on stderr do not depend on the
path that served the command.

A permission question is answered here, from standard input as always (a window or a viewing
``maka tui`` may answer it first: the first answer counts, and the question here closes saying
where it was answered). Ctrl+C asks the host to cancel the turn this command started,
and nothing else. If the command goes away (a closed terminal, a kill), the turn goes on in the
host and every window shows it; if the host stops while the command streams, the command ends
with ``host_stopped`` (exit 1).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from app.cli_errors import EXIT_ERROR, EXIT_PARKED, EXIT_USAGE, CliError
from app.commands.cancellable_turn import run_interruptible
from app.host.host_client import HostClient, HostConnectionError, HostRefusal
from app.host.terminal_transcript import ALLOW_PROMPT, calls_listed, calls_words, is_a_tty
from runtime.base.cancel_token import CancelToken
from runtime.ledger.codes import HostCode, StoreCode
from runtime.ledger.command_words import maka_command

_RUN = "run"
_USAGE_CODES = frozenset(
    {
        "session_not_found",
        "session_cwd_mismatch",
        "invalid_cwd",
        "text_not_utf8",
        "cwd_required",
    }
)


def run_through_host(
    args: argparse.Namespace,
    host: HostClient,
    mode: str,
    on_started: Callable[[], None],
    on_closed: Callable[[str], None] | None = None,
) -> Any:
    """Send ``turns.run`` and print what the host sends back; returns its ``turn.ended``
    (``on_started``: said once the host took the turn, after the session line)."""
    from pydantic import ValidationError

    from app.bridge_contract import MAX_TEXT_CHARS, TurnsRunRequest

    if args.session is not None and not 1 <= len(args.session) <= 200:
        raise CliError(StoreCode.SESSION_NOT_FOUND, f"no session {args.session}", EXIT_USAGE)
    if len(args.prompt) > MAX_TEXT_CHARS:
        raise CliError(
            HostCode.INVALID_ARGUMENT,
            f"the prompt is longer than the running Maka accepts ({MAX_TEXT_CHARS} characters)",
            EXIT_USAGE,
        )
    columns = min(max(shutil.get_terminal_size((100, 24)).columns, 20), 10_000)
    try:
        request = TurnsRunRequest(
            session_id=args.session,
            cwd=os.path.abspath(args.cwd) if args.cwd else None,
            text=args.prompt,
            permission_mode=mode,
            max_steps=args.max_steps,
            columns=columns,
            correlation_id=_RUN,
        )
    except ValidationError:
        raise CliError(
            HostCode.INVALID_ARGUMENT, "the running Maka cannot take this request", EXIT_USAGE
        ) from None
    if args.provider:
        print(
            "note: the running Maka serving this data folder runs the turn with its own "
            "provider settings; --provider applies when no Maka serves it",
            file=sys.stderr,
        )
    host.stream_without_timeout()
    turn = _HostTurn(host, mode, on_closed=on_closed, data_dir=getattr(args, "data_dir", None))
    return turn.follow(on_started, send=lambda: host.send(request))


def resume_through_host(
    args: argparse.Namespace,
    host: HostClient,
    mode: str,
    on_started: Callable[[], None],
    on_closed: Callable[[str], None] | None = None,
) -> int:
    """``maka resume`` beside a running host: its continuation service (the banner's) plans and
    continues; this command prints its lines and exits with its code (what ``on_started`` says
    on stderr, the host says back once the continuation is about to run, never for a park)."""
    from pydantic import ValidationError

    from app.bridge_contract import TurnsResumeRequest
    from app.host.resume_switch import command_safe_resume

    decision = "rebaseline" if args.rebaseline else None
    if args.restore_to is not None:
        decision = "isolated_restore"
    columns = min(max(shutil.get_terminal_size((100, 24)).columns, 20), 10_000)
    notes = io.StringIO()  # said by the host once the continuation runs, never for a park
    with contextlib.redirect_stderr(notes):
        on_started()
    try:
        request = TurnsResumeRequest(
            session_id=args.session,
            permission_mode=mode,
            max_steps=args.max_steps,
            columns=columns,
            as_json=bool(args.json),
            workspace_decision=decision,
            restore_to=os.path.abspath(args.restore_to) if args.restore_to else None,
            before_running=notes.getvalue()[:4000],
            safe_resume=command_safe_resume(),
            correlation_id=_RUN,
        )
    except ValidationError:
        raise CliError(
            StoreCode.SESSION_NOT_FOUND, f"no session {args.session}", EXIT_USAGE
        ) from None
    if args.provider:
        print(
            "note: the running Maka serving this data folder continues with its own provider "
            "settings; --provider applies when no Maka serves it",
            file=sys.stderr,
        )
    host.stream_without_timeout()
    turn = _HostTurn(
        host,
        mode,
        session_id=args.session,
        on_closed=on_closed,
        data_dir=getattr(args, "data_dir", None),
    )
    code: int = turn.follow(lambda: None, send=lambda: host.send(request))
    return code


def _note_checkpoints(host_off: bool | None) -> None:
    """``MAKA_WORKSPACE_CHECKPOINTS`` in this terminal is not the host's: the host takes this
    turn's snapshots (or not) as it was started to; say so when the two differ, rather than
    ignore the command's setting in silence."""
    from storage.checkpoints.checkpoint_store import CHECKPOINTS_ENV, checkpoints_turned_off

    if host_off is None or checkpoints_turned_off() == host_off:
        return
    own = os.environ.get(CHECKPOINTS_ENV, "").strip()
    if own:
        said = f"{CHECKPOINTS_ENV}={own} here does not apply to this turn"
    else:
        said = "this turn takes no snapshots of the folder"
    taken = (
        f"takes none (it was started with {CHECKPOINTS_ENV}=off)"
        if host_off
        else "takes snapshots of the folder, as it was started to"
    )
    print(
        f"note: {said}: the running Maka serving this data folder runs it and {taken}",
        file=sys.stderr,
    )


class _TurnLeft(NamedTuple):
    """What the ledger recorded of the session's latest run when its host stopped: whether its
    ending is recorded, and its tool calls by the facts committed for each (names, in order)."""

    ended: bool
    begun: bool  # False: the latest run is older than the request (the host stopped first)
    finished: tuple[str, ...]  # an outcome recorded
    running: tuple[str, ...]  # dispatched, no outcome: it may have done part of its work
    unstarted: tuple[str, ...]  # asked for (a permission question, say), never dispatched
    stopped: tuple[str, ...] = ()  # its result recorded that it was stopped part way


def _turn_left(data_dir: str | None, session_id: str, sent_at: int) -> _TurnLeft | None:
    """Read-only; None when the ledger cannot be read or the session has no run.
    ``sent_at``: when the request went out (ms since the epoch, the runs' clock: the host
    runs on this computer)."""
    from app.data_paths import resolve_data_dir
    from runtime.ledger.codes import ResolverStatus
    from runtime.ledger.ledger_errors import LedgerError
    from runtime.ledger.store_ports import TERMINAL_RUN_STATUSES
    from runtime.ledger.timeline_events import stop_of
    from runtime.recovery.recovery_resolver import resolve_operations
    from storage.ledger.ledger_store import open_store

    try:
        store = open_store(resolve_data_dir(data_dir), read_only=True)
    except (LedgerError, OSError):
        return None
    try:
        runs = sorted(store.list_session_runs(session_id), key=lambda h: h.created_at)
        if not runs:
            return None
        events = [stored.event for stored in store.read_run_events(runs[-1].run_id)]
        _resolution, operations = resolve_operations(events)
    except (LedgerError, OSError):
        return None
    finally:
        store.close()
    # As recovery classifies them, from the committed facts: a call proven not dispatched
    # never ran; one whose outcome is not proven (indeterminate, parked) may have done part
    # of its work.
    # A call whose recorded result says it was stopped part way (the host's shutdown or the
    # turn's cancel ended its command) is no finished call: it is said as maka plan says it.
    by_state: dict[str, list[str]] = {
        "finished": [],
        "running": [],
        "unstarted": [],
        "stopped": [],
    }
    for decision, scanned in operations:
        response = scanned.response_event.get("content") if scanned.response_event else None
        result = response.get("result") if isinstance(response, dict) else None
        stopped = isinstance(response, dict) and response.get("isError") and stop_of(result)
        state = (
            ("stopped" if stopped else "finished")
            if decision.status is ResolverStatus.COMPLETED
            else "unstarted"
            if decision.status is ResolverStatus.DEFINITELY_NOT_DISPATCHED
            else "running"
        )
        by_state[state].append(decision.tool_name or "a tool")
    return _TurnLeft(
        runs[-1].status in TERMINAL_RUN_STATUSES,
        runs[-1].created_at >= sent_at,
        tuple(by_state["finished"]),
        tuple(by_state["running"]),
        tuple(by_state["unstarted"]),
        tuple(by_state["stopped"]),
    )


def host_stopped_words(left: _TurnLeft | None, plan: str) -> str:
    """What a terminal says of its turn when the host running it stopped, from the facts the
    ledger committed (``plan``: the ``maka plan`` command to look with). A call dispatched with
    no outcome may have done part of its work; one never dispatched did not run, and saying
    "may have done part of its work" of a turn that stopped at a permission question was not
    true."""
    recorded = f"{plan} says what was recorded"
    if left is None:
        return (
            f"so it may have done part of its work: look before you run it again ({recorded}; "
            "the next start repairs what it left)"
        )
    if not left.begun:
        return f"it had not begun its run, so nothing of it ran: you can run it again ({recorded})"
    done = f"it had finished {calls_words(left.finished)}" if left.finished else ""
    look = "look before you run it again"
    if left.running:
        said = (
            f"{calls_words(left.running)} had started with no outcome recorded and may have done "
        )
        said += f"part of its work{'; ' + done if done else ''}"
    elif left.stopped:
        verb = "was" if len(left.stopped) == 1 else "were"
        said = f"{calls_words(left.stopped)} {verb} stopped part way (its result says so)"
        said += f"{'; ' + done if done else ''}"
    elif done:
        said = f"no tool call of it was running: {done}"
    else:
        said, look = "it had run no tool call, so it changed nothing", "you can run it again"
    if left.unstarted:
        plural = "s" if len(left.unstarted) > 1 else ""
        said += f"; the model's call{plural} to {calls_listed(left.unstarted)} never ran"
    repair = "" if left.ended else "; the next start repairs what it left"
    return f"{said}: {look} ({recorded}{repair})"


class _HostTurn:
    """Follows one turn: its pushes on a worker thread, Ctrl+C on the main thread."""

    def __init__(
        self,
        host: HostClient,
        mode: str,
        session_id: str | None = None,
        on_closed: Callable[[str], None] | None = None,
        data_dir: str | None = None,
    ) -> None:
        """``on_closed``: told where a question of this turn was answered when another client
        answered it (the TUI then takes a late ``y`` typed here for no message). ``data_dir``:
        as given (``--data-dir``), read when the host stops, for how the turn ended."""
        from app.commands.terminal_transcript import InputLines

        InputLines.of(sys.stdin).listen()  # (at a terminal: what is typed ahead is seen)
        self._data_dir = data_dir
        self._host = host
        self._on_closed = on_closed
        self._mode = mode
        self._resuming = session_id is not None
        self._session_id: str | None = session_id
        self._cancel_wanted = False
        self._sent = True  # (``follow`` with ``send``: once it was sent)
        self._sent_at = time.time_ns() // 1_000_000 - 5  # (the runs' clock: ms)
        self._lock = threading.Lock()
        self._question: CancelToken | None = None
        self._question_id: str | None = None
        # ``Allow? [y/N] `` printed without its newline (a terminal: the answer is typed on
        # its line); the next output starts a line first unless the user's Enter did.
        self._mid_question = False
        self._done = CancelToken()

    def follow(self, on_started: Any, send: Callable[[], None] | None = None) -> Any:
        """``send``: the request, sent once Ctrl+C is handled here: a Ctrl+C just after it was
        sent ended this command saying "interrupted" while the host ran the turn all the same
        (it took the command for one that went away)."""

        if send is not None:
            self._sent = False

        def work() -> Any:
            try:
                if send is not None:
                    send()
                    with self._lock:
                        self._sent = True
                        session_id = self._session_id if self._cancel_wanted else None
                    if session_id is not None:  # (a resume names its session: cancel it now)
                        self._send_cancel(session_id)
                return self._read(on_started)
            finally:
                self._done.cancel()

        try:
            return run_interruptible(work, self._cancel, name="maka-host-turn")
        except HostConnectionError as lost:
            with self._lock:
                session_id = self._session_id
                sent = self._sent
                if self._mid_question:  # (what is said next starts a line of its own)
                    self._mid_question = False
                    with contextlib.suppress(OSError, ValueError):
                        sys.stdout.write("\n")
                        sys.stdout.flush()
            if lost.code != HostCode.HOST_STOPPED or session_id is None or not sent:
                raise  # (not sent: nothing of this command's ran)
            # Not "run the command again" unless the record shows nothing ran.
            left = _turn_left(self._data_dir, session_id, self._sent_at)
            words = host_stopped_words(left, maka_command(f"plan {session_id}"))
            if left is not None and left.ended and left.begun:
                # Shut down in order (SIGTERM, the window closed): it stopped the turn and
                # recorded its ending; nothing is left to repair.
                raise HostConnectionError(
                    lost.code,
                    "the Maka window or host serving this data folder was shut down while this "
                    f"turn ran, and stopped it (its ending is recorded); {words}",
                ) from None
            raise HostConnectionError(
                lost.code,
                "the Maka window or host serving this data folder stopped while this turn ran"
                f"{'; ' if left is not None else ', '}{words}",
            ) from None
        finally:
            self._stop_question()

    def _cancel(self) -> None:
        with self._lock:
            # Before the request went out, a cancel would reach the host ahead of it.
            session_id = self._session_id if self._sent else None
            self._cancel_wanted = session_id is None
        if session_id is not None:
            self._send_cancel(session_id)

    def _send_cancel(self, session_id: str) -> None:
        from app.bridge_contract import TurnsCancelRequest

        with contextlib.suppress(HostConnectionError):  # the reader says the host stopped
            self._host.send(TurnsCancelRequest(session_id=session_id))

    def _read(self, on_started: Any) -> Any:
        from app.bridge_contract import (
            ErrorPush,
            PermissionClosedPush,
            PermissionRequestedPush,
            ResumeEndedPush,
            ResumeStartedPush,
            TurnEndedPush,
            TurnOutputPush,
            TurnStartedPush,
        )

        started = False
        while True:
            message = self._host.receive()
            if isinstance(message, TurnOutputPush) and message.session_id == self._session_id:
                self._print_output(message.text, message.stream == "stderr")
            elif (
                isinstance(message, ResumeStartedPush)
                and self._resuming
                and message.session_id == self._session_id
                and not started
            ):
                started = True
                on_started()
            elif isinstance(message, ResumeEndedPush) and message.correlation_id == _RUN:
                return message.exit_code
            elif isinstance(message, TurnStartedPush) and message.correlation_id == _RUN:
                started = True
                print(
                    f"session {message.session_id} in {message.cwd} ({message.provider_label}, "
                    f"permission mode {self._mode})",
                    file=sys.stderr,
                )
                on_started()
                _note_checkpoints(message.checkpoints_off)
                for note in message.notes:
                    print(note, file=sys.stderr)
                with self._lock:
                    self._session_id = message.session_id
                    cancel = self._cancel_wanted
                if cancel:
                    self._send_cancel(message.session_id)
            elif (
                isinstance(message, PermissionRequestedPush)
                and message.session_id == self._session_id
            ):
                self._ask(message.session_id, message.request_id)
            elif (
                isinstance(message, PermissionClosedPush)
                and message.session_id == self._session_id
                and self._stop_question(message.request_id)
            ):
                answer = "allowed" if message.decision.value == "allow" else "denied"
                print(f"\n[permission] answered in {message.answered_in}: {answer}", flush=True)
                if self._on_closed is not None:
                    self._on_closed(f"answered in {message.answered_in}: {answer}")
            elif isinstance(message, TurnEndedPush) and message.correlation_id == _RUN:
                return message
            elif isinstance(message, ErrorPush) and message.correlation_id == _RUN:
                refusal = HostRefusal(message.code, message.message)
                if started and str(refusal.code) == StoreCode.SESSION_LEASE_LOST:
                    # The write refused was this turn's next one: what ran before it may have
                    # done its work (a command cut off at its deadline), whatever was committed.
                    refusal = HostRefusal(
                        refusal.code,
                        f"{refusal.message}. The turn had started: a command it ran may have "
                        "done part of its work; look before you run it again "
                        f"({maka_command(f'plan {self._session_id}')} says what was recorded)",
                    )
                usage = not started and str(refusal.code) in _USAGE_CODES
                exit_code = EXIT_USAGE if usage else EXIT_ERROR
                if self._resuming and str(refusal.code) == HostCode.SESSION_BUSY:
                    exit_code = EXIT_PARKED  # as a busy session parks Safe resume
                raise CliError(refusal.code, refusal.message, exit_code)

    def _print_output(self, text: str, to_stderr: bool) -> None:
        """What the host's turn printed: a permission question's ``Allow? [y/N] `` keeps the
        typed answer on its line at a terminal, as ``maka run`` alone does."""
        stream = sys.stderr if to_stderr else sys.stdout
        with self._lock:
            if self._mid_question:
                stream.write("\n")  # (answered elsewhere: no Enter ended the line)
                self._mid_question = False
            asks = text.endswith(f"{ALLOW_PROMPT}\n") and is_a_tty(sys.stdin)
            if asks:
                text = text[:-1]
                self._mid_question = True
        if asks:
            # Only what is typed after the question answers it (a "y" typed while a command
            # ran approved it before it could be read): set aside now, as it is shown.
            from app.commands.terminal_transcript import InputLines

            note = InputLines.of(sys.stdin).set_aside_typed_ahead().note()
            if note:
                question = text.rfind("[permission]")
                head, tail = (text[:question], text[question:]) if question >= 0 else ("", text)
                text = f"{head}{note}\n{tail}"
        stream.write(text)
        stream.flush()

    def _ask(self, session_id: str, request_id: str) -> None:
        """Read the answer from standard input on its own thread (the pushes keep coming: a
        window may answer first); the end of input denies, as ``maka run`` does alone."""
        from app.bridge_contract import PermissionDecision, PermissionsAnswerRequest
        from app.commands.terminal_transcript import InputLines

        self._stop_question()
        cancel = CancelToken()
        with self._lock:
            self._question = cancel
            self._question_id = request_id

        lines = InputLines.of(sys.stdin)  # (what was typed before the question: set aside)

        def answer() -> None:
            line = lines.read_line(cancel)
            lines.keep_set_aside()  # (chat lines typed before the question come first again)
            if line is not None:
                with self._lock:
                    self._mid_question = False  # (the user's Enter ended the line)
            if cancel.is_cancelled():
                return
            allow = line is not None and line.strip().lower() in ("y", "yes", "allow")
            decision = PermissionDecision.ALLOW if allow else PermissionDecision.DENY
            with contextlib.suppress(HostConnectionError):
                self._host.send(
                    PermissionsAnswerRequest(
                        session_id=session_id,
                        request_id=request_id,
                        decision=decision,
                        correlation_id="permission",
                    )
                )

        threading.Thread(target=answer, name="maka-permission", daemon=True).start()

    def _stop_question(self, request_id: str | None = None) -> bool:
        """Stop waiting for the answer to the open question (only ``request_id``'s when given:
        answered elsewhere); True when one was waited for."""
        with self._lock:
            if request_id is not None and request_id != self._question_id:
                return False
            question, self._question = self._question, None
            self._question_id = None
        if question is not None:
            question.cancel()
        return question is not None
