"""The interrupted banner: Safe resume for a session whose latest run failed with
``app_restarted`` (docs/design/desktop.md; every such run is one the resume seam accepts).

States (docs/design/desktop.md): ``idle`` (explanation + Safe resume) -> ``resuming`` (button
disabled, busy bar) -> ``started`` (the banner closes; the continuation streams into the transcript)
| ``parked`` (colour of the most serious reason, one sentence per reason, then one on what to
do next; expandable details with codes and affected operations, Copy diagnostics, Try again) |
``failed`` (error text, Retry).
With the flag off the banner is ``disabled``: it says Safe resume is off and offers no button
that could only fail. ``hidden`` when the session is not interrupted.

Why the state is kept per session: a resume belongs to the session it was asked for, so
switching sessions while one is resuming must neither lose its answer nor show it on the
other session. The banner only sends a sessionId; the main process supplies every fact. A park
or failure of auto-resume at startup arrives the same way (pushed, or sent when the bridge
connects), so the banner opens parked instead of offering a resume that would be refused.

Why the body shows at most ``BODY_LINES`` lines with "More" for the rest: at the window's
minimum size a body of four or five wrapped lines pushed the transcript out of view. The reasons
(one line each) and the buttons stay; the running text below them is cut to two lines until the
reader asks for the rest.

This module is the widget: layout, the per-session state machine, pushes and colours. What it
says in each state (titles, bodies, reason sentences, details, the diagnostics block) is
composed in ``renderer.banner_text``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Literal

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt, QTime, Signal
from PySide6.QtGui import QGuiApplication, QPalette, QResizeEvent
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.bridge_contract import (
    ProcessesStoppedPush,
    ResumeDiagnostic,
    ResumeFailedPush,
    ResumeParkedPush,
    ResumeStartedPush,
    SettingsCurrentPush,
    ToolSettledPush,
    changed_files_shown,
)
from app.visible_text import visible
from renderer import theme
from renderer.banner_text import (
    BannerState,
    SessionResume,
    at_stop_note,
    automatic_stop_note,
    copy_for,
    details_for,
    diagnostics_block,
    offers_try_again,
    reason_sentences,
    rebaseline_note,
    severity_of,
    with_full_stop,
)
from renderer.bridge_port import BridgePort, ConnectionState
from renderer.cut_label import CutLabel
from renderer.elided_label import ElidedLabel
from renderer.park_text import Severity
from renderer.plain_tip import plain_tip
from renderer.restore_dialog import ask_restore_target
from renderer.tinted_panel import TintedPanel


def _tr(text: str) -> str:
    return QCoreApplication.translate("InterruptedBanner", text)


DETAILS_MAX_LINES = 10
SURVIVOR_REASON = "background_operation_pending"
DETAILS_MIN_LINES = 2
TIGHT_LINES = 8
"""Fewer spare lines than this in the window: More and Details take turns
(``set_details_line_limit``)."""


class InterruptedBanner(TintedPanel):
    locate_folder_requested = Signal(str)
    """A session id whose folder is missing: the window asks where it is now."""
    remove_session_requested = Signal(str)
    focus_released = Signal()
    """The button that had the keyboard focus was disabled or hidden (Safe resume pressed, a
    decision taken): the window puts the cursor back in the composer instead of leaving it on
    whatever Qt chose next, where typing is lost."""

    def __init__(self, bridge: BridgePort, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("InterruptedBanner")
        self.setAccessibleName(_tr("Interrupted run"))
        self._bridge = bridge
        self._session_id: str | None = None
        self._interrupted = False
        self._folder = ""
        self._automatic_stop = False
        self._by_session: dict[str, SessionResume] = {}
        self._details_lines = DETAILS_MAX_LINES
        self._stopping: set[str] = set()
        self._resume_from_environment = False
        self._compact = False
        self._compact_hides = False
        self._build()
        bridge.resume_started.connect(self._on_started)
        bridge.resume_parked.connect(self._on_parked)
        bridge.resume_failed.connect(self._on_failed)
        bridge.tool_settled.connect(self._on_tool_settled)
        bridge.processes_stopped.connect(self._on_processes_stopped)
        bridge.safe_resume_enabled_changed.connect(lambda _enabled: self._render())
        bridge.settings_current.connect(self._on_settings)
        bridge.connection_state_changed.connect(self._on_connection)
        self._render()

    # ----------------------------------------------------------------- layout

    def _build(self) -> None:
        outer = QVBoxLayout(self)
        outer.setContentsMargins(16, 12, 12, 12)
        outer.setSpacing(6)
        top = QHBoxLayout()
        top.setSpacing(12)
        text_column = QVBoxLayout()
        text_column.setSpacing(4)
        self.title_label = QLabel()
        self.title_label.setTextFormat(Qt.TextFormat.PlainText)
        self.title_label.setObjectName("BannerTitle")
        title_font = self.title_label.font()
        title_font.setBold(True)
        self.title_label.setFont(title_font)
        self.title_label.setWordWrap(True)
        self.body_label = CutLabel()
        self.body_label.setWordWrap(True)
        self.body_label.setTextFormat(Qt.TextFormat.PlainText)
        self.body_label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.body_label.installEventFilter(self)
        self._body_open = False
        self._tight = False  # (``set_details_line_limit``)
        self.body_more = QToolButton()
        self.body_more.setAutoRaise(True)
        self.body_more.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.body_more.setArrowType(Qt.ArrowType.RightArrow)
        self.body_more.setText(_tr("More"))
        self.body_more.setVisible(False)
        self.body_more.clicked.connect(self._on_body_more)
        self.reasons_box = QVBoxLayout()
        self.reasons_box.setSpacing(2)
        # Parked: the reasons, then the body says what the user can do about them. Compact,
        # More sits beside the title (``set_compact``).
        self.title_row = QHBoxLayout()
        self.title_row.setSpacing(8)
        self.title_row.addWidget(self.title_label, 1)
        text_column.addLayout(self.title_row)
        text_column.addLayout(self.reasons_box)
        text_column.addWidget(self.body_label)
        text_column.addWidget(self.body_more, 0, Qt.AlignmentFlag.AlignLeft)
        self._text_column = text_column
        self._outer = outer
        top.addLayout(text_column, 1)
        self.busy_bar = QProgressBar()
        self.busy_bar.setRange(0, 0)
        self.busy_bar.setTextVisible(False)
        self.busy_bar.setFixedWidth(72)
        self.busy_bar.setMaximumHeight(8)
        self.busy_bar.setAccessibleName(_tr("Checking"))
        self.action_button = QPushButton()
        self.action_button.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.action_button.clicked.connect(self._on_action)
        # A missing folder offers a second way out: the session is gone for good.
        self.remove_button = QPushButton(_tr("&Remove session…"))
        self.remove_button.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.remove_button.clicked.connect(self._on_remove)
        # A command from before the restart still runs (background_operation_pending): the
        # user can stop it here; the banner updates when it has ended (docs/design/recovery.md 9).
        self.stop_button = QPushButton(_tr("Stop it"))
        self.stop_button.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.stop_button.setToolTip(
            _tr("Stop the command that still runs from before Maka stopped (and what it started)")
        )
        self.stop_button.clicked.connect(self.stop_survivors)
        top.addWidget(self.busy_bar, 0, Qt.AlignmentFlag.AlignTop)
        top.addWidget(self.stop_button, 0, Qt.AlignmentFlag.AlignTop)
        top.addWidget(self.action_button, 0, Qt.AlignmentFlag.AlignTop)
        top.addWidget(self.remove_button, 0, Qt.AlignmentFlag.AlignTop)
        outer.addLayout(top)
        self._build_decisions(outer)
        self.tools_row = QWidget()
        tools = QHBoxLayout(self.tools_row)
        tools.setContentsMargins(0, 2, 0, 0)
        tools.setSpacing(8)
        self.details_toggle = QToolButton()
        self._details_shown = False
        self.details_toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.details_toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.details_toggle.setText(_tr("Details"))
        self.details_toggle.setAutoRaise(True)
        self.details_toggle.clicked.connect(self._on_details_clicked)
        self.copy_button = QPushButton(_tr("Copy diagnostics"))
        self.copy_button.clicked.connect(self.copy_diagnostics)
        tools.addWidget(self.details_toggle)
        tools.addStretch(1)
        tools.addWidget(self.copy_button)
        outer.addWidget(self.tools_row)
        # Details: one line per code or diagnostic, wrapped at spaces (codes and ids stay whole),
        # scrolling past DETAILS_MAX_LINES so hundreds of diagnostics never push the page away.
        self.details_panel = TintedPanel()
        details_layout = QVBoxLayout(self.details_panel)
        details_layout.setContentsMargins(1, 1, 1, 1)
        self.details_label = QLabel()
        self.details_label.setTextFormat(Qt.TextFormat.PlainText)
        self.details_label.setFont(theme.monospace_font())
        self.details_label.setContentsMargins(9, 7, 9, 7)
        self.details_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # Lines wrap at spaces, so a diagnostic's explanation is never hidden to the right; a
        # single word longer than the box (a long path) scrolls sideways instead of being cut.
        self.details_label.setWordWrap(True)
        self.details_scroll = QScrollArea()
        self.details_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.details_scroll.setWidget(self.details_label)
        self.details_scroll.setWidgetResizable(True)
        self.details_scroll.viewport().setAutoFillBackground(False)
        self.details_label.setAutoFillBackground(False)
        details_layout.addWidget(self.details_scroll)
        outer.addWidget(self.details_panel)
        self.reason_labels: list[QLabel] = []
        # Compact (beside the Timeline): one line per reason, cut with "…" (whole on hover).
        self.reason_lines: list[ElidedLabel] = []

    def _build_decisions(self, outer: QVBoxLayout) -> None:
        """The two ways forward after a workspace park, each with its consequence in one line."""
        self.decisions_row = QWidget()
        grid = QGridLayout(self.decisions_row)
        grid.setContentsMargins(0, 4, 0, 2)
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(4)
        self.restore_button = QPushButton(_tr("Continue in a restored copy…"))
        self.restore_button.clicked.connect(self._on_restore)
        self.restore_note = QLabel(at_stop_note())
        self.restore_note.setTextFormat(Qt.TextFormat.PlainText)
        self.rebaseline_button = QPushButton(_tr("Continue with my current files"))
        self.rebaseline_button.clicked.connect(lambda: self.request_decision("rebaseline"))
        self.rebaseline_note = QLabel(rebaseline_note(compared=True))
        self.rebaseline_note.setTextFormat(Qt.TextFormat.PlainText)
        pairs = (
            (self.restore_button, self.restore_note),
            (self.rebaseline_button, self.rebaseline_note),
        )
        for row, (button, note) in enumerate(pairs):
            button.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
            note.setWordWrap(True)
            button.setToolTip(plain_tip(note.text()))
            grid.addWidget(button, row, 0, Qt.AlignmentFlag.AlignLeft)
            grid.addWidget(note, row, 1)
        grid.setColumnStretch(1, 1)
        outer.addWidget(self.decisions_row)

    def _on_restore(self) -> None:
        """Confirm the copy, in a new sibling folder or one the user picks."""
        place = self._note("workspace_restore_place")
        confirmed, folder = ask_restore_target(
            self,
            self._folder,
            self._restore_point(),
            abandoned=self._note("workspace_restore_abandoned") is not None,
            place=(place.path if place else None) or "",
            clone=place.clone if place else None,
        )
        if confirmed:
            self.request_decision("isolated_restore", folder)

    def _note(self, code: str) -> ResumeDiagnostic | None:
        """The current park's first diagnostic with ``code`` (the main process's notes on a
        restored copy: what it would hold, where it would go, one a resume left), or None."""
        return next((d for d in self._current().diagnostics if d.code == code), None)

    def _restore_point(self) -> str:
        """What a restored copy would hold when it is not the folder at the stop (the main
        process's ``workspace_restore_point`` note), or ""."""
        point = self._note("workspace_restore_point")
        return point.message if point is not None else ""

    def request_decision(
        self, decision: Literal["isolated_restore", "rebaseline"], restore_to: str | None = None
    ) -> bool:
        """Continue a workspace park the way the user chose, if the park offers it."""
        current = self._current()
        if self.state is not BannerState.PARKED or decision not in current.workspace_options:
            return False
        session_id = self._session_id
        assert session_id is not None
        self._by_session[session_id] = replace(current, state=BannerState.RESUMING)
        self._render()
        # With the current files: the files the banner listed go with the choice, so a folder
        # that changed since is shown again rather than taken on a list the user did not see.
        shown = changed_files_shown(current.diagnostics) if decision == "rebaseline" else None
        self._bridge.resume_latest(session_id, decision, restore_to, shown)
        return True

    # ----------------------------------------------------------------- public

    @property
    def state(self) -> BannerState:
        if self._session_id is None or not self._interrupted:
            current = self._current()
            if current.state is BannerState.STARTED:
                return BannerState.STARTED
            return BannerState.HIDDEN
        if not self._bridge.safe_resume_enabled:
            return BannerState.DISABLED
        return self._current().state

    @property
    def session_id(self) -> str | None:
        return self._session_id

    def set_session(
        self, session_id: str | None, interrupted: bool, folder: str = "", automatic: bool = False
    ) -> None:
        """Show the banner for ``session_id``; ``interrupted`` = latest run failed with
        ``app_restarted``; ``folder`` = where the session lives (named when it is missing);
        ``automatic``: that run was an automatic Safe resume, never taken up by itself again. A
        session whose resume started stays closed until the main process reports it is no
        longer interrupted."""
        if session_id != self._session_id:
            self._body_open = False  # More opened another session's text, not this one's
        self._session_id = session_id
        self._interrupted = interrupted
        self._folder = folder
        self._automatic_stop = automatic
        if session_id is not None:
            current = self._by_session.get(session_id)
            if current is not None and current.state is BannerState.STARTED and not interrupted:
                del self._by_session[session_id]
        self._render()

    @property
    def folder_missing(self) -> bool:
        """The shown session parked because its folder is gone: Locate folder… is offered."""
        return (
            self.state is BannerState.PARKED
            and "workspace_folder_missing" in self._current().reasons
        )

    def forget_session(self, session_id: str) -> None:
        """What the banner knew about ``session_id`` no longer holds (its folder was located):
        it offers Safe resume again, unless the main process tells the park that stands now
        (planned again once the folder is found)."""
        self._by_session.pop(session_id, None)
        self._render()

    def _on_action(self) -> None:
        if self.folder_missing and self._session_id is not None:
            self.locate_folder_requested.emit(self._session_id)
        else:
            self.request_resume()

    def _on_remove(self) -> None:
        if self._session_id is not None:
            self.remove_session_requested.emit(self._session_id)

    def request_resume(self) -> bool:
        """Ask for Safe resume if the banner currently offers it (button or Ctrl+R)."""
        if self.state not in (BannerState.IDLE, BannerState.PARKED, BannerState.FAILED):
            return False
        current = self._current()
        retrying = self.state is BannerState.PARKED
        if retrying and not offers_try_again(current):
            return False  # planning again from the same facts can only park the same way
        session_id = self._session_id
        assert session_id is not None
        self._by_session[session_id] = replace(
            current, state=BannerState.RESUMING, retrying=retrying
        )
        self._render()
        self._bridge.resume_latest(session_id)
        return True

    def diagnostics_text(self) -> str:
        """The block "Copy diagnostics" puts on the clipboard: codes, operations, sentences."""
        return diagnostics_block(self._session_id, self._current())

    @property
    def compact(self) -> bool:
        return self._compact

    def set_compact(self, compact: bool) -> None:
        """Compact (while View › Timeline is open, whose rows need the height): the title, one
        line per reason and the buttons; the running text, the ways forward and the details
        wait under More."""
        if compact == self._compact:
            return
        self._compact = compact
        self._body_open = False
        self._text_column.removeWidget(self.body_more)
        self.title_row.removeWidget(self.body_more)
        if compact:
            self.title_row.addWidget(self.body_more, 0, Qt.AlignmentFlag.AlignVCenter)
            self._outer.setContentsMargins(12, 6, 10, 6)
        else:
            self._text_column.addWidget(self.body_more, 0, Qt.AlignmentFlag.AlignLeft)
            self._outer.setContentsMargins(16, 12, 12, 12)
        self._render()

    @property
    def collapsed(self) -> bool:
        """Compact and not opened with More."""
        return self._compact and not self._body_open

    def set_details_line_limit(self, lines: int) -> None:
        """How many detail lines show before they scroll (the window shrinks it when short).
        With room for fewer than ``TIGHT_LINES``, More and Details take turns: both open drew
        the banner over the transcript and the composer (800x600)."""
        self._details_lines = max(DETAILS_MIN_LINES, min(lines, DETAILS_MAX_LINES))
        was_tight, self._tight = self._tight, lines < TIGHT_LINES
        if self._tight and self._body_open and self._details_shown:
            self.set_details_shown(False)
        if self._tight != was_tight:
            self._render()  # (the decisions' notes show only with room for them)
        self._fit_details()

    def copy_diagnostics(self) -> None:
        QGuiApplication.clipboard().setText(self.diagnostics_text())
        self.copy_button.setText(_tr("Copied"))

    # ----------------------------------------------------------------- pushes

    def _current(self) -> SessionResume:
        if self._session_id is None:
            return SessionResume(state=BannerState.HIDDEN)
        return self._by_session.get(self._session_id, SessionResume())

    def _on_started(self, push: ResumeStartedPush) -> None:
        self._by_session[push.session_id] = SessionResume(state=BannerState.STARTED)
        self._render()

    def _on_parked(self, push: ResumeParkedPush) -> None:
        before = self._by_session.get(push.session_id)
        checked_at = ""
        if before is not None and before.state is BannerState.RESUMING and before.retrying:
            checked_at = QTime.currentTime().toString("HH:mm")
        self._by_session[push.session_id] = SessionResume(
            state=BannerState.PARKED,
            reasons=push.rejection_reasons,
            diagnostics=push.diagnostics,
            checked_at=checked_at,
            automatic=push.automatic,
            workspace_options=push.workspace_options,
        )
        self._render()

    def _on_failed(self, push: ResumeFailedPush) -> None:
        self._by_session[push.session_id] = SessionResume(
            state=BannerState.FAILED,
            failure_code=push.code,
            failure_message=push.message,
        )
        self._render()

    def stop_survivors(self) -> bool:
        """**Stop it**: ask the main process to end the session's commands from before the
        restart; the answer is ``processes.stopped`` (and the park as it stands then)."""
        session_id = self._session_id
        if session_id is None or session_id in self._stopping:
            return False
        if not self._bridge.stop_processes(session_id):
            return False
        self._stopping.add(session_id)
        self._render()
        return True

    def _on_settings(self, push: SettingsCurrentPush) -> None:
        if push.resume_from_environment != self._resume_from_environment:
            self._resume_from_environment = push.resume_from_environment
            self._render()

    def _on_processes_stopped(self, push: ProcessesStoppedPush) -> None:
        self._stopping.discard(push.session_id)
        if push.resume_available:
            current = self._by_session.get(push.session_id)
            if current is None or current.state is not BannerState.RESUMING:
                self._by_session[push.session_id] = SessionResume()
        self._render()

    def _on_tool_settled(self, push: ToolSettledPush) -> None:
        """The user settled a call with an unknown outcome and nothing else parks: offer Safe
        resume again (a park that still holds arrives as ``resume.parked``)."""
        if push.recorded and push.resume_available:
            current = self._by_session.get(push.session_id)
            if current is None or current.state is not BannerState.RESUMING:
                self._by_session[push.session_id] = SessionResume()
                self._render()

    def _on_connection(self, state: str) -> None:
        if state == ConnectionState.CONNECTED:
            self._render()
            return
        for session_id, current in list(self._by_session.items()):
            if current.state is BannerState.RESUMING:
                self._by_session[session_id] = SessionResume(
                    state=BannerState.FAILED,
                    failure_code="bridge_disconnected",
                    failure_message="lost the connection while resuming",
                )
        self._render()

    # ----------------------------------------------------------------- rendering

    def refresh_colours(self) -> None:
        self._apply_colours(self._severity())

    def _severity(self) -> Severity:
        state = self.state
        if state is BannerState.PARKED:
            return severity_of(self._current())
        if state is BannerState.FAILED:
            return Severity.ERROR
        if state is BannerState.DISABLED:
            return Severity.INFO
        return Severity.WARN

    def _render(self) -> None:
        focused = QApplication.focusWidget()
        had_focus = focused is not None and self.isAncestorOf(focused)
        self._render_state()
        focused = QApplication.focusWidget()
        if had_focus and (
            focused is None
            or not self.isAncestorOf(focused)
            or not focused.isVisible()
            or not focused.isEnabled()
        ):
            self.focus_released.emit()

    def _render_state(self) -> None:
        state = self.state
        current = self._current()
        self.setVisible(state not in (BannerState.HIDDEN, BannerState.STARTED))
        self._set_reasons(current if state is BannerState.PARKED else SessionResume())
        self.busy_bar.setVisible(state is BannerState.RESUMING)
        # Nothing can be resumed from a window whose main process is gone (or replaced).
        host_gone = self._bridge.connection_state in (
            ConnectionState.HOST_LOST,
            ConnectionState.REJECTED,
        )
        self.action_button.setEnabled(state in _ACTIONABLE and not host_gone)
        collapsed = self.collapsed
        self.tools_row.setVisible(state is BannerState.PARKED and not collapsed)
        options = current.workspace_options if state is BannerState.PARKED else ()
        self.decisions_row.setVisible(bool(options) and not collapsed)
        point = self._restore_point()
        self.restore_note.setText(
            _tr("Your folder stays as it is; {point}").replace("{point}", with_full_stop(point))
            if point
            else at_stop_note()
        )
        self.restore_button.setToolTip(plain_tip(self.restore_note.text()))
        uncompared = any(d.code == "workspace_rebaseline_uncompared" for d in current.diagnostics)
        uncaptured = next(
            (d.message for d in current.diagnostics if d.code == "workspace_rebaseline_uncaptured"),
            "",
        )
        self.rebaseline_note.setText(
            rebaseline_note(compared=not uncompared, uncaptured=visible(uncaptured))
        )
        self.rebaseline_button.setToolTip(plain_tip(self.rebaseline_note.text()))
        for button, note, option in (
            (self.restore_button, self.restore_note, "isolated_restore"),
            (self.rebaseline_button, self.rebaseline_note, "rebaseline"),
        ):
            button.setVisible(option in options)
            # In a short window the notes beside the two ways stay in the buttons' tooltips:
            # with them the banner was taller than the room it had (760x540) and covered the
            # transcript.
            note.setVisible(option in options and not self._tight)
            button.setEnabled(not host_gone)
        self.details_panel.setVisible(
            state is BannerState.PARKED and self._details_shown and not collapsed
        )
        self.copy_button.setText(_tr("Copy diagnostics"))
        title, body, action = copy_for(state, current, self._resume_from_environment)
        if state is BannerState.IDLE and self._automatic_stop:
            title, first = automatic_stop_note()
            body = f"{first} {body}"
        self.title_label.setText(title)
        # More stays open while the session does: Try again, a decision or an answer brings
        # a new text about the same park, which the reader asked to see whole.
        self.body_label.setText(visible(body))
        self.body_label.setVisible(bool(body) and not collapsed)
        self._compact_hides = bool(body) or state is BannerState.PARKED
        self._fit_body()
        self.action_button.setText(action)
        self.action_button.setVisible(bool(action))
        self.remove_button.setVisible(self.folder_missing)
        survivor = state is BannerState.PARKED and SURVIVOR_REASON in current.reasons
        stopping = self._session_id in self._stopping
        self.stop_button.setVisible(survivor)
        self.stop_button.setEnabled(survivor and not stopping and not host_gone)
        self.stop_button.setText(_tr("Stopping…") if stopping else _tr("Stop it"))
        self.details_label.setText(visible(details_for(current)))
        self._fit_details()
        self.setProperty("severity", self._severity().value)
        self._apply_colours(self._severity())
        self.updateGeometry()

    def _fit_details(self) -> None:
        label = self.details_label
        width = self.details_scroll.viewport().width()
        needs_bar = label.minimumSizeHint().width() > width
        wrapped = label.heightForWidth(max(width, label.minimumSizeHint().width()))
        needed = wrapped if wrapped > 0 else label.sizeHint().height()
        limit = label.fontMetrics().lineSpacing() * self._details_lines + 14
        bar = self.details_scroll.horizontalScrollBar().sizeHint().height() if needs_bar else 0
        height = min(needed, limit) + bar
        if height != self.details_scroll.height():
            self.details_scroll.setFixedHeight(height)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._fit_details()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if watched is self.body_label and event.type() == QEvent.Type.Resize:
            self._fit_body()
        return super().eventFilter(watched, event)

    @property
    def body_cut(self) -> bool:
        """Whether only the first ``BODY_LINES`` lines of the body show (the rest under More)."""
        return self.body_more.isVisibleTo(self) and not self._body_open

    def _fit_body(self) -> None:
        """At most ``BODY_LINES`` lines of running text, and More when there is more. A list
        before the running text (the changed files, ending at a blank line) is no running
        text: it stays whole and the two lines are counted after it."""
        label = self.body_label
        metrics = label.fontMetrics()
        spacing = max(metrics.lineSpacing(), 1)
        width = max(label.width() if label.width() > 0 else label.sizeHint().width(), 1)
        text = label.text()
        if self._compact and self._compact_hides:
            # Compact: More shows the running text, the ways forward and the details.
            self.body_more.setVisible(True)
            self.body_more.setText(_tr("Less") if self._body_open else _tr("More"))
            self.body_more.setArrowType(
                Qt.ArrowType.DownArrow if self._body_open else Qt.ArrowType.RightArrow
            )
            if label.maximumHeight() != QWIDGETSIZE_MAX:
                label.setMaximumHeight(QWIDGETSIZE_MAX)
            return
        full = label.heightForWidth(width) if text else 0
        lines = max(round(full / spacing), 1) if text else 0
        line_px = full / lines if lines else spacing  # the label's own line height
        head, blank, _running = text.rpartition("\n\n")
        keep = BODY_LINES
        if blank:
            flags = int(Qt.TextFlag.TextWordWrap)
            listed = metrics.boundingRect(0, 0, width, 1 << 20, flags, head)
            keep += round(listed.height() / spacing) + 1  # the list and the blank line
        long = lines > keep
        self.body_more.setVisible(long and not label.isHidden())
        self.body_more.setText(_tr("Less") if self._body_open else _tr("More"))
        self.body_more.setArrowType(
            Qt.ArrowType.DownArrow if self._body_open else Qt.ArrowType.RightArrow
        )
        limit = math.ceil(line_px * keep) if long and not self._body_open else QWIDGETSIZE_MAX
        if label.maximumHeight() != limit:
            label.setMaximumHeight(limit)

    def _on_body_more(self) -> None:
        self._body_open = not self._body_open
        if self._body_open and self._tight and self._details_shown:
            self.set_details_shown(False)  # (no room for both: they take turns)
        if self._compact:
            self._render()  # what compact hides shows (or hides) again
        else:
            self._fit_body()

    def _set_reasons(self, current: SessionResume) -> None:
        for label in self.reason_labels:
            self.reasons_box.removeWidget(label)
            label.deleteLater()
        for line in self.reason_lines:
            self.reasons_box.removeWidget(line)
            line.deleteLater()
        self.reason_labels = []
        self.reason_lines = []
        collapsed = self.collapsed
        for code, sentence in reason_sentences(current, self._folder):
            label = QLabel("•  " + sentence)
            label.setWordWrap(True)
            label.setTextFormat(Qt.TextFormat.PlainText)
            label.setProperty("code", code)
            self.reasons_box.addWidget(label)  # (parented first: never a window of its own)
            label.setVisible(not collapsed)
            self.reason_labels.append(label)
            line = ElidedLabel()
            line.setText("•  " + sentence)
            line.setProperty("code", code)
            self.reasons_box.addWidget(line)
            line.setVisible(collapsed)
            self.reason_lines.append(line)

    @property
    def details_shown(self) -> bool:
        return self._details_shown

    def set_details_shown(self, shown: bool) -> None:
        self._details_shown = shown
        self.details_toggle.setArrowType(
            Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow
        )
        self.details_toggle.setText(_tr("Hide details") if shown else _tr("Details"))
        self.details_panel.setVisible(shown and self.state is BannerState.PARKED)

    def _on_details_clicked(self) -> None:
        self.set_details_shown(not self._details_shown)
        if self._details_shown and self._tight and self._body_open:
            self._on_body_more()  # (no room for both: they take turns)

    def _apply_colours(self, severity: Severity) -> None:
        palette = self.palette()
        accent = theme.accent(severity, palette)
        background = theme.tinted_background(accent, palette)
        border = theme.blend(accent, palette.color(palette.ColorRole.Window), 0.45)
        details_bg = theme.blend(background, palette.color(palette.ColorRole.Base), 0.5)
        self.set_colours(background, border, accent)
        self.details_panel.set_colours(details_bg, border)
        title_palette = self.title_label.palette()
        title_palette.setColor(QPalette.ColorRole.WindowText, accent)
        self.title_label.setPalette(title_palette)


BODY_LINES = 2
"""Lines of running text the body shows before "More"."""
QWIDGETSIZE_MAX = (1 << 24) - 1
"""Qt's "no maximum" for a widget's size."""

_ACTIONABLE = frozenset({BannerState.IDLE, BannerState.PARKED, BannerState.FAILED})


__all__ = ["BannerState", "InterruptedBanner"]
