"""The OpenAI-compatible provider's waits, context size and tool choice in the desktop's
settings: stored in ``settings.json`` (the file ``maka`` commands read), read back as saved, a
damaged value read as the default, and an environment variable still winning when set.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from app import bridge_contract as bc
from app.host.desktop_settings import DesktopSettings, provider_environment
from app.host.host_services import SettingsChange
from runtime.providers.openai_compatible_provider import (
    DEFAULT_DATA_TIMEOUT,
    DEFAULT_READ_TIMEOUT,
    OpenAICompatibleProvider,
)
from runtime.providers.provider_registry import build_provider

TUNING = bc.ProviderTuning(timeout_s=90, data_timeout_s=900, context_tokens=4096, tool_choice=False)


def _change(tuning: bc.ProviderTuning | None) -> SettingsChange:
    return SettingsChange(
        provider=bc.ProviderChoice.OPENAI_COMPATIBLE,
        openai_base_url="http://127.0.0.1:8080/v1",
        openai_model="qwen",
        provider_tuning=tuning,
    )


def test_the_tuning_is_stored_in_settings_json_and_read_back(tmp_path: Path) -> None:
    DesktopSettings(tmp_path).update(_change(TUNING))
    stored = json.loads((tmp_path / "settings.json").read_text(encoding="utf-8"))
    assert stored["openai_timeout"] == "90" and stored["openai_data_timeout"] == "900"
    assert stored["openai_context_tokens"] == "4096" and stored["openai_tool_choice"] == "off"
    reopened = DesktopSettings(tmp_path)
    assert reopened.view().provider_tuning == TUNING
    reopened.update(_change(None))  # a change without tuning keeps the stored one
    assert DesktopSettings(tmp_path).view().provider_tuning == TUNING


def test_the_cli_builds_its_provider_from_the_stored_tuning(tmp_path: Path) -> None:
    DesktopSettings(tmp_path).update(_change(TUNING))
    config = DesktopSettings(tmp_path).provider_config({})
    provider = build_provider(None, config)
    assert isinstance(provider, OpenAICompatibleProvider)
    settings = provider._settings
    assert settings.read_timeout == 90 and settings.data_timeout == 900
    assert settings.context_tokens == 4096 and settings.send_tool_choice is False


def test_an_environment_variable_wins_over_the_stored_tuning(tmp_path: Path) -> None:
    DesktopSettings(tmp_path).update(_change(TUNING))
    environ = {"MAKA_OPENAI_TOOL_CHOICE": "auto", "MAKA_OPENAI_CONTEXT_TOKENS": "8192"}
    provider = build_provider(None, DesktopSettings(tmp_path).provider_config(environ))
    assert isinstance(provider, OpenAICompatibleProvider)
    assert provider._settings.send_tool_choice is True
    assert provider._settings.context_tokens == 8192
    assert provider_environment(environ) == (
        "MAKA_OPENAI_CONTEXT_TOKENS",
        "MAKA_OPENAI_TOOL_CHOICE",
    )


def test_unset_values_leave_the_provider_defaults(tmp_path: Path) -> None:
    DesktopSettings(tmp_path).update(_change(bc.ProviderTuning()))
    provider = build_provider(None, DesktopSettings(tmp_path).provider_config({}))
    assert isinstance(provider, OpenAICompatibleProvider)
    assert provider._settings.read_timeout == DEFAULT_READ_TIMEOUT
    assert provider._settings.data_timeout == DEFAULT_DATA_TIMEOUT
    assert provider._settings.context_tokens is None and provider._settings.send_tool_choice


def test_a_damaged_stored_value_reads_as_the_default(tmp_path: Path) -> None:
    values = {
        "provider": "openai_compatible",
        "openai_timeout": "soon",
        "openai_context_tokens": "-3",
        "openai_tool_choice": "off",
    }
    (tmp_path / "settings.json").write_text(json.dumps(values), encoding="utf-8")
    assert DesktopSettings(tmp_path).view().provider_tuning == bc.ProviderTuning(tool_choice=False)


def test_the_contract_refuses_a_data_wait_shorter_than_the_answer_wait() -> None:
    with pytest.raises(ValidationError):
        bc.ProviderTuning(timeout_s=300, data_timeout_s=200)
    with pytest.raises(ValidationError):
        bc.ProviderTuning(data_timeout_s=60)  # shorter than the default answer wait
    with pytest.raises(ValidationError):
        bc.ProviderTuning(context_tokens=0)


def test_the_contract_defaults_are_the_providers() -> None:
    assert bc.DEFAULT_OPENAI_TIMEOUT_S == DEFAULT_READ_TIMEOUT
    assert bc.DEFAULT_OPENAI_DATA_TIMEOUT_S == DEFAULT_DATA_TIMEOUT
