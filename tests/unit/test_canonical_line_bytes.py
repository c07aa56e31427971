"""``canonical_line_bytes``: a decoded line is its own canonical bytes exactly when it equals the
RFC 8785 encoding; the regex shortcut must never accept a line canonical JSON would write
differently (floats, integers beyond 2^53 - 1, keys ordered by UTF-16, escapes, spacing)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.ledger.canonical_codec import canonical_json_bytes, canonical_line_bytes
from runtime.ledger.event_model import MAX_SAFE_INTEGER
from runtime.ledger.ledger_errors import CanonicalEncodeError
from tests.helpers.ledger_strategies import JSON_VALUES

BIG_INTS = st.integers(-(2**60), 2**60)
HIGH_KEYS = st.dictionaries(
    st.sampled_from(["\ue000", "\uffff", "\U0001f600", "a", "\u00e9", "b1"]), JSON_VALUES
)
VALUES = st.one_of(JSON_VALUES, HIGH_KEYS, st.lists(BIG_INTS, max_size=3))


def _lines(value: Any) -> list[bytes]:
    """The same value written the ways a file may hold it."""
    lines = [
        json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(),
        json.dumps(value, sort_keys=True, separators=(",", ":")).encode(),
        json.dumps(value, ensure_ascii=False).encode(),
    ]
    with contextlib.suppress(rfc8785.CanonicalizationError, ValueError):
        lines.append(rfc8785.dumps(value))
    return lines


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_a_line_is_kept_only_when_it_is_the_canonical_encoding(value: Any) -> None:
    for line in _lines(value):
        decoded = json.loads(line)
        try:
            expected = rfc8785.dumps(decoded)
            if any(
                isinstance(item, int) and abs(item) > MAX_SAFE_INTEGER for item in _scalars(decoded)
            ):
                raise ValueError("unsafe integer")
        except (rfc8785.CanonicalizationError, ValueError):
            with pytest.raises(CanonicalEncodeError):
                canonical_line_bytes(line, decoded)
            continue
        assert canonical_line_bytes(line, decoded) == expected == canonical_json_bytes(decoded)


def _scalars(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [item for child in value.values() for item in _scalars(child)]
    if isinstance(value, list):
        return [item for child in value for item in _scalars(child)]
    return [value]


@pytest.mark.parametrize(
    ("line", "canonical"),
    [
        (b'{"a":1.0}', b'{"a":1}'),
        (b'{"a":[1e+16]}', b'{"a":[10000000000000000]}'),
        (b'{"a":1e-07}', b'{"a":1e-7}'),
        ('{"\ue000":1,"\U0001f600":2}'.encode(), '{"\U0001f600":2,"\ue000":1}'.encode()),
        (b'{"b":1, "a":2}', b'{"a":2,"b":1}'),
        (b'{"a":"\\u00e9"}', '{"a":"é"}'.encode()),
    ],
)
def test_non_canonical_lines_are_re_encoded(line: bytes, canonical: bytes) -> None:
    assert canonical_line_bytes(line, json.loads(line)) == canonical


def test_an_unsafe_integer_is_refused_even_when_the_line_looks_plain() -> None:
    line = b'{"a":9007199254740993}'
    with pytest.raises(CanonicalEncodeError):
        canonical_line_bytes(line, json.loads(line))
