"""Text from the model or a command, shown so that what you see is what it is.

Why: a permission prompt or a card shows text the user did not write. A carriage return or an
escape sequence (``\\r\\x1b[2K``) can erase part of a command in a terminal; a bidirectional
override can make a command read differently from what it does; a zero-width character can hide
inside a word. So every prompt and card passes its text through ``visible``: control
characters are shown by name (``\\x1b`` -> ``<ESC>``, ``\\r`` -> ``<CR>``, ``\\x00`` -> ``<NUL>``),
C1 controls and bidirectional embeddings, overrides and isolates become ``<U+202E>``. Newlines
and tabs stay. With ``strict`` (a command about to be approved, a tool's arguments) every other
invisible formatting character (zero-width space and joiner, byte-order mark...) is shown too.

Pure Python (no Qt): the terminal uses it as well as the window.
"""

from __future__ import annotations

import re
from typing import Any, TextIO

# ASCII names, not the Unicode control pictures (␛, ␍): those are missing from common monospace
# fonts and would show as empty boxes, hiding the difference between ESC and CR again.
_C0_NAMES = [
    "NUL",
    "SOH",
    "STX",
    "ETX",
    "EOT",
    "ENQ",
    "ACK",
    "BEL",
    "BS",
    "TAB",
    "LF",
    "VT",
    "FF",
    "CR",
    "SO",
    "SI",
    "DLE",
    "DC1",
    "DC2",
    "DC3",
    "DC4",
    "NAK",
    "SYN",
    "ETB",
    "CAN",
    "EM",
    "SUB",
    "ESC",
    "FS",
    "GS",
    "RS",
    "US",
]
_BIDI = frozenset(range(0x202A, 0x202F)) | frozenset(range(0x2066, 0x206A))
_LINE_SEPARATORS = frozenset((0x2028, 0x2029, 0x85))
AUTO_MODE_WARNING = "Commands can change files anywhere your user account can."
"""The one line shown wherever a command may run without a prompt, or is asked about."""


def _shown(char: str, strict: bool) -> str | None:
    code = ord(char)
    if code < 0x20:
        if char in "\n\t":
            return None
        return f"<{_C0_NAMES[code]}>"
    if code == 0x7F:
        return "<DEL>"
    if 0x80 <= code <= 0x9F or code in _BIDI or code in _LINE_SEPARATORS:
        return f"<U+{code:04X}>"
    if strict and code > 0x7F:
        import unicodedata  # only for strict text: every terminal command writes through here

        if unicodedata.category(char) in ("Cf", "Zl", "Zp", "Co", "Cn"):
            return f"<U+{code:04X}>"
    return None


_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""The characters ``_shown`` names when not strict (one regular expression: a 190 KB log is
scanned in C, not character by character in Python)."""


def visible(text: str, *, strict: bool = False) -> str:
    """``text`` with its control characters made visible (see the module's docstring)."""
    if text.isprintable() and (not strict or text.isascii()):
        return text  # the common case: nothing to show, no copy
    if not strict:
        return _HIDDEN.sub(lambda found: _shown(found.group(), False) or found.group(), text)
    out: list[str] = []
    for char in text:
        shown = _shown(char, strict)
        out.append(char if shown is None else shown)
    return "".join(out)


class VisibleStream:
    """A text stream that passes everything it is given through ``visible`` before writing it.

    ``maka``'s commands print text they did not write: file names from the user's folder (a
    drift list), messages and commands from the record, paths in error messages. A name such as
    ``bad\\x1b]0;title\\x07`` would otherwise retitle the terminal, and ``\\x1b[2K\\r`` could
    erase what was printed before it. The command line wraps standard output (unless it prints
    JSON, whose strings escape control characters themselves) and standard error in one of
    these; everything else (``isatty``, ``fileno``, ``buffer``, ``flush``) is the stream's own.
    ``unguarded`` is the stream itself, for a writer that shows its text with ``visible`` and
    adds its own colour codes (``maka timeline`` on a terminal).
    """

    def __init__(self, stream: TextIO) -> None:
        self.unguarded = stream

    def write(self, text: str) -> int:
        # One search in C for the common case (nothing hidden), before any copy.
        self.unguarded.write(text if _HIDDEN.search(text) is None else visible(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.unguarded, name)


def unguarded(stream: TextIO | VisibleStream) -> TextIO:
    """The stream under a ``VisibleStream`` (``stream`` itself when it is not one)."""
    return stream.unguarded if isinstance(stream, VisibleStream) else stream


def silence(stream: TextIO) -> None:
    """Point ``stream``'s descriptor at the null device, once its reader went away (``maka plan
    S | head``): later writes, and the interpreter's final flush, go nowhere instead of failing
    with a traceback."""
    import contextlib
    import os

    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
