"""A small private index staged and its tree written in this process
(``storage/checkpoints/checkpoint_index.py``), with the real ``git`` and real folders:

- the index codec reads and writes back, byte for byte, what Git writes (property test);
- a capture staged here records the same tree, the same entries and stat data Git trusts as
  a capture staged by Git, after every kind of change;
- a file changed in the same second after its entry was taken, with its time put back, is
  still seen when the index is written again later (Git's racy-entry rule);
- what is not ordinary (an index of version 4, a big index) is left to Git.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.ledger.checkpoint_ports import checkpoint_ref
from storage.checkpoints import checkpoint_index, checkpoint_store
from storage.checkpoints.checkpoint_store import GitCheckpointStore

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or os.name != "posix", reason="needs git and POSIX modes"
)
WS = "workspace:v1:3a3a3a3a-1111-2222-3333-444455556666"


def _git(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> bytes:
    base = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    base.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    base.update(env or {})
    return subprocess.run(
        ["git", "-c", "index.threads=true", *args],
        capture_output=True,
        check=True,
        env=base,
        cwd=cwd,
    ).stdout


_NAMES = st.text(alphabet="abcxyz._-", min_size=1, max_size=12).filter(
    lambda name: name not in {".", ".."} and not name.startswith(".git")
)
_TREES = st.dictionaries(
    st.lists(_NAMES, min_size=1, max_size=4).map(tuple),
    st.tuples(st.binary(max_size=64), st.sampled_from(["file", "exec", "link"])),
    min_size=1,
    max_size=30,
)


def _lay_out(folder: Path, tree: dict[tuple[str, ...], tuple[bytes, str]]) -> None:
    for parts, (body, kind) in sorted(tree.items()):
        path = folder.joinpath(*parts)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists() or path.is_symlink():
                continue
            if kind == "link":
                os.symlink(body.hex() or "x", path)
            else:
                path.write_bytes(body)
                path.chmod(0o755 if kind == "exec" else 0o644)
        except (FileExistsError, NotADirectoryError):
            continue  # a name used both as a file and as a folder: the first one stays


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(tree=_TREES, version=st.sampled_from([2, 3]))
def test_an_index_git_wrote_is_read_and_written_back_byte_for_byte(
    tmp_path_factory: pytest.TempPathFactory,
    tree: dict[tuple[str, ...], tuple[bytes, str]],
    version: int,
) -> None:
    root = tmp_path_factory.mktemp("codec")
    folder, index = root / "w", root / "index"
    folder.mkdir()
    _lay_out(folder, tree)
    env = {"GIT_DIR": str(root / "r.git"), "GIT_WORK_TREE": str(folder)}
    env["GIT_INDEX_FILE"] = str(index)
    _git("init", "-q", "--bare", str(root / "r.git"))
    _git("add", "-A", env=env)
    _git("update-index", "--index-version", str(version), env=env)
    tree_id = _git("write-tree", env=env).strip().decode()
    written = index.read_bytes()
    state = checkpoint_index._parse(written, 0)
    index.unlink()
    checkpoint_index._write(index, state)
    assert index.read_bytes() == written
    assert _git("write-tree", env=env).strip().decode() == tree_id


def test_a_name_longer_than_the_flags_hold_reads_back(tmp_path: Path) -> None:
    index = tmp_path / "index"
    env = {"GIT_DIR": str(tmp_path / "r.git"), "GIT_INDEX_FILE": str(index)}
    _git("init", "-q", "--bare", str(tmp_path / "r.git"))
    blob = subprocess.run(
        ["git", "--git-dir", str(tmp_path / "r.git"), "hash-object", "-w", "--stdin"],
        input=b"deep\n",
        capture_output=True,
        check=True,
    ).stdout
    deep = "/".join(["d" * 200] * 22) + "/f.txt"  # 4,406 bytes: the flags say 0xFFF
    for name in (deep, "top.txt"):
        _git(
            "update-index",
            "--add",
            "--cacheinfo",
            f"100644,{blob.decode().strip()},{name}",
            env=env,
        )
    _git("write-tree", env=env)
    written = index.read_bytes()
    state = checkpoint_index._parse(written, 0)
    assert deep.encode() in state.names
    index.unlink()
    checkpoint_index._write(index, state)
    assert index.read_bytes() == written


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """What each staging in this process answered (True: done here; False: left to Git)."""
    answers: list[bool] = []
    real = checkpoint_index.stage_paths

    def stage_paths(*args: object, **kwargs: object) -> bool:
        answer = real(*args, **kwargs)  # type: ignore[arg-type]
        answers.append(answer)
        return answer

    monkeypatch.setattr(checkpoint_store, "stage_paths", stage_paths)
    yield answers


def _file_becomes_folder(folder: Path) -> None:
    path = folder / "util"
    if path.is_file():
        path.unlink()
        path.mkdir()
        (path / "__init__.py").write_text("i\n")
    elif path.is_dir():
        shutil.rmtree(path)
        path.write_text("u\n")


def _folder_becomes_link(folder: Path) -> None:
    path = folder / "lib"
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
        os.symlink("pkg", path)
    elif path.is_symlink():
        path.unlink()
        path.mkdir()
        (path / "m.txt").write_text("m\n")


def _steps(folder: Path, rng: random.Random) -> list[Callable[[], None]]:
    def edit() -> None:
        with open(folder / "pkg" / rng.choice(["a.txt", "b.txt"]), "a") as out:
            out.write(f"{rng.random()}\n")

    def new_file() -> None:
        (folder / f"new{rng.randrange(1000)}.txt").write_text("n\n")

    def new_folder() -> None:
        sub = folder / f"sub{rng.randrange(5)}" / "deeper"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / "x.py").write_text("x = 1\n")

    def delete() -> None:
        files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
        if len(files) > 3:
            rng.choice(files).unlink()

    def executable() -> None:
        path = folder / "pkg" / "a.txt"
        if path.exists():
            path.chmod(path.stat().st_mode ^ 0o100)

    def link() -> None:
        path = folder / f"link{rng.randrange(3)}"
        if not path.is_symlink() and not path.exists():
            os.symlink(rng.choice(["pkg/a.txt", "nowhere", "../outside"]), path)

    def empty_file() -> None:
        (folder / "pkg" / "empty").write_bytes(b"")

    return [
        edit,
        new_file,
        new_folder,
        delete,
        executable,
        link,
        partial(_file_becomes_folder, folder),
        partial(_folder_becomes_link, folder),
        empty_file,
    ]


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "w"
    (folder / "pkg").mkdir(parents=True)
    (folder / "lib").mkdir()
    for name in ("a.txt", "b.txt", "c.txt"):
        (folder / "pkg" / name).write_text(name * 3)
    (folder / "lib" / "m.txt").write_text("m\n")
    (folder / "util").write_text("u\n")
    (folder / "notes.md").write_text("notes\n")
    return folder


def _entries(store: GitCheckpointStore) -> str:
    env = {"GIT_DIR": str(store.git_dir(WS)), "GIT_INDEX_FILE": str(store.index_path(WS))}
    return _git("ls-files", "-s", env=env).decode()


def _differing(store: GitCheckpointStore, folder: Path) -> set[str]:
    env = {"GIT_DIR": str(store.git_dir(WS)), "GIT_INDEX_FILE": str(store.index_path(WS))}
    env["GIT_WORK_TREE"] = str(folder)
    listed = _git("diff-files", "--name-only", "-z", env=env).decode().split("\0")
    return {name for name in listed if name} - {".maka/permissions"}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_capture_staged_here_is_the_capture_git_stages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: list[bool], seed: int
) -> None:
    rng = random.Random(seed)
    folder = _folder(tmp_path)
    here = GitCheckpointStore(tmp_path / "here")
    by_git = GitCheckpointStore(tmp_path / "by-git")
    steps = _steps(folder, rng)
    for n in range(1, 26):
        for _ in range(rng.randrange(1, 4)):
            rng.choice(steps)()
        ref = checkpoint_ref("s", "r", n)
        ours = here.capture(folder, WS, ref, "m")
        with monkeypatch.context() as patched:
            patched.setattr(checkpoint_index, "SMALL_INDEX", 0)
            theirs = by_git.capture(folder, WS, ref, "m")
        assert ours.tree_id == theirs.tree_id, f"step {n}"
        assert _entries(here) == _entries(by_git), f"step {n}"
        # The stat data written here is data Git trusts: nothing listed as changed.
        assert _differing(here, folder) == set(), f"step {n}"
    assert counted.count(True) >= 20  # staged here, not left to Git
    env = {"GIT_DIR": str(here.git_dir(WS))}
    _git("fsck", "--strict", "--no-dangling", env=env)


def _captured_by_a_git_comparing_no_ctime(
    tmp_path: Path, folder: Path
) -> tuple[GitCheckpointStore, dict[str, str]]:
    """A store that captured ``folder`` once, its Git set to compare no ctime
    (``core.trustctime=false``, ``core.checkStat=minimal``): a change Git's stat data cannot
    show is left to the racy-entry rule alone. The store and the environment naming it."""
    store = GitCheckpointStore(tmp_path / "data")
    store.capture(folder, WS, checkpoint_ref("s", "r", 1), "m")
    env = {"GIT_DIR": str(store.git_dir(WS))}
    _git("config", "core.trustctime", "false", env=env)
    _git("config", "core.checkStat", "minimal", env=env)
    return store, env


def test_a_file_changed_in_the_same_second_is_seen_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: list[bool]
) -> None:
    """Git's racy-entry rule with a Git that compares no ctime (``core.trustctime=false``,
    ``core.checkStat=minimal``): ``racy.txt`` is rewritten (same size, its time put back)
    after the listing and before the index is written; a later capture, with the index's time
    well past the file's, still records its new content."""
    folder = _folder(tmp_path)
    racy = folder / "pkg" / "racy.txt"
    racy.write_text("before\n")
    store, env = _captured_by_a_git_comparing_no_ctime(tmp_path, folder)
    index = store.index_path(WS)
    taken = racy.stat()
    os.utime(index, ns=(taken.st_mtime_ns, taken.st_mtime_ns))  # the same second as the file
    real = checkpoint_index.stage_paths

    def late_change(*args: object, **kwargs: object) -> bool:
        racy.write_text("after!\n")
        os.utime(racy, ns=(taken.st_atime_ns, taken.st_mtime_ns))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(checkpoint_store, "stage_paths", late_change)
    (folder / "notes.md").write_text("changed\n")
    store.capture(folder, WS, checkpoint_ref("s", "r", 2), "m")
    monkeypatch.setattr(checkpoint_store, "stage_paths", real)
    later = taken.st_mtime_ns + 60 * 10**9
    os.utime(index, ns=(later, later))  # a minute on: no entry is racy any more
    (folder / "notes.md").write_text("changed again\n")
    last = store.capture(folder, WS, checkpoint_ref("s", "r", 3), "m")
    shown = _git("cat-file", "-p", f"{last.tree_id}:pkg/racy.txt", env=env)
    assert shown == b"after!\n"


def test_an_index_of_version_4_is_left_to_git(tmp_path: Path, counted: list[bool]) -> None:
    folder = _folder(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    store.capture(folder, WS, checkpoint_ref("s", "r", 1), "m")
    env = {"GIT_DIR": str(store.git_dir(WS)), "GIT_INDEX_FILE": str(store.index_path(WS))}
    _git("update-index", "--index-version", "4", env=env)
    (folder / "pkg" / "a.txt").write_text("changed\n")
    counted.clear()
    ours = store.capture(folder, WS, checkpoint_ref("s", "r", 2), "m")
    assert counted == [False]
    fresh = GitCheckpointStore(tmp_path / "fresh").capture(
        folder, WS, checkpoint_ref("s", "f", 1), "m"
    )
    assert ours.tree_id == fresh.tree_id
    assert store.index_path(WS).read_bytes()[4:8] == b"\0\0\0\4"


def test_a_big_index_is_left_to_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: list[bool]
) -> None:
    folder = _folder(tmp_path)
    for n in range(40):
        (folder / "pkg" / f"f{n}.txt").write_text(f"{n}\n")
    monkeypatch.setattr(checkpoint_index, "SMALL_INDEX", 10)
    store = GitCheckpointStore(tmp_path / "data")
    store.capture(folder, WS, checkpoint_ref("s", "r", 1), "m")
    (folder / "pkg" / "a.txt").write_text("changed\n")
    before = store.capture(folder, WS, checkpoint_ref("s", "r", 2), "m")
    assert counted == []  # never tried: the staging was started in Git ahead of its paths
    monkeypatch.setattr(checkpoint_index, "SMALL_INDEX", 4_000)
    (folder / "pkg" / "a.txt").write_text("changed twice\n")
    after = store.capture(folder, WS, checkpoint_ref("s", "r", 3), "m")
    assert counted == [True]
    assert before.tree_id != after.tree_id


@pytest.mark.parametrize("change", ["folder_becomes_file", "file_becomes_folder"])
def test_an_entry_in_the_way_is_replaced_as_git_replaces_it(tmp_path: Path, change: str) -> None:
    """``update-index --add --replace``: a new entry drops the entries it would meet."""
    folder = tmp_path / "w"
    (folder / "a").mkdir(parents=True)
    (folder / "a" / "b.txt").write_text("b\n")
    (folder / "a" / "c.txt").write_text("c\n")
    (folder / "f").write_text("f\n")
    (folder / "z.txt").write_text("z\n")
    git_dir = tmp_path / "r.git"
    _git("init", "-q", "--bare", str(git_dir))
    env = {"GIT_DIR": str(git_dir), "GIT_WORK_TREE": str(folder)}
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    _git("add", "-A", env=env | {"GIT_INDEX_FILE": str(ours)})
    _git("write-tree", env=env | {"GIT_INDEX_FILE": str(ours)})
    shutil.copy(ours, theirs)
    if change == "folder_becomes_file":
        shutil.rmtree(folder / "a")
        (folder / "a").write_text("now a file\n")
        staged = b"a"
    else:
        (folder / "f").unlink()
        (folder / "f").mkdir()
        (folder / "f" / "g.txt").write_text("g\n")
        staged = b"f/g.txt"
    assert checkpoint_index.stage_paths(git_dir, folder, ours, [staged], [])
    tree = checkpoint_index.record_and_tree(git_dir, folder, ours, None)
    _git(
        "update-index", "--add", "--replace", staged.decode(),
        env=env | {"GIT_INDEX_FILE": str(theirs)},
    )  # fmt: skip
    expected = _git("write-tree", env=env | {"GIT_INDEX_FILE": str(theirs)}).strip().decode()
    assert tree == expected
    listed = [
        _git("ls-files", "-s", env=env | {"GIT_INDEX_FILE": str(index)}) for index in (ours, theirs)
    ]
    assert listed[0] == listed[1]


def test_a_fifo_put_in_a_files_place_is_not_waited_on(tmp_path: Path) -> None:
    """A file replaced by a fifo between its ``lstat`` and its reading: the read refuses at
    once (as for a link put there), and the staging is left to Git."""
    path = tmp_path / "f.txt"
    path.write_text("file\n")
    seen = os.lstat(path)
    path.unlink()
    os.mkfifo(path)
    outcome: list[object] = []

    def read() -> None:
        try:
            outcome.append(checkpoint_index._file_bytes(os.fsencode(path), seen))
        except OSError as error:
            outcome.append(error)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=5)
    if reader.is_alive():  # let the blocked open go, then fail
        with open(path, "wb"):
            pass
        pytest.fail("the read waited on the fifo")
    assert isinstance(outcome[0], OSError)


def test_a_file_that_grew_since_its_lstat_is_left_to_git(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_text("one line\n")
    seen = os.lstat(path)
    with open(path, "a") as out:
        out.write("and many more\n" * 1000)
    with pytest.raises(OSError, match="grew"):
        checkpoint_index._file_bytes(os.fsencode(path), seen)
    assert checkpoint_index._file_bytes(os.fsencode(path), os.lstat(path)) == path.read_bytes()


def test_a_capture_killed_at_any_moment_leaves_a_store_that_works(tmp_path: Path) -> None:
    """A process capturing again and again (staging in this process) killed with SIGKILL at
    random moments: every time, the next capture works and records what a capture from
    nothing records, and the store passes ``git fsck``."""
    folder = _folder(tmp_path)
    for n in range(300):
        (folder / "pkg" / f"f{n}.txt").write_text(f"{n}\n")
    data = tmp_path / "data"
    GitCheckpointStore(data).capture(folder, WS, checkpoint_ref("s", "r", 1), "m")
    script = textwrap.dedent(
        f"""
        import itertools, os, sys
        from pathlib import Path
        from runtime.ledger.checkpoint_ports import checkpoint_ref
        from storage.checkpoints.checkpoint_store import GitCheckpointStore
        store = GitCheckpointStore(Path({str(data)!r}))
        folder = Path({str(folder)!r})
        print("ready", flush=True)
        for n in itertools.count(2):
            for k in range(n % 7, 300, 29):
                (folder / "pkg" / f"f{{k}}.txt").write_text(f"{{k}} {{n}}\\n")
            store.capture(folder, {WS!r}, checkpoint_ref("s", "k", n), "m")
        """
    )
    rng = random.Random(5)
    root = Path(__file__).resolve().parents[2]
    for attempt in range(8):
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, cwd=root)
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.05, 0.6))
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        store = GitCheckpointStore(data)
        (folder / "notes.md").write_text(f"after kill {attempt}\n")
        after = store.capture(folder, WS, checkpoint_ref("s", "a", attempt + 1), "m")
        fresh = GitCheckpointStore(tmp_path / f"fresh-{attempt}").capture(
            folder, WS, checkpoint_ref("s", "f", 1), "m"
        )
        assert after.tree_id == fresh.tree_id, f"attempt {attempt}"
    _git("fsck", "--strict", "--no-dangling", env={"GIT_DIR": str(store.git_dir(WS))})


def test_a_file_changed_before_the_tree_is_written_is_seen_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``write-tree``'s half of Git's racy-entry rule: ``new.txt`` is staged, then rewritten
    (same size, its time put back) before the capture writes its tree, all in one second of
    the index's clock; a later capture, the index's time well past the file's, still records
    its new content (as with a Git that compares no ctime)."""
    folder = _folder(tmp_path)
    store, env = _captured_by_a_git_comparing_no_ctime(tmp_path, folder)
    index = store.index_path(WS)
    late = folder / "pkg" / "new.txt"
    late.write_bytes(b"old!")
    taken = late.stat()
    real = checkpoint_index.record_and_tree

    def late_change(*args: Any, **kwargs: Any) -> str | None:
        late.write_bytes(b"NEW!")
        os.utime(late, ns=(taken.st_atime_ns, taken.st_mtime_ns))
        os.utime(index, ns=(taken.st_mtime_ns, taken.st_mtime_ns))  # the same second
        return real(*args, **kwargs)

    monkeypatch.setattr(checkpoint_store, "record_and_tree", late_change)
    staged = store.capture(folder, WS, checkpoint_ref("s", "r", 2), "m")
    monkeypatch.setattr(checkpoint_store, "record_and_tree", real)
    assert _git("cat-file", "-p", f"{staged.tree_id}:pkg/new.txt", env=env) == b"old!"
    later = taken.st_mtime_ns + 60 * 10**9
    os.utime(index, ns=(later, later))  # a minute on: no entry is racy any more
    last = store.capture(folder, WS, checkpoint_ref("s", "r", 3), "m")
    assert _git("cat-file", "-p", f"{last.tree_id}:pkg/new.txt", env=env) == b"NEW!"


@pytest.mark.parametrize("kind", ["file", "link"])
@pytest.mark.usefixtures("staged_both_ways")
def test_a_top_level_maka_that_is_not_a_folder_is_left_out(tmp_path: Path, kind: str) -> None:
    """``.maka`` at the top of the folder is the app's own name (the policy leaves it out):
    a file or a link of that name no longer fails every capture (its entry met the permission
    record's, ``.maka/permissions``)."""
    folder = _folder(tmp_path)
    if kind == "file":
        (folder / ".maka").write_text("a file of the user's\n")
    else:
        os.symlink("notes.md", folder / ".maka")
    store = GitCheckpointStore(tmp_path / "data")
    first = store.capture(folder, WS, checkpoint_ref("s", "r", 1), "m")
    (folder / "notes.md").write_text("changed\n")
    second = store.capture(folder, WS, checkpoint_ref("s", "r", 2), "m")
    env = {"GIT_DIR": str(store.git_dir(WS))}
    for snapshot in (first, second):
        listed = _git("ls-tree", "--name-only", snapshot.tree_id, env=env).decode().split()
        assert ".maka" in listed  # the permission record's folder, not the user's entry
        inside = _git("ls-tree", "--name-only", f"{snapshot.tree_id}:.maka", env=env).decode()
        assert inside.split() == ["permissions"]
    assert store.observe(folder, WS).tree_id == second.tree_id


@pytest.mark.usefixtures("staged_both_ways")
def test_a_newly_ignored_name_that_is_not_utf8_is_noted(tmp_path: Path) -> None:
    """A path left out because an ignore rule came in, its name not UTF-8: the capture is
    written (it failed encoding its message), the name noted as ``\\xNN``."""
    folder = _folder(tmp_path)
    with open(os.path.join(os.fsencode(folder), b"\xffraw.txt"), "wb") as out:
        out.write(b"x\n")
    store = GitCheckpointStore(tmp_path / "data")
    store.capture(folder, WS, checkpoint_ref("s", "r", 1), "m")
    (folder / ".gitignore").write_text("*.txt\n")
    second = store.capture(folder, WS, checkpoint_ref("s", "r", 2), "m")
    assert second.commit_id is not None
    noted = store.now_ignored(WS, [second.commit_id])[second.commit_id]
    assert "\\xffraw.txt" in noted


def test_a_skipped_name_that_is_not_utf8_is_reported_as_text(tmp_path: Path) -> None:
    """A file over the size limit whose name is not UTF-8: the capture names it as ``\\xNN``
    (the run's checkpoint fact lists skipped paths, and a ledger holds UTF-8 text only)."""
    folder = _folder(tmp_path)
    with open(os.path.join(os.fsencode(folder), b"big\xfe.bin"), "wb") as out:
        out.write(b"x" * 2_000)
    store = GitCheckpointStore(tmp_path / "data", max_file_bytes=1_000)
    taken = store.capture(folder, WS, checkpoint_ref("s", "r", 1), "m")
    assert taken.skipped == ("big\\xfe.bin",)
    "".join(taken.skipped).encode("utf-8")  # no lone surrogate left
    assert store.observe(folder, WS).skipped == ("big\\xfe.bin",)
