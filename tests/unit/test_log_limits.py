"""Peer-chosen values reach the log escaped on one line; repeats are rate-limited."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from main_process.log_limits import RateLimitedLog, escape


@given(st.text(max_size=300))
def test_escaped_text_is_one_printable_ascii_line_without_brackets(value: str) -> None:
    shown = escape(value)
    assert shown.isascii() and shown.isprintable()
    assert "[" not in shown and "]" not in shown and "\n" not in shown
    assert len(shown) <= 80 * 10 + 20


def test_plain_ids_stay_readable_and_long_ones_say_how_much_is_left_out() -> None:
    assert escape("session_01HX-abc.def") == "session_01HX-abc.def"
    assert escape("a\nb\x1b[2K") == "a\\x0ab\\x1b\\x5b2K"
    assert escape("x" * 100, limit=10) == "x" * 10 + "...(+90)"


def test_repeats_beyond_the_burst_are_counted_and_reported_in_the_next_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    limited = RateLimitedLog(
        logging.getLogger("t.limits"), burst=3, window_s=10, clock=lambda: now[0]
    )
    with caplog.at_level(logging.INFO, logger="t.limits"):
        logged = [limited.log(logging.INFO, "k", "record %d", i) for i in range(100)]
        assert logged.count(True) == 3
        assert limited.log(logging.INFO, "other", "another kind") is True
        now[0] = 11.0
        assert limited.log(logging.INFO, "k", "later") is True
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "record 0",
        "record 1",
        "record 2",
        "another kind",
        "[k] 97 similar record(s) were not logged",
        "later",
    ]
