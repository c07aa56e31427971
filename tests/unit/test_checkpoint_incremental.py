"""A capture that looks again only at what changed (docs/design/workspace.md section 1), with the
real ``git`` and real folders: the permission record derived from the previous capture's is the
one a full pass would make, after every kind of change (edits, chmods in the same tick of the
clock, new files and folders, links, deletions, type changes), and when the kept findings are
damaged or stale; the commit and ref a capture writes without Git are ones Git reads as its own.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.ledger.checkpoint_ports import PathChange, TreeChange
from storage.checkpoints.checkpoint_store import GitCheckpointStore

pytestmark = [
    pytest.mark.skipif(
        shutil.which("git") is None or os.name != "posix", reason="needs git and POSIX modes"
    ),
    pytest.mark.usefixtures("staged_both_ways"),
]
WS = "workspace:v1:7c7c7c7c-1111-2222-3333-444455556666"


def _git(git_dir: Path, *args: str) -> str:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), *args],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout


def _fresh_tree(tmp_path: Path, folder: Path, n: int) -> str:
    """The tree a store that never saw the folder captures (every entry looked at)."""
    return (
        GitCheckpointStore(tmp_path / f"fresh-{n}")
        .capture(folder, WS, "refs/maka/f/r/1", "m")
        .tree_id
    )


def _steps(folder: Path) -> list[Callable[[], None]]:
    def edit() -> None:
        with open(folder / "pkg" / "a.txt", "a") as out:
            out.write("more\n")

    def chmod_same_mode() -> None:
        (folder / "pkg" / "b.txt").chmod(0o600)  # Git's mode stays 100644

    def chmod_executable() -> None:
        (folder / "pkg" / "a.txt").chmod(0o755)

    def new_folder_and_file() -> None:
        (folder / "new" / "deep").mkdir(parents=True)
        (folder / "new" / "deep" / "c.txt").write_text("c\n")
        (folder / "new" / "deep" / "c.txt").chmod(0o640)

    def folder_bits() -> None:
        (folder / "new").chmod(0o750)

    def link() -> None:
        (folder / "pkg" / "link").symlink_to("a.txt")

    def file_becomes_link() -> None:
        (folder / "pkg" / "b.txt").unlink()
        (folder / "pkg" / "b.txt").symlink_to("a.txt")

    def delete_last_file_of_folder() -> None:
        (folder / "new" / "deep" / "c.txt").unlink()

    def empty_folder() -> None:
        (folder / "hollow").mkdir()
        (folder / "hollow").chmod(0o701)

    def file_becomes_folder() -> None:
        (folder / "pkg" / "a.txt").unlink()
        (folder / "pkg" / "a.txt").mkdir()
        (folder / "pkg" / "a.txt" / "inner.txt").write_text("i\n")

    def root_bits() -> None:
        folder.chmod(0o711)

    return [
        edit,
        chmod_same_mode,
        chmod_executable,
        new_folder_and_file,
        folder_bits,
        link,
        file_becomes_link,
        delete_last_file_of_folder,
        empty_folder,
        file_becomes_folder,
        root_bits,
    ]


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    (folder / "pkg").mkdir(parents=True)
    for name in ("a.txt", "b.txt", "keep.txt"):
        (folder / "pkg" / name).write_text(f"{name}\n")
    (folder / "top.txt").write_text("top\n")
    return folder


def test_each_capture_records_what_a_capture_from_nothing_records(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    store.capture(folder, WS, "refs/maka/s/r/0", "m")
    for n, step in enumerate(_steps(folder), start=1):
        # The change lands right after a capture, in the same tick of the clock as often as not.
        store.capture(folder, WS, f"refs/maka/s/r/{n}a", "m")
        step()
        mine = store.capture(folder, WS, f"refs/maka/s/r/{n}b", "m")
        assert mine.tree_id == _fresh_tree(tmp_path, folder, n), step.__name__
        assert store.observe(folder, WS).tree_id == mine.tree_id, step.__name__


def test_a_same_mode_chmod_right_after_a_capture_is_drift(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    store.capture(folder, WS, "refs/maka/s/r/1", "m")
    (folder / "pkg" / "a.txt").write_text("changed\n")
    before = store.capture(folder, WS, "refs/maka/s/r/2", "m")
    (folder / "pkg" / "a.txt").chmod(0o600)  # at once: the ctime may not move on a coarse clock
    (folder / "pkg" / "keep.txt").chmod(0o640)
    after = store.capture(folder, WS, "refs/maka/s/r/3", "m")
    assert store.changes(WS, before.tree_id, after.tree_id) == [
        TreeChange("pkg/a.txt", PathChange.MODIFIED),
        TreeChange("pkg/keep.txt", PathChange.MODIFIED),
    ]


@pytest.mark.parametrize("damage", ["garbled", "stale", "absent"])
def test_damaged_or_stale_findings_fall_back_to_the_full_pass(tmp_path: Path, damage: str) -> None:
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    store.capture(folder, WS, "refs/maka/s/r/1", "m")
    kept = store.index_path(WS).with_name(store.index_path(WS).name + ".bits")
    assert kept.is_file()
    old = kept.read_bytes()
    store.capture(folder, WS, "refs/maka/s/r/2", "m")
    (folder / "pkg" / "b.txt").chmod(0o604)
    (folder / "extra.txt").write_text("x\n")
    if damage == "garbled":
        data = bytearray(kept.read_bytes())
        data[-3] ^= 0x01
        kept.write_bytes(bytes(data))
    elif damage == "stale":
        kept.write_bytes(old)  # an earlier capture's: the index has moved on since
    else:
        kept.unlink()
    mine = store.capture(folder, WS, "refs/maka/s/r/3", "m")
    assert mine.tree_id == _fresh_tree(tmp_path, folder, 0)


def test_random_changes_keep_the_record_exact(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    rng = random.Random(5)
    store = GitCheckpointStore(tmp_path / "data")
    files = [folder / "pkg" / name for name in ("a.txt", "b.txt", "keep.txt")]
    for n in range(12):
        for _ in range(3):
            kind = rng.choice(["edit", "chmod", "add", "remove"])
            if kind == "add" or not files:
                path = folder / f"d{rng.randrange(3)}" / f"f{n}-{rng.randrange(100)}.txt"
                path.parent.mkdir(exist_ok=True)
                path.write_text(str(rng.random()))
                files.append(path)
            elif kind == "edit":
                rng.choice(files).write_text(str(rng.random()))
            elif kind == "chmod":
                rng.choice(files).chmod(rng.choice([0o600, 0o644, 0o640, 0o755, 0o700]))
            else:
                path = files.pop(rng.randrange(len(files)))
                path.unlink()
        mine = store.capture(folder, WS, f"refs/maka/s/r/{n}", "m")
        assert mine.tree_id == _fresh_tree(tmp_path, folder, 100 + n), n


def test_the_commit_and_ref_written_without_git_are_gits_own(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    first = store.capture(folder, WS, "refs/maka/s/r/1", "the first\n\nwith a body")
    (folder / "top.txt").write_text("again\n")
    second = store.capture(folder, WS, "refs/maka/s/r/2", "the second")
    git_dir = store.git_dir(WS)
    _git(git_dir, "fsck", "--strict", "--no-dangling")
    assert _git(git_dir, "rev-parse", "refs/maka/s/r/1", "refs/maka/s/r/2").split() == [
        first.commit_id,
        second.commit_id,
    ]
    shown = _git(git_dir, "cat-file", "-p", second.commit_id)
    assert shown.startswith(f"tree {second.tree_id}\nauthor Maka <checkpoints@maka.invalid> ")
    assert "\nparent " not in shown
    assert (
        _git(git_dir, "log", "--format=%B", "-1", first.commit_id) == "the first\n\nwith a body\n\n"
    )
    # The permission record's blob, written without Git when the record changed (a file
    # came in), is the blob Git writes for the same bytes.
    (folder / "pkg" / "new.txt").write_text("new\n")
    (folder / "pkg" / "new.txt").chmod(0o640)
    with_new = store.capture(folder, WS, "refs/maka/s/r/3", "a new file")
    record = _git(git_dir, "rev-parse", f"{with_new.tree_id}:.maka/permissions").strip()
    assert record != _git(git_dir, "rev-parse", f"{second.tree_id}:.maka/permissions").strip()
    shown_record = subprocess.run(
        ["git", "--git-dir", str(git_dir), "cat-file", "blob", record],
        capture_output=True,
        check=True,
    ).stdout
    assert b"0640 pkg/new.txt\0" in shown_record
    rehashed = (
        subprocess.run(
            ["git", "hash-object", "--stdin"], input=shown_record, capture_output=True, check=True
        )
        .stdout.decode()
        .strip()
    )
    assert rehashed == record
    _git(git_dir, "fsck", "--strict", "--no-dangling")
    # A ref Git packed meanwhile is moved by the next capture as Git would move it.
    _git(git_dir, "pack-refs", "--all")
    third = store.capture(folder, WS, "refs/maka/s/r/2", "moved")
    assert _git(git_dir, "rev-parse", "refs/maka/s/r/2").strip() == third.commit_id
    assert store.refs(WS)["refs/maka/s/r/2"] == third.commit_id
