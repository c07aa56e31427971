"""Authenticated renderer requests -> host services on worker threads -> pushes.

The event loop never calls a service that may block: queries (list, open, create, settings) run on
the query pool, turns and resumes on their session's turn thread; their answers come back through
the relay. Only ``cancel_turn`` and ``answer_permission`` are called on the event loop, because
their job is to unblock a running turn quickly.

Answers to a request (``sessions.listed``, ``session.opened``, ``settings.current``, ``error``)
go to the asking connection with its ``correlationId``; state changes (``session.updated``,
transcript items, run status, ``resume.*``) go to every renderer.

Safe resume: the request carries a session id and nothing else; whatever the plan needs (run,
high-water, workspace identity, tools, background work) the services read from committed facts
and observe themselves. A resume while the session already runs is a calm park
(``session_busy``), not an error.

Standing state (``standing_state``): a park or failure (of auto-resume at startup, or of a click),
an open permission request and a running turn are broadcast when they happen, and they also
stand until the session moves on (a continuation starts, a new turn leaves the session no longer
interrupted, the request is answered, the run ends). A renderer that connects later (one that
started after auto-resume finished, or one restarted after a crash) is sent what stands right
after its handshake, and a ``sessions.open`` is followed by that session's, as the same pushes
without a ``correlationId``: its banner opens in the state a click would show, and a turn waiting
for permission shows Allow/Deny instead of hanging unseen. A ``session_busy`` park and a refusal
because the host is closing describe a moment, not the session, and never stand; nothing stands
for a session that does not exist.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import assert_never, cast, get_args

from PySide6.QtCore import QTimer

from app.bridge_contract import (
    AttestationChoice,
    BranchCreateRequest,
    BranchMadePush,
    BranchOptionsListedPush,
    BranchOptionsRequest,
    BranchRefusedPush,
    ChangedFilesShown,
    DatabaseTestedPush,
    ErrorPush,
    HelloRequest,
    Message,
    PermissionClosedPush,
    PermissionDecision,
    PermissionRequestedPush,
    PermissionsAnswerRequest,
    ProcessesStoppedPush,
    ProcessesStopRequest,
    Request,
    ResumeEndedPush,
    ResumeFailedPush,
    ResumeLatestRequest,
    ResumeParkedPush,
    ResumeStartedPush,
    RunStatusPush,
    RunStatusValue,
    SessionDriverPush,
    SessionExportedPush,
    SessionOpenedPush,
    SessionPlannedPush,
    SessionRemovedPush,
    SessionsCreateRequest,
    SessionsExportRequest,
    SessionsListedPush,
    SessionsListRequest,
    SessionsOpenRequest,
    SessionsOverviewedPush,
    SessionsOverviewRequest,
    SessionsPlanRequest,
    SessionsRelocateRequest,
    SessionsRemoveRequest,
    SessionsRenameRequest,
    SessionSummary,
    SessionsWatchRequest,
    SessionUpdatedPush,
    SettingsCurrentPush,
    SettingsGetRequest,
    SettingsTestDatabaseRequest,
    SettingsUpdateRequest,
    TerminalCommandRequest,
    TerminalTextPush,
    TimelineEventRequest,
    TimelineEventShownPush,
    TimelineLocatedPush,
    TimelineLocateRequest,
    TimelineOpenedPush,
    TimelineOpenRequest,
    TimelinePagePush,
    TimelineRowsRequest,
    ToolSettledPush,
    ToolsSettleRequest,
    TranscriptItemPush,
    TurnEndedPush,
    TurnOutputPush,
    TurnsCancelRequest,
    TurnsResumeRequest,
    TurnsRunRequest,
    TurnsSendRequest,
    TurnStartedPush,
    WindowActivateRequest,
)
from app.host.host_services import (
    DatabaseTest,
    HostServiceError,
    HostServices,
    PlanReport,
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
)
from app.host.resume_decisions import DECISION_NOT_OFFERED
from main_process.host_lifecycle import HostLifecycle
from main_process.ipc_server import IpcServer
from main_process.log_limits import RateLimitedLog, escape
from main_process.push_sink import CoalescingPushSink
from main_process.session_folder import check_session_folder
from main_process.standing_state import StandingState
from main_process.timeline_pages import TimelinePages
from main_process.turn_workers import JobResult, TurnWorkers
from runtime.base.cancel_token import HOST_STOPPED_AT_QUESTION
from runtime.ledger.coded_error import coded_failure
from runtime.ledger.codes import HostCode, ParkReason
from runtime.ledger.command_words import maka_command, wording_for

SURVIVOR_CHECK_MS = 1000
BACKGROUND_PENDING = HostCode.BACKGROUND_OPERATION_PENDING

_log = logging.getLogger("maka.main.router")
_limited = RateLimitedLog(_log)

HOST_NOT_READY = HostCode.HOST_NOT_READY
HOST_CLOSING = HostCode.HOST_DRAINING
SESSION_BUSY = HostCode.SESSION_BUSY
FOLDER_MISSING = ParkReason.WORKSPACE_FOLDER_MISSING.value
INTERNAL_FAILURE = HostCode.INTERNAL_FAILURE

ResumeDone = Callable[[ResumeOutcome], None]

_REQUEST_TYPES: tuple[type, ...] = get_args(Request)

_VIEWED = (TranscriptItemPush, RunStatusPush, PermissionRequestedPush, ResumeStartedPush)
"""What a terminal viewing a session (``sessions.watch``) hears of a turn another client drives,
as the windows hear it."""
_TEXT_PIECE = 100_000
"""A long transcript goes to the terminal in pieces of this many characters."""


def _error_code(error: BaseException | None) -> tuple[str, str]:
    """A coded error's code and message (:func:`coded_failure`, as the CLI reports it), or
    ``internal_failure`` for anything unexpected (the details go to the log, not to the
    renderer)."""
    failure = coded_failure(error)
    if failure is not None:
        return failure.code.value, failure.message[:4000]
    if error is not None:
        # The worker already logged the traceback (turn_workers); one rate-limited line here.
        _limited.log(
            logging.ERROR, "unexpected", "a request failed unexpectedly: %s", type(error).__name__
        )
    return INTERNAL_FAILURE, "the main process could not complete the request; see its log"


class RequestRouter:
    def __init__(
        self,
        server: IpcServer,
        services: HostServices,
        workers: TurnWorkers,
        lifecycle: HostLifecycle,
        window_coming: Callable[[], bool] = lambda: False,
    ) -> None:
        """``window_coming``: a window was started and may not have connected yet (the
        desktop's own, or one ``maka gui`` asked ``maka host`` for)."""
        self._server = server
        self._window_coming = window_coming
        self._services = services
        self._workers = workers
        self._lifecycle = lifecycle
        self._standing = StandingState()
        self._auto_started: dict[str, ResumeStartedPush] = {}
        # Sessions parked on a command still running from an earlier start: checked every
        # second, so the banner updates when the command ends by itself.
        self._watched: set[str] = set()
        self._watch_timer = QTimer()
        self._watch_timer.setInterval(SURVIVOR_CHECK_MS)
        self._watch_timer.timeout.connect(self._check_watched)
        self._timelines = TimelinePages(services.session_timeline)
        # Who drives each session's running work (one driver per session, docs/design/hosts.md
        # section 1): said by a ``session_busy`` refusal; a terminal may cancel only its own.
        self._drivers: dict[str, tuple[int | None, str]] = {}
        self._terminal_drivers: set[int] = set()  # terminals that started a turn or resume
        self._gone_drivers: set[int] = set()  # of those, the ones that went away
        # Terminals viewing a session (``maka tui``): they hear its turns driven by others.
        self._viewers: dict[int, str] = {}
        # Sessions whose folder an opening found gone (and every window was told so): told
        # again when an opening finds it back.
        self._told_missing: set[str] = set()
        server.peer_closed.connect(self._on_peer_closed)

    # --------------------------------------------------------------------------- dispatch

    def handle(self, peer_id: int, message: object) -> None:
        """Slot for ``IpcServer.request_received``, which forwards only requests."""
        if not isinstance(message, _REQUEST_TYPES):  # pragma: no cover - never forwarded
            _log.warning("ignoring %s", type(message).__name__)
            return
        wording = self._server.peer_wording(peer_id)
        if wording is None:
            self._route(peer_id, cast(Request, message))
            return
        # What is said to a terminal names the data folder it was given, or none, as the
        # command alone would (the work started here runs in a copy of this context).
        with wording_for(wording[0]):
            self._route(peer_id, cast(Request, message))

    # C901: one flat match case per request kind of the contract; splitting it would hide the
    # exhaustiveness check (assert_never) that catches an unrouted kind.
    def _route(self, peer_id: int, message: Request) -> None:  # noqa: C901
        """One case per request kind: a kind added to the contract and not routed here fails
        the type check (``assert_never``)."""
        match message:
            case TurnsCancelRequest():
                self._cancel(peer_id, message)
            case PermissionsAnswerRequest():
                self._answer_permission(peer_id, message)
            case SessionsWatchRequest():
                self._view(peer_id, message)
            case _ if not self._lifecycle.admits_work:
                self._refuse_while_not_ready(peer_id, message)
            case SessionsListRequest() | SessionsOverviewRequest() | SessionsPlanRequest():
                self._list(peer_id, message)
            case SessionsOpenRequest():
                self._open(peer_id, message)
            case SessionsCreateRequest():
                self._create(peer_id, message)
            case (
                SessionsRelocateRequest()
                | SessionsRenameRequest()
                | SessionsRemoveRequest()
                | SessionsExportRequest()
            ):
                self._change_session(peer_id, message)
            case TurnsSendRequest():
                self._send_turn(peer_id, message)
            case TurnsRunRequest():
                self._run_for_terminal(peer_id, message)
            case TurnsResumeRequest():
                self._resume_for_terminal(peer_id, message)
            case ResumeLatestRequest():
                self.start_resume(
                    message.session_id,
                    automatic=False,
                    correlation_id=message.correlation_id,
                    decision=message.workspace_decision,
                    restore_to=message.restore_to,
                    files_shown=message.files_shown,
                )
            case ToolsSettleRequest():
                self._settle(peer_id, message)
            case ProcessesStopRequest():
                self._check_survivors(
                    message.session_id, stop=True, correlation_id=message.correlation_id
                )
            case TimelineOpenRequest():
                self._query(
                    peer_id,
                    message.correlation_id,
                    lambda: self._timelines.open(message.session_id),
                    _as_push,
                )
            case TimelineRowsRequest():
                self._query(
                    peer_id,
                    message.correlation_id,
                    lambda: self._timelines.page(
                        message.session_id,
                        message.run_id,
                        message.start,
                        message.count,
                        message.filters,
                    ),
                    _as_push,
                )
            case TimelineLocateRequest():
                self._query(
                    peer_id,
                    message.correlation_id,
                    lambda: self._timelines.locate(
                        message.session_id, message.run_id, message.seq, message.filters
                    ),
                    _as_push,
                )
            case TimelineEventRequest():
                self._query(
                    peer_id,
                    message.correlation_id,
                    lambda: self._timelines.event(
                        message.session_id, message.run_id, message.event_id
                    ),
                    _as_push,
                )
            case BranchOptionsRequest() | BranchCreateRequest():
                self._branch(peer_id, message)
            case TerminalCommandRequest():
                self._terminal_command(peer_id, message)
            case SettingsGetRequest():
                self._query(peer_id, message.correlation_id, self._services.get_settings, _settings)
            case SettingsUpdateRequest():
                self._update_settings(peer_id, message)
            case SettingsTestDatabaseRequest():
                typed = message.database_url
                self._query(
                    peer_id,
                    message.correlation_id,
                    lambda: self._services.test_database(typed),
                    _database_tested,
                )
            case HelloRequest() | WindowActivateRequest():
                # The server answers these itself and never forwards them.
                _log.warning("ignoring %s", type(message).__name__)
            case _:
                assert_never(message)

    def _list(
        self,
        peer_id: int,
        message: SessionsListRequest | SessionsOverviewRequest | SessionsPlanRequest,
    ) -> None:
        """The window's list, a terminal's ``maka sessions`` rows or its ``maka plan``."""
        if isinstance(message, SessionsPlanRequest):
            session_id = message.session_id
            safe = message.safe_resume
            job = lambda: self._services.plan_report(session_id, safe)  # noqa: E731
            self._query(peer_id, message.correlation_id, job, _planned)
        elif isinstance(message, SessionsOverviewRequest):
            services = self._services

            def overview() -> Message:
                flags = services.resume_flags()
                return SessionsOverviewedPush(
                    rows=tuple(services.session_rows()),
                    safe_resume=flags[0] if flags is not None else None,
                )

            self._query(peer_id, message.correlation_id, overview, _as_push)
        else:
            self._query(peer_id, message.correlation_id, self._services.list_sessions, _listed)

    def _refuse_while_not_ready(self, peer_id: int, message: Request) -> None:
        code = HOST_NOT_READY if self._lifecycle.state == "opening" else HOST_CLOSING
        if isinstance(message, ResumeLatestRequest):
            self._broadcast(
                ResumeFailedPush(
                    session_id=message.session_id,
                    code=code,
                    message="the main process is not accepting work right now",
                    correlation_id=message.correlation_id,
                )
            )
        else:
            self._reply_error(peer_id, getattr(message, "correlation_id", None), code, "")

    def _update_settings(self, peer_id: int, message: SettingsUpdateRequest) -> None:
        change = SettingsChange(
            provider=message.provider,
            openai_base_url=message.openai_base_url,
            openai_model=message.openai_model,
            openai_api_key=message.openai_api_key,
            max_steps=message.max_steps,
            safe_resume=message.safe_resume,
            auto_resume=message.auto_resume,
            provider_tuning=message.provider_tuning,
            database=message.database,
            database_url=message.database_url,
        )
        self._query(
            peer_id,
            message.correlation_id,
            lambda: self._services.update_settings(change),
            _settings,
        )

    # --------------------------------------------------------------------------- requests

    def _query(
        self,
        peer_id: int,
        correlation_id: str | None,
        job: Callable[[], object],
        to_push: Callable[[object], Message],
        after: Callable[[], None] | None = None,
    ) -> None:
        def done(result: JobResult) -> None:
            if result.error is not None:
                self._reply_error(peer_id, correlation_id, *_error_code(result.error))
                return
            try:
                push = to_push(result.value).model_copy(update={"correlation_id": correlation_id})
            except Exception as error:
                _log.exception("answer does not fit the contract")
                self._reply_error(peer_id, correlation_id, *_error_code(error))
                return
            self._server.send(peer_id, push)
            if after is not None:
                after()

        if not self._workers.run_query(f"query-{peer_id}", job, done):
            self._reply_error(peer_id, correlation_id, HOST_CLOSING, "")

    def _open(self, peer_id: int, message: SessionsOpenRequest) -> None:
        """A window opens a session: its transcript, then what stands for it (standing_state).

        Its folder is looked at again as it opens (moved or deleted while Maka ran, the list
        and the banner would still show it as it was at start): a folder gone since says so on
        the session's row in every window (``session.updated``), and a session the banner
        offers Safe resume for is planned again as at start, so the banner shows the park Safe
        resume makes now (``workspace_folder_missing``: Locate folder…, Remove session…), as
        ``maka plan`` says it, instead of offering a resume that can only park. A folder found
        back after an opening said it was gone is told the same way."""
        session_id = message.session_id
        services = self._services
        outcome = self._standing.outcome(session_id)
        known_missing = (
            isinstance(outcome, ResumeParkedPush) and FOLDER_MISSING in outcome.rejection_reasons
        )
        checked: list[SessionSummary] = []
        replanned: list[ResumeParked] = []

        def job() -> object:
            transcript = services.open_session(session_id)
            try:
                summary = services.session_summary(session_id)
            except HostServiceError:
                return transcript  # (removed meanwhile: the list says so)
            checked.append(summary)
            if summary.folder_missing and summary.interrupted and not known_missing:
                park = services.replanned_park(session_id)
                replanned.extend([park] if park is not None else [])
            return transcript

        def after() -> None:
            for summary in checked:
                if summary.folder_missing != (session_id in self._told_missing):
                    self._broadcast(SessionUpdatedPush(session=summary))
                    if summary.folder_missing:
                        self._told_missing.add(session_id)
                    else:
                        self._told_missing.discard(session_id)
            told: Message | None = None
            for park in replanned:  # told to every window, the asking one included
                self._stand(session_id, park)
                told = self._standing.outcome(session_id)
            asker_told = told is not None and peer_id not in self._server.terminal_ids()
            for push in self._standing.pushes(session_id):
                if not (asker_told and push is told):
                    self._server.send(peer_id, push)

        self._query(peer_id, message.correlation_id, job, _opened, after=after)

    def _create(self, peer_id: int, message: SessionsCreateRequest) -> None:
        def done(result: JobResult) -> None:
            if result.error is not None:
                self._reply_error(peer_id, message.correlation_id, *_error_code(result.error))
                return
            summary = result.value
            assert isinstance(summary, SessionSummary)
            self._broadcast(
                SessionUpdatedPush(session=summary, correlation_id=message.correlation_id)
            )

        try:
            cwd = Path(check_session_folder(message.cwd))
        except HostServiceError as error:
            self._reply_error(peer_id, message.correlation_id, error.code, error.message)
            return
        if not self._workers.run_query(
            f"create-{peer_id}", lambda: self._services.create_session(cwd), done
        ):
            self._reply_error(peer_id, message.correlation_id, HOST_CLOSING, "")

    def _change_session(
        self,
        peer_id: int,
        message: SessionsRelocateRequest
        | SessionsRenameRequest
        | SessionsRemoveRequest
        | SessionsExportRequest,
    ) -> None:
        """Relocate, rename, remove or export a session; every window hears the change."""
        session_id = message.session_id
        correlation_id = message.correlation_id
        if not isinstance(message, SessionsExportRequest) and self._workers.busy(session_id):
            # Who drives the turn, said as to a second run or resume ("stop it first" was no
            # advice for a terminal, which cannot stop another client's turn).
            self._refuse_busy(peer_id, correlation_id, session_id)
            return
        services = self._services
        from_terminal = peer_id in self._server.terminal_ids()
        replanned: list[ResumeParked] = []

        def job() -> object:
            if isinstance(message, SessionsRelocateRequest):
                moved = services.relocate_session(session_id, Path(message.cwd))
                # Its folder found again, the session may still park for another reason.
                park = services.replanned_park(session_id)
                replanned.extend([park] if park is not None else [])
                return moved
            if isinstance(message, SessionsRenameRequest):
                return services.rename_session(session_id, message.title)
            if isinstance(message, SessionsExportRequest):
                return services.export_session(session_id, Path(message.path))
            services.remove_session(session_id)
            return None

        def done(result: JobResult) -> None:
            if result.error is not None:
                self._reply_error(peer_id, correlation_id, *_error_code(result.error))
                return
            if isinstance(message, SessionsExportRequest):
                assert isinstance(result.value, int)
                exported = SessionExportedPush(
                    session_id=session_id,
                    path=message.path,
                    events=result.value,
                    correlation_id=correlation_id,
                )
                self._server.send(peer_id, exported)
                return
            # The session's standing park no longer holds: its folder or its existence changed.
            self._standing.clear_outcome(session_id)
            if isinstance(result.value, SessionSummary):
                push: Message = SessionUpdatedPush(
                    session=result.value, correlation_id=correlation_id
                )
                if not result.value.folder_missing:
                    self._told_missing.discard(session_id)
            else:
                self._told_missing.discard(session_id)
                self._standing.forget(session_id)  # standing state only for existing sessions
                self._auto_started.pop(session_id, None)
                # A terminal's `maka sessions remove` is another Maka process: the windows say
                # so (naming the session), not that they removed it themselves.
                push = SessionRemovedPush(
                    session_id=session_id, correlation_id=correlation_id, elsewhere=from_terminal
                )
            self._announce_change(session_id, push, peer_id if from_terminal else None)
            if isinstance(message, SessionsRelocateRequest):
                # The folder is found again: the cards that ask about a call read it anew.
                self._refresh_folder_notes(session_id)
                for park in replanned:  # (after the answer, which forgets the old park)
                    self._stand(session_id, park)

        if not self._workers.run_query(f"session-{session_id}", job, done):
            self._reply_error(peer_id, correlation_id, HOST_CLOSING, "")

    def _announce_change(self, session_id: str, push: Message, terminal: int | None) -> None:
        """A session changed or removed: every window hears it, the terminal whose command made
        the change (``maka sessions ...`` waits for it), and, for a removal, every ``maka tui``
        viewing the session (now, not at its next message)."""
        self._broadcast(push)
        if terminal is not None:
            self._server.send(terminal, push)
        if isinstance(push, SessionRemovedPush):
            self._to_viewers(session_id, push, terminal)

    def _branch(self, peer_id: int, message: BranchOptionsRequest | BranchCreateRequest) -> None:
        """Branch options (on the query pool), or a branch made (issue #36) on a thread of its
        own: making one copies the folder, which can take seconds. A refusal is answered as
        ``branch.refused`` with its code; a branch made is told to every window as the new
        session's ``session.updated``, then to the asking one as ``branch.made`` (it opens the
        new session)."""
        session_id = message.session_id
        correlation_id = message.correlation_id
        services = self._services
        event_id = message.event_id if isinstance(message, BranchCreateRequest) else None

        def job() -> object:
            if isinstance(message, BranchOptionsRequest):
                return services.branch_options(session_id)
            made = services.make_branch(
                session_id,
                message.event_id,
                to=Path(message.to) if message.to is not None else None,
                current_files=message.current_files,
            )
            return made, services.session_summary(made.new_session_id)

        def refuse(code: str, text: str) -> None:
            self._server.send(
                peer_id,
                BranchRefusedPush(
                    session_id=session_id,
                    event_id=event_id,
                    code=code,
                    message=text,
                    correlation_id=correlation_id,
                ),
            )

        def done(result: JobResult) -> None:
            if result.error is not None:
                refuse(*_error_code(result.error))
                return
            value = result.value
            if isinstance(value, BranchOptionsListedPush):
                self._server.send(
                    peer_id, value.model_copy(update={"correlation_id": correlation_id})
                )
                return
            assert isinstance(value, tuple)
            made, summary = value
            assert isinstance(made, BranchMadePush) and isinstance(summary, SessionSummary)
            self._broadcast(SessionUpdatedPush(session=summary))
            self._server.send(peer_id, made.model_copy(update={"correlation_id": correlation_id}))

        if isinstance(message, BranchOptionsRequest):
            if not self._workers.run_query(f"branch-{session_id}", job, done):
                refuse(HOST_CLOSING, "the main process is closing")
            return
        # Making one copies the folder: its own thread, like a resume's restore, so the query
        # pool keeps answering the window meanwhile (one branch of a session at a time).
        if not self._workers.run_turn(f"branch:{session_id}", job, lambda reason: None, done):
            if self._workers.busy(f"branch:{session_id}"):
                refuse(SESSION_BUSY, "a branch of this session is being made; wait for it")
            else:
                refuse(HOST_CLOSING, "the main process is closing")

    def _send_turn(self, peer_id: int, message: TurnsSendRequest) -> None:
        session_id = message.session_id
        sink = CoalescingPushSink(session_id, self._workers.relay, self._turn_sender(session_id))

        def done(result: JobResult) -> None:
            sink.flush_now()
            self._standing.turn_ended(session_id)
            self._undrive(session_id)
            if result.error is not None:
                self._reply_error(peer_id, message.correlation_id, *_error_code(result.error))
            self.refresh_session(session_id)

        started = self._workers.run_turn(
            session_id,
            lambda: self._services.send_turn(session_id, message.text, sink),
            lambda reason: self._services.cancel_turn(session_id, reason),
            done,
        )
        if started:
            self._drive(session_id, peer_id)
        else:
            self._refuse_busy(peer_id, message.correlation_id, session_id)

    # ------------------------------------------------------------------ a terminal's turn

    def _run_for_terminal(self, peer_id: int, message: TurnsRunRequest) -> None:
        """``maka run`` beside the desktop (or ``maka host``): its session first (found, or
        created in its folder, on the query pool), then its turn on the session's turn thread.
        The terminal hears ``turn.started``, the turn's pushes as every window does, its own
        lines (``turn.output``) and ``turn.ended``; a busy session is refused naming its
        driver."""
        turn = TerminalTurn(
            text=message.text,
            permission_mode=message.permission_mode,
            session_id=message.session_id,
            cwd=message.cwd,
            max_steps=message.max_steps,
            columns=message.columns,
        )
        correlation_id = message.correlation_id
        if message.session_id is not None and self._workers.busy(message.session_id):
            self._refuse_busy(peer_id, correlation_id, message.session_id)
            return

        def opened(result: JobResult) -> None:
            if result.error is not None:
                self._reply_error(peer_id, correlation_id, *_error_code(result.error))
                return
            assert isinstance(result.value, TerminalSession)
            self._start_terminal_turn(peer_id, correlation_id, result.value, turn)

        if not self._workers.run_query(
            f"terminal-{peer_id}", lambda: self._services.terminal_session(turn), opened
        ):
            self._reply_error(peer_id, correlation_id, HOST_CLOSING, "")

    def _start_terminal_turn(
        self,
        peer_id: int,
        correlation_id: str | None,
        session: TerminalSession,
        turn: TerminalTurn,
    ) -> None:
        session_id = session.session_id
        sink = CoalescingPushSink(
            session_id, self._workers.relay, self._turn_sender(session_id, driver=peer_id)
        )

        def done(result: JobResult) -> None:
            sink.flush_now()
            self._standing.turn_ended(session_id)
            self._undrive(session_id)
            if result.error is not None:
                self._reply_error(peer_id, correlation_id, *_error_code(result.error))
            else:
                assert isinstance(result.value, TerminalTurnEnd)
                end = result.value
                self._server.send(
                    peer_id,
                    TurnEndedPush(
                        session_id=session_id,
                        run_id=end.run_id,
                        status=RunStatusValue(end.status),
                        failure_class=end.failure_class,
                        stop_reason=end.stop_reason,
                        message=end.message,
                        correlation_id=correlation_id,
                    ),
                )
            self.refresh_session(session_id)

        if not self._lifecycle.admits_work:
            self._reply_error(peer_id, correlation_id, HOST_CLOSING, "")
            return
        started = self._workers.run_turn(
            session_id,
            lambda: self._services.terminal_turn(session_id, turn, sink, sink.output),
            lambda reason: self._services.cancel_turn(session_id, reason),
            done,
        )
        if not started:
            self._refuse_busy(peer_id, correlation_id, session_id)
            return
        self._drive(session_id, peer_id)
        # Sent on the event loop before anything the turn's thread relays: the first push.
        self._server.send(
            peer_id,
            TurnStartedPush(
                session_id=session_id,
                cwd=session.cwd[:4096],
                provider_label=session.provider_label[:500],
                notes=tuple(note[:4000] for note in session.notes[:1000]),
                checkpoints_off=session.checkpoints_off,
                correlation_id=correlation_id,
            ),
        )

    def _resume_for_terminal(self, peer_id: int, message: TurnsResumeRequest) -> None:
        """``maka resume`` beside the desktop (or ``maka host``): the banner's continuation
        service, so a terminal and a window racing on one session make one continuation (the
        turn thread is the session's, and the store's continuation claim is the backstop).
        The terminal hears its lines, the continuation's pushes and ``resume.ended`` with its
        exit code; every window hears the outcome as after a click."""
        session_id = message.session_id
        correlation_id = message.correlation_id

        def tell_viewers(_: ResumeStartedPush) -> None:
            # Viewers hear who drives it once a continuation runs, not for a resume that
            # parks (they were told a turn ran, and never that it ended).
            driver = self._drivers.get(session_id)
            if driver is not None:
                said = SessionDriverPush(session_id=session_id, driver=driver[1])
                self._to_viewers(session_id, said, peer_id)

        sink = CoalescingPushSink(
            session_id,
            self._workers.relay,
            self._turn_sender(session_id, driver=peer_id),
            on_resume_started=tell_viewers,
        )
        terminal = TerminalResume(
            permission_mode=message.permission_mode,
            write=sink.output,
            max_steps=message.max_steps,
            columns=message.columns,
            as_json=message.as_json,
            before_running=message.before_running,
            safe_resume=message.safe_resume,
        )

        def done(result: JobResult) -> None:
            sink.flush_now()
            self._standing.turn_ended(session_id)
            self._undrive(session_id)
            outcome = _resume_outcome(result)
            refused = isinstance(outcome, ResumeParked) and (
                DECISION_NOT_OFFERED in outcome.rejection_reasons
            )
            if not refused:  # the terminal's own decision refused is no park of the session
                self._push_resume_outcome(session_id, outcome, sink.resume_started_sent, None)
            self.refresh_session(session_id)
            if isinstance(outcome, ResumeFailed):
                self._reply_error(peer_id, correlation_id, outcome.code, outcome.message)
                return
            exit_code = 3
            if isinstance(outcome, ResumeStarted):
                exit_code = 0 if outcome.status == RunStatusValue.COMPLETED else 1
            self._server.send(
                peer_id,
                ResumeEndedPush(
                    session_id=session_id, exit_code=exit_code, correlation_id=correlation_id
                ),
            )

        if not self._lifecycle.admits_work:
            self._reply_error(peer_id, correlation_id, HOST_CLOSING, "")
            return
        started = self._workers.run_turn(
            session_id,
            lambda: self._services.resume_latest(
                session_id,
                sink,
                automatic=False,
                decision=message.workspace_decision,
                restore_to=message.restore_to,
                terminal=terminal,
            ),
            lambda reason: self._services.cancel_turn(session_id, reason),
            done,
        )
        if not started:
            self._refuse_busy(peer_id, correlation_id, session_id)
            return
        words = self._client_words(peer_id, "a terminal", "resume")
        self._drive(session_id, peer_id, words, tell_viewers=False)

    def _drive(
        self,
        session_id: str,
        peer_id: int | None,
        what: str = "",
        asker: int | None = None,
        *,
        tell_viewers: bool = True,
    ) -> None:
        """Note who drives ``session_id``'s running work (a client, or the host's own work on
        behalf of ``asker``, which hears its own answer rather than a "[viewing]" line);
        ``tell_viewers``: False for a terminal's resume, told once its continuation runs."""
        if peer_id is not None and peer_id in self._server.terminal_ids():
            self._terminal_drivers.add(peer_id)
        if not what:
            what = self._client_words(peer_id, "a terminal")
        self._drivers[session_id] = (peer_id, what)
        if tell_viewers:
            push = SessionDriverPush(session_id=session_id, driver=what)
            self._to_viewers(session_id, push, peer_id if peer_id is not None else asker)

    def _client_words(self, peer_id: int | None, article: str, command: str = "run") -> str:
        """A client in words: "the desktop window", or ``article`` + " (maka tui, pid 12)"
        (the command its hello named, else ``command``)."""
        if peer_id is None or peer_id not in self._server.terminal_ids():
            return "the desktop window"
        pid = self._server.peer_process_id(peer_id)
        said = self._server.peer_command(peer_id) or command
        return f"{article} (maka {said}" + (f", pid {pid})" if pid else ")")

    def _to_viewers(self, session_id: str, message: Message, skip: int | None = None) -> None:
        """Tell the terminals viewing ``session_id`` (never ``skip``: the driver or the
        answerer hears it its own way)."""
        for peer_id, viewed in list(self._viewers.items()):
            if viewed == session_id and peer_id != skip:
                self._server.send(peer_id, message)

    def _view(self, peer_id: int, message: SessionsWatchRequest) -> None:
        """A terminal views a session (or none): answered with who drives it now, then what
        stands for it (its running turn, its open questions), as a window opening it hears."""
        if message.session_id is None:
            self._viewers.pop(peer_id, None)
            return
        session_id = message.session_id
        self._viewers[peer_id] = session_id
        driver = self._drivers.get(session_id) if self._workers.busy(session_id) else None
        self._server.send(
            peer_id,
            SessionDriverPush(
                session_id=session_id,
                driver=self._driver_words(driver) if driver is not None else None,
                correlation_id=message.correlation_id,
            ),
        )
        if driver is None or driver[0] == peer_id:
            return
        for push in self._standing.pushes(session_id):
            if isinstance(push, RunStatusPush | PermissionRequestedPush):
                self._server.send(peer_id, push)

    def _terminal_command(self, peer_id: int, message: TerminalCommandRequest) -> None:
        """A TUI's ``/transcript`` (the query pool) or ``/branch`` (a branch is made on the
        session's branch thread, as a window's): the lines the TUI prints alone, in pieces."""
        session_id = message.session_id
        correlation_id = message.correlation_id
        services = self._services

        def job() -> object:
            return services.terminal_text(session_id, message.command, message.arguments)

        def done(result: JobResult) -> None:
            if result.error is not None:
                self._reply_error(peer_id, correlation_id, *_error_code(result.error))
                return
            answer = result.value
            assert isinstance(answer, TerminalText)
            text = answer.text
            pieces = [text[i : i + _TEXT_PIECE] for i in range(0, len(text), _TEXT_PIECE)]
            for piece in pieces[:-1]:
                self._server.send(
                    peer_id,
                    TerminalTextPush(
                        session_id=session_id, text=piece, done=False, correlation_id=correlation_id
                    ),
                )
            self._server.send(
                peer_id,
                TerminalTextPush(
                    session_id=session_id,
                    text=pieces[-1] if pieces else "",
                    branched_to=answer.branched_to,
                    branched_cwd=answer.branched_cwd,
                    correlation_id=correlation_id,
                ),
            )
            if answer.branched_to is not None:
                self.refresh_session(answer.branched_to)  # every window lists the new session

        if message.command == "transcript" or not message.arguments.strip():
            if not self._workers.run_query(f"terminal-{peer_id}", job, done):
                self._reply_error(peer_id, correlation_id, HOST_CLOSING, "")
            return
        if not self._workers.run_turn(f"branch:{session_id}", job, lambda reason: None, done):
            if self._workers.busy(f"branch:{session_id}"):
                self._reply_error(
                    peer_id,
                    correlation_id,
                    SESSION_BUSY,
                    "a branch of this session is being made; wait for it",
                )
            else:
                self._reply_error(peer_id, correlation_id, HOST_CLOSING, "")

    def _on_peer_closed(self, peer_id: int) -> None:
        """A driving terminal went away: its turn goes on in the host. A question it left open
        is for a window, or a terminal viewing the session (``maka tui``), to answer; with
        neither connected (``maka host`` has no window) the turn stops there (``_viewer_left``),
        as one no terminal drives does: not denied on the user's behalf, which would record
        that the user refused and tell the model so. (A viewer that leaves later with the
        question still open: the same.)"""
        viewed = self._viewers.pop(peer_id, None)
        if peer_id not in self._terminal_drivers:
            if viewed is not None:
                self._viewer_left(viewed)
            elif not self._server.renderer_ids():
                self.last_window_left()
            return
        self._terminal_drivers.discard(peer_id)
        self._gone_drivers.add(peer_id)
        if len(self._gone_drivers) > 10_000:  # (bounded: only the drivers of turns still on)
            driving = {driver for driver, _ in self._drivers.values()}
            self._gone_drivers &= driving
        if self._server.renderer_ids():
            return
        for session_id, (driver, _) in list(self._drivers.items()):
            if driver == peer_id:  # (a ``maka tui`` viewing it answers its question)
                self._viewer_left(session_id)

    def last_window_left(self) -> None:
        """The last window left (closed, crashed; called again once the host saw the window's
        process end, as ``maka host`` counts a window it started as coming until then): a
        question a gone terminal left waited for it, and now for nobody. (A window's own
        questions stand for the next window: standing_state.)"""
        if self._server.renderer_ids():
            return
        for session_id, (driver, _) in list(self._drivers.items()):
            if driver in self._gone_drivers:
                self._viewer_left(session_id)

    def _viewer_left(self, session_id: str) -> None:
        """The last terminal viewing a session left: a question of its turn that no one
        connected can answer now (no window, no other viewer, no driving terminal) stops the
        turn there (``_stop_unasked``) rather than waiting for ever."""
        driver = self._drivers.get(session_id)
        if driver is not None and driver[0] in self._server.terminal_ids():
            return  # its driving terminal answers
        if not self._nobody_to_ask(session_id):
            return
        for push in self._standing.pushes(session_id):
            if isinstance(push, PermissionRequestedPush):
                self._stop_unasked(session_id, push.request_id)

    def _stop_unasked(self, session_id: str, request_id: str) -> None:
        """A question of a turn no terminal drives (automatic resume) with nobody connected to
        answer it: the turn is stopped there, not denied on the user's behalf. Denying would
        tell the model the user refused, and the turn would end "completed" with its task not
        done; stopped, the call never ran, the run ends cancelled, and the model is told why
        (calling again asks again) when Safe resume continues it with a window or ``maka tui``
        there."""
        _log.warning(
            "session %s: stopped its turn at a permission question no window or terminal "
            "could answer (the call did not run); continue it with %s, or /resume in %s: the "
            "model is told the call did not run, and asking for it again asks you there",
            escape(session_id, 80),
            maka_command(f"resume {session_id}"),
            maka_command(f"tui --session {session_id}"),
        )
        self._services.cancel_turn(session_id, HOST_STOPPED_AT_QUESTION)
        self._standing.answered(session_id, request_id)

    def _nobody_to_ask(self, session_id: str) -> bool:
        """No window is connected and no terminal views the session: a question of a turn no
        terminal drives (automatic resume under ``maka host``) would wait for ever."""
        return (
            not self._server.renderer_ids()
            and not self._window_coming()
            and session_id not in self._viewers.values()
        )

    def _undrive(self, session_id: str) -> None:
        """The session's work ended (its done callback, on the event loop): forget its driver,
        unless a new turn of the session started meanwhile and already named its own."""
        if not self._workers.busy(session_id):
            self._drivers.pop(session_id, None)

    def _refuse_busy(self, peer_id: int, correlation_id: str | None, session_id: str) -> None:
        if not self._workers.busy(session_id):
            self._reply_error(peer_id, correlation_id, HOST_CLOSING, "")
            return
        self._reply_error(peer_id, correlation_id, SESSION_BUSY, self.busy_text(session_id))

    def busy_text(self, session_id: str) -> str:
        """``session_busy``'s sentence, naming who drives the session."""
        driver = self._drivers.get(session_id)
        who = self._driver_words(driver) if driver is not None else "another client"
        return f"session {session_id} is running a turn driven by {who}; wait for it to end"

    def _driver_words(self, driver: tuple[int | None, str]) -> str:
        """Who drives a turn, and that it has gone away when its client is no longer
        connected (the turn goes on in the host): said to a viewer and in ``session_busy``."""
        peer, who = driver
        if peer is not None and peer not in (
            *self._server.terminal_ids(),
            *self._server.renderer_ids(),
        ):
            who += ", which has gone away (the turn goes on here)"
        return who

    def start_resume(
        self,
        session_id: str,
        *,
        automatic: bool,
        correlation_id: str | None = None,
        on_done: ResumeDone | None = None,
        decision: str | None = None,
        restore_to: str | None = None,
        files_shown: tuple[ChangedFilesShown, ...] | None = None,
    ) -> bool:
        """Safe resume of ``session_id`` (banner click or auto-resume). Returns False when it
        could not start; the outcome was pushed either way. ``files_shown``: the changed files
        the banner listed when the user chose to continue with them."""

        def keep_announced(pushed: ResumeStartedPush) -> None:
            # Kept from the moment it is said, not from the continuation's end: a window that
            # connects while it runs is told too (send_standing_outcomes).
            self._auto_started[session_id] = pushed.model_copy(update={"correlation_id": None})

        sink = CoalescingPushSink(
            session_id,
            self._workers.relay,
            self._turn_sender(session_id),
            correlation_id,
            automatic=automatic,
            on_resume_started=keep_announced if automatic else None,
        )

        def done(result: JobResult) -> None:
            sink.flush_now()
            self._standing.turn_ended(session_id)
            self._undrive(session_id)
            outcome = _resume_outcome(result)
            self._push_resume_outcome(
                session_id, outcome, sink.resume_started_sent, correlation_id, automatic
            )
            self.refresh_session(session_id)
            if on_done is not None:
                on_done(outcome)

        if not self._lifecycle.admits_work:
            self._broadcast(
                ResumeFailedPush(
                    session_id=session_id, code=HOST_CLOSING, correlation_id=correlation_id
                )
            )
            return False
        started = self._workers.run_turn(
            session_id,
            lambda: self._services.resume_latest(
                session_id,
                sink,
                automatic=automatic,
                decision=decision,
                restore_to=restore_to,
                files_shown=files_shown,
            ),
            lambda reason: self._services.cancel_turn(session_id, reason),
            done,
        )
        if started:
            self._drive(session_id, None, "automatic resume" if automatic else "Safe resume")
        else:
            if self._workers.busy(session_id):
                parked: ResumeOutcome = ResumeParked(rejection_reasons=(SESSION_BUSY,))
            else:
                parked = ResumeFailed(HOST_CLOSING, "the main process is closing")
            self._push_resume_outcome(session_id, parked, None, correlation_id, automatic)
            if on_done is not None:
                on_done(parked)
        return started

    def _push_resume_outcome(
        self,
        session_id: str,
        outcome: ResumeOutcome,
        already_started: ResumeStartedPush | None,
        correlation_id: str | None,
        automatic: bool = False,
    ) -> None:
        if isinstance(outcome, ResumeStarted):
            started = already_started
            if started is None:
                started = ResumeStartedPush(
                    session_id=session_id,
                    run_id=outcome.run_id,
                    turn_id=outcome.turn_id,
                    correlation_id=correlation_id,
                    automatic=automatic,
                )
                self._broadcast(started)
            self._standing.clear_outcome(session_id)
            if automatic:
                # Told again to a window that connects later: it announces what continued by
                # itself until the user has looked at it.
                self._auto_started[session_id] = started.model_copy(update={"correlation_id": None})
            return
        push: ResumeParkedPush | ResumeFailedPush
        if isinstance(outcome, ResumeParked):
            push = ResumeParkedPush(
                session_id=session_id,
                rejection_reasons=outcome.rejection_reasons,
                diagnostics=outcome.diagnostics,
                correlation_id=correlation_id,
                automatic=automatic,
                workspace_options=outcome.workspace_options,
            )
            transient = outcome.rejection_reasons == (SESSION_BUSY,)
        else:
            push = ResumeFailedPush(
                session_id=session_id,
                code=outcome.code,
                message=outcome.message[:4000],
                correlation_id=correlation_id,
                automatic=automatic,
            )
            transient = outcome.code in (HOST_CLOSING, HOST_NOT_READY)
        self._broadcast(push)
        if not transient:
            self._standing.set_outcome(push)
        if isinstance(push, ResumeParkedPush) and BACKGROUND_PENDING in push.rejection_reasons:
            self._watch(session_id)
        if isinstance(push, ResumeParkedPush) and not transient:
            # The park was checked again (Try again, a decision, an answer, commands that
            # ended): the cards that ask about a call say again what answering does to the
            # folder as it is now, when that changed since they were sent.
            self._refresh_folder_notes(session_id)

    def _refresh_folder_notes(self, session_id: str) -> None:
        def done(result: JobResult) -> None:
            if result.error is not None or not isinstance(result.value, tuple):
                return
            for card in result.value:
                self._broadcast(TranscriptItemPush(session_id=session_id, item=card))

        self._workers.run_query(
            f"notes-{session_id}", lambda: self._services.refresh_folder_notes(session_id), done
        )

    # ---------------------------------------------------- commands from an earlier start

    def _watch(self, session_id: str) -> None:
        self._watched.add(session_id)
        if not self._watch_timer.isActive():
            self._watch_timer.start()

    def _check_watched(self) -> None:
        if not self._watched or not self._lifecycle.admits_work:
            self._watch_timer.stop()
            return
        for session_id in list(self._watched):
            self._check_survivors(session_id, stop=False)

    def _check_survivors(
        self, session_id: str, *, stop: bool, correlation_id: str | None = None
    ) -> None:
        """**Stop it** (``stop``) or the periodic look: once no command of an earlier start
        runs, every window hears ``processes.stopped`` and the park as it stands now."""

        def done(result: JobResult) -> None:
            if result.error is not None:
                if stop:
                    self._broadcast(
                        ProcessesStoppedPush(
                            session_id=session_id, still_running=1, correlation_id=correlation_id
                        )
                    )
                return
            checked = result.value
            assert isinstance(checked, SurvivorsChecked)
            if checked.still_running and not stop:
                return  # still running: nothing new to say
            if not checked.still_running:
                self._watched.discard(session_id)
            self._broadcast(
                ProcessesStoppedPush(
                    session_id=session_id,
                    stopped=min(checked.stopped, 10_000),
                    still_running=min(checked.still_running, 10_000),
                    resume_available=checked.checked and checked.parked is None,
                    correlation_id=correlation_id,
                )
            )
            if not checked.checked:
                return
            if checked.parked is None:
                self._standing.clear_outcome(session_id)
            else:
                self._push_resume_outcome(session_id, checked.parked, None, None)

        if not self._workers.run_query(
            f"survivors-{session_id}",
            lambda: self._services.check_survivors(session_id, stop=stop),
            done,
        ):
            self._watched.discard(session_id)

    def _settle(self, peer_id: int, message: ToolsSettleRequest) -> None:
        """The user's answer about a call whose outcome is unknown (docs/design/recovery.md section
        8), on the session's turn thread (never while a turn of it runs). Every renderer hears the
        answer: the card re-sent as it now reads, then ``tool.settled``; when Safe resume would
        now continue the standing park goes, else the new park stands and is sent. A terminal
        that asked (``maka settle``) is sent ``tool.settled`` too, with what was recorded."""
        session_id = message.session_id
        from_terminal = peer_id in self._server.terminal_ids()

        def tell(push: ToolSettledPush) -> None:
            self._broadcast(push)
            if from_terminal:
                self._server.send(peer_id, push)

        def answer(recorded: bool, code: str | None = None, text: str = "") -> ToolSettledPush:
            return ToolSettledPush(
                session_id=session_id,
                tool_call_id=message.tool_call_id,
                recorded=recorded,
                code=code,
                message=text[:4000],
                correlation_id=message.correlation_id,
            )

        def done(result: JobResult) -> None:
            self._undrive(session_id)
            if result.error is not None:
                stale = result.error if isinstance(result.error, ShownCardStale) else None
                card = stale.card if stale is not None else None
                if card is not None:
                    # The card as it reads now, before the refusal: the window shows the new
                    # words, then why nothing was recorded, and the user answers again.
                    self._broadcast(TranscriptItemPush(session_id=session_id, item=card))
                if stale is not None and stale.parked is not None:
                    # So does the banner: its list of changed files moved on with the card's.
                    self._push_resume_outcome(session_id, stale.parked, None, None)
                tell(answer(False, *_error_code(result.error)))
                return
            settled = result.value
            assert isinstance(settled, SettleResult)
            if settled.card is not None:
                self._broadcast(TranscriptItemPush(session_id=session_id, item=settled.card))
            if settled.parked is None:
                self._standing.clear_outcome(session_id)
            elif settled.parked.rejection_reasons != ("resume_feature_disabled",):
                # What still parks now stands (the banner shows it instead of a stale park).
                self._push_resume_outcome(session_id, settled.parked, None, None)
            push = answer(True).model_copy(
                update={
                    "resume_available": settled.parked is None,
                    "settlement": settled.settlement,
                    "resume_reasons": settled.resume_reasons,
                }
            )
            tell(push)
            self.refresh_session(session_id)

        ran = message.outcome is AttestationChoice.RAN
        started = self._workers.run_turn(
            session_id,
            lambda: self._services.settle_call(
                session_id, message.tool_call_id, ran, message.note, message.folder_shown
            ),
            lambda reason: None,
            done,
        )
        if started:
            # (named to a second request while it runs; a viewer is not told of it as of a turn:
            # it is over in a moment, refused or not, and no line would say it ended)
            self._drive(
                session_id,
                None,
                "an answer about a tool call being recorded",
                peer_id,
                tell_viewers=False,
            )
        if not started:
            busy = self._workers.busy(session_id)
            tell(
                answer(
                    False,
                    SESSION_BUSY if busy else HOST_CLOSING,
                    self.busy_text(session_id) if busy else "",
                )
            )

    def restore_standing(self, parks: Sequence[tuple[str, ResumeParked]]) -> None:
        """Parks of an earlier start that still hold (same boundary, same inputs): told to every
        renderer that connects, like a park of auto-resume (and to any already connected)."""
        for session_id, parked in parks:
            self._stand(session_id, parked)

    def _stand(self, session_id: str, parked: ResumeParked) -> None:
        """A park that holds without anyone asking: kept for renderers that connect later, and
        told to every renderer connected now."""
        push = ResumeParkedPush(
            session_id=session_id,
            rejection_reasons=parked.rejection_reasons,
            diagnostics=parked.diagnostics,
            workspace_options=parked.workspace_options,
        )
        self._standing.set_outcome(push)
        self._broadcast(push)

    def send_standing_outcomes(self, peer_id: int) -> None:
        """Tell a renderer that just connected everything that still stands (standing_state):
        a running turn, its open permission requests, a park or failure of Safe resume, and
        the sessions automatic resume continued."""
        for started in list(self._auto_started.values()):
            self._server.send(peer_id, started)
        self._send_standing(peer_id, None)

    def _send_standing(self, peer_id: int, session_id: str | None) -> None:
        for push in self._standing.pushes(session_id):
            self._server.send(peer_id, push)

    @property
    def standing(self) -> StandingState:
        return self._standing

    def _cancel(self, peer_id: int, message: TurnsCancelRequest) -> None:
        driver = self._drivers.get(message.session_id)
        if peer_id in self._server.terminal_ids() and (driver is None or driver[0] != peer_id):
            # A terminal's Ctrl+C stops only the turn it started, never a window's.
            _limited.log(
                logging.INFO,
                "cancel_not_driver",
                "cancel for %s from a terminal that does not drive it",
                escape(message.session_id),
            )
            return
        if not self._workers.cancel(message.session_id):
            _limited.log(
                logging.INFO,
                "cancel_idle",
                "cancel for %s: nothing running",
                escape(message.session_id),
            )
            return
        if driver is not None and driver[0] != peer_id and driver[0] in self._server.terminal_ids():
            # The terminal driving the turn is told who stopped it, as it is told who answered
            # its question: its "cancelled_by_user" alone read as if its own user had.
            who = self._client_words(peer_id, "a terminal", "tui")
            said = TurnOutputPush(
                session_id=message.session_id,
                text=f"[stop] the turn was stopped in {who}\n",
                stream="stderr",
            )
            self._server.send(driver[0], said)

    def _answer_permission(self, peer_id: int, message: PermissionsAnswerRequest) -> None:
        try:
            self._services.answer_permission(
                message.session_id, message.request_id, message.decision
            )
            self._standing.answered(message.session_id, message.request_id)
            where = self._client_words(peer_id, "the terminal")
            self._closed(message.session_id, message.request_id, message.decision, where, peer_id)
        except Exception as error:
            if getattr(error, "code", None) == "permission_not_pending":
                self._standing.answered(message.session_id, message.request_id)
            _limited.log(
                logging.WARNING,
                "permission_answer",
                "permission answer refused [%s]",
                escape(getattr(error, "code", type(error).__name__), 40),
            )
            self._reply_error(peer_id, message.correlation_id, *_error_code(error))

    def _closed(
        self,
        session_id: str,
        request_id: str,
        decision: PermissionDecision,
        where: str,
        answerer: int | None,
    ) -> None:
        """The first answer was recorded: every other client's prompt of the question closes,
        saying where it was answered (the windows, the viewing terminals, the driving one)."""
        push = PermissionClosedPush(
            session_id=session_id,
            request_id=request_id,
            decision=decision,
            answered_in=where[:500],
        )
        for peer_id in self._server.renderer_ids():
            if peer_id != answerer:
                self._server.send(peer_id, push)
        self._to_viewers(session_id, push, answerer)
        driver = self._drivers.get(session_id)
        if (
            driver is not None
            and driver[0] is not None
            and driver[0] != answerer
            and driver[0] in self._server.terminal_ids()
            and self._viewers.get(driver[0]) != session_id
        ):
            self._server.send(driver[0], push)

    # --------------------------------------------------------------------------- pushes

    def refresh_session(self, session_id: str) -> None:
        def done(result: JobResult) -> None:
            if isinstance(result.value, SessionSummary):
                if not result.value.interrupted:
                    # A new turn or a continuation moved the session on: nothing left to resume.
                    self._standing.clear_outcome(session_id)
                self._broadcast(SessionUpdatedPush(session=result.value))

        self._workers.run_query(
            f"summary-{session_id}", lambda: self._services.session_summary(session_id), done
        )

    def _turn_sender(self, session_id: str, driver: int | None = None) -> Callable[[Message], None]:
        """Pushes of a running turn; when its run starts, the session list row is refreshed
        too (it stops showing "interrupted" as soon as a continuation runs). A terminal that
        drives the turn hears every push the windows hear, and its own lines."""

        def send(message: Message) -> None:
            if driver is not None:
                self._server.send(driver, message)
                if isinstance(message, TurnOutputPush):
                    return
            self._standing.note(message)
            self._broadcast(message)
            if isinstance(message, _VIEWED):
                self._to_viewers(session_id, message, driver)
            if (
                driver is None
                and isinstance(message, PermissionRequestedPush)
                and self._nobody_to_ask(session_id)
            ):
                self._stop_unasked(session_id, message.request_id)
            if isinstance(message, RunStatusPush) and message.status is RunStatusValue.RUNNING:
                self.refresh_session(session_id)

        return send

    def _broadcast(self, message: Message) -> None:
        self._server.broadcast(message)

    def _reply_error(self, peer_id: int, correlation_id: str | None, code: str, text: str) -> None:
        self._server.send(
            peer_id, ErrorPush(code=code, message=text[:4000], correlation_id=correlation_id)
        )


def _as_push(value: object) -> Message:
    """A push the job built itself (the timeline's pages, the sessions overview)."""
    assert isinstance(
        value,
        TimelineOpenedPush
        | TimelinePagePush
        | TimelineEventShownPush
        | TimelineLocatedPush
        | SessionsOverviewedPush,
    )
    return value


def _listed(value: object) -> Message:
    assert isinstance(value, Sequence)
    return SessionsListedPush(sessions=tuple(value))


def _planned(value: object) -> Message:
    assert isinstance(value, PlanReport)
    return SessionPlannedPush(
        session_id=value.session_id,
        continues=value.continues,
        summary=value.summary,
        document=value.document,
    )


def _opened(value: object) -> Message:
    assert isinstance(value, Transcript)
    return SessionOpenedPush(
        session_id=value.session_id,
        items=value.items,
        omitted_earlier=value.omitted_earlier,
        branched_from=value.branched_from,
    )


def _settings(value: object) -> Message:
    assert isinstance(value, SettingsView)
    return SettingsCurrentPush(
        provider=value.provider,
        openai_base_url=value.openai_base_url,
        openai_model=value.openai_model,
        api_key_set=value.api_key_set,
        max_steps=value.max_steps,
        safe_resume=value.safe_resume,
        auto_resume=value.auto_resume,
        resume_from_environment=value.resume_from_environment,
        safe_resume_enabled=value.safe_resume_enabled,
        provider_from_environment=value.provider_from_environment,
        provider_tuning=value.provider_tuning,
        database=value.database,
        database_url=value.database_url,
        database_from_environment=value.database_from_environment,
        database_in_use=value.database_in_use,
        postgres_driver=value.postgres_driver,
    )


def _database_tested(value: object) -> Message:
    assert isinstance(value, DatabaseTest)
    return DatabaseTestedPush(
        ok=value.ok,
        database_url=value.database_url,
        server_version=value.server_version,
        schema_version=value.schema_version,
        program_schema_version=value.program_schema_version,
        code=value.code,
        message=value.message,
    )


def _resume_outcome(result: JobResult) -> ResumeOutcome:
    if result.error is not None:
        return ResumeFailed(*_error_code(result.error))
    value = result.value
    if isinstance(value, ResumeStarted | ResumeParked | ResumeFailed):
        return value
    return ResumeFailed(INTERNAL_FAILURE, "resume returned no outcome")
