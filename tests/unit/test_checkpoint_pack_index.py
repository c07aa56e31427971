"""``own_packed`` reads the object names of a store's own packs from their index files
(storage/checkpoints/checkpoint_borrow.py): over generated version-2 index files it names
exactly their objects, and an index cut short anywhere, or not of version 2, names none (and
never raises)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.checkpoints.checkpoint_borrow import own_packed

_NAMES = st.sets(st.binary(min_size=20, max_size=20), max_size=300)


def _index(names: set[bytes], *, large: int = 0) -> bytes:
    """A version-2 pack index as Git writes it: magic, version, fan-out, the sorted names,
    their CRCs and offsets, ``large`` 8-byte offsets, the pack's and the index's checksums."""
    ordered = sorted(names)
    fanout = [sum(1 for name in ordered if name[0] <= byte) for byte in range(256)]
    return b"".join(
        [
            b"\377tOc",
            struct.pack(">I", 2),
            struct.pack(">256I", *fanout),
            *ordered,
            b"\0\0\0\0" * len(ordered),
            b"\0\0\0\x0c" * len(ordered),
            b"\0" * 8 * large,
            b"\x11" * 20,
            b"\x22" * 20,
        ]
    )


def _write(folder: Path, data: bytes) -> Path:
    (folder / "pack-1.idx").write_bytes(data)
    (folder / "pack-1.pack").write_bytes(b"PACK")
    return folder


@settings(max_examples=150, deadline=None)
@given(names=_NAMES, large=st.integers(0, 3))
def test_a_whole_index_names_exactly_its_objects(
    tmp_path_factory: pytest.TempPathFactory, names: set[bytes], large: int
) -> None:
    folder = tmp_path_factory.mktemp("pack")
    assert own_packed(_write(folder, _index(names, large=large))) == {n.hex() for n in names}


@settings(max_examples=150, deadline=None)
@given(names=_NAMES.filter(bool), cut=st.floats(0, 1, exclude_max=True))
def test_an_index_cut_short_names_nothing(
    tmp_path_factory: pytest.TempPathFactory, names: set[bytes], cut: float
) -> None:
    folder = tmp_path_factory.mktemp("pack")
    whole = _index(names)
    assert own_packed(_write(folder, whole[: int(len(whole) * cut)])) == set()


@settings(max_examples=50, deadline=None)
@given(names=_NAMES, version=st.sampled_from([1, 3, 0x2000000]))
def test_an_index_of_another_version_names_nothing(
    tmp_path_factory: pytest.TempPathFactory, names: set[bytes], version: int
) -> None:
    folder = tmp_path_factory.mktemp("pack")
    data = bytearray(_index(names))
    data[4:8] = struct.pack(">I", version)
    assert own_packed(_write(folder, bytes(data))) == set()
