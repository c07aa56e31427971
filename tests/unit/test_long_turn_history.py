"""A long turn projects each event into the provider history about once, not once per step:
the real session service and run loop, the real store and ``list_dir``, 300 model steps, with
the projection counted (before the incremental history, every step re-projected the whole turn:
~45,000 event projections here instead of ~1,000)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from runtime.agent import run_loop
from runtime.agent.permission_policy import PermissionMode, PermissionPolicy
from runtime.agent.run_loop import RunSettings
from runtime.agent.session_service import SessionService
from runtime.base.cancel_token import CancelToken
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import RunStatus
from runtime.providers import history_projection
from runtime.providers.provider_port import (
    Finished,
    HistoryItem,
    ProviderRequest,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallReady,
    ToolResult,
)
from storage.ledger.ledger_store import open_store
from storage.ledger.sqlite_connection import Synchronous

STEPS = 300


class ListingProvider:
    name = "listing"
    label = "listing test provider"

    def __init__(self) -> None:
        self.requests: list[ProviderRequest] = []

    def stream(self, request: ProviderRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        self.requests.append(request)
        step = len(self.requests)
        if step <= STEPS:
            yield ToolCallReady(f"c{step}", "list_dir", {"path": "."})
            yield Finished("tool_use")
        else:
            yield TextDelta("done")
            yield Finished("end_turn")


class Quiet:
    def text_delta(self, text: str) -> None:
        del text

    def thinking_delta(self, text: str) -> None:
        del text

    def committed(self, event: RuntimeEvent) -> None:
        del event

    def run_status(self, run_id: str, status: RunStatus, failure_class: str | None) -> None:
        del run_id, status, failure_class


def test_a_long_turn_projects_each_event_about_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    projected = [0]
    original = history_projection.history_from_events

    def counting(events: Iterable[RuntimeEvent]) -> tuple[HistoryItem, ...]:
        events = list(events)
        projected[0] += len(events)
        return original(events)

    monkeypatch.setattr(history_projection, "history_from_events", counting)
    monkeypatch.setattr(run_loop, "history_from_events", counting, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    provider = ListingProvider()
    with open_store(tmp_path / "data") as store:
        store.set_synchronous(Synchronous.OFF)  # speed only
        service = SessionService(
            store=store,
            provider_factory=lambda: provider,
            owner_epoch=1,
            settings=RunSettings(max_steps=STEPS + 1),
        )
        session = service.create_session(work)
        outcome = service.send_turn(
            session.session_id, "list", Quiet(), PermissionPolicy(PermissionMode.AUTO)
        )
    assert outcome.status is RunStatus.COMPLETED
    assert len(provider.requests) == STEPS + 1
    last = provider.requests[-1].history
    # the model still sees the whole turn, in order: every call followed by its result
    assert len(last) == 1 + 2 * STEPS
    assert last[-2:] == (
        ToolCall(f"c{STEPS}", "list_dir", {"path": "."}),
        ToolResult(f"c{STEPS}", "list_dir", last[-1].result, False),  # type: ignore[union-attr]
    )
    events_in_turn = 1 + 3 * STEPS  # the user's message, then call, dispatch, response per step
    assert projected[0] <= 2 * events_in_turn, projected[0]
