"""The desktop's step limit: a setting stored in the data directory, read at every turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from app import bridge_contract as bc
from app.host.desktop_services import DesktopServices
from app.host.desktop_settings import SETTINGS_FILE, DesktopSettings
from app.host.host_services import SettingsChange
from runtime.agent import run_loop
from runtime.ledger.store_ports import RunStatus
from storage.ledger.ledger_store import open_store
from tests.helpers.maka_run import shape


class Sink:
    def __init__(self) -> None:
        self.items: list[bc.TranscriptItem] = []

    def transcript_item(self, item: bc.TranscriptItem) -> None:
        self.items.append(item)

    def run_status(
        self, run_id: str, status: bc.RunStatusValue, failure_class: str | None = None
    ) -> None:
        del run_id, status, failure_class

    def permission_requested(self, request_id: str, tool_name: str, summary: str) -> None:
        del request_id, tool_name, summary

    def resume_started(self, run_id: str, turn_id: str) -> None:
        del run_id, turn_id


def test_the_bridge_and_the_runtime_agree_on_the_limits() -> None:
    assert bc.DEFAULT_MAX_STEPS == run_loop.DEFAULT_MAX_STEPS >= 100
    assert (1, bc.MAX_STEPS_LIMIT) == run_loop.MAX_STEPS_RANGE
    assert run_loop.RunSettings().max_steps == run_loop.DEFAULT_MAX_STEPS
    with pytest.raises(ValueError):
        run_loop.RunSettings(max_steps=0)


def test_the_setting_persists_and_a_damaged_value_reads_as_the_default(tmp_path: Path) -> None:
    settings = DesktopSettings(tmp_path)
    assert settings.view().max_steps == bc.DEFAULT_MAX_STEPS
    view = settings.update(SettingsChange(provider=bc.ProviderChoice.OFFLINE_DEMO, max_steps=7))
    assert view.max_steps == 7
    assert DesktopSettings(tmp_path).max_steps() == 7
    # a change that does not name the limit keeps it
    settings.update(SettingsChange(provider=bc.ProviderChoice.OFFLINE_DEMO))
    assert DesktopSettings(tmp_path).max_steps() == 7
    for damaged in ("0", "lots", "999999999"):
        (tmp_path / SETTINGS_FILE).write_text(json.dumps({"max_steps": damaged}))
        assert DesktopSettings(tmp_path).max_steps() == bc.DEFAULT_MAX_STEPS


def test_the_bridge_refuses_an_out_of_range_limit() -> None:
    for bad in (0, bc.MAX_STEPS_LIMIT + 1):
        with pytest.raises(ValidationError):
            bc.SettingsUpdateRequest(provider=bc.ProviderChoice.OFFLINE_DEMO, max_steps=bad)


def test_a_desktop_turn_stops_at_the_limit_set_in_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    steps = [
        {"toolCalls": [{"id": f"l{i}", "name": "list_dir", "args": {"path": "."}}]}
        for i in range(8)
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [[*steps, {"text": "done"}], [{"text": "more"}]]}))
    monkeypatch.setenv("MAKA_PROVIDER", "scripted")
    monkeypatch.setenv("MAKA_SCRIPT_FILE", str(script))
    data = tmp_path / "data"
    services = DesktopServices(open_store(data), data, safe_resume_enabled=False)
    try:
        services.recover_at_startup()
        services.update_settings(
            SettingsChange(provider=bc.ProviderChoice.OFFLINE_DEMO, max_steps=4)
        )
        assert services.get_settings().max_steps == 4
        session = services.create_session(work)
        sink = Sink()
        services.send_turn(session.session_id, "list it", sink)
        [run] = services._store.list_session_runs(session.session_id)
        assert run.status is RunStatus.COMPLETED
        events = [row.event for row in services._store.read_run_events(run.run_id)]
        calls = [e for e in events if shape(e) == "call"]
        assert len(calls) == 4
        assert events[-1]["actions"]["stateDelta"]["stopReason"] == "step_limit"
        notices = [item for item in sink.items if item.type == "notice"]
        assert notices and notices[-1].code == "step_limit"
        assert "step limit of 4 model steps" in notices[-1].text
    finally:
        services.close()
