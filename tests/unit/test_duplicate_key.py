"""``duplicate_key``: a key written twice in one object of a JSON line is found (decoders keep
the last value, so what the line stands for would depend on its reader); canonical bytes never
hold one."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from runtime.ledger.canonical_codec import canonical_json_bytes, duplicate_key

_LEAVES = st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=8)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=4), _VALUES, max_size=6))
def test_canonical_bytes_never_repeat_a_key(value: dict[str, Any]) -> None:
    assert duplicate_key(canonical_json_bytes(value)) is None


@given(
    st.dictionaries(st.text(max_size=4), _VALUES, min_size=1, max_size=6),
    st.data(),
)
def test_a_key_written_twice_is_found_at_any_depth(value: dict[str, Any], data: Any) -> None:
    key = data.draw(st.sampled_from(sorted(value)))
    body = json.dumps(value, ensure_ascii=False)[:-1]
    again = f"{body}, {json.dumps(key)}: 1}}"  # the same key once more, last
    nested = f'{{"outer": [{again}]}}'.encode()
    assert duplicate_key(again.encode()) == key
    assert duplicate_key(nested) == key


def test_lines_that_are_not_json_or_too_deep_are_left_to_the_decoder() -> None:
    assert duplicate_key(b"not json") is None
    assert duplicate_key(b"[" * 100_000 + b"]" * 100_000) is None
    assert duplicate_key(b'{"a": 1, "b": {"a": 2}}') is None  # one per object
