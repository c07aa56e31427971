"""Tool results carry any file name: bytes that are not UTF-8 are written as ``\\xNN``.

Why: POSIX file names are bytes. Python reads a name that is not valid UTF-8 with each stray
byte as a lone surrogate (U+DC80-U+DCFF, "surrogateescape"), which no JSON event may hold, so a
``list_dir`` over such a name used to end the turn with ``event_schema_invalid``. Before a
result is recorded every such byte becomes the four characters ``\\xNN`` (lower-case hex, as in
Python's ``backslashreplace`` and ``ls -b``), and any other lone surrogate becomes ``\\uXXXX``.
The escape is for reading: a name holding a literal backslash followed by ``x`` and two hex
digits reads the same, so a name shown escaped cannot be passed back to a tool as it is.
"""

from __future__ import annotations

import re
from typing import Any

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def escape_text(text: str) -> str:
    """``text`` with each undecodable byte written as ``\\xNN`` (see the module's notes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub(_escape, text)
    return text


def escape_undecodable(value: Any) -> Any:
    """A JSON-like value (dicts, lists, strings, numbers) with every string, keys included,
    passed through :func:`escape_text`; the value itself when nothing needed escaping."""
    if isinstance(value, str):
        return escape_text(value)
    if isinstance(value, dict):
        escaped = {
            escape_text(key) if isinstance(key, str) else key: escape_undecodable(item)
            for key, item in value.items()
        }
        return escaped if escaped != value else value
    if isinstance(value, list | tuple):
        items = [escape_undecodable(item) for item in value]
        return items if items != list(value) else value
    return value
