"""Keep credentials out of provider error texts.

A model server may echo what it was sent (the ``Authorization`` header, the key inside a JSON
error) in an error body. Such a text is shown to the user, logged and committed to the immutable
ledger, so every provider error passes through ``redact_secrets`` first: the configured key (also
in its JSON-escaped and URL-encoded spellings), anything that follows ``Bearer`` and the password
of a URL (``https://user:password@host``) are replaced by ``[redacted]``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from urllib.parse import quote

from runtime.providers.provider_port import ProviderError

REDACTED = "[redacted]"
_MIN_SECRET_LENGTH = 4  # shorter "keys" would redact ordinary words
_BEARER = re.compile(r"(?i)\b(bearer)(\s+|%20|\+)[^\s\"'<>,;&]+")
_URL_PASSWORD = re.compile(r"(?<=://)([^/\s@:]*):[^/\s@]+@")  # https://user:secret@host


def _spellings(secret: str) -> set[str]:
    return {secret, json.dumps(secret)[1:-1], quote(secret, safe=""), quote(secret)}


def redact_secrets(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` without any of ``secrets`` and without ``Bearer`` tokens."""
    for secret in secrets:
        if not secret or len(secret) < _MIN_SECRET_LENGTH:
            continue
        for spelling in sorted(_spellings(secret), key=len, reverse=True):
            text = text.replace(spelling, REDACTED)
    text = _URL_PASSWORD.sub(lambda match: f"{match.group(1)}:{REDACTED}@", text)
    return _BEARER.sub(lambda match: f"{match.group(1)} {REDACTED}", text)


def redacted_error(error: ProviderError, secrets: Iterable[str | None] = ()) -> ProviderError:
    """``error`` with its message redacted (the same error when there was nothing to hide)."""
    message = redact_secrets(error.message, secrets)
    if message == error.message:
        return error
    return ProviderError(error.code, message)
