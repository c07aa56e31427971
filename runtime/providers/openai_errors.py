"""What an OpenAI-compatible server said when it refused a request, in a sentence.

Error bodies are parsed whole (up to ``ERROR_BODY_LIMIT`` bytes) and only the sentence shown is
cut, so a long JSON error still reads as its message. Shapes understood: ``{"error": {"message":
...}}`` (OpenAI, vLLM, llama.cpp), ``{"error": "..."}`` (Ollama), ``{"detail": ...}`` (FastAPI
servers such as llama-cpp-python: a string or a list of validation errors), ``{"message": ...}``.

Secrets are redacted before anything is cut (``quoted``): a cut made first could split the key,
leaving a prefix of it that no redaction recognises.

A request longer than the model's context window is recognised from the wording servers use, so
the run can say so plainly and the next turn can leave the oversized message out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from runtime.providers.secret_redaction import redact_secrets
from runtime.providers.server_text import server_json

ERROR_BODY_LIMIT = 1024 * 1024
SHOWN_LIMIT = 300

_OVERFLOW = re.compile(
    r"context[ _](length|window|size)|exceeds? (the )?(maximum |available )?context"
    r"|context_length_exceeded|exceed_context_size|maximum context|too many tokens"
    r"|prompt is too long|input is too long|requested tokens \(\d+\) exceed",
    re.IGNORECASE,
)


def quoted(text: str, limit: int, secrets: Iterable[str | None] = ()) -> str:
    """A server's ``text`` as an error quotes it: ``secrets`` (and Bearer tokens, URL passwords)
    redacted first, then cut to ``limit`` characters."""
    text = redact_secrets(text, secrets)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shown(text: str, secrets: Iterable[str | None]) -> str:
    return quoted(" ".join(redact_secrets(text, secrets).split()), SHOWN_LIMIT)


def _detail_text(detail: Any) -> str | None:
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list):
        parts: list[str] = []
        for entry in detail:
            if isinstance(entry, dict) and isinstance(entry.get("msg"), str):
                location = entry.get("loc")
                where = ".".join(str(p) for p in location) if isinstance(location, list) else ""
                parts.append(f"{where}: {entry['msg']}" if where else entry["msg"])
            elif isinstance(entry, str):
                parts.append(entry)
        return "; ".join(parts) or None
    if isinstance(detail, dict):
        return error_object_text(detail)
    return None


def error_object_text(value: Any) -> str | None:
    """The readable message inside a decoded error body or an in-stream ``error`` object."""
    if isinstance(value, str):
        return value
    if not isinstance(value, dict):
        return None
    error = value.get("error")
    if isinstance(error, dict):
        inner = error_object_text(error)
        if inner:
            return inner
    if isinstance(error, str) and error:
        return error
    if "detail" in value:
        text = _detail_text(value["detail"])
        if text:
            return text
    for key in ("message", "msg"):
        if isinstance(value.get(key), str) and value[key]:
            return str(value[key])
    return None


def error_message(body: str, secrets: Iterable[str | None] = ()) -> str:
    """The sentence to show for an error body: ``secrets`` redacted, then cut to ``SHOWN_LIMIT``
    characters."""
    if body.lstrip().startswith("<"):
        return "an HTML page, not an API error (is MAKA_OPENAI_BASE_URL the API's address?)"
    try:
        value = server_json(body)
    except json.JSONDecodeError:
        return _shown(body, secrets)
    return _shown(error_object_text(value) or body, secrets)


def is_context_overflow(text: str) -> bool:
    """True when a server's error text says the request does not fit the model's context."""
    return bool(_OVERFLOW.search(text))
