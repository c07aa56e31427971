"""``/transcript`` in ``maka tui`` printed "(failed)" for a call refused because the turn was
cancelled at its question (the timeline: "not run (the turn was cancelled)"), and for a denied
one; the desktop's card qualifies both. It now says "cancelled" and "denied"."""

from __future__ import annotations

import pytest

from app.host.tui_reads import _print_entry
from runtime.agent.transcript_projection import TranscriptEntry


@pytest.mark.parametrize(
    ("status", "code", "shown"),
    [
        ("failed", "cancelled", "(cancelled)"),
        ("failed", "permission_denied", "(denied)"),
        ("failed", "command_failed", "(failed)"),
        ("succeeded", None, "(succeeded)"),
    ],
)
def test_a_card_says_what_became_of_its_call(status: str, code: str | None, shown: str) -> None:
    entry = TranscriptEntry(
        "tool_card",
        "i1",
        "r1",
        tool_call_id="c1",
        tool_name="write_file",
        args_summary="c.txt",
        status=status,
        code=code,
    )
    lines: list[str] = []
    _print_entry(entry, lambda text, strict=False: text, lines.append)
    assert lines[0] == f"[tool] write_file c.txt  {shown}", lines
