"""A restore checks the snapshot's stored bytes before it writes anything (docs/design/workspace.md
section 4), with the real ``git``: an object swapped or removed in the private repository is refused
with ``workspace_restore_snapshot_damaged`` and no copy is made."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from runtime.ledger.checkpoint_ports import CheckpointError
from runtime.ledger.codes import RestoreCode
from storage.checkpoints.checkpoint_store import GitCheckpointStore

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
WS = "workspace:v1:9c9c9c9c-1111-2222-3333-444455556666"


def object_id_of(git_dir: Path, spec: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-parse", spec],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def loose_path_of(git_dir: Path, object_id: str) -> Path:
    return git_dir / "objects" / object_id[:2] / object_id[2:]


def swap_blob(git_dir: Path, object_id: str, body: bytes) -> None:
    """Put other bytes under a blob's name, as a hand (or a disk) could."""
    path = loose_path_of(git_dir, object_id)
    path.chmod(0o600)
    path.write_bytes(zlib.compress(b"blob %d\0" % len(body) + body))


def _store(tmp_path: Path) -> tuple[GitCheckpointStore, str]:
    folder = tmp_path / "work"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("the real content\n")
    (folder / "sub" / "b.txt").write_text("b\n")
    store = GitCheckpointStore(tmp_path / "data")
    return store, store.capture(folder, WS, "refs/maka/s/r/1", "m").tree_id


def test_a_swapped_blob_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    store, tree = _store(tmp_path)
    git_dir = store.git_dir(WS)
    assert store.verify_snapshots(WS, [tree]) == {tree: []}
    swap_blob(git_dir, object_id_of(git_dir, f"{tree}:a.txt"), b"planted by someone else\n")

    copy = tmp_path / "copy"
    with pytest.raises(CheckpointError) as refused:
        store.materialize(WS, tree, copy, "s")
    assert refused.value.code is RestoreCode.WORKSPACE_RESTORE_SNAPSHOT_DAMAGED
    assert "a.txt" in refused.value.message
    assert not copy.exists()
    [damaged] = store.verify_snapshots(WS, [tree])[tree]
    assert damaged.path == "a.txt" and not damaged.missing


def test_a_swapped_folder_or_a_removed_file_is_refused(tmp_path: Path) -> None:
    store, tree = _store(tmp_path)
    git_dir = store.git_dir(WS)
    sub = object_id_of(git_dir, f"{tree}:sub")
    blob = object_id_of(git_dir, f"{tree}:sub/b.txt")
    path = loose_path_of(git_dir, sub)
    path.chmod(0o600)
    raw = zlib.decompress(path.read_bytes())
    path.write_bytes(zlib.compress(raw.replace(b"b.txt", b"c.txt")))
    assert [d.path for d in store.verify_snapshots(WS, [tree])[tree]] == ["sub"]
    os.remove(loose_path_of(git_dir, blob))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CheckpointError) as refused:
        store.materialize(WS, tree, empty, "s")
    assert refused.value.code is RestoreCode.WORKSPACE_RESTORE_SNAPSHOT_DAMAGED
    assert list(empty.iterdir()) == []


@pytest.mark.skipif(sys.platform != "linux", reason="file names are bytes on Linux")
def test_a_damaged_file_whose_name_is_not_utf8_is_named_as_changes_name_it(
    tmp_path: Path,
) -> None:
    """The stray byte written as ``\\xNN`` (``checkpoint_empty_dirs.shown_path``), as the
    snapshots' changes and skipped files name it: the doctor's report said a lone surrogate
    (``caf\\udce9.txt`` in ``--json``) and wrote the raw byte in its text."""
    folder = tmp_path / "work"
    folder.mkdir()
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.txt"), "wb") as named:
        named.write(b"real\n")
    store = GitCheckpointStore(tmp_path / "data")
    tree = store.capture(folder, WS, "refs/maka/s/r/1", "m").tree_id
    git_dir = store.git_dir(WS)
    [listed] = [
        entry
        for entry in subprocess.run(
            ["git", "--git-dir", str(git_dir), "ls-tree", "-z", tree],
            capture_output=True,
            check=True,
        ).stdout.split(b"\0")
        if entry.endswith(b"\tcaf\xe9.txt")
    ]
    swap_blob(git_dir, listed.split(b" ")[2].split(b"\t")[0].decode(), b"planted\n")
    assert [d.path for d in store.verify_snapshots(WS, [tree])[tree]] == ["caf\\xe9.txt"]


_MEASURED_RESTORE = """
import sys
from pathlib import Path
from storage.checkpoints.checkpoint_store import GitCheckpointStore

def peak_kib():  # this process image's own high-water mark (ru_maxrss outlives exec)
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

store = GitCheckpointStore(Path(sys.argv[1]))
before = peak_kib()
store.materialize(sys.argv[2], sys.argv[3], Path(sys.argv[4]), "s")
print(peak_kib() - before)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="peak memory as Linux reports it")
def test_a_restore_checks_a_large_snapshot_in_little_memory(tmp_path: Path) -> None:
    """The check reads the snapshot's objects as Git prints them, a piece at a time: the
    restore of a 64 MB snapshot raises the process's peak memory by far less than the
    snapshot's size (holding Git's output whole took twice its size)."""
    folder = tmp_path / "work"
    folder.mkdir()
    for n in range(4):
        lines = (f"file {n}, line {k}: some text of a large file\n" for k in range(360_000))
        (folder / f"large-{n}.txt").write_text("".join(lines))
    size = sum(path.stat().st_size for path in folder.iterdir())
    assert size > 60 * 2**20
    store = GitCheckpointStore(tmp_path / "data")
    tree = store.capture(folder, WS, "refs/maka/s/r/1", "m").tree_id
    copy = tmp_path / "copy"
    out = subprocess.run(
        [sys.executable, "-c", _MEASURED_RESTORE, str(tmp_path / "data"), WS, tree, str(copy)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout
    grown_kib = int(out.strip())
    assert grown_kib < 32 * 1024, f"peak memory grew by {grown_kib} KiB for {size} bytes"
    for n in range(4):
        name = f"large-{n}.txt"
        assert (copy / name).read_bytes() == (folder / name).read_bytes()


def test_a_snapshot_of_many_files_is_checked_in_one_stream(tmp_path: Path) -> None:
    """A query longer than a pipe holds (3,000 objects) is written while the answer is read,
    and one swapped blob among them is found."""
    folder = tmp_path / "work"
    for n in range(3_000):
        sub = folder / f"d{n % 30}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{n}.txt").write_text(f"file {n}\n")
    store = GitCheckpointStore(tmp_path / "data")
    tree = store.capture(folder, WS, "refs/maka/s/r/1", "m").tree_id
    assert store.verify_snapshots(WS, [tree]) == {tree: []}
    git_dir = store.git_dir(WS)
    target = object_id_of(git_dir, f"{tree}:d7/f2107.txt")
    swap_blob(git_dir, target, b"planted\n")
    damaged = store.verify_snapshots(WS, [tree])[tree]
    assert [(d.object_id, d.path, d.missing) for d in damaged] == [(target, "d7/f2107.txt", False)]
