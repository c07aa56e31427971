"""``cached_trees`` (storage/checkpoints/checkpoint_borrow.py) reads the trees an index's cache
of trees holds valid. Over generated indexes (random entry bytes, a ``TREE`` extension of random
folders, another extension after it) it names exactly the valid folders' trees and never
raises on a damaged one; over indexes real Git wrote (versions 2, 3 and 4) it names the trees
of the commit it was written with, and none of a folder changed since."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.checkpoints.checkpoint_borrow import cached_trees
from tests.helpers.user_git import user_git

_FOLDER = st.tuples(
    st.binary(max_size=12).filter(lambda name: b"\0" not in name and b"\n" not in name),
    st.integers(-1, 5000),
    st.integers(0, 30),
    st.binary(min_size=20, max_size=20),
)


def _extension(folders: list[tuple[bytes, int, int, bytes]]) -> bytes:
    body = b"".join(
        path + b"\0" + b"%d %d\n" % (entries, subtrees) + (oid if entries >= 0 else b"")
        for path, entries, subtrees, oid in folders
    )
    return b"TREE" + struct.pack(">I", len(body)) + body


def _index(entries: bytes, count: int, extension: bytes, version: int = 2) -> bytes:
    after = b"REUC" + struct.pack(">I", 3) + b"abc"
    return b"DIRC" + struct.pack(">II", version, count) + entries + extension + after + b"\x5a" * 20


@settings(max_examples=200)
@given(
    root=st.tuples(st.integers(-1, 5000), st.integers(0, 30), st.binary(min_size=20, max_size=20)),
    folders=st.lists(_FOLDER, max_size=20),
    count=st.integers(0, 40),
    version=st.sampled_from([2, 3, 4]),
    data=st.data(),
)
def test_a_generated_index_names_exactly_its_valid_trees(
    root: tuple[int, int, bytes],
    folders: list[tuple[bytes, int, int, bytes]],
    count: int,
    version: int,
    data: st.DataObject,
) -> None:
    entries = data.draw(st.binary(min_size=62 * count, max_size=62 * count + 200))
    every = [(b"", *root), *[(b"d" + path, held, subs, oid) for path, held, subs, oid in folders]]
    index = _index(entries, count, _extension(every), version)
    assert cached_trees(index) == [oid.hex() for _, held, _, oid in every if held >= 0]


@settings(max_examples=200)
@given(
    folders=st.lists(_FOLDER, min_size=1, max_size=10),
    cut=st.integers(1, 400),
    junk=st.binary(max_size=3),
)
def test_a_damaged_index_never_raises_and_names_only_trees_it_holds(
    folders: list[tuple[bytes, int, int, bytes]], cut: int, junk: bytes
) -> None:
    every = [(b"", 3, len(folders), b"\x11" * 20), *folders]
    whole = _index(b"\0" * 62, 1, _extension(every))
    damaged = whole[: max(len(whole) - cut, 0)] + junk
    held = {oid.hex() for *_, oid in every} | {b"\x11".hex() * 20}
    assert set(cached_trees(damaged)) <= held
    assert cached_trees(b"DIRC") == [] and cached_trees(b"") == []


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@needs_git
@pytest.mark.parametrize("version", [2, 3, 4])
def test_an_index_git_wrote_names_the_trees_of_its_commit(tmp_path: Path, version: int) -> None:
    folder = tmp_path / "repo"
    for n in range(60):
        sub = folder / f"pkg{n % 5}" / f"deep{n % 2}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{n}.txt").write_text(f"{n}\n")
    (folder / "top.txt").write_text("top\n")
    user_git(folder, "init", "-q")
    user_git(folder, "add", "-A")
    user_git(folder, "commit", "-qm", "one")
    if version == 3:
        (folder / "later.txt").write_text("intent to add\n")
        user_git(folder, "add", "-N", "later.txt")  # an extended flag: Git writes version 3
    else:
        user_git(folder, "update-index", "--index-version", str(version))
    user_git(folder, "write-tree")  # the cache of trees filled again where it was not
    data = (folder / ".git" / "index").read_bytes()
    assert struct.unpack_from(">I", data, 4)[0] == version
    trees = set(user_git(folder, "ls-tree", "-r", "-d", "--format=%(objectname)", "HEAD").split())
    trees.add(user_git(folder, "rev-parse", "HEAD^{tree}").strip())
    found = cached_trees(data)
    assert len(found) == len(set(found))
    if version == 3:  # the root holds an entry no commit has: its tree is not HEAD's
        assert set(found) < trees and len(found) == len(trees) - 1
    else:
        assert set(found) == trees
    # A staged change leaves its folders out (the root, pkg1, pkg1/deep1) and the rest in.
    (folder / "pkg1" / "deep1" / "f1.txt").write_text("changed\n")
    user_git(folder, "add", "pkg1/deep1/f1.txt")
    after = set(cached_trees((folder / ".git" / "index").read_bytes()))
    changed = {
        user_git(folder, "rev-parse", f"HEAD:{path}").strip() for path in ("pkg1", "pkg1/deep1")
    }
    assert after and after <= trees and not after & changed
    assert user_git(folder, "rev-parse", "HEAD:pkg2").strip() in after
