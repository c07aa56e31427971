"""Shortened text always says so: "… (N more characters)".

Why: a permission prompt or a card that silently cuts a command at some length lets the end of
the command (``; rm -rf ~``) pass unseen. Wherever a text is shortened for display, the marker
says how much is not shown.
"""

from __future__ import annotations

PROMPT_CHARS = 100_000
"""How much of a command a permission question carries: all of any real command (the window
scrolls, the terminal wraps); a longer one is shortened with the marker."""


def more_characters(count: int) -> str:
    return f"({count} more character{'' if count == 1 else 's'})"


def shorten(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its first ``limit`` characters
    followed by "… (N more characters)"."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… {more_characters(len(text) - limit)}"
