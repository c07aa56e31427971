"""Tool results carry any file name: a byte that is not UTF-8 is written as ``\\xNN``."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from runtime.ledger.canonical_codec import canonical_json_bytes
from runtime.tools.undecodable_text import escape_text, escape_undecodable


@given(st.binary(max_size=200))
def test_any_name_read_from_disk_is_escaped_as_backslash_replace_would(raw: bytes) -> None:
    name = raw.decode("utf-8", "surrogateescape")  # how Python reads a POSIX file name
    shown = escape_text(name)
    shown.encode("utf-8")  # valid UTF-8 now
    assert shown == raw.decode("utf-8", "backslashreplace")


@given(st.text(max_size=200))
def test_valid_text_is_unchanged(text: str) -> None:
    assert escape_text(text) == text


def test_a_result_with_an_undecodable_name_becomes_recordable() -> None:
    result = {"entries": [{"name": "caf\udce9.txt", "type": "file"}], "k\udcff": ["ok", 1]}
    escaped = escape_undecodable(result)
    assert escaped == {"entries": [{"name": "caf\\xe9.txt", "type": "file"}], "k\\xff": ["ok", 1]}
    canonical_json_bytes(escaped)  # no lone surrogate is left
    assert escape_undecodable({"entries": []}) == {"entries": []}


def test_a_lone_surrogate_that_is_no_byte_is_written_as_its_code_point() -> None:
    assert escape_text("a\ud800b") == "a\\ud800b"
