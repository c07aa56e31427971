"""Choosing a provider by name from a flat configuration (environment variables or settings).

Keys (docs/providers.md): ``MAKA_PROVIDER`` (``demo`` by default, ``openai``, ``scripted``),
``MAKA_OPENAI_BASE_URL``, ``MAKA_OPENAI_API_KEY``, ``MAKA_MODEL``, ``MAKA_OPENAI_TIMEOUT``
(seconds per socket read, 120 by default), ``MAKA_OPENAI_DATA_TIMEOUT`` (seconds between two data
events of a stream, keep-alive comments not counting: 600 by default, never less than the read
timeout), ``MAKA_OPENAI_CONTEXT_TOKENS`` (the model's context size: a request estimated above it
is refused as a context overflow without being sent), ``MAKA_OPENAI_TOOL_CHOICE`` (``auto``, the
default, sends ``tool_choice: "auto"`` with the tools; ``off`` leaves it out), and for the
scripted provider
``MAKA_SCRIPT_FILE`` and ``MAKA_SCRIPT_RECORD`` (a JSON-lines file that receives every request).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from runtime.providers.offline_demo_provider import OfflineDemoProvider
from runtime.providers.openai_compatible_provider import (
    DEFAULT_DATA_TIMEOUT,
    DEFAULT_READ_TIMEOUT,
    OpenAICompatibleProvider,
    OpenAISettings,
)
from runtime.providers.provider_port import Provider, ProviderError, ProviderErrorCode
from runtime.providers.scripted_provider import ScriptedProvider, load_script

PROVIDER_NAMES = ("demo", "openai", "scripted")
DEFAULT_PROVIDER = "demo"
DEFAULT_OPENAI_BASE_URL = "http://127.0.0.1:11434/v1"


def build_provider(name: str | None, config: Mapping[str, str]) -> Provider:
    """The provider called ``name`` (or ``MAKA_PROVIDER``, or the offline demo)."""
    chosen = (name or config.get("MAKA_PROVIDER") or DEFAULT_PROVIDER).strip().lower()
    if chosen in ("demo", "offline", "offline-demo"):
        return OfflineDemoProvider()
    if chosen in ("openai", "openai-compatible"):
        timeout = _seconds(config, "MAKA_OPENAI_TIMEOUT", DEFAULT_READ_TIMEOUT)
        data_timeout = _seconds(config, "MAKA_OPENAI_DATA_TIMEOUT", DEFAULT_DATA_TIMEOUT)
        if "MAKA_OPENAI_DATA_TIMEOUT" in config and data_timeout < timeout:
            raise ProviderError(
                ProviderErrorCode.CONFIG_INVALID,
                "MAKA_OPENAI_DATA_TIMEOUT must not be less than MAKA_OPENAI_TIMEOUT (a server "
                "processing a long prompt sends only keep-alive comments for a while)",
            )
        return OpenAICompatibleProvider(
            OpenAISettings(
                base_url=config.get("MAKA_OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL,
                model=config.get("MAKA_MODEL", ""),
                api_key=config.get("MAKA_OPENAI_API_KEY") or None,
                read_timeout=timeout,
                connect_timeout=min(timeout, 15.0),
                data_timeout=max(data_timeout, timeout),
                context_tokens=_context_tokens(config),
                send_tool_choice=_tool_choice(config),
            )
        )
    if chosen == "scripted":
        script = config.get("MAKA_SCRIPT_FILE")
        if not script:
            raise ProviderError(
                ProviderErrorCode.CONFIG_INVALID,
                "the scripted provider needs MAKA_SCRIPT_FILE (a JSON script of model steps)",
            )
        record = config.get("MAKA_SCRIPT_RECORD")
        return ScriptedProvider(load_script(Path(script)), Path(record) if record else None)
    raise ProviderError(
        ProviderErrorCode.CONFIG_INVALID,
        f"unknown provider {chosen!r}; choose one of {', '.join(PROVIDER_NAMES)}",
    )


def _seconds(config: Mapping[str, str], key: str, default: float) -> float:
    text = config.get(key)
    if text is None or not text.strip():
        return default
    try:
        value = float(text)
    except ValueError:
        raise ProviderError(
            ProviderErrorCode.CONFIG_INVALID, f"{key} must be a number of seconds, got {text!r}"
        ) from None
    if not value > 0 or value == float("inf"):
        raise ProviderError(ProviderErrorCode.CONFIG_INVALID, f"{key} must be positive")
    return value


def _context_tokens(config: Mapping[str, str]) -> int | None:
    text = (config.get("MAKA_OPENAI_CONTEXT_TOKENS") or "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) <= 0:
        raise ProviderError(
            ProviderErrorCode.CONFIG_INVALID,
            f"MAKA_OPENAI_CONTEXT_TOKENS must be a positive number of tokens, got {text!r}",
        )
    return int(text)


def _tool_choice(config: Mapping[str, str]) -> bool:
    text = (config.get("MAKA_OPENAI_TOOL_CHOICE") or "auto").strip().lower()
    if text not in ("auto", "off"):
        raise ProviderError(
            ProviderErrorCode.CONFIG_INVALID,
            f"MAKA_OPENAI_TOOL_CHOICE must be auto or off, got {text!r}",
        )
    return text == "auto"
