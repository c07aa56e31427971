"""The part of a Git index under one folder as an index of its own
(``storage/checkpoints/checkpoint_subindex.py``): read in versions 2 to 4, written in version
2, checked against the real Git; anything out of the ordinary answers None."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.checkpoints.checkpoint_subindex import (
    IndexEntry,
    read_entries,
    sub_index,
    write_index,
)
from tests.helpers.user_git import user_git

_names = st.lists(
    st.lists(
        st.text(alphabet="abz.-_ é字\t\n", min_size=1, max_size=12),
        min_size=1,
        max_size=4,
    ).map(lambda parts: "/".join(parts).encode("utf-8", "surrogateescape")),
    min_size=0,
    max_size=40,
    unique=True,
)


def _entry(name: bytes, n: int) -> IndexEntry:
    stat = struct.pack(">10L", n, n + 1, n + 2, n + 3, 0, n + 4, 0o100644, 1000, 1000, n * 7)
    return IndexEntry(stat, hashlib.sha1(name).digest(), 0, name)


@settings(max_examples=200)
@given(_names)
def test_what_is_written_reads_back_the_same(names: list[bytes]) -> None:
    entries = [_entry(name, n) for n, name in enumerate(sorted(names))]
    read = read_entries(write_index(entries))
    assert read is not None
    assert [(e.stat, e.oid, e.name) for e in read] == [(e.stat, e.oid, e.name) for e in entries]
    assert all(e.flags & 0x0FFF == min(len(e.name), 0x0FFF) for e in read)


@settings(max_examples=200)
@given(_names, st.integers(min_value=12, max_value=400), st.integers(min_value=1, max_value=255))
def test_a_changed_byte_never_reads_as_an_index(names: list[bytes], at: int, delta: int) -> None:
    data = bytearray(write_index([_entry(name, n) for n, name in enumerate(sorted(names))]))
    if at >= len(data):
        return
    data[at] = (data[at] + delta) % 256
    assert read_entries(bytes(data)) is None  # the checksum no longer matches


@settings(max_examples=200)
@given(_names, st.sampled_from([b"pkg/", b"a/b/", b"x/"]))
def test_the_part_under_a_folder_is_its_entries_without_the_prefix(
    names: list[bytes], prefix: bytes
) -> None:
    entries = [_entry(name, n) for n, name in enumerate(sorted({*names, prefix + b"f"}))]
    part = sub_index(write_index(entries), prefix)
    assert part is not None
    read = read_entries(part)
    assert read is not None
    expected = [
        (e.stat, e.oid, e.name[len(prefix) :]) for e in entries if e.name.startswith(prefix)
    ]
    assert [(e.stat, e.oid, e.name) for e in read] == expected


def test_nothing_under_the_folder_or_an_entry_not_plain_gives_none() -> None:
    plain = write_index([_entry(b"other/a", 1), _entry(b"pkg/a", 2)])
    assert sub_index(plain, b"none/") is None
    for flags in (0x8000, 0x1000):  # assume-unchanged; stage 1 (a conflict)
        entry = _entry(b"pkg/b", 3)
        flagged = IndexEntry(entry.stat, entry.oid, flags, entry.name)
        assert sub_index(write_index([_entry(b"pkg/a", 2), flagged]), b"pkg/") is None
    # A split index (its entries are in another file) is refused whole.
    body = plain[:-20] + b"link" + struct.pack(">L", 20) + b"\0" * 20
    assert read_entries(body + hashlib.sha1(body).digest()) is None
    assert read_entries(b"DIRC") is None and read_entries(b"") is None


def _blocks(top: Path, index: Path) -> list[str]:
    """``ls-files --debug -s`` of ``index`` read by the real Git (names unquoted), one block
    (an entry and its stat data) per entry."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(GIT_INDEX_FILE=str(index), GIT_CONFIG_NOSYSTEM="1", HOME=str(top.parent))
    git = ["git", "-c", "core.quotePath=false", "--git-dir", str(top / ".git")]
    text = subprocess.run(
        [*git, "ls-files", "--debug", "-s"], env=env, capture_output=True, check=True
    ).stdout.decode("utf-8", "surrogateescape")
    return re.split(r"\n(?=\d{6} )", text.strip())


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize("version", [2, 3, 4])
@pytest.mark.parametrize("skip_hash", [False, True])
def test_gits_own_index_gives_the_part_git_reads_as_it_reads_the_whole(
    tmp_path: Path, version: int, skip_hash: bool
) -> None:
    """``skip_hash``: the trailing checksum is zeros, as Git 2.40 and later write it with
    ``index.skipHash`` (``feature.manyFiles``); every Git reads such an index."""
    top = tmp_path / "repo"
    top.mkdir()
    user_git(top, "init", "-q")
    for name in ("pkg/a.txt", "pkg/deep/er/b.txt", "pkg-not/c.txt", "top.txt", "pkg/é.txt"):
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).write_text(name)
    user_git(top, "add", ".")
    user_git(top, "update-index", "--index-version", str(version))
    if version == 3:
        user_git(top, "update-index", "--skip-worktree", "top.txt")  # an extended flag outside
    whole = top / ".git" / "index"
    if skip_hash:
        whole.write_bytes(whole.read_bytes()[:-20] + bytes(20))
        assert read_entries(whole.read_bytes()) is not None
    part = sub_index(whole.read_bytes(), b"pkg/")
    assert part is not None
    index = tmp_path / "part.index"
    index.write_bytes(part)
    expected = [
        block.replace("\tpkg/", "\t", 1) for block in _blocks(top, whole) if "\tpkg/" in block
    ]
    read = _blocks(top, index)
    assert read == expected
    assert len(read) == 3


def test_a_name_longer_than_the_flags_can_count_reads_back() -> None:
    name = b"pkg/" + b"d/" * 2500 + b"f.txt"
    part = sub_index(write_index([_entry(name, 1)]), b"pkg/")
    assert part is not None
    read = read_entries(part)
    assert read is not None and [e.name for e in read] == [name[4:]]
    assert read[0].flags & 0x0FFF == 0x0FFF
