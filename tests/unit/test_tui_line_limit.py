"""The terminal's line limit counts bytes, not characters (Linux keeps 4,095 of a line)."""

from __future__ import annotations

import io

import pytest

from app.host import terminal_transcript
from app.host.terminal_transcript import cut_by_terminal, cut_line_words, line_bytes


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bytes_not_characters_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(terminal_transcript, "TERMINAL_LINE_BYTES", 4095)
    accented = "write trunc.md saying \u00e9" + "a" * 5000 + " END"
    cut = accented.encode()[:4095].decode() + "\n"  # what the terminal lets through
    assert len(cut.rstrip("\n")) == 4094 and line_bytes(cut) == 4095
    assert cut_by_terminal(cut, _Tty())
    assert not cut_by_terminal(cut, io.StringIO())  # a pipe holds any length
    # Cut inside a character: the half "é" read with surrogateescape is the one byte it was.
    half = ("\u00e9" * 2100).encode()[:4095].decode("utf-8", "surrogateescape")
    assert line_bytes(half) == 4095 and cut_by_terminal(half, _Tty())
    assert not cut_by_terminal("\u00e9" * 2000, _Tty())  # 4,000 bytes: whole


def test_the_refusal_speaks_of_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(terminal_transcript, "TERMINAL_LINE_BYTES", 4095)
    words = cut_line_words("S")
    assert "4,095 bytes long, the most a terminal line holds" in words
    assert "characters long" not in words


def test_settle_refuses_the_forms_placeholder_as_a_note() -> None:
    """Alone and beside a running Maka, /settle's note check is the same."""
    from app.commands.tui_host import placeholder_note

    for note in ("(or not-run) [NOTE]", "[NOTE]", "(or not-run)", "[NOTE] I checked"):
        refusal = placeholder_note(note)
        assert refusal is not None and "nothing was recorded" in refusal
    assert placeholder_note(None) is None
    assert placeholder_note("count.txt has [NOTE] in it") is None
