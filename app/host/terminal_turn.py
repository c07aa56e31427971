"""A terminal's ``maka run`` served by the running host (docs/design/hosts.md section 1).

The host runs the turn with the terminal's permission mode and step limit, and renders the
terminal's lines with the code ``maka run`` prints with when it opens the store itself
(``TerminalTranscript``), from the same committed events: the output cannot differ by the path
that served it. Every window hears the turn as it hears its own (``LiveTurnView``). A
permission question is printed to the terminal as ``maka run`` prints it and shown to every
window; the first answer counts (the terminal's or a window's).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from app.host.host_services import (
    HostServiceError,
    ResumeParked,
    TerminalResume,
    TerminalSession,
    TerminalTurn,
    TerminalTurnEnd,
    TurnSink,
)
from app.host.live_turn_view import LiveTurnView
from app.host.terminal_transcript import (
    TerminalTranscript,
    left_running,
    permission_question_text,
)
from runtime.agent.permission_policy import (
    Decision,
    PermissionAsker,
    PermissionMode,
    PermissionPolicy,
    PermissionQuestion,
)
from runtime.agent.run_loop import RunObserver, RunSettings
from runtime.agent.session_service import SessionService
from runtime.base.cancel_token import CancelToken
from runtime.ledger.codes import HostCode
from runtime.ledger.command_words import maka_command
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import RunStatus

if TYPE_CHECKING:
    from runtime.continuation.continuation_planner import ContinuationPlan
    from runtime.continuation.workspace_decision import WorkspaceDecision


def terminal_session(
    sessions: SessionService, turn: TerminalTurn, provider_label: str
) -> TerminalSession:
    """The session named (its folder checked against ``cwd``), or a new one in ``cwd``."""
    try:
        if turn.session_id is not None:
            session = sessions.get_session(turn.session_id)
            if turn.cwd is not None and os.path.realpath(turn.cwd) != os.path.realpath(session.cwd):
                raise HostServiceError(
                    HostCode.SESSION_CWD_MISMATCH,
                    f"session {session.session_id} works in {session.cwd}, not in {turn.cwd}; "
                    "leave out --cwd to continue it, or start a new session in that folder "
                    "without --session",
                )
            _refuse_leased_elsewhere(sessions.store, session.session_id)
            notes = tuple(unsettled_call_notes(sessions, session.session_id))
        else:
            assert turn.cwd is not None  # the contract asks for one or the other
            if not Path(turn.cwd).is_dir():
                raise HostServiceError(HostCode.INVALID_CWD, f"{turn.cwd} is not a folder")
            session = sessions.create_session(Path(turn.cwd), title=turn.text)
            notes = ()
    except LedgerError as error:
        raise HostServiceError(error.code, error.message) from None
    return TerminalSession(session.session_id, session.cwd, provider_label, notes)


def _refuse_leased_elsewhere(store: Any, session_id: str) -> None:
    """On a shared ledger (PostgreSQL), a session whose live lease another host holds is busy
    there: refused before anything is said about its history (a call running there is not
    interrupted), as ``maka run`` without a host refuses it."""
    from runtime.continuation.resume_gates import busy_elsewhere_words

    busy = busy_elsewhere_words(store, session_id)
    if busy is not None:
        raise HostServiceError(HostCode.SESSION_BUSY, busy)


def unsettled_call_notes(service: Any, session_id: str) -> list[str]:
    """What the model is told before a new turn that it has not had with a message yet, as
    ``maka run`` says it on stderr (quoted as what the model is told): the host's notices at
    the end of the history, after the model's last words (earlier tool calls whose outcome is
    unknown, told again every turn; the folder taken as it is after an answer nobody has
    continued from), and a notice of the folder taken as it is that was recorded after the
    latest turn began (an answer given later, about an older interrupted call). A notice a
    turn or a continuation was already given stays in the history but is not announced again.
    """
    from runtime.providers.provider_port import HostNotice

    history = list(service.prior_history(session_id))
    news: list[HostNotice] = []
    for item in reversed(history):
        if not isinstance(item, HostNotice):
            break
        news.append(item)
    news.reverse()
    late = _notices_after_the_latest_turn(service.store, session_id)
    news[:0] = [
        item
        for item in history[: len(history) - len(news)]
        if isinstance(item, HostNotice) and item.text in late
    ]
    lines: list[str] = []
    for notice in news:
        text = notice.text.removeprefix("Note from the host: ")
        quoted = text[:1].upper() + text[1:]
        lines.append(f"note: with your next message the model is told: “{quoted}”")
    return lines


def _notices_after_the_latest_turn(store: Any, session_id: str) -> set[str]:
    """The notices of folder baselines that earlier runs received after the session's latest
    run was created (a settle about an older call): no turn has been given them yet. The
    latest run's own are at the end of the history, or were its start."""
    from runtime.ledger.workspace_facts import baseline_notice

    runs = list(store.list_session_runs(session_id))
    if not runs:
        return set()
    newest = max(runs, key=lambda header: header.created_at)
    late: set[str] = set()
    for header in runs:
        if header.run_id == newest.run_id:
            continue
        for row in store.read_run_events(header.run_id):
            baseline = (row.event.get("actions") or {}).get("workspaceBaseline")
            if baseline is not None and row.event["ts"] > newest.created_at:
                late.add(baseline_notice(baseline))
    return late


def terminal_turn(
    sessions: SessionService,
    session_id: str,
    turn: TerminalTurn,
    sink: TurnSink,
    write: Callable[[str], None],
) -> TerminalTurnEnd:
    """Run the turn to its end (``send_turn``'s refusals raise ``HostServiceError``)."""
    transcript = TerminalTranscript(cast(TextIO, _Written(write)))

    def tell(question: PermissionQuestion) -> None:
        transcript.print_line(permission_question_text(question, turn.columns))
        sink.permission_requested(question.request_id, question.tool_name, question.summary)

    def ask(question: PermissionQuestion, cancel: CancelToken) -> Decision | None:
        return sessions.permissions.wait(question, cancel, tell)  # told once it is open

    settings = None if turn.max_steps is None else RunSettings(max_steps=turn.max_steps)
    try:
        outcome = sessions.send_turn(
            session_id,
            turn.text,
            _Both(LiveTurnView(sink), transcript),
            PermissionPolicy(PermissionMode(turn.permission_mode)),
            asker=ask,
            settings=settings,
        )
    except LedgerError as error:
        raise HostServiceError(
            error.code, error.message + left_running(transcript, session_id)
        ) from None
    return TerminalTurnEnd(
        session_id,
        outcome.run_id,
        outcome.status.value,
        outcome.failure_class,
        outcome.stop_reason,
        # A call whose outcome could not be committed ran all the same (maka run says so too).
        (outcome.message or "") + left_running(transcript, session_id) or None,
    )


class _Written:
    """A text stream whose writes go to the terminal (``turn.output``)."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write

    def flush(self) -> None:
        pass


class _Both:
    """One run observed by every window and by the driving terminal."""

    def __init__(self, live: LiveTurnView, transcript: TerminalTranscript) -> None:
        self._live = live
        self._transcript = transcript

    def text_delta(self, text: str) -> None:
        self._live.text_delta(text)
        self._transcript.text_delta(text)

    def thinking_delta(self, text: str) -> None:
        self._live.thinking_delta(text)

    def committed(self, event: RuntimeEvent) -> None:
        self._live.committed(event)
        self._transcript.committed(event)

    def run_status(self, run_id: str, status: RunStatus, failure_class: str | None) -> None:
        self._live.run_status(run_id, status, failure_class)


_PICK_ANOTHER_FOLDER = frozenset(
    {"workspace_restore_target_not_empty", "workspace_restore_target_inside"}
)
"""Refusals of the folder picked for a restored copy: ``maka resume`` says to pick another."""


def refusal_advice(
    code: str, session_id: str, cwd: str, restore_to: str | None = None
) -> str | None:
    """What ``maka resume`` says after a refusal before the provider was called, when there
    is a way on: another folder for the copy, or the current files when the snapshot the
    copy needs is damaged (both said the same here and beside a host). ``restore_to``: the
    folder the user named for the copy, named again in a retry."""
    if code in _PICK_ANOTHER_FOLDER:
        return (
            f"Nothing was changed and nothing continued. Pick a new or empty folder outside "
            f"{cwd}: {maka_command(f'resume {session_id} --restore-to DIR')} (or leave DIR out "
            "for a new sibling folder)."
        )
    if code == "workspace_restore_snapshot_damaged":
        # The check set the damaged objects aside (the store's own, never the user's): a
        # look at a folder that still holds those bytes writes them again.
        return (
            "Nothing continued, and your folder and the record are as they were: no copy can "
            "be made from a damaged snapshot "
            f"({maka_command('doctor --verify-snapshots')} lists what is damaged). When the "
            "damaged objects were moved aside (the refusal above says so) and your folder "
            "still holds those files as the snapshot had them, trying again can make the copy "
            "(the next look at the folder writes them again): "
            f"{maka_command(f'resume {session_id} --restore-to{_named(restore_to)}')}. Otherwise "
            "the copy is made "
            "from an earlier snapshot that is whole, without what the calls after it changed, "
            f"or none is left ({maka_command(f'plan {session_id}')} says which, first). Or "
            "continue with your current files: "
            f"{maka_command(f'resume {session_id} --rebaseline')}."
        )
    return None


def _named(folder: str | None) -> str:
    """`` DIR`` for a folder the user named (absolute, quoted for their shell), else nothing."""
    if not folder:
        return ""
    from runtime.ledger.command_words import shell_quoted

    return " " + shell_quoted(os.path.abspath(folder))


class TerminalContinuation:
    """What a terminal's ``maka resume`` changes in the banner's continuation: its permission
    mode and step limit, the question printed as ``maka resume`` prints it, its lines (the
    plan said before the first output, a park in words or as JSON, the ending)."""

    def __init__(self, terminal: TerminalResume, sessions: SessionService, sink: TurnSink) -> None:
        self._terminal = terminal
        stream = "stderr" if terminal.as_json else "stdout"
        self.transcript = TerminalTranscript(
            cast(TextIO, _Written(lambda text: terminal.write(text, stream)))
        )
        self.policy = PermissionPolicy(PermissionMode(terminal.permission_mode))
        self.settings = (
            None if terminal.max_steps is None else RunSettings(max_steps=terminal.max_steps)
        )
        self._sessions = sessions
        self._sink = sink

    def wiring(
        self, live: LiveTurnView
    ) -> tuple[PermissionPolicy, PermissionAsker, RunObserver, RunSettings | None]:
        """The continuation's permission policy, asker, observer and settings for the
        terminal (the windows' live view included)."""
        return self.policy, self.ask, _Both(live, self.transcript), self.settings

    def ask(self, question: PermissionQuestion, cancel: CancelToken) -> Decision | None:
        return self._sessions.permissions.wait(question, cancel, self._tell)  # once it is open

    def _tell(self, question: PermissionQuestion) -> None:
        self.transcript.print_line(permission_question_text(question, self._terminal.columns))
        self._sink.permission_requested(question.request_id, question.tool_name, question.summary)

    def _out(self, text: str) -> None:
        self._terminal.write(text + "\n", "stdout")

    def parked(
        self, store: Any, plan: ContinuationPlan, refusal: tuple[str, str] | None = None
    ) -> None:
        """A park, as ``maka resume`` says it: the plan in words (with the calls ``maka settle``
        can answer) or its JSON document; ``refusal``: the terminal's decision it refuses."""
        from app.host.plan_report import resume_park_json, resume_park_lines

        if self._terminal.as_json:
            body = resume_park_json(store, plan)
            if refusal is not None:
                body.update({"disposition": "refused", "code": refusal[0], "message": refusal[1]})
            self._out(json.dumps(body, ensure_ascii=False))
            return
        self._out("\n".join(resume_park_lines(store, self._sessions.checkpoints, plan)))
        if refusal is not None:
            self._out(f"Refused: [{refusal[0]}] {refusal[1]}")

    def not_carried(
        self, plan: ContinuationPlan, decision: WorkspaceDecision | None, cwd: str
    ) -> ResumeParked | None:
        """The terminal asked for a copy (or a rebaseline) the plan would not make: refused
        rather than dropped, nothing done, as ``maka resume`` does alone (None: nothing to
        refuse)."""
        from app.host.plan_report import plan_json, plan_summary
        from app.host.resume_decisions import unanswered_decision

        unanswered = unanswered_decision(plan, decision, cwd)
        if unanswered is None:
            return None
        code, message = unanswered
        if self._terminal.as_json:
            body = plan_json(plan, {"disposition": "refused", "code": code})
            body["message"] = message
            self._out(json.dumps(body, ensure_ascii=False))
        else:
            self._out("\n".join(plan_summary(plan)))
            self._out(f"Refused: [{code}] {message}")
        return ResumeParked((code,))

    def continuing(self, plan: ContinuationPlan) -> None:
        from app.host.plan_report import plan_summary

        notes = self._terminal.before_running
        if notes:  # (said before the continuation's first output: a refusal drops them)
            self.transcript.before_first_output(lambda: self._terminal.write(notes, "stderr"))
        if plan.continuation is not None:
            self.transcript.name_calls(plan.continuation.restore_subjects)
        if not self._terminal.as_json:
            self.transcript.hold("\n".join(plan_summary(plan)) + "\n")

    def refused(self, plan: ContinuationPlan, code: str, message: str, cwd: str) -> None:
        """Refused after the plan, before the provider was called (a changed source, the
        folder picked for a restored copy), as ``maka resume`` says it."""
        from app.host.plan_report import plan_json

        self.transcript.release(keep=False)
        if self._terminal.as_json:
            body = plan_json(plan, {"disposition": "refused", "code": code})
            body["message"] = message
            self._out(json.dumps(body, ensure_ascii=False))
        else:
            self._out(f"Safe resume refused before the provider was called: [{code}] {message}")
            details = plan.continuation
            restore_to = details.restore_to if details is not None else None
            advice = refusal_advice(code, plan.session_id, cwd, restore_to)
            if advice is not None:
                self._out(advice)

    def ended(self, store: Any, plan: ContinuationPlan, run_id: str, status: str, cwd: str) -> None:
        """The continuation ran: its ending, and where it ran when that is a restored copy."""
        from app.host.plan_report import plan_json

        target = store.read_run_header(run_id)
        target_cwd = target.cwd if target is not None else None
        self.transcript.release()
        if self._terminal.as_json:
            extra: dict[str, object] = {"started": True, "runId": run_id, "status": status}
            if target_cwd is not None:
                extra["workspacePath"] = target_cwd
            self._out(json.dumps(plan_json(plan, extra), ensure_ascii=False))
            return
        if target_cwd is not None and target_cwd != cwd:
            from app.host.copy_note import copy_repository_note

            self._out(f"Continued in a restored copy at {target_cwd}; {cwd} was left as it is.")
            note = copy_repository_note(cwd, target_cwd)
            if note is not None:
                self._out(note)
        self._out(f"\ncontinuation run {run_id} ended {status}")
