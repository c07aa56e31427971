"""What a window must show about each session, kept by the main process (docs/design/desktop.md,
"Around a crash").

A push is sent once, to the renderers connected at that moment. A renderer that connects later
(the window of a start whose auto-resume ran before it connected, or a window restarted after a
crash) would miss what still holds: an open permission request (a turn waits on it and nobody
could answer), a park or failure of Safe resume, a running turn. So the main process keeps, per
session, the latest such pushes, and sends them again on every ``hello`` and ``sessions.open``:

- **running**: the ``run.status running`` of the session's turn, until its run ends;
- **permissions**: every open ``permission.requested``, until answered or the run ends;
- **outcome**: a ``resume.parked`` / ``resume.failed`` that describes the session (not a moment:
  ``session_busy``, a closing host), until the session moves on (a continuation starts, or a
  turn of the session runs).

Bounded, and only for sessions that exist: an outcome whose code says the session does not exist
is never kept, and at most ``MAX_SESSIONS`` sessions are remembered (the least recently changed
one without an open permission request goes first), so a peer asking about thousands of made-up
sessions cannot grow it or make every new window replay them.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from app.bridge_contract import (
    Message,
    PermissionRequestedPush,
    ResumeFailedPush,
    ResumeParkedPush,
    ResumeStartedPush,
    RunStatusPush,
    RunStatusValue,
)

MAX_SESSIONS = 256
MAX_PERMISSIONS_PER_SESSION = 32
NOT_A_SESSION_CODES = frozenset({"session_not_found", "not_found", "invalid_session_id"})
_ACTIVE = frozenset({RunStatusValue.CREATED, RunStatusValue.RUNNING})


@dataclass(slots=True)
class _Standing:
    running: RunStatusPush | None = None
    outcome: ResumeParkedPush | ResumeFailedPush | None = None
    permissions: OrderedDict[str, PermissionRequestedPush] = field(default_factory=OrderedDict)

    def empty(self) -> bool:
        return self.running is None and self.outcome is None and not self.permissions


class StandingState:
    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self._max = max_sessions
        self._sessions: OrderedDict[str, _Standing] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    # ---- what happened ------------------------------------------------------------------------

    def note(self, message: Message) -> None:
        """A push of a running turn or continuation (broadcast right now)."""
        if isinstance(message, PermissionRequestedPush):
            standing = self._touch(message.session_id)
            if len(standing.permissions) < MAX_PERMISSIONS_PER_SESSION:
                standing.permissions[message.request_id] = message.model_copy(
                    update={"correlation_id": None}
                )
        elif isinstance(message, ResumeStartedPush):
            # A continuation was admitted: the park it answered no longer describes the session
            # (a window opening it meanwhile must not be told it is on hold again).
            self.clear_outcome(message.session_id)
        elif isinstance(message, RunStatusPush):
            if message.status in _ACTIVE:
                self._touch(message.session_id).running = message.model_copy(
                    update={"correlation_id": None}
                )
                self._sessions[message.session_id].outcome = None  # the session moved on
            else:
                self.turn_ended(message.session_id)

    def turn_ended(self, session_id: str) -> None:
        """The session's turn or continuation ended: nothing of it can be answered any more."""
        standing = self._sessions.get(session_id)
        if standing is None:
            return
        standing.running = None
        standing.permissions.clear()
        self._drop_if_empty(session_id)

    def answered(self, session_id: str, request_id: str) -> None:
        standing = self._sessions.get(session_id)
        if standing is not None and standing.permissions.pop(request_id, None) is not None:
            self._drop_if_empty(session_id)

    def set_outcome(self, push: ResumeParkedPush | ResumeFailedPush) -> None:
        if isinstance(push, ResumeFailedPush) and push.code in NOT_A_SESSION_CODES:
            self.clear_outcome(push.session_id)
            return
        self._touch(push.session_id).outcome = push.model_copy(update={"correlation_id": None})

    def clear_outcome(self, session_id: str) -> None:
        standing = self._sessions.get(session_id)
        if standing is not None:
            standing.outcome = None
            self._drop_if_empty(session_id)

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def outcome(self, session_id: str) -> ResumeParkedPush | ResumeFailedPush | None:
        standing = self._sessions.get(session_id)
        return standing.outcome if standing is not None else None

    # ---- telling a window ---------------------------------------------------------------------

    def pushes(self, session_id: str | None = None) -> list[Message]:
        """Everything that still stands (of one session, or of all), in the order a window can
        apply it: the running turn, the resume outcome, then the open permission requests."""
        chosen = (
            [(session_id, self._sessions[session_id])]
            if session_id is not None and session_id in self._sessions
            else list(self._sessions.items())
            if session_id is None
            else []
        )
        out: list[Message] = []
        for _, standing in chosen:
            if standing.running is not None:
                out.append(standing.running)
            if standing.outcome is not None:
                out.append(standing.outcome)
            out.extend(standing.permissions.values())
        return out

    # ---- bounds -------------------------------------------------------------------------------

    def _touch(self, session_id: str) -> _Standing:
        standing = self._sessions.pop(session_id, None) or _Standing()
        self._sessions[session_id] = standing
        while len(self._sessions) > self._max:
            victim = next(
                (sid for sid, s in self._sessions.items() if not s.permissions),
                next(iter(self._sessions)),
            )
            del self._sessions[victim]
        return standing

    def _drop_if_empty(self, session_id: str) -> None:
        standing = self._sessions.get(session_id)
        if standing is not None and standing.empty():
            del self._sessions[session_id]
