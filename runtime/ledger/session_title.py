"""What a session's title may be: one line of 1 to ``MAX_TITLE_CHARS`` characters with no
control character (C0, DEL or C1), once stripped. The one rule the store's rename (``maka
sessions rename``), the desktop's Rename (before anything is sent) and the title a first
message gives apply. Standard library only: the window imports it.
"""

from __future__ import annotations

MAX_TITLE_CHARS = 200


def is_control(char: str) -> bool:
    """A control character a terminal may act on: C0, DEL and C1 (U+0080 to U+009F, such as
    CSI, which some terminals take as ESC [)."""
    code = ord(char)
    return code < 32 or 127 <= code <= 159


def title_allowed(title: str) -> bool:
    """Whether ``title`` (stripped) may name a session."""
    title = title.strip()
    return 0 < len(title) <= MAX_TITLE_CHARS and not any(is_control(char) for char in title)
