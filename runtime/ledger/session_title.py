"""What a session's title may be: one line of 1 to ``MAX_TITLE_CHARS`` characters with no
control character, once stripped. The one rule the store's rename (``maka sessions rename``)
and the desktop's Rename (before anything is sent) apply. Standard library only: the window
imports it.
"""

from __future__ import annotations

MAX_TITLE_CHARS = 200


def title_allowed(title: str) -> bool:
    """Whether ``title`` (stripped) may name a session."""
    title = title.strip()
    return 0 < len(title) <= MAX_TITLE_CHARS and not any(ord(char) < 32 for char in title)
