"""A desktop turn against an OpenAI-compatible server set up in Settings: the provider's tuning
from the settings reaches the request, and an empty reply reaches the window as a coded notice."""

from __future__ import annotations

from pathlib import Path

import pytest

from app import bridge_contract as bc
from app.host.desktop_services import DesktopServices
from app.host.desktop_settings import PROVIDER_ENVIRONMENT
from app.host.host_services import SettingsChange
from runtime.ledger.store_ports import RunStatus
from storage.ledger.ledger_store import open_store
from tests.contract.test_desktop_step_limit import Sink
from tests.helpers.chat_server import chat_server, text_reply


@pytest.mark.parametrize("tool_choice", [True, False])
def test_an_empty_reply_in_the_desktop_is_a_notice_with_its_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool_choice: bool
) -> None:
    for name in PROVIDER_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MAKA_WORKSPACE_CHECKPOINTS", "off")
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    with chat_server([text_reply("")]) as server:
        services = DesktopServices(open_store(data), data, safe_resume_enabled=False)
        try:
            services.recover_at_startup()
            services.update_settings(
                SettingsChange(
                    provider=bc.ProviderChoice.OPENAI_COMPATIBLE,
                    openai_base_url=server.base_url,
                    openai_model="tiny",
                    provider_tuning=bc.ProviderTuning(timeout_s=30, tool_choice=tool_choice),
                )
            )
            session = services.create_session(work)
            sink = Sink()
            services.send_turn(session.session_id, "hello", sink)
            [run] = services._store.list_session_runs(session.session_id)
        finally:
            services.close()
        [request] = server.requests()
    assert run.status is RunStatus.COMPLETED
    assert ("tool_choice" in request) is tool_choice
    notices = [item for item in sink.items if item.type == "notice"]
    assert notices and notices[-1].code == "provider_empty_reply"
    assert notices[-1].level is bc.NoticeLevel.WARN
    assert "empty reply" in notices[-1].text
    assert ("Tool choice: off" in notices[-1].text) is tool_choice
