"""An in-memory ``HostServices`` for host tests: records every call, in order, with its thread.

Turns stream a user message, a growing assistant message and a tool card, then end; a turn told to
``block`` waits until cancelled (and then reports ``cancelled``, as the real runtime commits a
cancelled terminal event). Resume outcomes are scripted per session.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from app.bridge_contract import (
    AssistantMessageItem,
    BranchMadePush,
    BranchOptionsListedPush,
    ChangedFilesShown,
    PermissionDecision,
    ProviderChoice,
    RunStatusValue,
    SessionRow,
    SessionSummary,
    SettleFolderNote,
    ToolCardItem,
    ToolCardStatus,
    TranscriptItem,
    UserMessageItem,
)
from app.host.host_services import (
    DatabaseTest,
    ElsewhereChanges,
    HostServiceError,
    InterruptedRun,
    PlanReport,
    RecoveryReport,
    ResumeOutcome,
    ResumeParked,
    ResumeStarted,
    SettingsChange,
    SettingsView,
    SettleResult,
    SurvivorsChecked,
    TerminalResume,
    TerminalSession,
    TerminalText,
    TerminalTurn,
    TerminalTurnEnd,
    Transcript,
    TurnSink,
)
from runtime.ledger.codes import HostCode, StoreCode
from runtime.ledger.timeline_pins import SessionTimeline


@dataclass
class FakeHostServices:
    report: RecoveryReport = field(default_factory=RecoveryReport)
    sessions: dict[str, SessionSummary] = field(default_factory=dict)
    resume_outcomes: dict[str, ResumeOutcome] = field(default_factory=dict)
    settle_outcomes: dict[str, SettleResult | HostServiceError] = field(default_factory=dict)
    survivors: dict[str, int] = field(default_factory=dict)
    """Commands still running from an earlier start, per session (``check_survivors``)."""
    after_survivors: dict[str, ResumeParked | None] = field(default_factory=dict)
    timelines: dict[str, SessionTimeline] = field(default_factory=dict)
    replanned: dict[str, ResumeParked] = field(default_factory=dict)
    """The park a session's located folder plans to (``replanned_park``)."""
    block_turns: bool = False
    flags: tuple[bool, bool] | None = None
    calls: list[str] = field(default_factory=list)
    threads: dict[str, str] = field(default_factory=dict)
    resumed_automatic: list[tuple[str, bool]] = field(default_factory=list)
    files_shown: list[tuple[str, tuple[ChangedFilesShown, ...] | None]] = field(
        default_factory=list
    )
    """Each ``resume_latest``'s session and the changed files the banner said it showed."""
    folders_shown: list[tuple[str, SettleFolderNote | None]] = field(default_factory=list)
    """Each ``settle_call``'s call and the folder note the card said it showed."""
    fresh_notes: dict[str, tuple[TranscriptItem, ...]] = field(default_factory=dict)
    """What the next ``refresh_folder_notes`` of a session returns (once)."""
    settings: SettingsView = field(
        default_factory=lambda: SettingsView(provider=ProviderChoice.OFFLINE_DEMO)
    )
    sweep_every_s: float | None = None
    """How often the host sweeps (a shared ledger); None: never, as on SQLite."""
    taken_over: list[InterruptedRun] = field(default_factory=list)
    """Handed to the next sweep (once), as the sessions it took over."""
    elsewhere: list[SessionSummary | str | Exception] = field(default_factory=list)
    """What the next sweeps read of sessions other hosts run: a change, the id of a session
    they removed, or a failure."""
    _cancels: dict[str, threading.Event] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _record(self, name: str) -> None:
        with self._lock:
            self.calls.append(name)
            self.threads[name.split(":", maxsplit=1)[0]] = threading.current_thread().name

    def recover_at_startup(self) -> RecoveryReport:
        self._record("recover_at_startup")
        return self.report

    def takeover_interval_s(self) -> float | None:
        return self.sweep_every_s

    def take_over_expired(self) -> tuple[InterruptedRun, ...]:
        self._record("take_over_expired")
        with self._lock:
            taken, self.taken_over = tuple(self.taken_over), []
        return taken

    def elsewhere_changes(self) -> ElsewhereChanges:
        self._record("elsewhere_changes")
        with self._lock:
            if not self.elsewhere:
                return ElsewhereChanges()
            next_one = self.elsewhere.pop(0)
        if isinstance(next_one, Exception):
            raise next_one
        if isinstance(next_one, str):
            return ElsewhereChanges(removed=(next_one,))
        return ElsewhereChanges(updated=(next_one,))

    def list_sessions(self) -> Sequence[SessionSummary]:
        self._record("list_sessions")
        return list(self.sessions.values())

    def session_rows(self) -> Sequence[SessionRow]:
        self._record("session_rows")
        return [
            SessionRow(
                session_id=s.session_id,
                cwd=s.cwd,
                title=s.title,
                created_at=0,
                interrupted=s.interrupted,
                run_count=0 if s.last_run_status is None else 1,
                folder_missing=s.folder_missing,
                resumable=False,
                last_run_status=s.last_run_status,
                failure_class=s.failure_class,
            )
            for s in self.sessions.values()
        ]

    def plan_report(self, session_id: str, safe_resume: bool | None = None) -> PlanReport:
        self._record(f"plan_report:{session_id}")
        if session_id not in self.sessions:
            raise HostServiceError(HostCode.NOT_FOUND, f"no session {session_id}")
        return PlanReport(session_id, True, ("Safe resume would continue.",), '{"continues": true}')

    def session_summary(self, session_id: str) -> SessionSummary:
        self._record(f"session_summary:{session_id}")
        if session_id not in self.sessions:
            raise HostServiceError(HostCode.NOT_FOUND, f"no session {session_id}")
        return self.sessions[session_id]

    def terminal_text(self, session_id: str, command: str, arguments: str) -> TerminalText:
        self._record(f"terminal_text:{session_id}:{command}:{arguments}")
        if session_id not in self.sessions:
            raise HostServiceError(HostCode.NOT_FOUND, f"no session {session_id}")
        return TerminalText(f"you> hello ({command})")

    def open_session(self, session_id: str) -> Transcript:
        self._record(f"open_session:{session_id}")
        if session_id not in self.sessions:
            raise HostServiceError(HostCode.NOT_FOUND, f"no session {session_id}")
        return Transcript(session_id, (UserMessageItem(item_id="u1", text="hello"),))

    def session_timeline(self, session_id: str) -> SessionTimeline:
        self._record(f"session_timeline:{session_id}")
        if session_id not in self.sessions:
            raise HostServiceError(HostCode.NOT_FOUND, f"no session {session_id}")
        return self.timelines.get(session_id, SessionTimeline(session_id, (), None))

    def create_session(self, cwd: Path) -> SessionSummary:
        self._record(f"create_session:{cwd}")
        if not cwd.is_dir():
            raise HostServiceError(HostCode.INVALID_CWD, f"{cwd} is not a folder")
        session_id = f"s{len(self.sessions) + 1}"
        summary = SessionSummary(session_id=session_id, cwd=str(cwd), title="new session")
        self.sessions[session_id] = summary
        return summary

    def branch_options(self, session_id: str) -> BranchOptionsListedPush:
        self._record(f"branch_options:{session_id}")
        if session_id not in self.sessions:
            raise HostServiceError(StoreCode.SESSION_NOT_FOUND, f"no session {session_id}")
        cwd = self.sessions[session_id].cwd
        return BranchOptionsListedPush(
            session_id=session_id, cwd=cwd, default_folder=f"{cwd}-branch-1", options=()
        )

    def make_branch(
        self, session_id: str, event_id: str, *, to: Path | None, current_files: bool
    ) -> BranchMadePush:
        self._record(f"make_branch:{session_id}:{event_id}")
        if session_id not in self.sessions:
            raise HostServiceError(StoreCode.SESSION_NOT_FOUND, f"no session {session_id}")
        new_id = f"s{len(self.sessions) + 1}"
        cwd = str(to) if to is not None else f"{self.sessions[session_id].cwd}-branch-1"
        self.sessions[new_id] = SessionSummary(session_id=new_id, cwd=cwd, title="branch")
        return BranchMadePush(
            session_id=session_id,
            event_id=event_id,
            new_session_id=new_id,
            cwd=cwd,
            title="branch",
            current_files=current_files,
        )

    def relocate_session(self, session_id: str, cwd: Path) -> SessionSummary:
        self._record(f"relocate_session:{session_id}")
        if session_id not in self.sessions:
            raise HostServiceError(StoreCode.SESSION_NOT_FOUND, f"no session {session_id}")
        moved = self.sessions[session_id].model_copy(update={"cwd": str(cwd)})
        self.sessions[session_id] = moved
        return moved

    def replanned_park(self, session_id: str) -> ResumeParked | None:
        self._record(f"replanned_park:{session_id}")
        return self.replanned.get(session_id)

    def rename_session(self, session_id: str, title: str) -> SessionSummary:
        self._record(f"rename_session:{session_id}")
        if session_id not in self.sessions:
            raise HostServiceError(StoreCode.SESSION_NOT_FOUND, f"no session {session_id}")
        renamed = self.sessions[session_id].model_copy(update={"title": title})
        self.sessions[session_id] = renamed
        return renamed

    def remove_session(self, session_id: str) -> None:
        self._record(f"remove_session:{session_id}")
        if self.sessions.pop(session_id, None) is None:
            raise HostServiceError(StoreCode.SESSION_NOT_FOUND, f"no session {session_id}")

    def export_session(self, session_id: str, path: Path) -> int:
        self._record(f"export_session:{session_id}")
        path.write_text("{}\n")
        return 1

    def send_turn(self, session_id: str, text: str, sink: TurnSink) -> None:
        self._record(f"send_turn:{session_id}")
        cancel = threading.Event()
        with self._lock:
            self._cancels[session_id] = cancel
        run_id = f"run-{session_id}"
        sink.run_status(run_id, RunStatusValue.RUNNING)
        sink.transcript_item(UserMessageItem(item_id=f"{run_id}-u", run_id=run_id, text=text))
        for length in range(1, 6):
            sink.transcript_item(
                AssistantMessageItem(item_id=f"{run_id}-a", run_id=run_id, text="abcde"[:length])
            )
        if self.block_turns:
            cancel.wait(30)
        if cancel.is_set():
            sink.run_status(run_id, RunStatusValue.CANCELLED, "cancelled_by_user")
            self._record(f"turn_cancelled:{session_id}")
            return
        sink.transcript_item(
            ToolCardItem(
                item_id=f"{run_id}-t",
                run_id=run_id,
                tool_call_id="c1",
                tool_name="read_file",
                status=ToolCardStatus.SUCCEEDED,
            )
        )
        sink.run_status(run_id, RunStatusValue.COMPLETED)

    def terminal_session(self, turn: TerminalTurn) -> TerminalSession:
        session_id = turn.session_id or "s-new"
        return TerminalSession(session_id, turn.cwd or "/", "fake")

    def terminal_turn(
        self, session_id: str, turn: TerminalTurn, sink: TurnSink, write: Callable[[str], None]
    ) -> TerminalTurnEnd:
        self.send_turn(session_id, turn.text, sink)
        write("done\n")
        return TerminalTurnEnd(session_id, f"run-{session_id}", "completed")

    def cancel_turn(self, session_id: str, reason: str | None = None) -> None:
        self._record(f"cancel_turn:{session_id}")
        with self._lock:
            event = self._cancels.get(session_id)
        if event is not None:
            event.set()

    def answer_permission(
        self, session_id: str, request_id: str, decision: PermissionDecision
    ) -> None:
        self._record(f"answer_permission:{session_id}:{request_id}:{decision}")

    def resume_latest(
        self,
        session_id: str,
        sink: TurnSink,
        *,
        automatic: bool,
        decision: str | None = None,
        restore_to: str | None = None,
        terminal: TerminalResume | None = None,
        files_shown: tuple[ChangedFilesShown, ...] | None = None,
    ) -> ResumeOutcome:
        self._record(f"resume_latest:{session_id}")
        with self._lock:
            self.files_shown.append((session_id, files_shown))
        with self._lock:
            self.resumed_automatic.append((session_id, automatic))
        outcome = self.resume_outcomes.get(
            session_id, ResumeParked(rejection_reasons=("resume_candidate_missing",))
        )
        if isinstance(outcome, ResumeStarted):
            sink.resume_started(outcome.run_id, outcome.turn_id)
            sink.run_status(outcome.run_id, RunStatusValue.RUNNING)
            sink.run_status(outcome.run_id, RunStatusValue.COMPLETED)
        return outcome

    def settle_call(
        self,
        session_id: str,
        tool_call_id: str,
        ran: bool,
        note: str | None,
        folder_shown: SettleFolderNote | None = None,
    ) -> SettleResult:
        self._record(f"settle_call:{session_id}:{tool_call_id}:{ran}:{note}")
        with self._lock:
            self.folders_shown.append((tool_call_id, folder_shown))
        outcome = self.settle_outcomes.get(session_id)
        if isinstance(outcome, HostServiceError):
            raise outcome
        return outcome or SettleResult(None, None)

    def refresh_folder_notes(self, session_id: str) -> tuple[TranscriptItem, ...]:
        with self._lock:
            return self.fresh_notes.pop(session_id, ())

    def check_survivors(self, session_id: str, *, stop: bool) -> SurvivorsChecked:
        self._record(f"check_survivors:{session_id}:{stop}")
        running = self.survivors.get(session_id, 0)
        if stop:
            self.survivors[session_id] = 0
        still = self.survivors.get(session_id, 0)
        if still:
            return SurvivorsChecked(0, still)
        parked = self.after_survivors.get(session_id)
        return SurvivorsChecked(running if stop else 0, 0, checked=True, parked=parked)

    def resume_flags(self) -> tuple[bool, bool] | None:
        return self.flags

    def get_settings(self) -> SettingsView:
        self._record("get_settings")
        return self.settings

    def update_settings(self, change: SettingsChange) -> SettingsView:
        self._record("update_settings")
        self.settings = SettingsView(
            provider=change.provider,
            openai_base_url=change.openai_base_url,
            openai_model=change.openai_model,
            api_key_set=bool(change.openai_api_key),
        )
        return self.settings

    def test_database(self, database_url: str | None) -> DatabaseTest:
        self._record(f"test_database:{database_url}")
        return DatabaseTest(
            ok=True, database_url=database_url or "", server_version="16.4", schema_version=0
        )

    def start_checkpoint_retention(self) -> None:
        self._record("start_checkpoint_retention")

    def stop_background_work(self) -> None:
        self._record("stop_background_work")

    def close(self) -> None:
        self._record("close")
