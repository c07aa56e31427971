"""The renderer's end of the IPC bridge: a ``QLocalSocket`` speaking ``app.bridge_contract``.

Why it behaves this way:

* The handshake (``hello`` with the per-launch token) is the first frame on every connection;
  widgets hear ``connected`` only after ``hello.ok``, so nothing they send can precede it.
* If the main process disappears, the state turns ``disconnected`` and the bridge reconnects
  with a doubling backoff (capped), because a restarted main process may come back on the same
  name. A ``hello.rejected`` is final: the token belongs to a main process that is gone, and
  retrying would only hammer the new one.
* When the connection closes and the main process that started this window no longer exists
  (its pid is gone, or this process was handed to another parent), the state turns
  ``host_lost`` within a few hundred milliseconds: Maka stopped unexpectedly, nothing more will
  answer. The bridge keeps trying the name, so a newer start of Maka rejecting this window's
  token is noticed too (``rejected`` after having been connected: superseded).
* Any frame that breaks the contract closes the connection (and is logged); it never reaches a
  widget. Requests made while disconnected are dropped, not queued, so a stale click cannot fire
  after a reconnect; a Safe resume request answers ``resume_failed`` at once instead.
"""

from __future__ import annotations

import itertools
import logging
import os
import secrets
from typing import Literal

from PySide6.QtCore import QObject, QTimer
from PySide6.QtNetwork import QLocalSocket

from app.bridge_contract import (
    MAX_PATH_CHARS,
    MAX_TEXT_CHARS,
    MAX_TIMELINE_PAGE,
    PROTOCOL_VERSION,
    PUSH_KINDS,
    AttestationChoice,
    BranchCreateRequest,
    BranchMadePush,
    BranchOptionsListedPush,
    BranchOptionsRequest,
    BranchRefusedPush,
    BridgeProtocolError,
    ChangedFilesShown,
    DatabaseChoice,
    DatabaseTestedPush,
    ErrorPush,
    FrameReader,
    HelloOkPush,
    HelloRejectedPush,
    HelloRequest,
    HostState,
    HostStatePush,
    Message,
    PermissionClosedPush,
    PermissionDecision,
    PermissionRequestedPush,
    PermissionsAnswerRequest,
    ProcessesStoppedPush,
    ProcessesStopRequest,
    ProviderChoice,
    ProviderTuning,
    Request,
    ResumeFailedPush,
    ResumeLatestRequest,
    ResumeParkedPush,
    ResumeStartedPush,
    RunStatusPush,
    SessionExportedPush,
    SessionOpenedPush,
    SessionRemovedPush,
    SessionsCreateRequest,
    SessionsExportRequest,
    SessionsListedPush,
    SessionsListRequest,
    SessionsOpenRequest,
    SessionsOverviewedPush,
    SessionsOverviewRequest,
    SessionsRelocateRequest,
    SessionsRemoveRequest,
    SessionsRenameRequest,
    SessionUpdatedPush,
    SettingsCurrentPush,
    SettingsGetRequest,
    SettingsTestDatabaseRequest,
    SettingsUpdateRequest,
    SettleFolderNote,
    TimelineEventRequest,
    TimelineEventShownPush,
    TimelineLocatedPush,
    TimelineLocateRequest,
    TimelineOpenedPush,
    TimelineOpenRequest,
    TimelinePagePush,
    TimelineRowFilter,
    TimelineRowsRequest,
    ToolSettledPush,
    ToolsSettleRequest,
    TranscriptItemPush,
    TurnsCancelRequest,
    TurnsSendRequest,
    WindowShowPush,
    encode_frame,
)
from renderer.bridge_port import BridgePort, ConnectionState
from runtime.ledger.session_title import MAX_TITLE_CHARS

log = logging.getLogger("maka.renderer.bridge")

BACKOFF_FIRST_MS = 50
BACKOFF_MAX_MS = 2000
SENT_TURNS_KEPT = 16


LOST_CHECK_MS = 250


def process_gone(pid: int, parent_at_start: int) -> bool:
    """True when the main process ``pid`` is known to have ended. A child whose parent dies is
    handed to another process at once (POSIX), before the dead parent is even reaped, so the
    parent check is exact for the usual case (the main process started this window); otherwise
    signal 0 asks whether the pid exists. Windows has no safe signal 0: never "gone" there."""
    if os.name == "nt" or pid <= 0:
        return False
    if parent_at_start == pid and os.getppid() != pid:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class RendererBridge(BridgePort):
    def __init__(
        self,
        server_name: str,
        token: str,
        parent: QObject | None = None,
        *,
        main_pid: int | None = None,
    ) -> None:
        super().__init__(parent)
        self._server_name = server_name
        self._token = token
        self._main_pid = main_pid
        self._parent_at_start = os.getppid()
        self._lost_check = QTimer(self)
        self._lost_check.setInterval(LOST_CHECK_MS)
        self._lost_check.timeout.connect(self._check_main_process)
        self._socket = QLocalSocket(self)
        self._reader = FrameReader(accept=PUSH_KINDS)
        self._handshaken = False
        self._stopped = False
        self._backoff_ms = BACKOFF_FIRST_MS
        # Answers to session changes go to every window: each window's correlation ids carry
        # a random prefix of its own, so one window never takes another's answer for its own.
        self._id_prefix = f"w{secrets.token_hex(4)}-"
        self._ids = itertools.count(1)
        self._sent_turns: dict[str, tuple[str, str]] = {}
        self._changes: dict[str, tuple[str, str]] = {}
        self._sent_settles: dict[str, tuple[str, str]] = {}
        self._sent_branches: dict[str, tuple[str, str]] = {}
        self._sent_database_tests: set[str] = set()
        self._sent_overviews: set[str] = set()
        self._retry = QTimer(self)
        self._retry.setSingleShot(True)
        self._retry.timeout.connect(self._connect)
        self._socket.connected.connect(self._on_connected)
        self._socket.disconnected.connect(self._on_disconnected)
        self._socket.errorOccurred.connect(self._on_error)
        self._socket.stateChanged.connect(self._on_state_changed)
        self._socket.readyRead.connect(self._on_ready_read)

    @property
    def server_name(self) -> str:
        return self._server_name

    def _check_main_process(self) -> None:
        if self.connection_state is ConnectionState.CONNECTED or self._stopped:
            self._lost_check.stop()
            return
        if self._main_pid is not None and process_gone(self._main_pid, self._parent_at_start):
            self._lost_check.stop()
            log.warning("the main process (pid %s) is gone", self._main_pid)
            self._set_connection_state(ConnectionState.HOST_LOST)

    @property
    def next_retry_ms(self) -> int:
        return self._backoff_ms

    def start(self) -> None:
        """Begin connecting; reconnection after a loss is automatic from here on."""
        self._stopped = False
        self._set_connection_state(ConnectionState.CONNECTING)
        self._connect()

    def stop(self) -> None:
        self._stopped = True
        self._retry.stop()
        self._socket.abort()

    # ----------------------------------------------------------------- socket events

    def _connect(self) -> None:
        if self._stopped:
            return
        self._reader = FrameReader(accept=PUSH_KINDS)
        self._handshaken = False
        self._socket.abort()
        self._socket.connectToServer(self._server_name)

    def _on_connected(self) -> None:
        hello = HelloRequest(token=self._token, protocol_version=PROTOCOL_VERSION)
        self._socket.write(encode_frame(hello))
        self._socket.flush()

    def _on_error(self, error: QLocalSocket.LocalSocketError) -> None:
        log.info("bridge socket error: %s", error.name)

    def _on_state_changed(self, state: QLocalSocket.LocalSocketState) -> None:
        # A failed connect never emits ``disconnected``; the drop to Unconnected covers both.
        if state == QLocalSocket.LocalSocketState.UnconnectedState:
            self._schedule_reconnect()

    def _on_disconnected(self) -> None:
        self._schedule_reconnect()

    def _schedule_reconnect(self) -> None:
        self._handshaken = False
        if self._stopped or self.connection_state is ConnectionState.REJECTED:
            return
        if self.connection_state is not ConnectionState.HOST_LOST:
            self._set_connection_state(ConnectionState.DISCONNECTED)
            if self.ever_connected and not self._lost_check.isActive():
                self._lost_check.start()
                self._check_main_process()
        if not self._retry.isActive():
            self._retry.start(self._backoff_ms)
            self._backoff_ms = min(self._backoff_ms * 2, BACKOFF_MAX_MS)

    def _on_ready_read(self) -> None:
        data = self._socket.readAll().data()
        try:
            messages = self._reader.feed(bytes(data))
        except BridgeProtocolError as exc:
            log.warning("closing bridge connection: %s", exc.code.value)
            self._socket.abort()
            self._schedule_reconnect()
            return
        for message in messages:
            self._dispatch(message)

    # C901: one flat match over the wire's push and reply types, one signal per case.
    def _dispatch(self, message: Message) -> None:  # noqa: C901
        if not self._handshaken:
            self._dispatch_handshake(message)
            return
        match message:
            case HostStatePush():
                self.host_state_changed.emit(message)
                if message.state is HostState.CLOSED:
                    self.stop()
                    self._set_connection_state(ConnectionState.DISCONNECTED)
            case SessionsListedPush():
                self.sessions_listed.emit(message)
            case SessionUpdatedPush():
                self.session_updated.emit(message)
                self._answered(message, message.session.session_id, ("relocate", "rename"))
            case SessionOpenedPush():
                self.session_opened.emit(message)
            case TranscriptItemPush():
                self.transcript_item.emit(message)
            case RunStatusPush():
                self.run_status.emit(message)
            case PermissionRequestedPush():
                self.permission_requested.emit(message)
            case PermissionClosedPush():
                self.permission_closed.emit(message)
            case ResumeStartedPush():
                self.resume_started.emit(message)
            case ResumeParkedPush():
                self.resume_parked.emit(message)
            case ResumeFailedPush():
                self.resume_failed.emit(message)
            case ToolSettledPush():
                self._sent_settles.pop(message.correlation_id or "", None)
                self.tool_settled.emit(message)
            case DatabaseTestedPush():
                self._sent_database_tests.discard(message.correlation_id or "")
                self.database_tested.emit(message)
            case SettingsCurrentPush():
                if message.safe_resume_enabled is not None:
                    self._set_safe_resume_enabled(message.safe_resume_enabled)
                self.settings_current.emit(message)
            case SessionsOverviewedPush():
                self._sent_overviews.discard(message.correlation_id or "")
                self.sessions_overviewed.emit(message)
            case ErrorPush() if (message.correlation_id or "") in self._sent_overviews:
                self._sent_overviews.discard(message.correlation_id or "")
                self.sessions_overviewed.emit(None)
            case ErrorPush() if (message.correlation_id or "") in self._sent_database_tests:
                self._sent_database_tests.discard(message.correlation_id or "")
                self.database_tested.emit(
                    DatabaseTestedPush(ok=False, code=message.code, message=message.message)
                )
            case ErrorPush():
                key = message.correlation_id or ""
                sent = self._sent_turns.pop(key, None)
                change = self._changes.pop(key, None)
                settle = self._sent_settles.pop(key, None)
                branch = self._sent_branches.pop(key, None)
                if sent is not None:
                    self.turn_refused.emit(sent[0], sent[1], message)
                elif change is not None:
                    self.session_change_refused.emit(change[0], change[1], message)
                elif settle is not None:
                    # The main process refused before the settle ran (it is closing, say).
                    self.tool_settled.emit(
                        ToolSettledPush(
                            session_id=settle[0],
                            tool_call_id=settle[1],
                            recorded=False,
                            code=message.code,
                            message=message.message,
                        )
                    )
                elif branch is not None:
                    # Refused before the branch was tried (the main process is not ready).
                    self.branch_refused.emit(
                        BranchRefusedPush(
                            session_id=branch[0],
                            event_id=branch[1],
                            code=message.code,
                            message=message.message,
                        )
                    )
                else:
                    self.error_received.emit(message)
            case SessionRemovedPush():
                self.session_removed.emit(message)
                self._answered(message, message.session_id, ("remove",))
            case SessionExportedPush():
                self.session_exported.emit(message)
                self._answered(message, message.session_id, ("export",))
            case ProcessesStoppedPush():
                self.processes_stopped.emit(message)
            case WindowShowPush():
                self.window_show_requested.emit()
            case TimelineOpenedPush():
                self.timeline_opened.emit(message)
            case TimelinePagePush():
                self.timeline_page.emit(message)
            case TimelineEventShownPush():
                self.timeline_event_shown.emit(message)
            case TimelineLocatedPush():
                self.timeline_located.emit(message)
            case BranchOptionsListedPush():
                self.branch_options_listed.emit(message)
            case BranchMadePush():
                self._sent_branches.pop(message.correlation_id or "", None)
                self.branch_made.emit(message)
            case BranchRefusedPush():
                self._sent_branches.pop(message.correlation_id or "", None)
                self.branch_refused.emit(message)
            case _:
                log.warning("ignoring unexpected %s after handshake", message.kind.value)

    def _answered(
        self,
        push: SessionUpdatedPush | SessionRemovedPush | SessionExportedPush,
        session_id: str,
        kinds: tuple[str, ...],
    ) -> None:
        """``session_change_done`` when ``push`` answers a change this window asked for: its
        correlation id is ours, for that session and that kind of change (answers are sent to
        every window, whose correlation ids are their own)."""
        key = push.correlation_id
        change = self._changes.get(key) if key is not None else None
        if key is None or change is None or change[0] != session_id or change[1] not in kinds:
            return
        del self._changes[key]
        self.session_change_done.emit(change[0], change[1], push)

    def _dispatch_handshake(self, message: Message) -> None:
        if isinstance(message, HelloOkPush):
            self._handshaken = True
            self._backoff_ms = BACKOFF_FIRST_MS
            self._set_safe_resume_enabled(message.safe_resume_enabled)
            self._set_connection_state(ConnectionState.CONNECTED)
            self.host_state_changed.emit(HostStatePush(state=message.host_state))
        elif isinstance(message, HelloRejectedPush):
            log.warning("main process rejected the handshake: %s", message.code)
            self._rejected_by_windowless = message.windowless_owner
            self._set_connection_state(ConnectionState.REJECTED)
            self.stop()
        else:
            log.warning("closing bridge connection: %s before hello.ok", message.kind.value)
            self._socket.abort()
            self._schedule_reconnect()

    # ----------------------------------------------------------------- requests

    def _send(self, request: Request) -> bool:
        if not self._handshaken or self.connection_state is not ConnectionState.CONNECTED:
            return False
        self._socket.write(encode_frame(request))
        return True

    def _correlation(self) -> str:
        return f"{self._id_prefix}r{next(self._ids)}"

    def list_sessions(self) -> bool:
        return self._send(SessionsListRequest(correlation_id=self._correlation()))

    def overview_sessions(self) -> bool:
        correlation = self._correlation()
        if not self._send(SessionsOverviewRequest(correlation_id=correlation)):
            return False
        self._sent_overviews.add(correlation)
        while len(self._sent_overviews) > SENT_TURNS_KEPT:
            self._sent_overviews.pop()
        return True

    def create_session(self, cwd: str) -> bool:
        if not 0 < len(cwd) <= MAX_PATH_CHARS:
            return False
        return self._send(SessionsCreateRequest(cwd=cwd, correlation_id=self._correlation()))

    def open_session(self, session_id: str) -> bool:
        return self._send(
            SessionsOpenRequest(session_id=session_id, correlation_id=self._correlation())
        )

    def send_turn(self, session_id: str, text: str) -> bool:
        if not 0 < len(text) <= MAX_TEXT_CHARS:
            return False
        correlation = self._correlation()
        request = TurnsSendRequest(session_id=session_id, text=text, correlation_id=correlation)
        if not self._send(request):
            return False
        # Remembered so a refusal gives the text back; only the newest few can still be answered.
        self._sent_turns[correlation] = (session_id, text)
        while len(self._sent_turns) > SENT_TURNS_KEPT:
            del self._sent_turns[next(iter(self._sent_turns))]
        return True

    def _change(self, session_id: str, what: str, request: Request) -> bool:
        if not self._send(request):
            return False
        assert request.correlation_id is not None
        self._changes[request.correlation_id] = (session_id, what)
        while len(self._changes) > SENT_TURNS_KEPT:
            del self._changes[next(iter(self._changes))]
        return True

    def relocate_session(self, session_id: str, cwd: str) -> bool:
        if not 0 < len(cwd) <= MAX_PATH_CHARS:
            return False
        request = SessionsRelocateRequest(
            session_id=session_id, cwd=cwd, correlation_id=self._correlation()
        )
        return self._change(session_id, "relocate", request)

    def rename_session(self, session_id: str, title: str) -> bool:
        title = title.strip()
        if not 0 < len(title) <= MAX_TITLE_CHARS:
            return False
        request = SessionsRenameRequest(
            session_id=session_id, title=title, correlation_id=self._correlation()
        )
        return self._change(session_id, "rename", request)

    def remove_session(self, session_id: str) -> bool:
        request = SessionsRemoveRequest(session_id=session_id, correlation_id=self._correlation())
        return self._change(session_id, "remove", request)

    def export_session(self, session_id: str, path: str) -> bool:
        if not 0 < len(path) <= MAX_PATH_CHARS:
            return False
        request = SessionsExportRequest(
            session_id=session_id, path=path, correlation_id=self._correlation()
        )
        return self._change(session_id, "export", request)

    def cancel_turn(self, session_id: str) -> bool:
        return self._send(TurnsCancelRequest(session_id=session_id))

    def answer_permission(self, session_id: str, request_id: str, allow: bool) -> bool:
        decision = PermissionDecision.ALLOW if allow else PermissionDecision.DENY
        return self._send(
            PermissionsAnswerRequest(
                session_id=session_id, request_id=request_id, decision=decision
            )
        )

    def resume_latest(
        self,
        session_id: str,
        decision: Literal["isolated_restore", "rebaseline"] | None = None,
        restore_to: str | None = None,
        files_shown: tuple[ChangedFilesShown, ...] | None = None,
    ) -> bool:
        correlation = self._correlation()
        request = ResumeLatestRequest(
            session_id=session_id,
            correlation_id=correlation,
            workspace_decision=decision,
            restore_to=restore_to or None,
            files_shown=files_shown,
        )
        if self._send(request):
            return True
        failed = ResumeFailedPush(
            session_id=session_id,
            code="bridge_disconnected",
            message="not connected to the main process",
            correlation_id=correlation,
        )
        QTimer.singleShot(0, lambda: self.resume_failed.emit(failed))
        return False

    def stop_processes(self, session_id: str) -> bool:
        return self._send(
            ProcessesStopRequest(session_id=session_id, correlation_id=self._correlation())
        )

    def settle_call(
        self,
        session_id: str,
        tool_call_id: str,
        ran: bool,
        note: str | None,
        folder_shown: SettleFolderNote | None = None,
    ) -> bool:
        correlation = self._correlation()
        request = ToolsSettleRequest(
            session_id=session_id,
            tool_call_id=tool_call_id,
            outcome=AttestationChoice.RAN if ran else AttestationChoice.NOT_RUN,
            note=note or None,
            folder_shown=folder_shown,
            correlation_id=correlation,
        )
        if self._send(request):
            self._sent_settles[correlation] = (session_id, tool_call_id)
            while len(self._sent_settles) > SENT_TURNS_KEPT:
                del self._sent_settles[next(iter(self._sent_settles))]
            return True
        refused = ToolSettledPush(
            session_id=session_id,
            tool_call_id=tool_call_id,
            recorded=False,
            code="bridge_disconnected",
            message="not connected to the main process",
            correlation_id=correlation,
        )
        QTimer.singleShot(0, lambda: self.tool_settled.emit(refused))
        return False

    def branch_options(self, session_id: str) -> bool:
        return self._send(
            BranchOptionsRequest(session_id=session_id, correlation_id=self._correlation())
        )

    def create_branch(
        self, session_id: str, event_id: str, to: str | None, current_files: bool
    ) -> bool:
        correlation = self._correlation()
        request = BranchCreateRequest(
            session_id=session_id,
            event_id=event_id,
            to=to[:MAX_PATH_CHARS] if to else None,
            current_files=current_files,
            correlation_id=correlation,
        )
        if self._send(request):
            self._sent_branches[correlation] = (session_id, event_id)
            return True
        refused = BranchRefusedPush(
            session_id=session_id,
            event_id=event_id,
            code="bridge_disconnected",
            message="not connected to the main process",
        )
        QTimer.singleShot(0, lambda: self.branch_refused.emit(refused))
        return False

    def get_settings(self) -> bool:
        return self._send(SettingsGetRequest(correlation_id=self._correlation()))

    def open_timeline(self, session_id: str) -> bool:
        return self._send(
            TimelineOpenRequest(session_id=session_id, correlation_id=self._correlation())
        )

    def timeline_rows(
        self,
        session_id: str,
        run_id: str,
        start: int,
        count: int,
        filters: TimelineRowFilter | None = None,
    ) -> bool:
        request = TimelineRowsRequest(
            session_id=session_id,
            run_id=run_id,
            start=start,
            count=max(1, min(count, MAX_TIMELINE_PAGE)),
            filters=filters,
            correlation_id=self._correlation(),
        )
        return self._send(request)

    def timeline_locate(
        self, session_id: str, run_id: str, seq: int, filters: TimelineRowFilter | None = None
    ) -> bool:
        request = TimelineLocateRequest(
            session_id=session_id,
            run_id=run_id,
            seq=seq,
            filters=filters,
            correlation_id=self._correlation(),
        )
        return self._send(request)

    def timeline_event(self, session_id: str, run_id: str, event_id: str) -> bool:
        request = TimelineEventRequest(
            session_id=session_id,
            run_id=run_id,
            event_id=event_id,
            correlation_id=self._correlation(),
        )
        return self._send(request)

    def test_database(self, database_url: str | None) -> bool:
        correlation = self._correlation()
        self._sent_database_tests.add(correlation)
        sent = self._send(
            SettingsTestDatabaseRequest(database_url=database_url, correlation_id=correlation)
        )
        if not sent:
            self._sent_database_tests.discard(correlation)
            refused = DatabaseTestedPush(
                ok=False, code="bridge_disconnected", message="not connected to the main process"
            )
            QTimer.singleShot(0, lambda: self.database_tested.emit(refused))
        return sent

    def update_settings(
        self,
        provider: ProviderChoice,
        openai_base_url: str,
        openai_model: str,
        openai_api_key: str | None,
        max_steps: int | None = None,
        *,
        safe_resume: bool | None = None,
        auto_resume: bool | None = None,
        provider_tuning: ProviderTuning | None = None,
        database: DatabaseChoice | None = None,
        database_url: str | None = None,
    ) -> bool:
        return self._send(
            SettingsUpdateRequest(
                database=database,
                database_url=database_url,
                provider=provider,
                openai_base_url=openai_base_url,
                openai_model=openai_model,
                openai_api_key=openai_api_key,
                max_steps=max_steps,
                safe_resume=safe_resume,
                auto_resume=auto_resume,
                provider_tuning=provider_tuning,
                correlation_id=self._correlation(),
            )
        )
