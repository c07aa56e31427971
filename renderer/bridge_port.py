"""What the widgets may do and hear: the signals and request methods of the bridge.

Why a separate base class: the widgets depend on this surface only, so pytest-qt tests drive
them with a fake (a subclass that records requests and emits pushes by hand) while the real
:class:`renderer.bridge_client.RendererBridge` speaks the socket protocol. Push payloads are the
frozen models of :mod:`app.bridge_contract`; widgets never see bytes or sockets.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from PySide6.QtCore import QObject, Signal

from app.bridge_contract import (
    ChangedFilesShown,
    DatabaseChoice,
    ProviderChoice,
    ProviderTuning,
    SettleFolderNote,
    TimelineRowFilter,
)


class ConnectionState(StrEnum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    DISCONNECTED = "disconnected"
    REJECTED = "rejected"
    HOST_LOST = "host_lost"
    """The connection closed and the main process no longer exists: Maka stopped unexpectedly.
    (A new start may still answer on the same name; it rejects this window's token.)"""


class BridgePort(QObject):
    """Signals carry ``app.bridge_contract`` models (typed ``object`` for Qt)."""

    connection_state_changed = Signal(str)
    """A :class:`ConnectionState` value; ``connected`` means the handshake succeeded."""
    host_state_changed = Signal(object)  # HostStatePush
    safe_resume_enabled_changed = Signal(bool)
    sessions_listed = Signal(object)  # SessionsListedPush
    session_updated = Signal(object)  # SessionUpdatedPush
    session_opened = Signal(object)  # SessionOpenedPush
    transcript_item = Signal(object)  # TranscriptItemPush
    run_status = Signal(object)  # RunStatusPush
    permission_requested = Signal(object)  # PermissionRequestedPush
    permission_closed = Signal(object)  # PermissionClosedPush: answered by another client
    resume_started = Signal(object)  # ResumeStartedPush
    resume_parked = Signal(object)  # ResumeParkedPush
    resume_failed = Signal(object)  # ResumeFailedPush
    tool_settled = Signal(object)  # ToolSettledPush
    processes_stopped = Signal(object)  # ProcessesStoppedPush
    settings_current = Signal(object)  # SettingsCurrentPush
    database_tested = Signal(object)  # DatabaseTestedPush
    """Also (``ok`` False, with the code) when the test could not be sent or was refused."""
    error_received = Signal(object)  # ErrorPush
    session_removed = Signal(object)  # SessionRemovedPush
    session_exported = Signal(object)  # SessionExportedPush
    session_change_refused = Signal(str, str, object)
    """(session id, what was asked: relocate / rename / remove / export, ErrorPush)."""
    session_change_done = Signal(str, str, object)
    """(session id, what was asked, the answer: ``SessionUpdatedPush`` for relocate and rename,
    ``SessionRemovedPush``, ``SessionExportedPush``): a change *this window* asked for went
    through. The same pushes also arrive as ``session_updated`` and the like, for every window
    and for any reason (a run ending refreshes its session); only this says a request was
    answered."""
    turn_refused = Signal(str, str, object)
    """(session id, the refused text, ErrorPush): a message the main process did not take;
    the composer gets the text back and says why beside it."""
    window_show_requested = Signal()
    timeline_opened = Signal(object)  # TimelineOpenedPush
    timeline_page = Signal(object)  # TimelinePagePush
    timeline_event_shown = Signal(object)  # TimelineEventShownPush
    timeline_located = Signal(object)  # TimelineLocatedPush
    branch_options_listed = Signal(object)  # BranchOptionsListedPush
    branch_made = Signal(object)  # BranchMadePush
    branch_refused = Signal(object)  # BranchRefusedPush
    """Also when a branch request could not be sent or the main process refused it early."""
    sessions_overviewed = Signal(object)  # SessionsOverviewedPush, or None
    """The answer to ``overview_sessions``: every session's row (``maka sessions --json``'s,
    with the sessions branched from each); None when the main process refused the request."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._connection_state = ConnectionState.CONNECTING
        self._safe_resume_enabled = False
        self._ever_connected = False
        self._rejected_by_windowless = False

    @property
    def connection_state(self) -> ConnectionState:
        return self._connection_state

    @property
    def ever_connected(self) -> bool:
        """Whether a handshake ever succeeded (a later rejection then means a newer start)."""
        return self._ever_connected

    @property
    def rejected_by_windowless(self) -> bool:
        """Whether the start that refused this window has no window of its own (``maka host``
        alone): the window then offers to open one instead of pointing at it."""
        return self._rejected_by_windowless

    @property
    def safe_resume_enabled(self) -> bool:
        """What the main process said at handshake; the flag lives there, not here."""
        return self._safe_resume_enabled

    def _set_connection_state(self, state: ConnectionState) -> None:
        if state is ConnectionState.CONNECTED:
            self._ever_connected = True
        if state != self._connection_state:
            self._connection_state = state
            self.connection_state_changed.emit(state.value)

    def _set_safe_resume_enabled(self, enabled: bool) -> None:
        if enabled != self._safe_resume_enabled:
            self._safe_resume_enabled = enabled
            self.safe_resume_enabled_changed.emit(enabled)

    # Requests. Each returns whether the request left the process; while disconnected nothing
    # is queued (a stale click must not fire after a reconnect).

    def list_sessions(self) -> bool:
        raise NotImplementedError

    def create_session(self, cwd: str) -> bool:
        raise NotImplementedError

    def overview_sessions(self) -> bool:
        """Ask for every session's row as ``maka sessions`` lists it (``sessions_overviewed``):
        what the list's summaries do not carry, such as the sessions branched from each."""
        raise NotImplementedError

    def open_session(self, session_id: str) -> bool:
        raise NotImplementedError

    def send_turn(self, session_id: str, text: str) -> bool:
        raise NotImplementedError

    def cancel_turn(self, session_id: str) -> bool:
        raise NotImplementedError

    def answer_permission(self, session_id: str, request_id: str, allow: bool) -> bool:
        raise NotImplementedError

    def resume_latest(
        self,
        session_id: str,
        decision: Literal["isolated_restore", "rebaseline"] | None = None,
        restore_to: str | None = None,
        files_shown: tuple[ChangedFilesShown, ...] | None = None,
    ) -> bool:
        """Ask for Safe resume. The answer arrives as ``resume_started``, ``resume_parked`` or
        ``resume_failed`` for that session, also when the request could not be sent.
        ``decision``: the user's way forward when the files changed since the stop (continue in
        a restored copy, in ``restore_to`` or a new sibling folder, or with the current files);
        ``files_shown``: the changed files the banner listed when the user chose (a changed
        list parks again with the new one)."""
        raise NotImplementedError

    def stop_processes(self, session_id: str) -> bool:
        """**Stop it**: end the session's commands still running from before Maka stopped;
        answered by ``processes_stopped``."""
        raise NotImplementedError

    def settle_call(
        self,
        session_id: str,
        tool_call_id: str,
        ran: bool,
        note: str | None,
        folder_shown: SettleFolderNote | None = None,
    ) -> bool:
        """Say what the user checked about a call whose outcome is unknown. The answer arrives
        as ``tool_settled`` for that call, also when the request could not be sent.
        ``folder_shown``: what the card said answering does to the folder (an answer on a note
        that no longer holds is refused, and the card comes back with the note as it is)."""
        raise NotImplementedError

    def relocate_session(self, session_id: str, cwd: str) -> bool:
        """Point the session at ``cwd``; answered by ``session_updated`` or
        ``session_change_refused`` (a folder that is another workspace)."""
        raise NotImplementedError

    def rename_session(self, session_id: str, title: str) -> bool:
        raise NotImplementedError

    def remove_session(self, session_id: str) -> bool:
        """Delete the session and its history; answered by ``session_removed``."""
        raise NotImplementedError

    def export_session(self, session_id: str, path: str) -> bool:
        raise NotImplementedError

    def get_settings(self) -> bool:
        raise NotImplementedError

    def open_timeline(self, session_id: str) -> bool:
        """Ask for the session's timeline: its runs and the plan (``timeline_opened``)."""
        raise NotImplementedError

    def timeline_rows(
        self,
        session_id: str,
        run_id: str,
        start: int,
        count: int,
        filters: TimelineRowFilter | None = None,
    ) -> bool:
        """Ask for rows of one run, counted among those ``filters`` shows (``timeline_page``)."""
        raise NotImplementedError

    def timeline_locate(
        self, session_id: str, run_id: str, seq: int, filters: TimelineRowFilter | None = None
    ) -> bool:
        """Ask where a row is among those ``filters`` shows (``timeline_located``)."""
        raise NotImplementedError

    def timeline_event(self, session_id: str, run_id: str, event_id: str) -> bool:
        """Ask for one event's canonical JSON (``timeline_event_shown``)."""
        raise NotImplementedError

    def branch_options(self, session_id: str) -> bool:
        """Ask where the session can be branched from (``branch_options_listed``)."""
        raise NotImplementedError

    def create_branch(
        self, session_id: str, event_id: str, to: str | None, current_files: bool
    ) -> bool:
        """Continue from ``event_id`` in a new session (``branch_made`` or ``branch_refused``,
        also when the request could not be sent). ``to``: the new folder, or None for a new
        sibling of the session's folder."""
        raise NotImplementedError

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
        raise NotImplementedError

    def test_database(self, database_url: str | None) -> bool:
        """Try a PostgreSQL server (``None``: the stored URL); answered by ``database_tested``."""
        raise NotImplementedError
