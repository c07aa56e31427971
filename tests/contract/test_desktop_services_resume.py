"""The desktop's services while Safe resume runs: no second turn or resume in that session."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from app.bridge_contract import TranscriptItem
from app.host.desktop_services import DesktopServices
from app.host.host_services import HostServiceError, ResumeOutcome, ResumeParked
from runtime.ledger.store_ports import RunHeader, RunStatus
from storage.ledger.ledger_store import open_store
from storage.sessions.workspace_identity import resolve_workspace_identity
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    dispatch_event,
    user_text,
)
from tests.helpers.resume_fixtures import seed_interrupted_run

IDS = RunIds("sess-d", "inv-d", "run-d", "turn-d")


class RecordingSink:
    def __init__(self) -> None:
        self.started = threading.Event()

    def transcript_item(self, item: TranscriptItem) -> None:
        del item

    def run_status(self, run_id: str, status: object, failure_class: str | None = None) -> None:
        del run_id, status, failure_class

    def permission_requested(self, request_id: str, tool_name: str, summary: str) -> None:
        del request_id, tool_name, summary

    def resume_started(self, run_id: str, turn_id: str) -> None:
        del run_id, turn_id
        self.started.set()


def test_a_session_being_resumed_accepts_no_new_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    identity = resolve_workspace_identity(work).identity
    call = call_event("c1", "bash", {"command": "true"}, ids=IDS, ts=2)
    events = [
        user_text("go", ids=IDS, marker=True),
        call,
        dispatch_event(call, recovery_mode="never_auto_retry"),
        bound_response(call, {"exitCode": 0}),
    ]
    data = tmp_path / "data"
    with open_store(data) as store:
        seed_interrupted_run(store, IDS, events, cwd=str(work), workspace_identity=identity)
    script = tmp_path / "script.json"
    # turn 1: the call (already committed), then a step that hangs until the turn is cancelled
    script.write_text(json.dumps({"steps": [{"text": "x"}, {"hang": True}]}))
    monkeypatch.setenv("MAKA_PROVIDER", "scripted")
    monkeypatch.setenv("MAKA_SCRIPT_FILE", str(script))
    services = DesktopServices(open_store(data), data, safe_resume_enabled=True)
    try:
        report = services.recover_at_startup()
        assert [run.session_id for run in report.interrupted] == [IDS.session_id]
        sink = RecordingSink()
        outcome: list[ResumeOutcome] = []
        worker = threading.Thread(
            target=lambda: outcome.append(
                services.resume_latest(IDS.session_id, sink, automatic=False)
            )
        )
        worker.start()
        assert sink.started.wait(20), "the continuation never started"
        with pytest.raises(HostServiceError) as refused:
            services.send_turn(IDS.session_id, "another message", RecordingSink())
        assert refused.value.code == "session_busy"
        second = services.resume_latest(IDS.session_id, RecordingSink(), automatic=False)
        assert isinstance(second, ResumeParked)
        assert second.rejection_reasons == ("session_busy",)
        services.cancel_turn(IDS.session_id)
        worker.join(20)
        assert not worker.is_alive()
        assert outcome, "resume_latest did not return"
        runs = sorted(
            services._store.list_session_runs(IDS.session_id),
            key=lambda header: header.created_at,
        )
        assert [run.status for run in runs] == [RunStatus.FAILED, RunStatus.CANCELLED]
    finally:
        services.close()


def test_every_desktop_run_records_its_workspace_even_with_safe_resume_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash while Safe resume was off can be resumed once it is turned on: the run header
    carries the workspace identity whatever the flag (else it parks forever with
    ``workspace_identity_missing``)."""
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    monkeypatch.delenv("MAKA_PROVIDER", raising=False)
    services = DesktopServices(open_store(data), data, safe_resume_enabled=False)
    try:
        services.recover_at_startup()
        session = services.create_session(work)
        services.send_turn(session.session_id, "list files", RecordingSink())
        deadline = time.monotonic() + 20
        runs: Sequence[RunHeader] = ()
        while time.monotonic() < deadline:
            runs = services._store.list_session_runs(session.session_id)
            if runs and runs[0].status is RunStatus.COMPLETED:
                break
            time.sleep(0.05)
        assert runs and runs[0].status is RunStatus.COMPLETED
        assert runs[0].workspace_identity == resolve_workspace_identity(work).identity
        assert (work / ".maka" / "workspace.json").is_file()
        assert not (work / ".maka-workspace.json").exists()
    finally:
        services.close()


def test_safe_resume_setting_is_kept_in_the_data_dir_and_the_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.bridge_contract import ProviderChoice
    from app.host.host_services import SettingsChange

    data = tmp_path / "data"
    monkeypatch.delenv("MAKA_RUNTIME_SAFE_BOUNDARY_RESUME", raising=False)
    services = DesktopServices(open_store(data), data, safe_resume_enabled=False)
    try:
        services.recover_at_startup()
        assert services.resume_flags() == (False, False)
        view = services.update_settings(
            SettingsChange(ProviderChoice.OFFLINE_DEMO, safe_resume=True, auto_resume=False)
        )
        assert view.safe_resume and not view.auto_resume and view.safe_resume_enabled
        assert services.resume_flags() == (True, False)
    finally:
        services.close()
    again = DesktopServices(open_store(data), data, safe_resume_enabled=False)
    try:
        again.recover_at_startup()
        assert again.resume_flags() == (True, False), "kept in the data directory"
        monkeypatch.setenv("MAKA_RUNTIME_SAFE_BOUNDARY_RESUME", "0")
        assert again.resume_flags() == (False, False)
        view = again.get_settings()
        assert view.resume_from_environment and not view.safe_resume_enabled
        for name in ("MAKA_PROVIDER", "MAKA_OPENAI_BASE_URL", "MAKA_MODEL", "MAKA_OPENAI_API_KEY"):
            monkeypatch.delenv(name, raising=False)
        assert again.get_settings().provider_from_environment == ()
        monkeypatch.setenv("MAKA_PROVIDER", "scripted")
        assert again.get_settings().provider_from_environment == ("MAKA_PROVIDER",)
        monkeypatch.setenv("MAKA_RUNTIME_SAFE_BOUNDARY_RESUME", "1")
        assert again.resume_flags() == (True, True)
        # The settings show what is in force: both on, though automatic resume is off here.
        view = again.get_settings()
        assert view.safe_resume and view.auto_resume
    finally:
        again.close()
