"""The real ``HostServices``: the store, startup recovery, the session service and Safe resume.

``open_host_services(data_dir)`` is the factory the composition root gives the host. It opens the
store (a refusal raises ``LedgerError`` with ``schema_newer_than_program``, ``store_corrupt`` or
``store_locked``: the host shows the refusal screen). ``recover_at_startup`` runs the one startup
recovery of docs/design/recovery.md section 3 (the host holds the data-directory lock), then builds
the session service with the new owner epoch, the safety inspector and the resume seam, so that
nothing can touch a session before its interrupted runs are repaired.

What a park looks like on the wire is ``resume_wire``; the verdict remembered per boundary across
starts is ``verdict_memory``.

Everything here runs on worker threads (the host never calls it on the event loop) except
``cancel_turn`` and ``answer_permission``, which only signal a running turn.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from app.bridge_contract import (
    BranchMadePush,
    BranchOptionsListedPush,
    ChangedFilesShown,
    PermissionDecision,
    RunStatusValue,
    SessionRow,
    SessionSummary,
    SettleFolderNote,
    ToolCardItem,
    TranscriptItem,
    changed_files_shown,
)
from app.host.auto_resume import select_auto_resume
from app.host.branch_desktop import (
    make_branch,
    options_push,
    with_branch_markers,
    with_branch_prefix,
)
from app.host.desktop_settings import DesktopSettings, provider_environment, try_database
from app.host.host_bootstrap import (
    SessionTakeover,
    now_ms,
    recover_at_startup,
    session_service,
    start_deadline_feed,
    startup_reconciler,
    take_over_expired,
)
from app.host.host_services import (
    DatabaseTest,
    ElsewhereChanges,
    HostServiceError,
    InterruptedRun,
    PlanReport,
    RecoveryReport,
    ResumeFailed,
    ResumeOutcome,
    ResumeParked,
    ResumeStarted,
    SettingsChange,
    SettingsView,
    SettleResult,
    ShownCardStale,
    SurvivorsChecked,
    TerminalResume,
    TerminalSession,
    TerminalText,
    TerminalTurn,
    TerminalTurnEnd,
    Transcript,
    TurnSink,
)
from app.host.live_turn_view import LiveTurnView
from app.host.opened_transcripts import OpenedTranscripts, ledger_mark
from app.host.plan_report import explained_plan
from app.host.resume_decisions import DECISION_NOT_OFFERED, restore_unavailable
from app.host.resume_seam import continuation_resume_service, resume_service
from app.host.resume_switch import RESUME_FLAG
from app.host.resume_verdicts import ResumeVerdicts
from app.host.resume_wire import (
    TARGET_REFUSALS,
    parked_outcome,
    parked_write_diagnostics,
    wire_diagnostic,
)
from app.host.session_relocation import (
    SessionChangeRefused,
    relocate_session,
    remove_session,
)
from app.host.session_rows import quarantined_sessions, wire_rows
from app.host.settle_call import card_of, settle_call, settleable_in
from app.host.settle_folder import (
    ShownFolderNotes,
    baseline_capture,
    folder_changed_words,
    folder_note_now,
    with_folder_notes,
)
from app.host.since_shown import ShownChangedCode, drift_changed_words
from app.host.terminal_turn import TerminalContinuation, terminal_session, terminal_turn
from app.host.transcript_items import session_transcript
from app.host.verdict_memory import VerdictMemory
from runtime.agent.permission_policy import Decision, PermissionPolicy, PermissionQuestion
from runtime.agent.run_loop import RunSettings
from runtime.agent.session_overview import SessionOverview, session_overview
from runtime.agent.session_service import SessionService
from runtime.agent.transcript_projection import TranscriptEntry, transcript_of_run
from runtime.base.cancel_token import CancelToken
from runtime.continuation.continuation_planner import ContinuationPlan
from runtime.continuation.lifecycle_log import LifecycleLog
from runtime.continuation.resume_candidate import continued_after
from runtime.continuation.resume_service import ResumeRefused, ResumeService
from runtime.continuation.workspace_decision import WorkspaceDecision
from runtime.ledger.canonical_codec import operation_id
from runtime.ledger.codes import FailureClass, HostCode, ParkReason, TransferCode
from runtime.ledger.database_url import masked_database_url
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.process_records import ToolProcessRecord
from runtime.ledger.quarantined_runs import Quarantined, read_unless_quarantined
from runtime.ledger.restore_point_words import call_subjects
from runtime.ledger.store_ports import RunHeader, RunStatus, SessionRecord
from runtime.ledger.timeline_pins import SessionTimeline
from runtime.providers.provider_port import Provider
from runtime.providers.provider_registry import build_provider
from runtime.recovery.settlement import find_operation
from runtime.tools.process_identity import (
    live_tool_processes,
    note_stopped_by_host,
    stop_tool_process,
)
from runtime.tools.process_tree import BackgroundShellRegistry
from storage.checkpoints.checkpoint_store import GitCheckpointStore
from storage.ledger.database_choice import DATABASE_URL_VARIABLE, select_database
from storage.ledger.ledger_store import SqliteLedgerStore, open_store

if TYPE_CHECKING:
    from runtime.recovery.startup_recovery import StartupRecoveryReport

_log = logging.getLogger("maka.main")
_MAX_DIAGNOSTICS = 500
SAFE_RESUME_ENV = RESUME_FLAG


def open_host_services(data_dir: Path, /, *, safe_resume_enabled: bool) -> DesktopServices:
    store = open_store(data_dir)
    return DesktopServices(store, data_dir, safe_resume_enabled=safe_resume_enabled)


def holder_words(owner: str) -> str:
    """A lease holder (``machine:pid:nonce``) as the window names it: ``machine, pid N``."""
    parts = owner.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdigit():
        return f"{parts[0][:200]}, pid {parts[1]}"
    return owner[:200]


def _as_listed(record: SessionRecord, others: Mapping[str, str]) -> tuple[str, str, str | None]:
    """The title, folder and holder a session is listed with (``SessionSummary``'s fields): what
    the sweep compares with what the window was given."""
    holder = others.get(record.session_id)
    return (
        record.title[:500],
        record.cwd[:4096],
        holder_words(holder) if holder is not None else None,
    )


def _summary(
    overview: SessionOverview,
    held: Mapping[str, int] | None = None,
    others: Mapping[str, str] | None = None,
) -> SessionSummary:
    """``held``: the sessions whose lease this host holds, on a shared ledger (None: the data
    folder's own ledger, where every run is this host's); ``others``: the sessions whose live
    lease another process holds, with its holder."""
    record = overview.session
    status = overview.last_run_status
    elsewhere = (
        held is not None
        and status in (RunStatus.CREATED, RunStatus.RUNNING)
        and record.session_id not in held
    )
    title, cwd, holder = _as_listed(record, others or {})
    return SessionSummary(
        session_id=record.session_id,
        cwd=cwd,
        title=title,
        last_run_status=RunStatusValue(status.value) if status is not None else None,
        interrupted=overview.interrupted,
        interrupted_automatic=overview.interrupted_automatic,
        failure_class=overview.failure_class,
        folder_missing=not os.path.isdir(record.cwd),
        running_elsewhere=elsewhere,
        held_elsewhere=holder,
    )


def _unreadable_run(run: Quarantined) -> TranscriptEntry:
    """The transcript's notice for a run whose saved history cannot be read."""
    run_id, error = run.run_id, run.error
    return TranscriptEntry(
        "notice",
        f"{run_id}_unreadable",
        run_id,
        text=f"This run's saved history cannot be read, so it is not shown ({error.message}). "
        "The session's other runs are. Safe resume does not continue from it; a new message "
        "carries the session on without it.",
        level="error",
        code="runtime_ledger_unreadable",
    )


def _as_quarantined(summary: SessionSummary) -> SessionSummary:
    """A quarantined session's row: nothing runs its latest run, so it is shown failed, not
    "Running" with a Stop button that stops nothing, and with no banner offering a Safe resume
    that can only park (the transcript's notice says why)."""
    return summary.model_copy(
        update={
            "last_run_status": RunStatusValue.FAILED,
            "interrupted": False,  # (no banner offering a Safe resume that cannot be)
            "failure_class": ParkReason.RUNTIME_LEDGER_UNREADABLE.value,
        }
    )


def _ordered(runs: Sequence[RunHeader]) -> list[RunHeader]:
    return sorted(runs, key=lambda header: (header.created_at, header.run_id))


def _as_verdict(outcome: ResumeOutcome) -> ResumeOutcome | None:
    """What is remembered as the session's verdict: a park on changed files that changed after
    they were listed (``workspace_drift_changed``) is the park as it stands, without that note,
    which was about the click (None: nothing parks now)."""
    code = ShownChangedCode.WORKSPACE_DRIFT_CHANGED.value
    if not isinstance(outcome, ResumeParked) or code not in outcome.rejection_reasons:
        return outcome
    reasons = tuple(r for r in outcome.rejection_reasons if r != code)
    if not reasons:
        return None
    return ResumeParked(
        reasons,
        tuple(d for d in outcome.diagnostics if d.code != code),
        outcome.workspace_options,
    )


class DesktopServices:
    def __init__(
        self,
        store: SqliteLedgerStore,
        data_dir: Path,
        *,
        safe_resume_enabled: bool,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self._store = store
        self._data_dir = data_dir
        self._safe_resume_default = safe_resume_enabled
        self._clock = clock
        self._settings = DesktopSettings(data_dir)
        # What ``open_store`` chose at start (the store is opened once; a changed Database
        # setting applies at the next start).
        chosen = select_database(data_dir).url
        self._database_in_use = "" if chosen is None else masked_database_url(chosen)
        self._shells = BackgroundShellRegistry.in_data_dir(data_dir)
        self._sessions: SessionService | None = None
        self._owner_epoch = 0
        self._feed_stop = threading.Event()
        self._lifecycle = LifecycleLog.in_data_dir(data_dir, clock)
        self._memory = VerdictMemory(
            store,
            self._shells,
            ResumeVerdicts(data_dir),
            clock,
            tool_names=self._tool_names,
            planner=self._planner,
            safe_resume_on=lambda: self.resume_flags()[0],
        )
        self._lock = threading.Lock()
        self._continuations: dict[str, CancelToken] = {}
        self._notes_sent = ShownFolderNotes()  # the settleable cards' notes as last sent
        self._shown_elsewhere: dict[str, SessionSummary] = {}
        # The sessions the window was given (a list, a summary), with the title, folder and
        # holder it was given: a shared ledger's sweep tells it what other hosts created,
        # renamed, moved, took or let go of, or removed since.
        self._known_sessions: dict[str, tuple[str, str, str | None]] = {}
        self._listed = False
        # The sessions whose transcript a window read, with the ledger's mark at that read: a
        # shared ledger's sweep tells the window of those another process has added to since.
        self._opened = OpenedTranscripts()
        # Sessions this host claimed, or whose runs its own turns left unfinished, noted before
        # their repair: each stays here until a sweep hands its repaired run to automatic resume
        # (take_over_expired). A sweep that fails after the repair committed (a lost connection,
        # or a COMMIT whose answer was lost) would otherwise forget a repaired run that no later
        # sweep finds unfinished again, and the session would wait, interrupted, for nobody.
        self._awaiting_resume: set[str] = set()

    # ---- startup -------------------------------------------------------------------------

    def recover_at_startup(self) -> RecoveryReport:
        # Interrupted file writes are reconciled before run endings are repaired; the marker
        # is only read here (recovery never creates one).
        report = recover_at_startup(self._store, self._clock)
        self._owner_epoch = report.owner_epoch
        if isinstance(self._store, SessionTakeover):
            self._store.on_runway_lost(self._end_tool_processes)
            self._start_deadline_feed(self._store)
            if report.taken_over:
                _log.info("took over session(s) %s", ", ".join(report.taken_over))
        self._sessions = session_service(
            self._store,
            self._data_dir,
            report.owner_epoch,
            provider_factory=self._provider,
            shells=self._shells,
            settings=self._run_settings,
            clock=self._clock,
        )
        interrupted = self._interrupted(report)
        quarantined = tuple(dict.fromkeys(q.session_id for q in report.quarantined))
        # The sessions automatic resume takes up now say their own outcome; every other one
        # the banner would offer is planned (verdict_memory).
        automatic = select_auto_resume(interrupted, enabled=all(self.resume_flags())).resume
        return RecoveryReport(
            interrupted=tuple(interrupted),
            quarantined_sessions=quarantined,
            repaired_runs=len(report.repaired),
            standing=self._memory.standing(skip=frozenset(r.session_id for r in automatic)),
        )

    def _interrupted(self, report: StartupRecoveryReport) -> list[InterruptedRun]:
        interrupted: list[InterruptedRun] = []
        for repaired in report.repaired:
            header = self._store.read_run_header(repaired.run_id)
            runs = _ordered(self._store.list_session_runs(repaired.session_id))
            if header is None or not runs or runs[-1].run_id != header.run_id:
                continue  # not the session's latest run any more
            interrupted.append(
                InterruptedRun(
                    session_id=repaired.session_id,
                    run_id=repaired.run_id,
                    created_at=header.created_at,
                    automatic_continuation=repaired.automatic_continuation,
                )
            )
        return interrupted

    def takeover_interval_s(self) -> float | None:
        """How often the host sweeps for sessions to take over (PostgreSQL); None: never (the
        data folder's own ledger has one host, which recovered everything at startup)."""
        if isinstance(self._store, SessionTakeover):
            return self._store.takeover_interval_s()
        return None

    def take_over_expired(self) -> tuple[InterruptedRun, ...]:
        """One takeover sweep (docs/design/hosts.md section 2): claim the sessions whose host
        stopped renewing their leases, repair their runs with startup recovery's code, and
        return the interrupted ones (automatic resume takes them up as at startup)."""
        if not isinstance(self._store, SessionTakeover) or self._sessions is None:
            return ()
        deadline = self._store.runway_deadline()
        if deadline is not None and time.monotonic() > deadline:
            return ()  # no runway on this host's own clock: it could resume nothing now
        stalled = self._recover_stalled(self._sessions)
        report = take_over_expired(
            self._store, self._owner_epoch, self._clock, on_claimed=self._await_resume
        )
        if stalled is not None:
            report = replace(
                report,
                repaired=stalled.repaired + report.repaired,
                taken_over=tuple(dict.fromkeys(r.session_id for r in stalled.repaired))
                + report.taken_over,
            )
        if report.taken_over:
            _log.info(
                "took over session(s) %s (%d run(s) repaired)",
                ", ".join(report.taken_over),
                len(report.repaired),
            )
        return self._repaired_awaiting_resume()

    def _await_resume(self, session_ids: Sequence[str]) -> None:
        with self._lock:
            self._awaiting_resume.update(session_ids)

    def _repaired_awaiting_resume(self) -> tuple[InterruptedRun, ...]:
        """The sessions awaiting a resume whose latest run is now repaired (failed,
        ``app_restarted``), for automatic resume to take up; they leave the set here, as do
        those that need nothing any more (a newer turn, another host's resume). A session whose
        run is still unfinished stays: a later sweep repairs it (``_recover_stalled``)."""
        with self._lock:
            awaiting = sorted(self._awaiting_resume)
        interrupted: list[InterruptedRun] = []
        decided: set[str] = set()
        for session_id in awaiting:
            runs = _ordered(self._store.list_session_runs(session_id))
            latest = runs[-1] if runs else None
            if latest is not None and latest.status in (RunStatus.CREATED, RunStatus.RUNNING):
                continue
            decided.add(session_id)
            if (
                latest is not None
                and latest.status is RunStatus.FAILED
                and latest.failure_class == FailureClass.APP_RESTARTED.value
            ):
                source = latest.continuation_source
                interrupted.append(
                    InterruptedRun(
                        session_id=session_id,
                        run_id=latest.run_id,
                        created_at=latest.created_at,
                        automatic_continuation=bool(source and source.get("automatic")),
                    )
                )
        with self._lock:
            self._awaiting_resume -= decided
        return tuple(interrupted)

    def _start_deadline_feed(self, store: SessionTakeover) -> None:
        """The lease's runway deadline to every tool supervisor, every quarter second
        (``host_bootstrap.start_deadline_feed``), until ``close``."""
        start_deadline_feed(store, self._feed_stop)

    def _recover_stalled(self, sessions: SessionService) -> StartupRecoveryReport | None:
        """A turn of this host that ended on a lost connection (``store_io_failed``) may have
        left its run unfinished while the heartbeat keeps renewing the session's lease: no
        sweep would ever claim it. Such runs (an unfinished run in a session this host holds,
        no turn or continuation of this host running in it) are repaired here with the same
        takeover recovery, those runs only (never one a turn started since the check)."""
        from runtime.recovery.startup_recovery import run_takeover_recovery

        store = self._store
        held = store.held_session_leases()
        if not held:
            return None
        stalled: dict[str, str] = {}
        for header in store.list_runs([RunStatus.CREATED, RunStatus.RUNNING]):
            if header.session_id not in held:
                continue
            with self._lock:
                running = sessions.is_busy(header.session_id) or (
                    header.session_id in self._continuations
                )
            if not running:
                stalled[header.run_id] = header.session_id
        if not stalled:
            return None
        _log.warning(
            "run(s) %s left unfinished by this host's own turn(s): repairing them",
            ", ".join(sorted(stalled)),
        )
        self._await_resume(tuple(stalled.values()))
        return run_takeover_recovery(
            store,
            set(stalled.values()),
            self._owner_epoch,
            self._clock,
            startup_reconciler(store, self._clock),
            only_runs=frozenset(stalled),
        )

    def _end_tool_processes(self) -> None:
        """This host could not renew its session leases for ttl - runway (its own clock): end
        every tool process it started, before another host may take the sessions over."""
        assert isinstance(self._store, SessionTakeover)
        deadline = self._store.runway_deadline()
        if deadline is not None and time.monotonic() < deadline:
            # A renewal succeeded after the deadline was seen to pass (a write's own renewal,
            # say): the leases are held again, and a command started since must keep running.
            _log.info("session leases renewed meanwhile: no tool process ended")
            return
        records = self._store.started_tool_processes()
        _log.warning(
            "session leases not renewed in time: ending %d tool process(es) and background shells",
            len(records),
        )
        for record in records:
            note_stopped_by_host(
                record.pid,
                "this host could not renew its session leases in time (the database did not "
                "answer), so it ended the command before another host could take the session "
                "over; it did not fail by itself, and it may have done part of its work",
            )
            try:
                stop_tool_process(record)
            except Exception:
                _log.exception("could not end tool process %s", record.pid)
        self._shells.stop_all()

    def _tool_names(self) -> Sequence[str]:
        return list(self._sessions.catalog.names()) if self._sessions is not None else []

    def _provider(self) -> Provider:
        config = self._settings.provider_config(os.environ)
        return build_provider(None, config)

    def _run_settings(self) -> RunSettings:
        """Read at the start of every turn and continuation: Settings may change the limit."""
        return RunSettings(max_steps=self._settings.max_steps())

    @property
    def _service(self) -> SessionService:
        if self._sessions is None:
            raise HostServiceError(HostCode.HOST_NOT_READY, "startup recovery has not run")
        return self._sessions

    # ---- sessions ------------------------------------------------------------------------

    def list_sessions(self) -> Sequence[SessionSummary]:
        overviews = self._service.list_sessions()
        # Most recent activity first: the session worked in last is at the top after a restart.
        ordered = sorted(
            overviews,
            key=lambda o: (o.last_activity_at, o.session.created_at, o.session.session_id),
            reverse=True,
        )
        held, others = self._held(), self._others()
        summaries = [_summary(overview, held, others) for overview in ordered]
        quarantined = self._quarantined(summaries, held)
        summaries = [
            self._shown(_as_quarantined(summary) if summary.session_id in quarantined else summary)
            for summary in summaries
        ]
        self._listed = True
        return summaries

    def _quarantined(
        self, summaries: Sequence[SessionSummary], held: Mapping[str, int] | None
    ) -> set[str]:
        """The sessions whose latest run, still marked running after startup recovery, is of an
        earlier start: recovery could not repair it (its record does not decode: quarantined),
        the rule ``maka sessions`` follows (``session_rows.quarantined_sessions``). Only for the
        data folder's own ledger: on a shared one another host may run it."""
        if held is not None:
            return set()
        running = [
            summary.session_id
            for summary in summaries
            if summary.last_run_status in (RunStatusValue.CREATED, RunStatusValue.RUNNING)
        ]
        if not running:
            return set()
        try:
            return quarantined_sessions(self._store, running)
        except LedgerError:
            return set()

    def _held(self) -> Mapping[str, int] | None:
        store = self._store
        return store.held_session_leases() if isinstance(store, SessionTakeover) else None

    def _others(self) -> Mapping[str, str]:
        """The sessions whose live lease another process holds, with its holder (none on the
        data folder's own ledger)."""
        store = self._store
        if not isinstance(store, SessionTakeover):
            return {}
        mine = getattr(store, "owner", None)
        return {
            session_id: owner
            for session_id, owner in store.live_lease_holders().items()
            if owner != mine
        }

    def _shown(self, summary: SessionSummary) -> SessionSummary:
        """Remember the sessions shown, and which ran in another process (``elsewhere_changes``)."""
        with self._lock:
            self._known_sessions[summary.session_id] = (
                summary.title,
                summary.cwd,
                summary.held_elsewhere,
            )
            if summary.running_elsewhere or summary.held_elsewhere is not None:
                self._shown_elsewhere[summary.session_id] = summary
            else:
                self._shown_elsewhere.pop(summary.session_id, None)
        return summary

    def elsewhere_changes(self) -> ElsewhereChanges:
        held = self._held()
        if held is None:
            return ElsewhereChanges()  # the data folder's own ledger: every change was told
        with self._lock:
            shown: dict[str, SessionSummary | None] = dict(self._shown_elsewhere)
            known = dict(self._known_sessions) if self._listed else None
        removed: list[str] = []
        others = self._others()  # one reading of the leases for the whole sweep
        if known is not None:  # (no window has asked for the list yet: nothing to add to)
            listed = {record.session_id: record for record in self._store.list_sessions()}
            for record in listed.values():  # made, renamed, moved or taken by other hosts
                if known.get(record.session_id) != _as_listed(record, others):
                    shown[record.session_id] = None
            removed = [session_id for session_id in known if session_id not in listed]
        changed: list[SessionSummary] = []
        opened = set(self._opened.followed())
        for session_id, before in shown.items():
            try:
                now = self._summary_of(session_id, held, others)
            except HostServiceError:  # removed meanwhile
                if self._forget(session_id) and session_id not in removed:
                    removed.append(session_id)
                continue
            moved = session_id in opened and self._moved(session_id)
            if now != before or moved:
                changed.append(now)
        for session_id in removed:
            self._forget(session_id)
        return ElsewhereChanges(tuple(changed), tuple(removed))

    def _moved(self, session_id: str) -> bool:
        """Whether another process added to a session whose transcript a window read (a run
        started or ended, events committed): the window reads it again."""
        try:
            return self._opened.moved(session_id, ledger_mark(self._store, session_id))
        except LedgerError:  # removed meanwhile: the summary's read says so
            return False

    def _forget(self, session_id: str) -> bool:
        """Stop following a session that is gone; whether the window had been given it."""
        self._opened.forget(session_id)
        with self._lock:
            self._shown_elsewhere.pop(session_id, None)
            return self._known_sessions.pop(session_id, None) is not None

    def session_rows(self) -> Sequence[SessionRow]:
        return wire_rows(self._service.list_sessions())

    def plan_report(self, session_id: str, safe_resume: bool | None = None) -> PlanReport:
        """``safe_resume``: a terminal's own setting, which decides as it does for its
        ``maka resume`` (None: the host's)."""
        try:
            self._service.get_session(session_id)
        except LedgerError as error:
            raise HostServiceError(error.code, error.message) from None
        plan = self._planner(safe_resume).plan_latest(session_id)
        # The words maka plan prints when it opens the store itself (one function for both).
        words = explained_plan(self._store, self._service.checkpoints, plan, read_only=False)
        return PlanReport(
            session_id=session_id,
            continues=plan.continues,
            summary=words.summary,
            document=json.dumps(words.document, ensure_ascii=False),
        )

    def session_summary(self, session_id: str) -> SessionSummary:
        return self._summary_of(session_id, self._held(), self._others())

    def _summary_of(
        self, session_id: str, held: Mapping[str, int] | None, others: Mapping[str, str]
    ) -> SessionSummary:
        service = self._service
        try:
            overview = session_overview(self._store, service.get_session(session_id))
        except LedgerError as error:
            raise HostServiceError(error.code, error.message) from None
        summary = _summary(overview, held, others)
        if session_id in self._quarantined([summary], held):
            summary = _as_quarantined(summary)
        return self._shown(summary)

    def session_timeline(self, session_id: str) -> SessionTimeline:
        from app.host.session_timeline import read_session_timeline_lazily

        try:
            self._service.get_session(session_id)
            return read_session_timeline_lazily(
                self._store, session_id, self._planner().plan_latest
            )
        except LedgerError as error:
            raise HostServiceError(error.code, error.message) from None

    def terminal_text(self, session_id: str, command: str, arguments: str) -> TerminalText:
        from types import SimpleNamespace

        from app.host import tui_reads

        try:
            self._service.get_session(session_id)
        except LedgerError as error:
            raise HostServiceError(error.code, error.message) from None
        lines: list[str] = []
        reader = SimpleNamespace(store=self._store, service=self._service, data_dir=self._data_dir)
        if command == "transcript":
            tui_reads.transcript(reader, session_id, lines.append)
            return TerminalText("\n".join(lines))
        new = tui_reads.branch(reader, session_id, f"/branch {arguments}", lines.append)
        if new is None:
            return TerminalText("\n".join(lines))
        header: list[str] = []
        tui_reads.say_if_branched(reader, new.session_id, header.append)
        return TerminalText(
            "\n".join([*lines, f"maka tui: session {new.session_id} in {new.cwd}", *header]),
            new.session_id,
            str(new.cwd),
        )

    def open_session(self, session_id: str) -> Transcript:
        try:
            self._service.get_session(session_id)
            # On a shared ledger, what it holds now (before the read: what another process
            # commits meanwhile moves it, and the next sweep has the window read it again).
            shared = isinstance(self._store, SessionTakeover)
            mark = ledger_mark(self._store, session_id) if shared else None
            runs: list[tuple[str, str | None, Sequence[TranscriptEntry]]] = []
            epoch = self._store.read_owner_epoch()
            # A call whose command still runs from an earlier start cannot be settled by the
            # user yet (docs/design/recovery.md sections 8 and 9): its card offers no choice
            # until it ends.
            running_ops = {record.operation_id for record in self._survivors(session_id)}
            # The calls so far, named by what they did: a restored copy's mark in a later run
            # names the calls it predates as the user knows them (the command), not by id.
            subjects: dict[str, str] = {}
            by_id: dict[str, RunHeader] = {}
            after: dict[str, str] = {}  # what each continuation followed, for its marker
            automatic: set[str] = set()  # the continuations automatic resume started
            for header in _ordered(self._store.list_session_runs(session_id)):
                by_id[header.run_id] = header
                rows = read_unless_quarantined(self._store, header.run_id)
                if isinstance(rows, Quarantined):
                    # One run whose record no longer decodes: said where it stands, and the
                    # session's other runs shown (the whole transcript read "No messages yet").
                    runs.append((header.run_id, None, [_unreadable_run(rows)]))
                    continue
                events = [row.event for row in rows]
                source = header.continuation_source or {}
                source_run = source.get("sourceRunId") or source.get("runId")
                if source_run:
                    after[header.run_id] = continued_after(by_id.get(str(source_run)))
                    if source.get("automatic") is True:  # its claim's: automatic resume
                        automatic.add(header.run_id)
                entries = transcript_of_run(events, subjects)
                subjects.update(call_subjects(events))
                settleable_in(entries, header, epoch)
                if running_ops:
                    entries = [
                        replace(entry, settleable=False)
                        if entry.settleable
                        and operation_id(header.invocation_id, entry.tool_call_id or "")
                        in running_ops
                        else entry
                        for entry in entries
                    ]
                runs.append((header.run_id, str(source_run) if source_run else None, entries))
        except LedgerError as error:
            raise HostServiceError(error.code, error.message) from None
        transcript = session_transcript(session_id, runs, after, frozenset(automatic))
        if mark is not None:
            self._opened.read(session_id, mark)
        transcript = with_folder_notes(self._store, self._service.checkpoints, transcript)
        self._notes_sent.remember(transcript)
        # A branch shows its source's history up to the point (a chain of branches: each
        # source's own, read the same way), then its own; every session marks its branches.
        transcript = with_branch_prefix(self._store, transcript, self.open_session)
        return with_branch_markers(self._store, transcript)

    def create_session(self, cwd: Path) -> SessionSummary:
        try:
            record = self._service.create_session(cwd)
        except LedgerError as error:
            raise HostServiceError(error.code, error.message) from None
        return self.session_summary(record.session_id)

    # ---- branching (issue #36) --------------------------------------------------------------

    def branch_options(self, session_id: str) -> BranchOptionsListedPush:
        try:
            return options_push(self._store, self._service.checkpoints, session_id)
        except LedgerError as error:
            raise HostServiceError(error.code, error.message) from None

    def make_branch(
        self, session_id: str, event_id: str, *, to: Path | None, current_files: bool
    ) -> BranchMadePush:
        """Copies the folder (seconds for a big one): a worker thread, never the event loop."""
        try:
            return make_branch(
                self._store,
                self._service.checkpoints,
                session_id,
                event_id,
                to=to,
                current_files=current_files,
                now_ms=self._clock,
                lifecycle=self._lifecycle,
            )
        except LedgerError as error:
            raise HostServiceError(error.code, error.message) from None

    def relocate_session(self, session_id: str, cwd: Path) -> SessionSummary:
        self._refuse_while_busy(session_id, "moving")
        try:
            relocate_session(
                self._store,
                session_id,
                cwd,
                self._lifecycle,
                follow_folder=GitCheckpointStore.from_environment(self._data_dir).follow_folder,
            )
        except SessionChangeRefused as refusal:
            raise HostServiceError(refusal.code, refusal.message) from None
        except LedgerError as error:
            raise HostServiceError(error.code, error.message) from None
        return self.session_summary(session_id)

    def replanned_park(self, session_id: str) -> ResumeParked | None:
        try:
            return self._memory.recheck(session_id)
        except LedgerError:  # (the relocation went through: the banner then offers Safe resume)
            return None

    def rename_session(self, session_id: str, title: str) -> SessionSummary:
        try:
            self._store.rename_session(session_id, title)
        except LedgerError as error:
            raise HostServiceError(error.code, error.message) from None
        return self.session_summary(session_id)

    def remove_session(self, session_id: str) -> None:
        self._refuse_while_busy(session_id, "removing")
        try:
            remove_session(self._store, session_id, self._lifecycle)
            self._memory.clear(session_id)
            self._forget(session_id)  # this host told the window itself
        except SessionChangeRefused as refusal:
            raise HostServiceError(refusal.code, refusal.message) from None
        except LedgerError as error:
            raise HostServiceError(error.code, error.message) from None

    def export_session(self, session_id: str, path: Path) -> int:
        if not path.is_absolute() or path.exists() or path.is_symlink():
            raise HostServiceError(TransferCode.EXPORT_TARGET_EXISTS, f"{path} already exists")
        if not path.parent.is_dir():
            raise HostServiceError(
                TransferCode.EXPORT_TARGET_INVALID, f"{path.parent} is not a folder"
            )
        try:
            with path.open("xb") as out:
                return self._store.export_session(session_id, out)
        except FileExistsError:
            raise HostServiceError(
                TransferCode.EXPORT_TARGET_EXISTS, f"{path} already exists"
            ) from None
        except OSError as error:
            path.unlink(missing_ok=True)
            raise HostServiceError(
                TransferCode.EXPORT_WRITE_FAILED, error.strerror or "not written"
            ) from None
        except LedgerError as error:
            path.unlink(missing_ok=True)
            raise HostServiceError(error.code, error.message) from None

    def _refuse_while_busy(self, session_id: str, doing: str) -> None:
        with self._lock:
            resuming = session_id in self._continuations
        if resuming or self._service.is_busy(session_id):
            raise HostServiceError(
                HostCode.SESSION_BUSY, f"the session is running; stop it before {doing} it"
            )

    # ---- turns ---------------------------------------------------------------------------

    def send_turn(self, session_id: str, text: str, sink: TurnSink) -> None:
        def ask(question: PermissionQuestion) -> None:
            sink.permission_requested(question.request_id, question.tool_name, question.summary)

        with self._lock:
            resuming = session_id in self._continuations
        if resuming:
            raise HostServiceError(HostCode.SESSION_BUSY, "Safe resume is continuing this session")
        try:
            self._service.send_turn(
                session_id, text, LiveTurnView(sink), PermissionPolicy(), on_question=ask
            )
        except LedgerError as error:
            raise HostServiceError(error.code, error.message) from None

    def terminal_session(self, turn: TerminalTurn) -> TerminalSession:
        session = terminal_session(self._service, turn, self._provider().label)
        off = getattr(self._service.checkpoints, "turned_off", None)
        return replace(session, checkpoints_off=off if isinstance(off, bool) else None)

    def terminal_turn(
        self, session_id: str, turn: TerminalTurn, sink: TurnSink, write: Callable[[str], None]
    ) -> TerminalTurnEnd:
        with self._lock:
            resuming = session_id in self._continuations
        if resuming:
            raise HostServiceError(HostCode.SESSION_BUSY, "Safe resume is continuing this session")
        return terminal_turn(self._service, session_id, turn, sink, write)

    def cancel_turn(self, session_id: str, reason: str | None = None) -> None:
        if self._sessions is not None:
            self._sessions.cancel(session_id, reason)
        with self._lock:
            continuation = self._continuations.get(session_id)
        if continuation is not None:
            continuation.cancel(reason)

    def answer_permission(
        self, session_id: str, request_id: str, decision: PermissionDecision
    ) -> None:
        if not self._service.answer_permission(request_id, decision.value):
            raise HostServiceError(
                HostCode.PERMISSION_NOT_PENDING, "that question is no longer open"
            )

    # ---- Safe resume ---------------------------------------------------------------------

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
        choice = WorkspaceDecision(decision) if decision and not automatic else None
        outcome = self._resume_latest(
            session_id,
            sink,
            automatic=automatic,
            decision=choice,
            restore_to=restore_to,
            terminal=terminal,
            files_shown=files_shown if choice is WorkspaceDecision.REBASELINE else None,
        )
        if not (
            isinstance(outcome, ResumeParked) and DECISION_NOT_OFFERED in outcome.rejection_reasons
        ):
            verdict = _as_verdict(outcome)
            if verdict is None:
                self._memory.clear(session_id)
            else:
                self._memory.remember(session_id, verdict)
        return outcome

    # C901: one flow for the banner and a terminal's `maka resume` (which is told each step in
    # its words); splitting it would split the continuation's claim from its plan and execution.
    def _resume_latest(  # noqa: C901
        self,
        session_id: str,
        sink: TurnSink,
        *,
        automatic: bool,
        decision: WorkspaceDecision | None = None,
        restore_to: str | None = None,
        terminal: TerminalResume | None = None,
        files_shown: tuple[ChangedFilesShown, ...] | None = None,
    ) -> ResumeOutcome:
        sessions = self._service
        if sessions.is_busy(session_id):
            return ResumeParked(("session_busy",))
        try:
            cwd = sessions.get_session(session_id).cwd
        except LedgerError as error:
            return ResumeFailed(error.code, error.message)
        observer = _ResumeObserver(sink)

        def tell(question: PermissionQuestion) -> None:
            sink.permission_requested(question.request_id, question.tool_name, question.summary)

        def ask(question: PermissionQuestion, cancel: CancelToken) -> Decision | None:
            # Told once the question is open: an answer at once (a host denying a question
            # nobody can be asked) finds it.
            return sessions.permissions.wait(question, cancel, tell)

        # A terminal's `maka resume` drives the same continuation with its own mode and lines.
        said = TerminalContinuation(terminal, sessions, sink) if terminal is not None else None
        policy, asker, watcher, settings = (
            said.wiring(observer) if said is not None else (PermissionPolicy(), ask, observer, None)
        )
        resume, turn = continuation_resume_service(
            self._store,
            catalog=sessions.catalog,
            provider_factory=self._provider,
            shells=self._shells,
            processes=self._store,
            process_recorder=sessions.process_recorder,
            policy=policy,
            asker=asker,
            observer=watcher,
            cwd=cwd,
            enabled=self._resume_on(terminal),
            clock=self._clock,
            lifecycle=self._lifecycle,
            settings=settings or self._run_settings(),
            checkpoints=sessions.checkpoints,
        )
        with self._lock:
            if session_id in self._continuations:
                return ResumeParked(("session_busy",))
            # registered before planning, so no turn can start in between
            self._continuations[session_id] = turn.cancel
        plan_made = None
        try:
            plan = plan_made = resume.plan_latest(
                session_id, automatic=automatic, decision=decision, restore_to=restore_to
            )
            if not plan.continues:
                if said is not None:
                    said.parked(self._store, plan, restore_unavailable(plan, decision))
                return parked_outcome(plan, parked_write_diagnostics(self._store, plan, cwd))
            refused = said.not_carried(plan, decision, cwd) if said is not None else None
            if refused is not None:
                return refused
            if files_shown is not None:
                moved_on = self._drift_changed(resume, plan, files_shown, cwd)
                if moved_on is not None:
                    return moved_on
            observer.continuation_of = plan.source_run_id
            if plan.source_run_id is not None:
                observer.automatic = automatic
                observer.continued_after = continued_after(
                    self._store.read_run_header(plan.source_run_id)
                )
            if plan.continuation is not None:
                observer.know_earlier_calls(plan.continuation.restore_subjects)
            if said is not None:
                said.continuing(plan)
            result = resume.execute(plan, automatic=automatic)
            if said is not None:
                said.ended(self._store, plan, result.target_run_id, result.status.value, cwd)
        except ResumeRefused as refusal:
            code = refusal.code
            if said is not None and plan_made is not None:
                said.refused(plan_made, str(code), refusal.message, cwd)
            refused = ResumeParked((code,), (wire_diagnostic(code, refusal.message),))
            if decision is None or code not in TARGET_REFUSALS:
                return refused
            # The folder picked for the copy was refused: the park stands as it was, with its
            # ways forward, so the user can pick another folder (or the other way).
            try:
                again = resume.plan_latest(session_id, automatic=automatic)
            except LedgerError:
                return refused
            if again.continues or not again.workspace_options:
                return refused
            parked = parked_outcome(again)
            return ResumeParked(
                (code, *parked.rejection_reasons),
                (*refused.diagnostics, *parked.diagnostics),
                parked.workspace_options,
            )
        except LedgerError as error:
            return ResumeFailed(error.code, error.message)
        finally:
            with self._lock:
                self._continuations.pop(session_id, None)
        return ResumeStarted(result.target_run_id, result.target_turn_id, result.status.value)

    def _drift_changed(
        self,
        resume: ResumeService,
        plan: ContinuationPlan,
        files_shown: tuple[ChangedFilesShown, ...],
        cwd: str,
    ) -> ResumeParked | None:
        """A rebaseline decided on a list of changed files that is not the plan's list now (the
        folder changed after the banner showed it): nothing is captured, and the park as it
        stands now comes back with ``workspace_drift_changed`` first, so the banner shows the
        new list and asks again. None when the lists agree, or when the plan takes no files
        (none differ now: it continues as any Safe resume does)."""
        details = plan.continuation
        if details is None or details.workspace_decision is not WorkspaceDecision.REBASELINE:
            return None
        now = changed_files_shown(parked_outcome(plan).diagnostics)
        words = drift_changed_words(files_shown, now)
        if words is None:
            return None
        code = ShownChangedCode.WORKSPACE_DRIFT_CHANGED.value
        changed = wire_diagnostic(code, words)
        try:
            again = resume.plan_latest(plan.session_id)
        except LedgerError as error:
            return ResumeParked((code,), (changed, wire_diagnostic(str(error.code), error.message)))
        if again.continues:
            return ResumeParked((code,), (changed,))
        parked = parked_outcome(again, parked_write_diagnostics(self._store, again, cwd))
        return ResumeParked(
            (code, *parked.rejection_reasons)[:64],
            (changed, *parked.diagnostics),
            parked.workspace_options,
        )

    # ---- settling an unknown outcome ------------------------------------------------------

    def settle_call(
        self,
        session_id: str,
        tool_call_id: str,
        ran: bool,
        note: str | None,
        folder_shown: SettleFolderNote | None = None,
    ) -> SettleResult:
        sessions = self._service
        try:
            sessions.get_session(session_id)
        except LedgerError as error:
            raise HostServiceError(error.code, error.message) from None
        if sessions.is_busy(session_id):
            raise HostServiceError(HostCode.SESSION_BUSY, "this session is running; wait for it")
        if folder_shown is not None:
            self._check_folder_shown(session_id, tool_call_id, folder_shown)
        planner = self._planner()
        result = settle_call(
            self._store,
            self._shells,
            planner.plan_latest,
            parked_outcome,
            session_id,
            tool_call_id,
            ran,
            note,
            baseline_capture(self._store, sessions.checkpoints, self._clock),
        )
        self._notes_sent.forget(session_id, tool_call_id)
        # The settled call changed the boundary: what Safe resume would do now is the verdict.
        if result.parked is None:
            self._memory.clear(session_id)
        else:
            self._memory.remember(session_id, result.parked)
        return result

    def _check_folder_shown(
        self, session_id: str, tool_call_id: str, shown: SettleFolderNote
    ) -> None:
        """Refuse an answer given on a card whose note on the folder no longer holds (the
        folder was edited, or located, after the card was sent): nothing is recorded, and the
        refusal carries the card with the note as it is now, for every window to show."""
        carrier = self._service.checkpoints
        now = folder_note_now(self._store, carrier, session_id, tool_call_id)
        if now is None or now == shown:
            return
        card: TranscriptItem | None = None
        sent = self._notes_sent.sent(session_id, tool_call_id)
        if sent is None:
            try:
                operation = find_operation(self._store, session_id, tool_call_id)
                found = card_of(
                    self._store, operation.run_id, tool_call_id, self._store.read_owner_epoch()
                )
            except LedgerError:
                found = None
            sent = found if isinstance(found, ToolCardItem) else None
        if sent is not None:
            card = self._notes_sent.with_note(session_id, tool_call_id, now, sent)
        parked: ResumeParked | None = None
        try:
            plan = self._planner().plan_latest(session_id)
        except LedgerError:
            plan = None
        if plan is not None and not plan.continues:
            parked = parked_outcome(plan)
            self._memory.remember(session_id, parked)
        raise ShownCardStale(
            ShownChangedCode.SETTLE_FOLDER_CHANGED, folder_changed_words(shown, now), card, parked
        )

    def refresh_folder_notes(self, session_id: str) -> tuple[TranscriptItem, ...]:
        return self._notes_sent.refreshed(self._store, self._service.checkpoints, session_id)

    def _resume_on(self, terminal: TerminalResume | None) -> bool:
        """Safe resume for one resume: a terminal command's own flag when it set one (its
        ``MAKA_RUNTIME_SAFE_BOUNDARY_RESUME``, which decides for the command alone too), else
        the host's (``resume_flags``)."""
        if terminal is not None and terminal.safe_resume is not None:
            return terminal.safe_resume
        return self.resume_flags()[0]

    def _planner(self, safe_resume: bool | None = None) -> ResumeService:
        sessions = self._service
        return resume_service(
            self._store,
            sessions.catalog.names,
            self._shells,
            enabled=self.resume_flags()[0] if safe_resume is None else safe_resume,
            clock=self._clock,
            lifecycle=None,
            checkpoints=sessions.checkpoints,
            processes=self._store,
        )

    # ---- commands still running from an earlier start (docs/design/recovery.md section 9) ----

    def _survivors(self, session_id: str) -> list[ToolProcessRecord]:
        epoch = self._store.read_owner_epoch()
        return live_tool_processes(self._store, session_id=session_id, before_epoch=epoch)

    def check_survivors(self, session_id: str, *, stop: bool) -> SurvivorsChecked:
        stopped = 0
        if stop:
            for record in self._survivors(session_id):
                if stop_tool_process(record):
                    self._store.delete_tool_process(record.operation_id, record.pid)
                    stopped += 1
            shells = self._shells.live_shells(session_id)
            self._shells.stop(shells)
            stopped += len(shells)
        still = len(self._survivors(session_id)) + len(self._shells.live_shells(session_id))
        if still or self._service.is_busy(session_id):
            return SurvivorsChecked(stopped, still)
        plan = self._planner().plan_latest(session_id)
        if plan.continues:
            self._memory.clear(session_id)
            return SurvivorsChecked(stopped, 0, checked=True)
        parked = parked_outcome(plan)
        self._memory.remember(session_id, parked)
        return SurvivorsChecked(stopped, 0, checked=True, parked=parked)

    # ---- shutdown ------------------------------------------------------------------------

    def start_checkpoint_retention(self) -> None:
        """Workspace checkpoint retention on a thread of its own, over a read-only store (it
        never holds the writer); its outcome goes to the log."""
        if self._sessions is None or self._sessions.checkpoints is None:
            return
        thread = threading.Thread(
            target=_retain_checkpoints,
            args=(self._data_dir,),
            name="maka-checkpoint-retention",
            daemon=True,
        )
        thread.start()

    def stop_background_work(self) -> None:
        self._shells.stop_all()

    def close(self) -> None:
        self._feed_stop.set()
        self._store.close()

    # ---- settings ------------------------------------------------------------------------

    def get_settings(self) -> SettingsView:
        return self._with_flags(self._settings.view())

    def update_settings(self, change: SettingsChange) -> SettingsView:
        return self._with_flags(self._settings.update(change))

    def test_database(self, database_url: str | None) -> DatabaseTest:
        return try_database(self._settings.database_url_to_try(database_url))

    def resume_flags(self) -> tuple[bool, bool]:  # never None: the settings are here
        """Safe resume and automatic resume now. ``MAKA_RUNTIME_SAFE_BOUNDARY_RESUME``, when
        set, decides both (as it always did); else the settings; else what the host was
        started with."""
        from_env = os.environ.get(SAFE_RESUME_ENV)
        if from_env is not None:
            return from_env == "1", from_env == "1"
        stored = self._settings.stored_safe_resume()
        safe = self._safe_resume_default if stored is None else stored
        return safe, safe and self._settings.auto_resume()

    def _with_flags(self, view: SettingsView) -> SettingsView:
        safe, auto = self.resume_flags()
        # The variable decides both: the boxes show what is in force (greyed), not the stored
        # choices it overrides.
        return replace(
            view,
            safe_resume=safe if SAFE_RESUME_ENV in os.environ else view.safe_resume,
            auto_resume=auto if SAFE_RESUME_ENV in os.environ else view.auto_resume,
            resume_from_environment=SAFE_RESUME_ENV in os.environ,
            safe_resume_enabled=safe,
            provider_from_environment=provider_environment(os.environ),
            database_from_environment=masked_database_url(
                os.environ.get(DATABASE_URL_VARIABLE, "").strip()
            ),
            database_in_use=self._database_in_use,
        )


class _ResumeObserver(LiveTurnView):
    """The live view of a continuation; its first committed event (the ``continuationStart``
    fact, already admitted) is the moment the banner learns the continuation started."""

    def __init__(self, sink: TurnSink) -> None:
        super().__init__(sink)
        self._started = False

    def committed(self, event: RuntimeEvent) -> None:
        if not self._started:
            self._started = True
            self._sink.resume_started(event["runId"], event["turnId"])
        super().committed(event)


def _retain_checkpoints(data_dir: Path) -> None:
    from storage.checkpoints.checkpoint_retention import run_retention

    try:
        with open_store(data_dir, read_only=True) as reader:
            result = run_retention(reader, GitCheckpointStore.from_environment(data_dir))
    except Exception as error:  # retention is housekeeping: never disturb the host
        _log.warning("workspace checkpoint retention failed: %s", error)
        return
    _log.info(
        "workspace checkpoints: %d ref(s) deleted, %d kept, %d repositor(ies) pruned%s",
        len(result.deleted),
        result.kept,
        len(result.pruned),
        f"; errors: {'; '.join(result.errors)}" if result.errors else "",
    )


__all__ = ["DesktopServices", "open_host_services"]
