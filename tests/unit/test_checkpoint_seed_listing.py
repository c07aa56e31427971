"""The seed's reading of the user's index listing (``ls-files -z -s -v``) over its bytes
(storage/checkpoints/checkpoint_borrow.py): the same answers as reading it entry by entry,
whatever the names hold (tabs, spaces, what looks like a tag or a mode)."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from storage.checkpoints.checkpoint_borrow import _attributes_paths, _only_plain_entries

_NAME_PARTS = st.sampled_from(
    [
        b"a",
        b"pkg",
        b".gitattributes",
        b"x.gitattributes",
        b"H ",
        b" 0\t",
        b"\t",
        b" ",
        b"160000",
        b"\xff",
        b"\xc3\xa9",
        b"/",
    ]
)
_NAMES = (
    st.lists(_NAME_PARTS, min_size=1, max_size=5)
    .map(b"".join)
    .filter(
        lambda name: not name.startswith(b"/") and not name.endswith(b"/") and b"//" not in name
    )
)
_ENTRY = st.tuples(
    st.sampled_from([b"H", b"H", b"H", b"S", b"h", b"M", b"C"]),
    st.sampled_from([b"100644", b"100755", b"120000", b"160000"]),
    st.sampled_from([b"0", b"0", b"0", b"1", b"2", b"3"]),
    _NAMES,
)


def _listing(entries: list[tuple[bytes, bytes, bytes, bytes]]) -> bytes:
    oid = b"0123456789abcdef0123456789abcdef01234567"
    return b"".join(
        tag + b" " + mode + b" " + oid + b" " + stage + b"\t" + name + b"\0"
        for tag, mode, stage, name in entries
    )


@given(st.lists(_ENTRY, max_size=12))
def test_the_byte_reading_agrees_with_reading_each_entry(
    entries: list[tuple[bytes, bytes, bytes, bytes]],
) -> None:
    listed = _listing(entries)
    # Git tags an unmerged entry ``M`` (the refusal test of test_checkpoint_borrow shows it):
    # the stage itself is not read.
    plain = all(tag == b"H" and mode != b"160000" for tag, mode, _, _ in entries)
    assert _only_plain_entries(listed) is plain
    expected = [
        os.fsdecode(name)
        for *_, name in entries
        if name == b".gitattributes" or name.endswith(b"/.gitattributes")
    ]
    assert _attributes_paths(listed) == expected


def test_an_empty_index_is_plain() -> None:
    assert _only_plain_entries(b"")
    assert _attributes_paths(b"") == []
