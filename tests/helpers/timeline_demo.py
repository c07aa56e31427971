"""Timelines for the Timeline view's tests, bench and screenshots, served like the main process.

``ServingBridge`` is the fake bridge answering ``timeline.*`` requests from a real
``TimelinePages`` (the main process's own paging) over a timeline built by the real model from
ledger events, so the renderer sees exactly the pushes the main process would send. Answers
are queued and delivered by ``serve()`` (the real bridge answers later, from the event loop),
or at once with ``immediate``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from app.bridge_contract import TimelineRowFilter
from main_process.timeline_pages import TimelinePages
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.timeline_model import RunSource, build_timeline
from runtime.ledger.timeline_pins import (
    ParkHeader,
    ResumeMarks,
    SessionTimeline,
    TimelineReason,
    pin_reasons,
)
from tests.helpers.fake_bridge import FakeBridge
from tests.helpers.ledger_builders import (
    DEFAULT_IDS,
    DROP,
    bound_response,
    call_event,
    dispatch_event,
    model_text,
    terminal,
    user_text,
    with_changes,
)


class ServingBridge(FakeBridge):
    def __init__(self, timelines: dict[str, SessionTimeline], *, immediate: bool = False) -> None:
        super().__init__()
        self.pages = TimelinePages(lambda session_id: timelines[session_id])
        self.immediate = immediate
        self.queue: list[Callable[[], None]] = []

    def _answer(self, make: Callable[[], Any], signal: Any) -> None:
        def deliver() -> None:
            signal.emit(make())

        if self.immediate:
            deliver()
        else:
            self.queue.append(deliver)

    def serve(self) -> int:
        """Deliver every queued answer (and those they cause); how many were delivered."""
        done = 0
        while self.queue:
            self.queue.pop(0)()
            done += 1
        return done

    def open_timeline(self, session_id: str) -> bool:
        self._record("open_timeline", session_id)
        self._answer(lambda: self.pages.open(session_id), self.timeline_opened)
        return True

    def timeline_rows(
        self,
        session_id: str,
        run_id: str,
        start: int,
        count: int,
        filters: TimelineRowFilter | None = None,
    ) -> bool:
        super().timeline_rows(session_id, run_id, start, count, filters)
        self._answer(
            lambda: self.pages.page(session_id, run_id, start, count, filters), self.timeline_page
        )
        return True

    def timeline_locate(
        self, session_id: str, run_id: str, seq: int, filters: TimelineRowFilter | None = None
    ) -> bool:
        super().timeline_locate(session_id, run_id, seq, filters)
        self._answer(
            lambda: self.pages.locate(session_id, run_id, seq, filters), self.timeline_located
        )
        return True

    def timeline_event(self, session_id: str, run_id: str, event_id: str) -> bool:
        self._record("timeline_event", session_id, run_id, event_id)
        self._answer(
            lambda: self.pages.event(session_id, run_id, event_id), self.timeline_event_shown
        )
        return True


DAY = 1_764_650_000_000
"""Timestamps of the demo sessions: 2 December 2025, a few seconds apart."""


def _system(event_id: str, actions: dict[str, Any], ts: int = DAY) -> RuntimeEvent:
    return with_changes(
        user_text(event_id=event_id, ts=ts),
        role="system",
        author="system",
        actions=actions,
        content=DROP,
    )


def checkpoint_event(event_id: str, high_water: int, *, ts: int = DAY) -> RuntimeEvent:
    return _system(
        event_id,
        {
            "workspaceCheckpoint": {
                "protocol": "workspace_checkpoint_v1",
                "workspaceIdentity": "workspace:v1:11111111-1111-4111-8111-111111111111",
                "workspaceEpoch": 1,
                "runtimeHighWater": high_water,
                "runtimeDigest": "sha256:" + "a" * 64,
                "checkpointRef": f"refs/maka/checkpoints/{event_id}",
                "commitId": "c" * 40,
                "treeId": "d" * 40,
                "policyHash": "e" * 64,
            }
        },
        ts,
    )


def chat_events(count: int, *, start: int = 0) -> list[RuntimeEvent]:
    """``count`` rows of plain conversation and completed tool calls, alternating."""
    events: list[RuntimeEvent] = []
    for number in range(start, start + count):
        ts = DAY + number * 7_000
        if number % 4 == 3:
            call = call_event(
                f"call-{number}", tool_name="read_file", event_id=f"evt-c{number}", ts=ts
            )
            events += [
                call,
                dispatch_event(call, recovery_mode="replay_safe"),
                bound_response(call),
            ]
        elif number % 2:
            events.append(model_text(f"answer {number}", event_id=f"evt-m{number}", ts=ts))
        else:
            events.append(user_text(f"question {number}", event_id=f"evt-u{number}", ts=ts))
    return events


def parked_session(
    rows_before: int = 0, session_id: str = DEFAULT_IDS.session_id
) -> SessionTimeline:
    """An interrupted session parked for every family of reason: an unknown outcome and a
    damaged record (pinned to their rows), a stale snapshot (pinned to the snapshot), and a
    drifted folder, a missing folder and a background process (outside the record)."""
    later = DAY + (rows_before + 1) * 7_000
    call = call_event("call-bash", tool_name="bash", event_id="evt-bash", ts=later + 2_000)
    damaged = with_changes(
        call_event("call-x", event_id="evt-damaged", ts=later + 60_000),
        actions=dispatch_event(call_event("call-x"))["actions"],
    )
    events = [
        user_text("please run the build", event_id="evt-ask", marker=True, ts=DAY - 5_000),
        *chat_events(rows_before),
        checkpoint_event("evt-snap", 2, ts=later),
        call,
        dispatch_event(call, recovery_mode="never_auto_retry"),
        damaged,
        terminal(status="failed", state_delta={"failureClass": "app_restarted"}, ts=later + 90_000),
    ]
    runs = build_timeline(
        [RunSource("run-1", list(enumerate(events, 1)), "failed", failure_class="app_restarted")]
    )
    reasons = [
        TimelineReason(
            "pending_tool_result",
            "bash (call-bash) is indeterminate",
            event_id="evt-bash",
            tool_call_id="call-bash",
            tool_name="bash",
        ),
        TimelineReason(
            "tool_ledger_corruption",
            "immutable tool ledger is corrupt: semantic_lane_conflict",
            event_id="evt-damaged",
        ),
        TimelineReason("workspace_checkpoint_stale", "the snapshot predates a later tool call"),
        TimelineReason("workspace_drift", "2 files changed since the stop"),
    ]
    rejection = (
        "dangling_tool_state",
        "workspace_drift",
        "workspace_checkpoint_stale",
        "workspace_folder_missing",
        "background_operation_pending",
    )
    header = ParkHeader(
        "park",
        rejection,
        pin_reasons(runs, reasons, rejection),
        ResumeMarks("run-1", len(events)),
    )
    return SessionTimeline(session_id, runs, header)


def long_session(rows: int, session_id: str = DEFAULT_IDS.session_id) -> SessionTimeline:
    events = [user_text("start", event_id="evt-first", marker=True, ts=DAY - 5_000)]
    events += chat_events(rows - 1)
    events.append(terminal(status="completed", ts=DAY + rows * 7_000))
    runs = build_timeline([RunSource("run-1", list(enumerate(events, 1)), "completed")])
    return SessionTimeline(session_id, runs, None)


def rows_of(timeline: SessionTimeline) -> Sequence[int]:
    return [len(run.rows) for run in timeline.runs]
