"""The main process's live view of a turn, its transcript items and its settings file."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.bridge_contract import (
    MAX_ITEMS_PER_OPEN,
    MAX_SUMMARY_CHARS,
    ProviderChoice,
    RunStatusValue,
    ToolCardStatus,
    TranscriptItem,
)
from app.host.desktop_settings import SETTINGS_FILE, DesktopSettings
from app.host.host_services import SettingsChange
from app.host.live_turn_view import LiveTurnView
from app.host.transcript_items import session_transcript, wire_item
from runtime.agent.transcript_projection import TranscriptEntry, transcript_of_run
from runtime.ledger.store_ports import RunStatus
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    dispatch_event,
    model_text,
    terminal,
    user_text,
)

IDS = RunIds(session_id="s", invocation_id="i", run_id="r", turn_id="t")


@dataclass
class Sink:
    items: list[TranscriptItem] = field(default_factory=list)
    statuses: list[tuple[str, RunStatusValue, str | None]] = field(default_factory=list)
    started: list[tuple[str, str]] = field(default_factory=list)

    def transcript_item(self, item: TranscriptItem) -> None:
        self.items.append(item)

    def run_status(
        self, run_id: str, status: RunStatusValue, failure_class: str | None = None
    ) -> None:
        self.statuses.append((run_id, status, failure_class))

    def permission_requested(self, request_id: str, tool_name: str, summary: str) -> None:
        raise AssertionError("not expected")

    def resume_started(self, run_id: str, turn_id: str) -> None:
        self.started.append((run_id, turn_id))


def test_streamed_text_is_replaced_in_place_by_its_committed_event() -> None:
    sink = Sink()
    view = LiveTurnView(sink)
    view.committed(user_text("hi", ids=IDS, marker=True))
    view.text_delta("Hel")
    view.text_delta("lo")
    view.committed(model_text("Hello", ids=IDS, event_id="m1"))
    view.text_delta("Again")
    view.committed(model_text("Again", ids=IDS, event_id="m2"))
    assistant = [i for i in sink.items if i.type == "assistant_message"]
    ids = [i.item_id for i in assistant]
    texts = [i.model_dump(by_alias=False)["text"] for i in assistant]
    # Two steps, two ids; each committed item reuses its stream's id (no duplicate on screen).
    assert len(set(ids)) == 2
    assert texts == ["Hel", "Hello", "Hello", "Again", "Again"]
    assert ids[0] == ids[1] == ids[2] and ids[3] == ids[4]


def test_tool_cards_follow_the_committed_facts_and_the_ending() -> None:
    sink = Sink()
    view = LiveTurnView(sink)
    call = call_event("c1", "bash", {"command": "ls"}, ids=IDS, ts=2)
    view.committed(user_text("go", ids=IDS, marker=True))
    view.committed(call)
    view.committed(dispatch_event(call))
    view.committed(bound_response(call, {"exitCode": 0, "output": "a\n"}))
    view.committed(terminal(IDS, status="completed"))
    view.run_status("r", RunStatus.COMPLETED, None)
    cards = [i for i in sink.items if i.type == "tool_card"]
    assert [c.model_dump(by_alias=False)["status"] for c in cards] == [
        ToolCardStatus.RUNNING,
        ToolCardStatus.RUNNING,
        ToolCardStatus.SUCCEEDED,
    ]
    assert len({c.item_id for c in cards}) == 1
    assert sink.statuses == [("r", RunStatusValue.COMPLETED, None)]


def test_a_continuation_starts_with_its_marker() -> None:
    sink = Sink()
    view = LiveTurnView(sink)
    view.continuation_of = "source-run"
    view.committed(model_text("continuing", ids=IDS, event_id="m1"))
    assert sink.items[0].type == "continuation_marker"
    assert sink.items[0].model_dump(by_alias=False)["source_run_id"] == "source-run"


def test_wire_items_clip_to_the_contract_and_drop_malformed_codes() -> None:
    entry = TranscriptEntry(
        "tool_card",
        "e1",
        "r",
        tool_call_id="c",
        tool_name="bash",
        args_summary="x" * 10_000,
        status="pending",
        park_reason="Not A Code",
    )
    item = wire_item(entry)
    assert item is not None
    dumped = item.model_dump(by_alias=False)
    assert len(dumped["args_summary"]) <= MAX_SUMMARY_CHARS
    assert dumped["args_summary"].endswith(f"… ({10_000 - MAX_SUMMARY_CHARS + 40} more characters)")
    assert dumped["status"] == ToolCardStatus.RUNNING
    assert dumped["park_reason"] == "awaiting_permission", "the malformed code is dropped"
    assert wire_item(TranscriptEntry("future_kind", "e2", "r")) is None


def test_an_opened_session_keeps_the_newest_items_and_counts_the_rest() -> None:
    entries = [TranscriptEntry("user_message", f"u{n}", "r1", text="x") for n in range(2500)]
    transcript = session_transcript("s", [("r0", None, []), ("r1", "r0", entries)])
    assert len(transcript.items) == MAX_ITEMS_PER_OPEN
    assert transcript.omitted_earlier == 2501 - MAX_ITEMS_PER_OPEN  # 2,500 entries + 1 marker
    assert transcript.items[-1].item_id == "u2499"


def test_a_continuation_marker_says_what_it_followed() -> None:
    runs: list[tuple[str, str | None, list[TranscriptEntry]]] = [
        ("r0", None, []),
        ("r1", "r0", []),
        ("r2", "r1", []),
        ("r3", "r2", []),
    ]
    after = {"r1": "stop", "r2": "failure"}
    markers = session_transcript("s", runs, after).items
    assert [(m.run_id, getattr(m, "after", None)) for m in markers] == [
        ("r1", "stop"),
        ("r2", "failure"),
        ("r3", "restart"),  # not said: Maka stopping while it ran, as before
    ]


def test_settings_are_user_only_and_the_environment_wins(tmp_path: Path) -> None:
    settings = DesktopSettings(tmp_path)
    view = settings.update(
        SettingsChange(
            provider=ProviderChoice.OPENAI_COMPATIBLE,
            openai_base_url=" http://localhost:11434/v1 ",
            openai_model="qwen",
            openai_api_key="secret",
        )
    )
    assert view.api_key_set and view.openai_base_url == "http://localhost:11434/v1"
    path = tmp_path / SETTINGS_FILE
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert json.loads(path.read_text())["openai_api_key"] == "secret"
    kept = settings.update(SettingsChange(provider=ProviderChoice.OPENAI_COMPATIBLE))
    assert kept.api_key_set, "None keeps the stored key"
    config = DesktopSettings(tmp_path).provider_config({"MAKA_MODEL": "from-env", "HOME": "/x"})
    assert config["MAKA_PROVIDER"] == "openai"
    assert config["MAKA_MODEL"] == "from-env"
    assert "HOME" not in config
    cleared = settings.update(
        SettingsChange(provider=ProviderChoice.OFFLINE_DEMO, openai_api_key="")
    )
    assert not cleared.api_key_set


def test_a_damaged_settings_file_falls_back_to_the_defaults(tmp_path: Path) -> None:
    (tmp_path / SETTINGS_FILE).write_text("{not json", encoding="utf-8")
    assert DesktopSettings(tmp_path).view().provider is ProviderChoice.OFFLINE_DEMO


def test_the_live_view_projects_incrementally_what_the_whole_run_projects() -> None:
    """Only the events from the earliest call still waiting for its result are projected again
    at each commit; after every commit, the newest state of each item sent equals the items of
    the whole run projected at once (what a reopened transcript shows)."""
    sink = Sink()
    view = LiveTurnView(sink)
    first = call_event("c1", "bash", {"command": "sleep 1"}, ids=IDS, ts=2)
    second = call_event("c2", "read_file", {"path": "a.txt"}, ids=IDS, ts=3)
    third = call_event("c3", "bash", {"command": "ls"}, ids=IDS, ts=9)
    events = [
        user_text("go", ids=IDS, marker=True),
        model_text("Looking.", event_id="m1", ids=IDS, ts=1),
        first,
        second,
        dispatch_event(first),
        dispatch_event(second),
        bound_response(second, {"content": "a"}),
        bound_response(first, {"exitCode": 0, "output": ""}),
        model_text("More.", event_id="m2", ids=IDS, ts=8),
        third,
        dispatch_event(third),
        terminal(IDS, status="failed"),
    ]
    committed: list[Any] = []
    for event in events:
        view.committed(event)
        committed.append(event)
        shown = {item.item_id: item for item in sink.items}
        whole = [wire_item(entry) for entry in transcript_of_run(committed)]
        assert [shown[item.item_id] for item in whole if item is not None] == [
            item for item in whole if item is not None
        ]


def test_a_live_continuation_in_a_restored_copy_names_the_earlier_call_by_what_it_did() -> None:
    """The mark of a continuation in a restored copy names the calls the copy predates as the
    reopened transcript does ("the command ..."), from the earlier runs' calls it was told,
    while the run streams and after its ending re-projects the whole run."""
    earlier = RunIds(session_id="s", invocation_id="i0", run_id="r0", turn_id="t0")
    before = call_event("c1", "bash", {"command": "echo x >> count.txt"}, ids=earlier, ts=2)
    from runtime.ledger.restore_point_words import call_subjects

    first = user_text("go on", ids=IDS, marker=True)
    first["actions"]["workspaceTransition"] = {  # type: ignore[typeddict-item]  # the mark's keys
        "protocol": "workspace_transition_v1",
        "kind": "isolated_restore",
        "toPath": "/w/proj-restored-1",
        "restorePoint": "before_later_calls",
        "laterCalls": [{"toolName": "bash", "toolCallId": "c1"}],
    }
    sink = Sink()
    view = LiveTurnView(sink, continuation_of="r0")
    view.know_earlier_calls(call_subjects([before]))
    view.committed(first)
    view.committed(model_text("done", ids=IDS, ts=3))
    view.committed(terminal(IDS, status="completed"))
    marks = [
        getattr(item, "text", "")
        for item in sink.items
        if "Continued in a restored copy" in getattr(item, "text", "")
    ]
    assert marks, "the mark was shown"
    for mark in marks:
        assert 'before the command "echo x >> count.txt"' in mark
        assert "c1" not in mark
