"""The renderer's window: sessions on the left; header, banner, transcript, permission prompt
and composer on the right; connection state in the status bar.

Why the window keeps so little state: everything durable lives in the main process. The window
remembers only which session is on screen and which sessions are running (from pushes), and it
re-asks for the list and the open session after every reconnect.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from PySide6.QtCore import QCoreApplication, QDir, QEvent, QMargins, QObject, QSize, Qt, QTimer
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence, QResizeEvent
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QMainWindow,
    QMessageBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.bridge_contract import (
    BranchOrigin,
    ErrorPush,
    ProcessesStoppedPush,
    ResumeStartedPush,
    RunStatusPush,
    RunStatusValue,
    SessionOpenedPush,
    SessionRemovedPush,
    SessionsListedPush,
    SessionSummary,
    SessionUpdatedPush,
    SettingsCurrentPush,
    ToolCardItem,
    ToolSettledPush,
    TranscriptItemPush,
    UserMessageItem,
)
from app.visible_text import visible
from renderer import theme
from renderer.auto_resume_notice import AutoResumeNotice
from renderer.branch_dialog import boundary_words
from renderer.branch_flow import BranchFlow, BranchPoint
from renderer.bridge_port import BridgePort, ConnectionState
from renderer.composer import EDITOR_LINES, Composer
from renderer.connection_status import ConnectionStatus
from renderer.elided_label import ElidedLabel
from renderer.host_lost_panel import SUPERSEDED_CLOSE_MS, HostLostPanel
from renderer.interrupted_banner import BannerState, InterruptedBanner
from renderer.measured_row import MeasuredRow
from renderer.park_text import describe
from renderer.permission_prompt import PermissionPrompt
from renderer.session_actions import SessionActions
from renderer.session_list import SessionListPanel, display_title
from renderer.settings_dialog import SettingsDialog
from renderer.timeline_panel import TimelinePanel
from renderer.transcript_view import TranscriptView

_ACTIVE = frozenset(
    {RunStatusValue.CREATED, RunStatusValue.RUNNING, RunStatusValue.WAITING_FOR_USER}
)


_RESUMABLE = frozenset({BannerState.IDLE, BannerState.PARKED, BannerState.FAILED})
"""Banner states in which Safe resume can be asked for (``InterruptedBanner.request_resume``)."""

SHORT_WINDOW_PX = 640
"""Below this height, with the Timeline open, the composer takes two lines, not four, and the
banner is compact (its title, reasons and buttons; the rest under More)."""

SESSION_LIST_MAX_PX = 460
"""The session list grows with a wide window (a quarter of the width) up to this."""

RESERVED_HEIGHT_PX = 460
"""Height kept for menu, header, banner text, transcript, composer and status bar."""


USUAL_WINDOW = QSize(1180, 760)
"""The window's first size on a screen with room for it."""

MIN_WINDOW = QSize(720, 480)

SCREEN_MARGIN = QSize(40, 60)
"""Room kept around a first window that has to shrink to fit: its frame and title bar, which
the available geometry does not include."""


def first_size(available: QSize | None) -> QSize:
    """The window's first size: the usual one, shrunk to what the screen has free (the
    composer, Send and the status bar stay on screen on a small display), never below the
    minimum size."""
    if available is None or available.isEmpty():
        return QSize(USUAL_WINDOW)
    room = available - SCREEN_MARGIN
    return USUAL_WINDOW.boundedTo(room).expandedTo(MIN_WINDOW)


def _tr(text: str) -> str:
    return QCoreApplication.translate("MainWindow", text)


def _elsewhere(summary: SessionSummary | None) -> bool:
    """Another process runs the session or holds it (a shared ledger): what it commits
    reaches this window only through the main process's sweep."""
    return summary is not None and (summary.running_elsewhere or summary.held_elsewhere is not None)


REFUSAL_DETAIL_CODES = frozenset({"provider_config_invalid", "provider_script_invalid"})
"""Refusals whose message names the one setting to fix (``no model configured (set
MAKA_MODEL)``): the composer shows it after the code's sentence."""


WAITING_AFTER_S = 2.0
"""A running turn quiet this long after its last step is said to wait for the model's answer."""
STALLED_AFTER_S = 5.0
"""A reply being written that has been quiet this long is said to have stopped for a while."""


def waited_words(seconds: float) -> str:
    """``12 s``, ``2 min 5 s``: how long a turn has waited, in whole seconds."""
    whole = int(seconds)
    if whole < 120:
        return _tr("{n} s").replace("{n}", str(whole))
    return _tr("{m} min {n} s").replace("{m}", str(whole // 60)).replace("{n}", str(whole % 60))


class MainWindow(QMainWindow):
    def __init__(
        self,
        bridge: BridgePort,
        parent: QWidget | None = None,
        *,
        confirm_quit: bool = False,
        restart_argv: Sequence[str] = (),
    ) -> None:
        super().__init__(parent)
        self.confirm_quit = confirm_quit
        """Ask before a user's close stops running turns (the real app; off in widget tests and
        when the main process itself closes the window)."""
        self.setWindowTitle("Maka")
        self.setMinimumSize(MIN_WINDOW)
        screen = self.screen()
        self.resize(first_size(screen.availableGeometry().size() if screen else None))
        self._bridge = bridge
        self._session_id: str | None = None
        self._running: set[str] = set()
        # Of those, the ones another process runs (a shared ledger): nothing here can stop them.
        self._elsewhere: set[str] = set()
        self._pending_create_cwd: str | None = None
        # A message typed with no session open: sent once the session it asked for is made.
        self._pending_first_text: str | None = None
        self._selecting = False
        # A draft belongs to its session: what was typed for a session the user left waits
        # here, and comes back when that session is shown again (None: no session open).
        self._drafts: dict[str | None, str] = {}
        # The open session's transcript asked for again (another process changed it): its
        # answer updates the items shown, where the reader is, instead of starting over.
        self._rereading: str | None = None
        self._settings: SettingsCurrentPush | None = None
        self._restart_argv = tuple(restart_argv)
        self._build()
        self._build_actions()
        self._wire()
        self._show_session(None)

    # ----------------------------------------------------------------- layout

    def _build(self) -> None:
        self.sessions = SessionListPanel()
        self.sessions.setMinimumWidth(220)
        right = QWidget()
        column = QVBoxLayout(right)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        header = QWidget()
        header_layout = QVBoxLayout(header)
        header_layout.setContentsMargins(20, 14, 20, 8)
        header_layout.setSpacing(2)
        # Elided, never wider than the header: a long title or path must not squeeze the
        # session list or push text out of view (the whole text is the tooltip).
        self.title_label = ElidedLabel()
        font = self.title_label.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.25)
        self.title_label.setFont(font)
        self.path_label = ElidedLabel(Qt.TextElideMode.ElideMiddle)
        # A branched session names its source and the point it continues from (issue #36).
        self.branch_label = ElidedLabel()
        self.branch_label.setVisible(False)
        self._origin_session: str | None = None
        header_layout.addWidget(self.title_label)
        header_layout.addWidget(self.path_label)
        header_layout.addWidget(self.branch_label)
        self.host_lost = HostLostPanel(self._restart_argv)
        self.host_lost.opened_elsewhere.connect(self.close)
        host_lost_holder = MeasuredRow(self.host_lost, margins=QMargins(20, 10, 20, 4))
        self.host_lost.shown_changed.connect(host_lost_holder.setVisible)
        host_lost_holder.setVisible(False)
        self.banner = InterruptedBanner(self._bridge)
        banner_holder = MeasuredRow(self.banner, margins=QMargins(20, 4, 20, 8))
        self.banner.shown_changed.connect(banner_holder.setVisible)
        self.banner.focus_released.connect(self.focus_composer)
        banner_holder.setVisible(not self.banner.isHidden())
        self.transcript = TranscriptView()
        self.transcript.setMinimumHeight(40)  # in a short window the banner keeps its text
        self.permission = PermissionPrompt(self._bridge)
        permission_holder = MeasuredRow(self.permission, margins=QMargins(20, 6, 20, 0))
        self.permission.shown_changed.connect(permission_holder.setVisible)
        self.permission.waiting_changed.connect(self.sessions.model.set_waiting)
        permission_holder.setVisible(not self.permission.isHidden())
        self.composer = Composer()
        self.session_actions = SessionActions(
            self, self._bridge, self.banner, self.sessions.model.summary, lambda: self._session_id
        )
        column.addWidget(host_lost_holder)
        column.addWidget(header)
        column.addWidget(banner_holder)
        # What stands above and beside the permission question: in a short window the
        # question's command scrolls sooner so the whole question fits (_fit_permission).
        self._column = right
        self._permission_holder = permission_holder
        self._rows_above = (host_lost_holder, header, banner_holder)
        self._permission_fit = QTimer(self)
        self._permission_fit.setSingleShot(True)
        self._permission_fit.setInterval(0)
        self._permission_fit.timeout.connect(self._fit_permission)
        # A running turn's wait for the model, said under the transcript once it is quiet.
        # (per session, from its pushes: a session opened later shows how long it has waited)
        self._quiet_since: dict[str, float] = {}
        self._waiting_tick = QTimer(self)
        self._waiting_tick.setInterval(1000)
        self._waiting_tick.timeout.connect(self._show_waiting)
        for watched in (*self._rows_above, permission_holder, self.composer, right):
            watched.installEventFilter(self)
        self.timeline = TimelinePanel(self._bridge)
        self.timeline.setVisible(False)
        column.addWidget(self.transcript, 1)
        column.addWidget(self.timeline, 1)
        column.addWidget(permission_holder)
        column.addWidget(self.composer)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.sessions)
        splitter.addWidget(right)
        # A wide window gives the session list a share (its titles cut less), up to a limit.
        self.sessions.setMaximumWidth(SESSION_LIST_MAX_PX)
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 3)
        splitter.setSizes([280, 900])
        splitter.setChildrenCollapsible(False)
        self.setCentralWidget(splitter)
        self.branch_flow = BranchFlow(
            self,
            self._bridge,
            self.open_session,
            lambda text: self.statusBar().showMessage(text, 10_000),
        )
        self.connection_status = ConnectionStatus(self._bridge)
        self.auto_resume_notice = AutoResumeNotice(self._bridge, self.sessions.model)
        self.statusBar().addPermanentWidget(self.auto_resume_notice.label)
        self.statusBar().addPermanentWidget(self.connection_status)
        self._recolour_header()
        for first, second in (
            (self.sessions.view, self.banner.action_button),
            (self.banner.action_button, self.banner.details_toggle),
            (self.banner.details_toggle, self.banner.copy_button),
            (self.banner.copy_button, self.transcript),
            (self.transcript, self.permission.summary_view),
            (self.permission.summary_view, self.permission.deny_button),
            (self.permission.deny_button, self.permission.allow_button),
            (self.permission.allow_button, self.composer.editor),
            (self.composer.editor, self.composer.send_button),
            (self.composer.send_button, self.composer.stop_button),
        ):
            QWidget.setTabOrder(first, second)

    def _build_actions(self) -> None:
        self.new_action = QAction(_tr("&New session…"), self)
        self.new_action.setShortcut(QKeySequence.StandardKey.New)
        self.new_action.triggered.connect(self.new_session)
        self.settings_action = QAction(_tr("&Settings…"), self)
        self.settings_action.setShortcut(QKeySequence("Ctrl+,"))
        self.settings_action.triggered.connect(self.open_settings)
        self.quit_action = QAction(_tr("&Quit"), self)
        self.quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        self.quit_action.triggered.connect(self.close)
        self.resume_action = QAction(_tr("Safe &resume"), self)
        self.resume_action.setShortcut(QKeySequence("Ctrl+R"))
        self.resume_action.triggered.connect(self.request_resume)
        self.cancel_action = QAction(_tr("S&top turn"), self)
        self.cancel_action.setShortcut(QKeySequence(Qt.Key.Key_Escape))
        self.cancel_action.triggered.connect(self.cancel_turn)
        self.focus_composer_action = QAction(_tr("Write a &message"), self)
        self.focus_composer_action.setShortcut(QKeySequence("Ctrl+L"))
        self.focus_composer_action.triggered.connect(self.focus_composer)
        menu = self.menuBar().addMenu(_tr("&File"))
        menu.addActions([self.new_action, self.settings_action])
        menu.addSeparator()
        menu.addAction(self.quit_action)
        session_menu = self.menuBar().addMenu(_tr("&Session"))
        session_menu.addActions(
            [self.focus_composer_action, self.resume_action, self.cancel_action]
        )
        session_menu.addSeparator()
        session_menu.addActions(self.session_actions.actions)
        self.timeline_action = QAction(_tr("&Timeline"), self)
        self.timeline_action.setCheckable(True)
        self.timeline_action.setShortcut(QKeySequence("Ctrl+T"))
        self.timeline_action.toggled.connect(self.show_timeline)
        view_menu = self.menuBar().addMenu(_tr("&View"))
        view_menu.addAction(self.timeline_action)
        self.sessions.view.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        self.sessions.view.addActions(self.session_actions.actions)
        # The menu shows Safe resume greyed out when the banner has nothing to offer; the
        # shortcut stays live and says why nothing happened (see ``request_resume``).
        session_menu.aboutToShow.connect(
            lambda: self.resume_action.setEnabled(self.banner.state in _RESUMABLE)
        )
        session_menu.aboutToHide.connect(lambda: self.resume_action.setEnabled(True))

    def _wire(self) -> None:
        bridge = self._bridge
        bridge.connection_state_changed.connect(self._on_connection)
        bridge.sessions_listed.connect(self._on_sessions_listed)
        bridge.session_updated.connect(self._on_session_updated)
        bridge.session_opened.connect(self._on_session_opened)
        bridge.transcript_item.connect(self._on_transcript_item)
        bridge.run_status.connect(self._on_run_status)
        bridge.resume_started.connect(self._on_resume_started)
        bridge.tool_settled.connect(self._on_tool_settled)
        bridge.processes_stopped.connect(self._on_processes_stopped)
        self.transcript.settle_requested.connect(self._settle)
        self.transcript.branch_requested.connect(self._continue_from_item)
        self.transcript.branch_open_requested.connect(self.open_session)
        self.timeline.branch_requested.connect(
            lambda session_id, event_id: self.branch_flow.continue_at(
                session_id, BranchPoint(event_id=event_id)
            )
        )
        self.timeline.said.connect(lambda text: self.statusBar().showMessage(text, 6000))
        self.timeline.source_open_requested.connect(self.open_session)
        bridge.settings_current.connect(self._on_settings)
        bridge.error_received.connect(self._on_error)
        bridge.turn_refused.connect(self._on_turn_refused)
        bridge.session_removed.connect(self._on_session_removed)
        bridge.window_show_requested.connect(self.bring_to_front)
        self.sessions.session_selected.connect(self._select)
        self.sessions.new_session_requested.connect(self.new_session)
        self.composer.send_requested.connect(self._send)
        self.composer.cancel_requested.connect(self.cancel_turn)

    # ----------------------------------------------------------------- actions

    @property
    def session_id(self) -> str | None:
        return self._session_id

    def show_timeline(self, shown: bool) -> None:
        """View › Timeline: the session's record in place of its transcript (the composer and
        banner stay)."""
        if self.timeline_action.isChecked() != shown:
            self.timeline_action.setChecked(shown)  # toggled calls back here
            return
        self.transcript.setVisible(not shown)
        self.timeline.setVisible(shown)
        # In a short window the record's rows need the height: the banner keeps its title,
        # reasons and buttons (the rest under More) and the composer takes two lines.
        self._fit_composer()
        if shown:
            if self._session_id is not None:
                self.timeline.open(self._session_id)
            self.timeline.tree.setFocus()

    def open_session(self, session_id: str) -> None:
        """Show ``session_id`` (a branch just made, a "Branched here" link)."""
        if self.sessions.model.row_of(session_id) is None:
            self.statusBar().showMessage(_tr("That session is not in the list."), 8000)
            return
        self.sessions.select(session_id)

    def _continue_from_item(self, item: object) -> None:
        """ "Continue from here…" on a transcript item: a message you sent is its own
        boundary; a tool card's is its result."""
        if self._session_id is None:
            return
        if isinstance(item, UserMessageItem):
            point = BranchPoint(event_id=item.item_id)
        elif isinstance(item, ToolCardItem):
            point = BranchPoint(tool_call_id=item.tool_call_id, run_id=item.run_id)
        else:
            return
        self.branch_flow.continue_at(self._session_id, point)

    def new_session(self) -> None:
        folder = QFileDialog.getExistingDirectory(
            self, _tr("Choose the workspace folder"), QDir.homePath()
        )
        if folder and self._bridge.create_session(folder):
            self._pending_create_cwd = folder
            first, self._pending_first_text = self._pending_first_text, None
            if first is not None:  # (a first message was waiting for its own session)
                self.composer.give_back(first, _tr("Not sent: another session was started."))

    def _start_with(self, text: str) -> None:
        """A message typed with no session open (a first start): ask for the folder to work
        in, make the session there and send the message once it is made; without a folder,
        the text goes back to the composer, with why."""
        if self._pending_first_text is not None:
            # (a second message while the first one's session is being made)
            self.composer.give_back(
                text, _tr("Not sent: the new session is still being made; send it again.")
            )
            return
        folder = QFileDialog.getExistingDirectory(
            self, _tr("Choose the folder this session works in"), QDir.homePath()
        )
        if not folder:
            self.composer.give_back(
                text,
                _tr("Not sent: choose the folder the new session works in, or open a session."),
            )
            return
        if not self._bridge.create_session(folder):
            self.composer.give_back(text, describe("bridge_disconnected").sentence)
            return
        self._pending_create_cwd = folder
        self._pending_first_text = text

    def open_settings(self) -> None:
        self._bridge.get_settings()
        SettingsDialog(self._bridge, self._settings, self).exec()

    def request_resume(self) -> bool:
        """Safe resume of the open session (menu, Ctrl+R); says why when there is none."""
        if self.banner.request_resume():
            return True
        if self._session_id is None:
            reason = _tr("Open a session first.")
        elif self.banner.state is BannerState.DISABLED:
            reason = _tr("Safe resume is turned off; turn it on in Settings (Ctrl+,).")
        elif self.banner.state in (BannerState.RESUMING, BannerState.STARTED):
            reason = _tr("Safe resume is already under way for this session.")
        else:
            reason = _tr("Nothing to resume: this session's last turn was not interrupted.")
        self.statusBar().showMessage(reason, 8000)
        return False

    def cancel_turn(self) -> None:
        session = self._session_id
        if session is not None and session in self._running and session not in self._elsewhere:
            self._bridge.cancel_turn(session)

    def focus_composer(self) -> None:
        self.composer.editor.setFocus(Qt.FocusReason.ShortcutFocusReason)

    def bring_to_front(self) -> None:
        self.showNormal()
        self.raise_()
        self.activateWindow()

    def _send(self, text: str) -> None:
        if self._session_id is None:
            self._start_with(text)
            return
        self.auto_resume_notice.seen(self._session_id)
        self.transcript.follow_newest()
        if not self._bridge.send_turn(self._session_id, text):
            self.composer.give_back(text, describe("bridge_disconnected").sentence)

    def _on_turn_refused(self, session_id: str, text: str, push: ErrorPush) -> None:
        """The main process did not take a message: nothing typed is lost."""
        known = describe(push.code)
        reason = known.sentence if known.known else _tr("The message was not sent.")
        if push.code in REFUSAL_DETAIL_CODES and push.message:
            # The sentence says what kind of setting is wrong; the detail says which one.
            reason = f"{reason} {_tr('Details:')} {visible(push.message[:300])}"
        if session_id == self._session_id:
            self.composer.give_back(text, _tr("Not sent: {reason}").replace("{reason}", reason))
        else:
            # Refused after the user left that session: the text waits in its own draft.
            kept = self._drafts.get(session_id, "")
            if kept.strip() != text:
                self._drafts[session_id] = text + ("\n" + kept if kept.strip() else "")
            self.statusBar().showMessage(f"{reason} [{push.code}]", 10_000)

    def _select(self, session_id: str) -> None:
        if not self._selecting:
            self.auto_resume_notice.seen(session_id)  # the user opened it
        if session_id == self._session_id:
            return
        leaving = self._session_id
        self._show_session(session_id)
        self.composer.clear_note()
        self._switch_draft(leaving, session_id)
        self._note_missing_folder()
        self.transcript.clear()
        self._rereading = None
        self._bridge.open_session(session_id)
        if self.timeline.isVisible():
            self.timeline.open(session_id)

    def _switch_draft(self, leaving: str | None, entering: str | None) -> None:
        """The shared composer shows the draft of the session shown: what was typed for
        ``leaving`` is kept for it, and ``entering``'s own draft (none: an empty composer) takes
        its place, so a message written for one session (and its folder) is never sent to
        another by the next Ctrl+Enter."""
        typed = self.composer.draft
        if typed.strip():
            self._drafts[leaving] = typed
        else:
            self._drafts.pop(leaving, None)
        self.composer.set_draft(self._drafts.pop(entering, ""))

    def _note_missing_folder(self) -> None:
        """A session whose folder is gone (and that has no banner to say so): the composer says
        it before anything is typed; the note, and a message's refusal for the missing folder,
        go once the folder is located."""
        summary = self.sessions.model.summary(self._session_id) if self._session_id else None
        sentence = describe("invalid_cwd").sentence
        refused = _tr("Not sent: {reason}").replace("{reason}", sentence)
        if summary is not None and summary.folder_missing and not summary.interrupted:
            if not self.composer.note:  # a refusal's "Not sent: …" stays
                self.composer.show_note(sentence)
        elif summary is not None and self.composer.note in (sentence, refused):
            # The folder is back (located, say): neither the note nor a refusal for its
            # absence is true any longer; the message given back stays in the editor.
            self.composer.clear_note()

    def _select_quietly(self, session_id: str) -> None:
        """Select a row for the user (a listing, a new session): not a sign they looked at it."""
        self._selecting = True
        try:
            self.sessions.select(session_id)
        finally:
            self._selecting = False

    # ----------------------------------------------------------------- pushes

    def _on_connection(self, state: str) -> None:
        if state == ConnectionState.HOST_LOST:
            self._on_host_lost()
        elif state == ConnectionState.REJECTED and self._bridge.ever_connected:
            self._on_superseded()
        connected = state == ConnectionState.CONNECTED
        self._refresh_availability()
        if connected:
            self._bridge.list_sessions()
            self._bridge.get_settings()
            if self._session_id is not None:
                self._bridge.open_session(self._session_id)

    def _on_host_lost(self) -> None:
        """The main process is gone: nothing runs any more, nothing here can act, and the
        window says so (and never claims a running turn when it is closed)."""
        self._running.clear()
        self._elsewhere.clear()
        self.permission.drop_all()
        self.transcript.mark_running_interrupted()
        self.sessions.model.set_host_stopped()
        self.host_lost.show_lost()
        self.statusBar().clearMessage()

    def _on_superseded(self) -> None:
        """A newer start of Maka owns the data directory: this window closes itself."""
        self._running.clear()
        self._elsewhere.clear()
        self.permission.drop_all()
        self.transcript.mark_running_interrupted()
        self.sessions.model.set_host_stopped()
        self.confirm_quit = False
        if self._bridge.rejected_by_windowless:
            # No window of the new start to use: this one stays until a new one is opened.
            self.host_lost.show_superseded(windowless=True)
            return
        self.host_lost.show_superseded()
        QTimer.singleShot(SUPERSEDED_CLOSE_MS, self.close)

    def _on_sessions_listed(self, push: SessionsListedPush) -> None:
        self.sessions.model.set_sessions(push.sessions)
        for summary in push.sessions:
            self._track_running(summary)
        if (
            self._session_id is not None
            and self.sessions.model.row_of(self._session_id) is not None
        ):
            self._select_quietly(self._session_id)
            self._show_session(self._session_id)
        elif push.sessions:
            self._select_quietly(push.sessions[0].session_id)
            self._offer_composer()
        else:
            self._offer_composer()  # a first start: what is typed is the first message

    def _offer_composer(self) -> None:
        """Put the cursor in the composer when nothing else has it (the window's first listing,
        a session just created): what the user types then is the message, instead of keys sent
        to whatever took focus first (a space would press New)."""
        focused = QApplication.focusWidget()
        if focused is None or focused is self.sessions.new_button:
            self.focus_composer()

    def _on_session_updated(self, push: SessionUpdatedPush) -> None:
        summary = push.session
        before = self.sessions.model.summary(summary.session_id)
        is_new = before is None
        was_running = summary.session_id in self._running
        self.sessions.model.upsert(summary)
        self._track_running(summary)
        if summary.session_id == self._session_id and (
            _elsewhere(before)
            or _elsewhere(summary)
            or (
                was_running
                and summary.session_id not in self._running
                and self.transcript.shows_running_calls()
            )
        ):
            # Another process changed the open session (a shared ledger): it ran a turn in it,
            # committed more of that turn, or ended it; or its run ended without this window
            # seeing the calls end, and recovery closed it. None of that streamed here: the
            # transcript is read again from the ledger rather than left as it was (or saying
            # "Running…").
            self._reread(summary.session_id)
        if (
            is_new
            and self._pending_create_cwd is not None
            and summary.cwd == self._pending_create_cwd
        ):
            self._pending_create_cwd = None
            from_nothing = self._session_id is None
            self._select_quietly(summary.session_id)
            if from_nothing and self._session_id == summary.session_id:
                # What was typed with no session open was written to start this one.
                self.composer.set_draft(self._drafts.pop(None, ""))
            self._offer_composer()
            first, self._pending_first_text = self._pending_first_text, None
            if first is not None and self._session_id == summary.session_id:
                self._send(first)
            elif first is not None:  # (not opened after all: the text stays with the user)
                self.composer.give_back(first, _tr("Not sent: open the new session to send it."))
        elif summary.session_id == self._session_id:
            self._show_session(summary.session_id)
            self._note_missing_folder()

    def _on_session_removed(self, push: SessionRemovedPush) -> None:
        self._running.discard(push.session_id)
        self._quiet_since.pop(push.session_id, None)
        self._drafts.pop(push.session_id, None)
        self.permission.drop_session_requests(push.session_id)
        if push.session_id == self._session_id:
            self._session_id = None
            self.transcript.clear()
            self._show_session(None)
        self._bridge.list_sessions()

    def _on_session_opened(self, push: SessionOpenedPush) -> None:
        if push.session_id == self._session_id:
            if self._rereading == push.session_id:
                self._rereading = None
                self.transcript.refresh_items(push.items, push.omitted_earlier)
            else:
                self.transcript.set_items(push.items, push.omitted_earlier)
            self._show_origin(push.session_id, push.branched_from)

    def _reread(self, session_id: str) -> None:
        """Ask for the open session's transcript again: the ledger holds more than it shows
        (another process ran a turn in it). Where the reader is and the draft stay."""
        if self._bridge.open_session(session_id):
            self._rereading = session_id

    def _show_origin(self, session_id: str | None, origin: BranchOrigin | None) -> None:
        """ "Branched from <title> at <boundary>" under the folder of a branched session."""
        self._origin_session = session_id if origin is not None else None
        if session_id is not None:
            self.timeline.set_origin(session_id, origin)
        if origin is None:
            self.branch_label.setVisible(False)
            self.branch_label.setText("")
            return
        summary = self.sessions.model.summary(origin.source_session_id)
        title = display_title(summary) if summary is not None else visible(origin.source_title)
        title = title or origin.source_session_id
        point = (
            boundary_words(origin.boundary_kind, origin.boundary_label)
            if origin.boundary_label
            else _tr("at event {event}").replace("{event}", origin.boundary_event_id)
        )
        text = (
            _tr("Branched from “{title}”, {point}")
            .replace("{title}", title)
            .replace("{point}", point)
        )
        if origin.current_files:
            text += " " + _tr("(with a copy of the files as they were at branching)")
        self.branch_label.setText(text)
        self.branch_label.setToolTip(
            _tr("Session {session}, event {event}")
            .replace("{session}", origin.source_session_id)
            .replace("{event}", origin.boundary_event_id)
        )
        self.branch_label.setVisible(True)

    def _on_transcript_item(self, push: TranscriptItemPush) -> None:
        self._heard_from_turn(push.session_id)
        if push.session_id == self._session_id:
            self.transcript.apply_item(push.item)

    def _heard_from_turn(self, session_id: str) -> None:
        """A session's turn said something: its quiet starts again."""
        self._quiet_since[session_id] = time.monotonic()
        if session_id == self._session_id and self.composer.waiting_label.isVisible():
            self.composer.set_waiting(None)

    def _show_waiting(self) -> None:
        """While the open session's turn runs here and has been quiet a moment: what it waits
        for, and how long (a local model can take a minute before its first word)."""
        session = self._session_id
        if session is None or session not in self._running or session in self._elsewhere:
            self._waiting_tick.stop()
            self.composer.set_waiting(None)
            return
        if not self._waiting_tick.isActive():
            self._waiting_tick.start()
        quiet = time.monotonic() - self._quiet_since.setdefault(session, time.monotonic())
        awaiting = self.transcript.awaiting_model()
        if awaiting == "answer" and quiet >= WAITING_AFTER_S:
            text = _tr("Waiting for the model to answer… {time}")
        elif awaiting == "more" and quiet >= STALLED_AFTER_S:
            text = _tr("The model has sent nothing more for {time}…")
        else:
            self.composer.set_waiting(None)
            return
        self.composer.set_waiting(text.replace("{time}", waited_words(quiet)))

    def _on_run_status(self, push: RunStatusPush) -> None:
        self._heard_from_turn(push.session_id)
        self._elsewhere.discard(push.session_id)  # a run of this host's
        if push.status in _ACTIVE:
            self._running.add(push.session_id)
        else:
            self._running.discard(push.session_id)
            self.permission.drop_session_requests(push.session_id)
        if push.session_id == self._session_id:
            self._refresh_availability()

    def _on_resume_started(self, push: ResumeStartedPush) -> None:
        self._heard_from_turn(push.session_id)
        self._running.add(push.session_id)
        self._elsewhere.discard(push.session_id)
        if push.automatic:
            self.transcript.note_automatic_run(push.run_id)
        if push.session_id == self._session_id:
            self._refresh_availability()
            self.statusBar().showMessage(
                _tr("Automatic resume started a continuation.")
                if push.automatic
                else _tr("Safe resume started a continuation."),
                6000,
            )

    def _settle(self, tool_call_id: str, ran: bool, note: str) -> None:
        if self._session_id is not None:
            # What the card said the answer does to the folder goes with it: the main process
            # records nothing when that no longer holds, and sends the card as it reads now.
            card = self.transcript.tool_card(tool_call_id)
            shown = card.item.settle_folder if card is not None else None
            self._bridge.settle_call(self._session_id, tool_call_id, ran, note or None, shown)

    def _on_processes_stopped(self, push: ProcessesStoppedPush) -> None:
        """Commands from before the restart ended: the open session's cards read anew (a call
        whose command ended may now be settled by the user)."""
        if push.session_id == self._session_id and not push.still_running:
            self._bridge.open_session(push.session_id)

    def _on_tool_settled(self, push: ToolSettledPush) -> None:
        if push.session_id != self._session_id:
            return
        if push.recorded:
            text = _tr("Recorded your answer.")
            if push.resume_available:
                text = _tr("Recorded. Safe resume can continue from this call.")
            self.statusBar().showMessage(text, 8000)
            settlement = push.settlement
            if settlement is None or (settlement.created and settlement.workspace is not None):
                # The answer may also have taken the folder as the new starting point, which
                # the transcript tells in a notice of its own ("Your answer took the folder as
                # it was…"): only the card is re-sent, so the transcript is read again.
                self._bridge.open_session(push.session_id)
            return
        # A card re-sent with the refusal (``settle_folder_changed``: its note as it is now)
        # is shown first, so the refusal is said under the new words, not wiped by them.
        self.transcript.flush()
        card = self.transcript.tool_card(push.tool_call_id)
        known = describe(push.code or "")
        reason = known.sentence if known.known else (push.message or push.code or "")
        if push.code in ("background_operation_pending", "settle_folder_changed") and push.message:
            # names the command and its pid; or what the card said and what holds now
            reason = f"{reason} {push.message}"
        if card is not None:
            card.settle_refused(f"{reason} [{push.code}]" if push.code else reason)

    def _on_settings(self, push: SettingsCurrentPush) -> None:
        self._settings = push

    def _on_error(self, push: ErrorPush) -> None:
        known = describe(push.code)
        text = known.sentence if known.known else (push.message or push.code)
        first, self._pending_first_text = self._pending_first_text, None
        if first is not None:
            # The session a first message asked for was not made: the text comes back.
            self._pending_create_cwd = None
            self.composer.give_back(first, _tr("Not sent: {reason}").replace("{reason}", text))
        self.statusBar().showMessage(f"{text} [{push.code}]", 10_000)

    # ----------------------------------------------------------------- rendering

    def _track_running(self, summary: SessionSummary) -> None:
        if summary.last_run_status in _ACTIVE:
            self._running.add(summary.session_id)
        else:
            self._running.discard(summary.session_id)
        if summary.running_elsewhere:
            self._elsewhere.add(summary.session_id)
        else:
            self._elsewhere.discard(summary.session_id)

    def _show_session(self, session_id: str | None) -> None:
        self._session_id = session_id
        summary = self.sessions.model.summary(session_id) if session_id else None
        if self._origin_session is not None and session_id != self._origin_session:
            self._show_origin(None, None)
        if summary is None:
            self.title_label.setText(_tr("No session open") if session_id is None else "")
            self.path_label.setText(
                _tr(
                    "Choose a session on the left, start a new one with Ctrl+N, or type a "
                    "message below: Maka then asks which folder it works in."
                )
                if session_id is None
                else ""
            )
            self.banner.set_session(session_id, interrupted=False)
        else:
            self.title_label.setText(display_title(summary))
            self.path_label.setText(summary.cwd)
            self.banner.set_session(
                session_id,
                interrupted=summary.interrupted,
                folder=summary.cwd,
                automatic=summary.interrupted_automatic,
            )
            self.setWindowTitle(f"{display_title(summary)} — Maka")
        self.permission.set_session(session_id)
        self.transcript.set_session_open(session_id is not None)
        self._refresh_availability()

    def _refresh_availability(self) -> None:
        connected = self._bridge.connection_state is ConnectionState.CONNECTED
        session = self._session_id
        # With no session open the composer still takes a message: sending it starts one.
        self.composer.set_available(connected)
        self.composer.set_starts_session(session is None)
        running = session is not None and session in self._running
        elsewhere = running and session in self._elsewhere
        self.composer.set_running(running, elsewhere=elsewhere)
        self._show_waiting()
        # (the Timeline's verdict says nothing of what resume would do while a turn runs)
        self.timeline.set_turn_running(
            session, "elsewhere" if elsewhere else "here" if running else None
        )
        summary = self.sessions.model.summary(session) if session is not None else None
        self.composer.set_held_elsewhere(summary.held_elsewhere if summary is not None else None)
        self.timeline.set_resume_offered(summary is None or summary.interrupted)
        self.cancel_action.setEnabled(connected and running and not elsewhere)
        self.session_actions.set_enabled(connected and session is not None and not running)
        self.new_action.setEnabled(connected)
        self.sessions.new_button.setEnabled(connected)  # the same action as File › New session

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        running = sorted(self._running - self._elsewhere)  # quitting stops this host's turns
        if self.confirm_quit and running and not self._quit_confirmed(running):
            event.ignore()
            return
        super().closeEvent(event)

    def _quit_confirmed(self, running: list[str]) -> bool:
        box = QMessageBox(self)
        box.setIcon(QMessageBox.Icon.Question)
        box.setWindowTitle(_tr("Quit Maka?"))
        box.setTextFormat(Qt.TextFormat.PlainText)
        # Named: the running turn is often not in the session the window shows.
        titles = [self._title_of(session_id) for session_id in running]
        box.setText(
            _tr("A turn is still running in “{title}”.").replace("{title}", titles[0])
            if len(running) == 1
            else _tr("Turns are still running in {count} sessions: {titles}.")
            .replace("{count}", str(len(running)))
            .replace(
                "{titles}",
                ", ".join(f"“{t}”" for t in titles[:3]) + (", …" if len(titles) > 3 else ""),
            )
        )
        box.setInformativeText(
            _tr(
                "Quitting stops it now, with any command it has started. What it has done so "
                "far stays in the session."
            )
        )
        quit_button = box.addButton(_tr("Quit"), QMessageBox.ButtonRole.AcceptRole)
        keep = box.addButton(_tr("Keep working"), QMessageBox.ButtonRole.RejectRole)
        box.setDefaultButton(keep)  # Enter must not stop the running turn
        box.exec()
        return box.clickedButton() is quit_button

    def _title_of(self, session_id: str) -> str:
        """A session's title as the list shows it, shortened for a sentence."""
        summary = self.sessions.model.summary(session_id)
        title = (summary.title if summary is not None else "") or session_id
        return title if len(title) <= 60 else title[:59] + "…"

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        # Keep room for the transcript in short windows (200% scaling on a 1080p screen leaves
        # 540 logical pixels): the banner's details scroll sooner instead of crowding it out.
        spare = event.size().height() - RESERVED_HEIGHT_PX
        self.banner.set_details_line_limit(spare // max(self.fontMetrics().lineSpacing(), 1))
        self._fit_composer()

    def _fit_composer(self) -> None:
        action = getattr(self, "timeline_action", None)  # (a resize while being built)
        short = self.height() < SHORT_WINDOW_PX and action is not None and action.isChecked()
        self.composer.set_editor_lines(2 if short else EDITOR_LINES)
        self.banner.set_compact(short)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if event.type() in (QEvent.Type.Resize, QEvent.Type.Show, QEvent.Type.Hide):
            self._permission_fit.start()  # once the layout has settled
        return super().eventFilter(watched, event)

    def _fit_permission(self) -> None:
        """Keep the whole permission question readable in a short window (720x480, or 200 %
        scaling): its command grows only as far as the height left by the header, the banner,
        the composer and the transcript's minimum allows, then scrolls, so the warning under
        it and the buttons are never covered by the composer."""
        view = self.permission.summary_view
        if not self._permission_holder.isVisible():
            return
        above = sum(row.height() for row in self._rows_above if row.isVisible())
        around = max(self._permission_holder.height() - view.height(), 0)
        room = (  # (the column's rows sit with no spacing between them)
            self._column.height()
            - above
            - self.composer.height()
            - self.transcript.minimumHeight()
            - around
        )
        margin = 2 * math.ceil(view.document().documentMargin()) + 1 + 2 * view.frameWidth()
        view.set_max_lines((room - margin) // max(view.line_height(), 1))

    def _recolour_header(self) -> None:
        palette = self.path_label.palette()
        palette.setColor(self.path_label.foregroundRole(), theme.muted_text(self.palette()))
        self.path_label.setPalette(palette)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self._recolour_header()
