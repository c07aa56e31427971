"""What a model server sends, made fit for Maka before it enters a turn.

A server's JSON may hold values no ledger event can keep and no terminal can print. A JSON escape
may name half of a surrogate pair (``"\\ud800"``): ``json.loads`` turns it into a lone surrogate,
which UTF-8 cannot encode, so printing the text or committing it to the ledger would fail in the
middle of a turn. Every JSON text taken from a server is decoded with ``server_json``, which
replaces each lone surrogate (in strings and in object keys) with U+FFFD, the replacement
character; a proper pair is one character after decoding and is kept. Counts that must fit a
ledger event are read with ``ledger_count``.
"""

from __future__ import annotations

import json
import re
from typing import Any

LEDGER_INT_MAX = 2**53 - 1
"""The largest integer a ledger event holds (canonical JSON, RFC 8785)."""

REPLACEMENT = "\ufffd"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def without_lone_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD."""
    if _LONE_SURROGATE.search(text) is None:
        return text
    return _LONE_SURROGATE.sub(REPLACEMENT, text)


def _cleaned(value: Any) -> Any:
    if isinstance(value, str):
        return without_lone_surrogates(value)
    if isinstance(value, list):
        return [_cleaned(item) for item in value]
    if isinstance(value, dict):
        return {without_lone_surrogates(key): _cleaned(item) for key, item in value.items()}
    return value


def server_json(text: str) -> Any:
    """``json.loads(text)`` without lone surrogates anywhere in the value (``JSONDecodeError``
    as ``json.loads`` raises it). ``text`` itself holds no surrogates when it was decoded from
    UTF-8, so only a ``\\uD800``-``\\uDFFF`` escape can bring one in."""
    value = json.loads(text)
    if _SURROGATE_ESCAPE.search(text) is None:
        return value
    return _cleaned(value)


def ledger_count(value: Any) -> int:
    """A token count as a ledger event can hold it: a JSON integer from 0 to 2^53-1; anything
    else (negative, fractional, not a number, too large) is treated as not reported, 0."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= LEDGER_INT_MAX:
        return value
    return 0
