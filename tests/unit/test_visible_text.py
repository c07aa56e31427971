"""What a prompt or card shows is what the text is: control characters visible, nothing cut
without saying so."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from app.visible_text import _shown, visible
from runtime.agent.text_limits import more_characters, shorten
from runtime.agent.transcript_projection import summarize_args

_INVISIBLE_CATEGORIES = {"Cc", "Cf", "Zl", "Zp"}


@given(st.text(max_size=200))
def test_strict_text_keeps_no_invisible_character_but_newline_and_tab(text: str) -> None:
    shown = visible(text, strict=True)
    for char in shown:
        assert char in "\n\t" or unicodedata.category(char) not in _INVISIBLE_CATEGORIES, repr(char)
    assert shown.count("\n") == text.count("\n")


@given(st.text(max_size=200))
def test_plain_text_shows_every_control_and_bidi_override(text: str) -> None:
    shown = visible(text)
    for char in shown:
        code = ord(char)
        assert char in "\n\t" or unicodedata.category(char) != "Cc", repr(char)
        assert not (0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069), repr(char)


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=200))
def test_printable_ascii_is_unchanged(text: str) -> None:
    assert visible(text) == text and visible(text, strict=True) == text


def test_the_erasing_sequence_of_the_review_is_shown_for_what_it_is() -> None:
    assert visible("ls\r\x1b[2Krm -rf ~") == "ls<CR><ESC>[2Krm -rf ~"
    assert visible("a\x00b\x7fc") == "a<NUL>b<DEL>c"
    assert visible("safe\u202egnp.exe") == "safe<U+202E>gnp.exe"
    assert visible("r\u200bm", strict=True) == "r<U+200B>m"
    assert visible("r\u200bm") == "r\u200bm"  # an emoji's joiner stays in ordinary text
    assert visible("line one\n\tline two") == "line one\n\tline two"


def test_a_shortened_text_says_how_much_is_left_out() -> None:
    assert shorten("abc", 3) == "abc"
    assert shorten("abcdef", 3) == "abc… (3 more characters)"
    assert more_characters(1) == "(1 more character)"
    card = summarize_args("bash", {"command": "echo " + "x" * 1000})
    assert card.endswith("… (705 more characters)") and card.startswith("echo xxx")


@given(st.text(max_size=300))
def test_plain_text_is_shown_as_each_character_would_be(text: str) -> None:
    """The scan a long log goes through gives, character for character, what each character is
    shown as on its own."""
    expected = "".join(_shown(char, False) or char for char in text)
    assert visible(text) == expected


@given(st.lists(st.text(max_size=60), max_size=8))
def test_a_guarded_stream_writes_each_piece_as_visible_shows_it(pieces: list[str]) -> None:
    import io

    from app.visible_text import VisibleStream, unguarded

    inner = io.StringIO()
    stream = VisibleStream(inner)
    for piece in pieces:
        assert stream.write(piece) == len(piece)  # what print() expects: the text's length
    assert inner.getvalue() == "".join(visible(piece) for piece in pieces)
    assert unguarded(stream) is inner and unguarded(inner) is inner
    assert stream.getvalue() == inner.getvalue()  # the rest is the stream's own
