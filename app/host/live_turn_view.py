"""A running turn's observer callbacks -> transcript items for the renderer (live view).

The runtime reports streamed deltas (not yet committed) and committed events. The renderer shows
the streamed text at once under a provisional item id; when the step's assistant (or thinking)
event commits, the committed item is sent under that *same* id, so the text is replaced in place
instead of appearing twice. Tool cards and notices come from the runtime's own transcript
projection over the run's committed events, so a live transcript and a reopened one agree.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from app.bridge_contract import (
    MAX_TEXT_CHARS,
    AssistantMessageItem,
    RunStatusValue,
    ThinkingItem,
    TranscriptItem,
)
from app.host.host_services import TurnSink
from app.host.transcript_items import continuation_marker, wire_item
from runtime.agent.transcript_projection import TranscriptEntry, transcript_of_run
from runtime.ledger.event_model import RuntimeEvent, is_terminal
from runtime.ledger.restore_point_words import call_subjects
from runtime.ledger.store_ports import RunStatus


class LiveTurnView:
    """Implements the runtime's ``RunObserver`` for one turn or continuation (one thread)."""

    def __init__(self, sink: TurnSink, continuation_of: str | None = None) -> None:
        self._sink = sink
        self.continuation_of = continuation_of
        self.continued_after = "restart"  # what it follows (``continued_after``)
        self.automatic = False  # automatic resume started it
        self._lock = threading.Lock()
        self._run_id = ""
        self._events: list[RuntimeEvent] = []
        self._sent: dict[str, TranscriptEntry] = {}
        self._alias: dict[str, str] = {}
        self._stream_text = ""
        self._stream_thinking = ""
        self._step = 0
        # Incremental projection (``_project``): events before ``_from`` have final entries.
        self._from = 0
        self._open_calls: dict[str, int] = {}
        self._subjects: dict[str, str] = {}
        # The earlier runs' calls by what they did (``know_earlier_calls``).
        self._earlier: dict[str, str] = {}

    def know_earlier_calls(self, subjects: Mapping[str, str]) -> None:
        """The calls of the runs before this one, by what they did (``call_subjects``): a
        continuation in a restored copy names the calls the copy predates in its mark as the
        user knows them (the command, the file), as the reopened transcript does, not by
        their ids. Call before the first event."""
        with self._lock:
            self._earlier = dict(subjects)
            self._subjects = {**self._earlier, **self._subjects}

    # ---- RunObserver -----------------------------------------------------------------------

    def text_delta(self, text: str) -> None:
        with self._lock:
            self._stream_text += text
            item_id = self._stream_id("a")
            current = self._stream_text[-MAX_TEXT_CHARS:]
            run_id = self._run_id or None
        self._sink.transcript_item(
            AssistantMessageItem(item_id=item_id, run_id=run_id, text=current)
        )

    def thinking_delta(self, text: str) -> None:
        with self._lock:
            self._stream_thinking += text
            item_id = self._stream_id("t")
            current = self._stream_thinking[-MAX_TEXT_CHARS:]
            run_id = self._run_id or None
        self._sink.transcript_item(ThinkingItem(item_id=item_id, run_id=run_id, text=current))

    def committed(self, event: RuntimeEvent) -> None:
        items: list[TranscriptItem] = []
        with self._lock:
            if not self._run_id:
                self._run_id = event["runId"]
                if self.continuation_of is not None:
                    items.append(
                        continuation_marker(
                            self._run_id,
                            self.continuation_of,
                            self.continued_after,
                            self.automatic,
                        )
                    )
            self._events.append(event)
            content = event.get("content")
            kind = content["kind"] if content is not None else None
            if kind == "text" and event["role"] == "model" and self._stream_text:
                self._alias[event["id"]] = self._stream_id("a")
                self._stream_text = ""
            elif kind == "thinking" and self._stream_thinking:
                self._alias[event["id"]] = self._stream_id("t")
                self._stream_thinking = ""
            if kind in ("text", "thinking") and not (self._stream_text or self._stream_thinking):
                self._step += 1
            for entry in self._project(event):
                if self._sent.get(entry.item_id) == entry:
                    continue
                self._sent[entry.item_id] = entry
                item = wire_item(entry, self._alias.get(entry.item_id))
                if item is not None:
                    items.append(item)
        for item in items:
            self._sink.transcript_item(item)

    def _project(self, event: RuntimeEvent) -> list[TranscriptEntry]:
        """The run's entries that may have changed with ``event`` (lock held).

        Projecting every committed event of the run again at each commit costs a long turn
        quadratic time; the entries before the earliest tool call still waiting for its result
        are final (a card changes only with its own call's dispatch and result), so only the
        events from there on are projected, with the earlier calls' subjects. The run's ending
        (which turns open cards into ``not_dispatched`` or ``indeterminate``) and a recovery
        fact (which may name any earlier card) project the whole run, as a reopened transcript
        does."""
        content: Mapping[str, Any] = event.get("content") or {}
        kind = content.get("kind")
        if kind == "function_call":
            self._open_calls.setdefault(str(content.get("id")), len(self._events) - 1)
        elif kind == "function_response":
            self._open_calls.pop(str(content.get("id")), None)
        if is_terminal(event) or "toolRecovery" in (event.get("actions") or {}):
            entries = transcript_of_run(self._events, self._earlier)
        else:
            events = self._events[self._from :]
            entries = transcript_of_run(events, self._subjects) if events else []
        start = min(self._open_calls.values(), default=len(self._events))
        if start > self._from:
            self._subjects.update(call_subjects(self._events[self._from : start]))
            self._from = start
        return entries

    def run_status(self, run_id: str, status: RunStatus, failure_class: str | None) -> None:
        with self._lock:
            self._run_id = self._run_id or run_id
        self._sink.run_status(run_id, RunStatusValue(status.value), failure_class)

    def _stream_id(self, kind: str) -> str:
        return f"stream:{self._run_id or 'run'}:{self._step}:{kind}"
