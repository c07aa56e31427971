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

Seen means the user opened the session (``seen``, from the window), or had it open in view for a
moment (``SessionListModel.looked_at``): the session the window shows at start was selected by
the window, not clicked, yet the user is looking at it.

What was seen stays seen. The main process tells a window again what stands about a session (its
park, the sessions automatic resume continued) when the window opens that session and when it
connects (``main_process/standing_state.py``): that copy is no news, and must not bring back the
announcement the user has just made go. A continuation is known by its run; a park told again is
one that arrives as the answer to an open of the session, or to a reconnect, and is the park
already seen. A park automatic resume leaves later (it took the session up again) is announced.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QCoreApplication, QObject, Qt
from PySide6.QtWidgets import QLabel

from app.bridge_contract import (
    ResumeFailedPush,
    ResumeParkedPush,
    ResumeStartedPush,
    SessionOpenedPush,
    SessionRemovedPush,
    SessionsListedPush,
    SessionSummary,
    SessionUpdatedPush,
    ToolSettledPush,
)
from renderer.bridge_port import BridgePort, ConnectionState
from renderer.session_list import Announcement, SessionListModel

MAX_REMEMBERED = 1024
"""Seen announcements remembered (a few at each start; bounded anyway)."""


def _tr(text: str) -> str:
    return QCoreApplication.translate("AutoResumeNotice", text)


def _told(push: ResumeParkedPush | ResumeFailedPush) -> dict[str, Any]:
    """What a park says, whichever answer it came with."""
    return push.model_dump(exclude={"correlation_id"})


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
        bridge.session_opened.connect(self._on_opened)
        bridge.connection_state_changed.connect(self._on_connection)
        model.looked_at.connect(self.seen)
        self._runs: dict[str, str] = {}
        """The continuation each session is announced for (its run)."""
        self._parks: dict[str, dict[str, Any]] = {}
        """The park each session is announced as on hold for."""
        self._seen_runs: set[str] = set()
        self._seen_parks: dict[str, dict[str, Any]] = {}
        self._retold: set[str] = set()
        """Sessions whose standing park the main process is about to tell again (an open of
        the session was answered, or the window connected again)."""

    @property
    def text(self) -> str:
        return self.label.text() if self.label.isVisible() else ""

    def seen(self, session_id: str) -> None:
        announced = self._model.announcements().get(session_id)
        if not self._model.mark_seen(session_id):
            return
        run = self._runs.pop(session_id, None)
        park = self._parks.pop(session_id, None)
        if announced is Announcement.CONTINUED and run is not None:
            if len(self._seen_runs) >= MAX_REMEMBERED:
                self._seen_runs.clear()
            self._seen_runs.add(run)
        elif announced is Announcement.ON_HOLD and park is not None:
            if len(self._seen_parks) >= MAX_REMEMBERED:
                self._seen_parks.clear()
            self._seen_parks[session_id] = park
        self._render()

    def _forget(self, session_id: str) -> None:
        """The session moved on (or is gone): a park of it told from now on is news."""
        self._seen_parks.pop(session_id, None)
        self._retold.discard(session_id)

    def _on_opened(self, push: SessionOpenedPush) -> None:
        if push.session_id in self._seen_parks:
            self._retold.add(push.session_id)  # what stands for it follows the answer

    def _on_connection(self, state: str) -> None:
        if state == ConnectionState.CONNECTED:
            self._retold.update(self._seen_parks)  # everything that stands follows hello

    def _on_started(self, push: ResumeStartedPush) -> None:
        if push.automatic:
            if push.run_id in self._seen_runs:
                return  # told again (a window connecting): already seen
            self._model.announce(push.session_id, Announcement.CONTINUED)
            self._runs[push.session_id] = push.run_id
            self._parks.pop(push.session_id, None)
            self._forget(push.session_id)
            self._render()
        else:  # the user continued it: "on hold" is no longer true
            self._forget(push.session_id)
            self.seen(push.session_id)

    def _on_removed(self, push: SessionRemovedPush) -> None:
        self._forget(push.session_id)
        self.seen(push.session_id)  # nothing is left to open

    def _on_updated(self, push: SessionUpdatedPush) -> None:
        self._moved_on((push.session,))

    def _on_listed(self, push: SessionsListedPush) -> None:
        self._moved_on(push.sessions)

    def _moved_on(self, sessions: tuple[SessionSummary, ...]) -> None:
        """A session on hold that is no longer interrupted was carried on (a continuation or a
        new message, from this window or not): "on hold" is no longer true."""
        held = self._model.announcements()
        for s in sessions:
            if not s.interrupted:
                self._forget(s.session_id)
        cleared = [
            s.session_id
            for s in sessions
            if not s.interrupted and held.get(s.session_id) is Announcement.ON_HOLD
        ]
        for session_id in cleared:
            self._parks.pop(session_id, None)
        if any([self._model.mark_seen(session_id) for session_id in cleared]):
            self._render()

    def _on_held(self, push: ResumeParkedPush | ResumeFailedPush) -> None:
        if push.automatic:
            session_id = push.session_id
            told = _told(push)
            if session_id in self._retold and self._seen_parks.get(session_id) == told:
                self._retold.discard(session_id)
                return  # the park the user has seen, told again: no news
            self._retold.discard(session_id)
            self._seen_parks.pop(session_id, None)
            self._runs.pop(session_id, None)
            self._parks[session_id] = told
            self._model.announce(session_id, Announcement.ON_HOLD)
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
