"""Permission policy and the wait for a user's answer.

Modes (docs/design/cli.md): ``ask`` asks the user before a tool that changes something (read-only
tools are allowed without asking unless ``ask_read_only`` is set); ``auto`` allows every tool;
``deny`` refuses every tool that would need asking (read-only tools still run unless
``deny_read_only``). An ``ask`` becomes a durable ``permissionRequest`` event; the answer a
``permissionDecision`` event; both are written by the tool runtime.

``PendingPermissions`` is the rendezvous between the turn's worker thread (which waits) and
whoever answers (a terminal prompt, the desktop's ``permissions.answer``). A cancelled turn
stops waiting at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from runtime.base.cancel_token import CancelToken

Decision = Literal["allow", "deny"]


class PermissionMode(StrEnum):
    ASK = "ask"
    AUTO = "auto"
    DENY = "deny"


class PolicyVerdict(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


@dataclass(frozen=True, slots=True)
class PermissionPolicy:
    mode: PermissionMode = PermissionMode.ASK
    ask_read_only: bool = False
    deny_read_only: bool = False

    def verdict(self, read_only: bool) -> PolicyVerdict:
        if self.mode is PermissionMode.AUTO:
            return PolicyVerdict.ALLOW
        if self.mode is PermissionMode.DENY:
            return (
                PolicyVerdict.DENY
                if (self.deny_read_only or not read_only)
                else (PolicyVerdict.ALLOW)
            )
        if read_only and not self.ask_read_only:
            return PolicyVerdict.ALLOW
        return PolicyVerdict.ASK


@dataclass(frozen=True, slots=True)
class PermissionQuestion:
    request_id: str
    session_id: str
    run_id: str
    tool_name: str
    tool_call_id: str
    summary: str


# Asks the user and blocks until an answer (or the turn is cancelled: then returns None).
PermissionAsker = Callable[[PermissionQuestion, CancelToken], Decision | None]


class PendingPermissions:
    """Open questions by request id; ``answer`` may be called from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[str, threading.Event] = {}
        self._answers: dict[str, Decision] = {}
        self._questions: dict[str, PermissionQuestion] = {}

    def open_questions(self, session_id: str | None = None) -> list[PermissionQuestion]:
        with self._lock:
            return [
                question
                for question in self._questions.values()
                if session_id is None or question.session_id == session_id
            ]

    def answer(self, request_id: str, decision: Decision) -> bool:
        """Deliver an answer; False when no such question is open."""
        with self._lock:
            event = self._events.get(request_id)
            if event is None or request_id in self._answers:
                return False
            self._answers[request_id] = decision
        event.set()
        return True

    def wait(
        self,
        question: PermissionQuestion,
        cancel: CancelToken,
        notify: Callable[[PermissionQuestion], None] | None = None,
    ) -> Decision | None:
        event = threading.Event()
        with self._lock:
            self._events[question.request_id] = event
            self._questions[question.request_id] = question
        unregister = cancel.on_cancel(event.set)
        try:
            if notify is not None:
                notify(question)
            event.wait()
            with self._lock:
                return self._answers.get(question.request_id)
        finally:
            unregister()
            with self._lock:
                self._events.pop(question.request_id, None)
                self._answers.pop(question.request_id, None)
                self._questions.pop(question.request_id, None)
