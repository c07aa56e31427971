"""A running turn's progress -> push messages to the renderer, coalesced on the event loop.

Why coalescing: a streaming model produces many small deltas, and each transcript item push
carries the item's whole current state (the replacement rule of the bridge contract). If the event
loop is busy for a moment, the pending updates of one item collapse into the newest one instead of
queueing hundreds of frames, so a fast stream can never flood the renderer or the IPC socket.
Order is kept: pushes are sent in the order their keys first became pending.

Why defensive: the sink is called from inside the agent runtime's worker thread. A message that
does not fit the contract (an oversized summary, an odd code) is logged and dropped; it must never
raise into the turn, whose ledger writes matter more than one UI update.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from typing import Literal

from pydantic import ValidationError

from app.bridge_contract import (
    MAX_TEXT_CHARS,
    Message,
    PermissionRequestedPush,
    ResumeStartedPush,
    RunStatusPush,
    RunStatusValue,
    TranscriptItem,
    TranscriptItemPush,
    TurnOutputPush,
)
from main_process.turn_workers import MainThreadRelay

_log = logging.getLogger("maka.main.push")

_unique = itertools.count()


class CoalescingPushSink:
    """Implements ``host_services.TurnSink`` for one turn of one session."""

    def __init__(
        self,
        session_id: str,
        relay: MainThreadRelay,
        send: Callable[[Message], None],
        correlation_id: str | None = None,
        *,
        automatic: bool = False,
        on_resume_started: Callable[[ResumeStartedPush], None] | None = None,
    ) -> None:
        """``on_resume_started``: called (on the event loop thread) just before the
        continuation's start is sent."""
        self._session_id = session_id
        self._on_resume_started = on_resume_started
        self._automatic = automatic
        self._relay = relay
        self._send = send
        self._correlation_id = correlation_id
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str], Message] = {}
        self._flush_scheduled = False
        self._resume_started: ResumeStartedPush | None = None

    @property
    def resume_started_sent(self) -> ResumeStartedPush | None:
        return self._resume_started

    def transcript_item(self, item: TranscriptItem) -> None:
        self._queue(
            ("item", item.item_id),
            lambda: TranscriptItemPush(session_id=self._session_id, item=item),
        )

    def run_status(
        self, run_id: str, status: RunStatusValue, failure_class: str | None = None
    ) -> None:
        self._queue(
            ("status", str(next(_unique))),
            lambda: RunStatusPush(
                session_id=self._session_id,
                run_id=run_id,
                status=status,
                failure_class=failure_class,
            ),
        )

    def permission_requested(self, request_id: str, tool_name: str, summary: str) -> None:
        self._queue(
            ("permission", request_id),
            lambda: PermissionRequestedPush(
                session_id=self._session_id,
                request_id=request_id,
                tool_name=tool_name,
                summary=summary,
            ),
        )

    def output(self, text: str, stream: str = "stdout") -> None:
        """The driving terminal's lines (``turn.output``): consecutive pieces still pending are
        sent as one push, in order with everything else."""
        if not text:
            return
        with self._lock:
            last = next(reversed(self._pending), None) if self._pending else None
            pending = self._pending.get(last) if last is not None else None
            if (
                last is not None
                and last[0] == "output"
                and isinstance(pending, TurnOutputPush)
                and pending.stream == stream
                and len(pending.text) + len(text) <= MAX_TEXT_CHARS
            ):
                self._pending[last] = pending.model_copy(update={"text": pending.text + text})
                return
        for start in range(0, len(text), MAX_TEXT_CHARS):
            self._queue(
                ("output", str(next(_unique))),
                self._output_push(text[start:][:MAX_TEXT_CHARS], stream),
            )

    def _output_push(self, piece: str, stream: str) -> Callable[[], Message]:
        where: Literal["stdout", "stderr"] = "stderr" if stream == "stderr" else "stdout"
        return lambda: TurnOutputPush(session_id=self._session_id, text=piece, stream=where)

    def resume_started(self, run_id: str, turn_id: str) -> None:
        def build() -> Message:
            push = ResumeStartedPush(
                session_id=self._session_id,
                run_id=run_id,
                turn_id=turn_id,
                correlation_id=self._correlation_id,
                automatic=self._automatic,
            )
            self._resume_started = push
            return push

        self._queue(("resume", "started"), build)

    def flush_now(self) -> None:
        """Send everything pending (event loop thread only)."""
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
            self._flush_scheduled = False
        for message in pending:
            try:
                if isinstance(message, ResumeStartedPush) and self._on_resume_started:
                    self._on_resume_started(message)
                self._send(message)
            except Exception:
                _log.exception("sending a %s push failed", message.kind)

    def _queue(self, key: tuple[str, str], build: Callable[[], Message]) -> None:
        try:
            message = build()
        except ValidationError as error:
            _log.warning(
                "dropping a push that does not fit the contract (%s)", error.errors()[0]["type"]
            )
            return
        with self._lock:
            # Assigning to a pending key keeps its place: an item keeps the position where it
            # first became pending and carries its newest state.
            self._pending[key] = message
            schedule = not self._flush_scheduled
            self._flush_scheduled = True
        if schedule:
            self._relay.post(self.flush_now)
