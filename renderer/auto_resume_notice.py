"""Automatic resume, announced: which sessions continued by themselves at start and which are on
hold, in the status bar and on their rows, until the user has looked at each one.

Why it stays until seen: automatic resume acts before anyone watches (the window may open later
or be in the background), so a message that vanishes after a few seconds would leave the user
not knowing that a session moved on, or that one waits for them. A row's announcement goes when
the user opens that session, sends a message in it, continues it or removes it; "on hold" also
goes as soon as the session is no longer interrupted (whatever moved it on), and as soon as the
park automatic resume left is no longer what stands: an answer about one of its calls was
recorded, or Safe resume was asked again (Try again) and its own outcome arrived. The banner then
speaks of that outcome ("Safe resume is on hold."), so the row and the status bar must not go on
naming automatic resume for it.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QObject, Qt
from PySide6.QtWidgets import QLabel

from app.bridge_contract import (
    ResumeFailedPush,
    ResumeParkedPush,
    ResumeStartedPush,
    SessionRemovedPush,
    SessionsListedPush,
    SessionSummary,
    SessionUpdatedPush,
    ToolSettledPush,
)
from renderer.bridge_port import BridgePort
from renderer.session_list import Announcement, SessionListModel


def _tr(text: str) -> str:
    return QCoreApplication.translate("AutoResumeNotice", text)


class AutoResumeNotice(QObject):
    def __init__(self, bridge: BridgePort, model: SessionListModel) -> None:
        super().__init__(model)
        self._model = model
        self.label = QLabel()
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setObjectName("AutoResumeNotice")
        self.label.setVisible(False)
        bridge.resume_started.connect(self._on_started)
        bridge.resume_parked.connect(self._on_held)
        bridge.resume_failed.connect(self._on_held)
        bridge.session_removed.connect(self._on_removed)
        bridge.session_updated.connect(self._on_updated)
        bridge.sessions_listed.connect(self._on_listed)
        bridge.tool_settled.connect(self._on_settled)

    @property
    def text(self) -> str:
        return self.label.text() if self.label.isVisible() else ""

    def seen(self, session_id: str) -> None:
        if self._model.mark_seen(session_id):
            self._render()

    def _on_started(self, push: ResumeStartedPush) -> None:
        if push.automatic:
            self._model.announce(push.session_id, Announcement.CONTINUED)
            self._render()
        else:  # the user continued it: "on hold" is no longer true
            self.seen(push.session_id)

    def _on_removed(self, push: SessionRemovedPush) -> None:
        self.seen(push.session_id)  # nothing is left to open

    def _on_updated(self, push: SessionUpdatedPush) -> None:
        self._moved_on((push.session,))

    def _on_listed(self, push: SessionsListedPush) -> None:
        self._moved_on(push.sessions)

    def _moved_on(self, sessions: tuple[SessionSummary, ...]) -> None:
        """A session on hold that is no longer interrupted was carried on (a continuation or a
        new message, from this window or not): "on hold" is no longer true."""
        held = self._model.announcements()
        cleared = [
            s.session_id
            for s in sessions
            if not s.interrupted and held.get(s.session_id) is Announcement.ON_HOLD
        ]
        if any([self._model.mark_seen(session_id) for session_id in cleared]):
            self._render()

    def _on_held(self, push: ResumeParkedPush | ResumeFailedPush) -> None:
        if push.automatic:
            self._model.announce(push.session_id, Announcement.ON_HOLD)
            self._render()
        elif self._model.announcements().get(push.session_id) is Announcement.ON_HOLD:
            # Safe resume was asked again (Try again, a decision about the files, an answer):
            # what stands now is its outcome, not the park automatic resume left.
            self.seen(push.session_id)

    def _on_settled(self, push: ToolSettledPush) -> None:
        """An answer about a call of the park (It ran / It did not run) was recorded: the park
        automatic resume left no longer stands as it was (the banner shows what holds now)."""
        if push.recorded:
            self.seen(push.session_id)

    def _render(self) -> None:
        announced = list(self._model.announcements().values())
        continued = announced.count(Announcement.CONTINUED)
        held = announced.count(Announcement.ON_HOLD)
        parts = []
        if continued:
            parts.append(
                _tr("1 session continued by itself")
                if continued == 1
                else _tr("{n} sessions continued by themselves").replace("{n}", str(continued))
            )
        if held:
            parts.append(
                _tr("1 is on hold")
                if held == 1
                else _tr("{n} are on hold").replace("{n}", str(held))
            )
        if not parts:
            self.label.setVisible(False)
            return
        pattern = (
            _tr("Automatic resume: {what}; open it to see.")
            if continued + held == 1
            else _tr("Automatic resume: {what}; open them to see.")
        )
        text = pattern.replace("{what}", _tr(" and ").join(parts))
        self.label.setText(text)
        self.label.setToolTip(_tr("Marked on their rows until you open them."))
        self.label.setVisible(True)
