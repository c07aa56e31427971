"""The workspace checkpoint carrier against the real ``git`` (docs/design/workspace.md
section 1)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from runtime.ledger.checkpoint_ports import CheckpointError, CheckpointMode, PathChange
from runtime.ledger.codes import CheckpointFailureCode, CheckpointUnavailableCode
from storage.checkpoints.checkpoint_git import find_git
from storage.checkpoints.checkpoint_store import GitCheckpointStore, workspace_key
from storage.sessions.workspace_identity import (
    LEGACY_MARKER_NAME,
    MARKER_NAME,
    marker_bytes,
    read_workspace_identity,
    resolve_workspace_identity,
)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
WS = "workspace:v1:0f0e0d0c-1111-2222-3333-444455556666"


def _git(folder: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=folder, check=True, capture_output=True, text=True, env=env
    ).stdout


def _tree_state(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every entry under ``root``: mode, mtime and bytes (link targets for links)."""
    state: dict[str, tuple[int, int, bytes]] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if path.is_symlink():
            body = os.readlink(path).encode()
        elif path.is_file():
            body = path.read_bytes()
        else:
            body = b""
        state[str(path.relative_to(root))] = (info.st_mode, info.st_mtime_ns, body)
    return state


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user whose global Git config would change a capture if Git read it (``autocrlf``),
    and whose excludes file keeps ``*.log`` out (read by the store, as ``git status`` reads it).
    """
    home = tmp_path / "home"
    home.mkdir()
    (home / "global-excludes").write_text("*.log\n")
    (home / ".gitconfig").write_text(
        f"[core]\n\texcludesFile = {home / 'global-excludes'}\n\tautocrlf = true\n"
        "[user]\n\tname = User\n\temail = user@example.com\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "elsewhere.index"))
    return home


def _user_repository(folder: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "GIT_INDEX_FILE"}
    env["HOME"] = str(folder.parent)  # built with a plain configuration
    env.update(GIT_AUTHOR_NAME="U", GIT_AUTHOR_EMAIL="u@x", GIT_COMMITTER_NAME="U")
    env["GIT_COMMITTER_EMAIL"] = "u@x"
    folder.mkdir()
    _git(folder, "init", "-q", env=env)
    (folder / "tracked.txt").write_text("one\n")
    (folder / "notes.md").write_text("# notes\n")
    _git(folder, "add", ".", env=env)
    _git(folder, "commit", "-q", "-m", "first", env=env)
    hooks = folder / ".git" / "hooks"
    for hook in ("pre-commit", "post-index-change", "post-checkout", "reference-transaction"):
        script = hooks / hook
        script.write_text(f"#!/bin/sh\necho ran >> {folder.parent / 'hook-ran'}\n")
        script.chmod(0o755)
    (folder / "tracked.txt").write_text("one\ntwo (staged)\n")
    _git(folder, "add", "tracked.txt", env=env)
    (folder / "tracked.txt").write_text("one\ntwo (staged)\nthree (unstaged)\n")
    (folder / "untracked.txt").write_text("new\n")
    (folder / ".git" / "info" / "exclude").write_text("notes.md\n")
    ran = folder.parent / "hook-ran"
    assert ran.exists()  # the hooks are live for the user's own git
    ran.unlink()


def test_the_users_repository_is_byte_identical_after_many_captures(
    tmp_path: Path, user_home: Path
) -> None:
    folder = tmp_path / "project"
    _user_repository(folder)
    before = _tree_state(folder / ".git")
    store = GitCheckpointStore(tmp_path / "data")
    assert store.decide_mode(folder, WS).mode is CheckpointMode.GIT_V1
    trees = []
    (folder / "debug.log").write_text("noise\n")
    for n in range(12):
        (folder / "work.txt").write_text(f"edit {n}\r\n")
        trees.append(store.capture(folder, WS, f"refs/maka/s/r/{n}", f"capture {n}").tree_id)
        store.observe(folder, WS)
    assert len(set(trees)) == 12
    assert _tree_state(folder / ".git") == before
    assert not (tmp_path / "hook-ran").exists()
    status = subprocess.run(
        ["git", "status", "--porcelain"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if k != "GIT_INDEX_FILE"},
    ).stdout
    assert "MM tracked.txt" in status
    # Captured byte for byte (no autocrlf), *.log left out (the user's excludes file), .git
    # left out.
    listed = _git(tmp_path, "--git-dir", str(store.git_dir(WS)), "ls-tree", "-r", trees[-1])
    names = sorted(line.split("\t")[1] for line in listed.splitlines())
    # (``.maka/permissions``: the store's record of every entry's permission bits.)
    assert names == [".maka/permissions", "notes.md", "tracked.txt", "untracked.txt", "work.txt"]
    raw = subprocess.run(
        ["git", "--git-dir", str(store.git_dir(WS)), "cat-file", "blob", f"{trees[-1]}:work.txt"],
        capture_output=True,
        check=True,
    ).stdout
    assert raw == b"edit 11\r\n"


def test_policy_ignores_links_big_files_and_the_marker(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    resolve_workspace_identity(folder)  # .maka/workspace.json and .maka/.gitignore
    (folder / LEGACY_MARKER_NAME).write_text("{}")  # the marker of older versions
    # The app's own folder: never the user's files, nor a record of theirs.
    (folder / ".maka" / "permissions").write_text("0777 src.py\0")
    (folder / ".maka" / "empty").mkdir()
    (folder / ".gitignore").write_text("build/\n")
    (folder / "build").mkdir()
    (folder / "build" / "out.o").write_text("x")
    (folder / "src.py").write_text("print(1)\n")
    (folder / "big.bin").write_bytes(b"0" * 2048)
    (folder / "link").symlink_to("/etc/passwd")
    store = GitCheckpointStore(tmp_path / "data", max_file_bytes=1024)
    snap = store.capture(folder, WS, "refs/maka/s/r/1", "start")
    assert snap.skipped == ("big.bin",)
    listed = _git(tmp_path, "--git-dir", str(store.git_dir(WS)), "ls-tree", "-r", snap.tree_id)
    entries = {line.split("\t")[1]: line.split()[0] for line in listed.splitlines()}
    assert entries == {
        ".gitignore": "100644",
        "src.py": "100644",
        "link": "120000",
        ".maka/permissions": "100644",
    }
    git_dir = str(store.git_dir(WS))
    message = _git(tmp_path, "--git-dir", git_dir, "log", "-1", "--format=%B", snap.commit_id)
    assert "big.bin" in message
    # A small file that grows past the limit leaves the snapshot; one that shrinks comes back.
    (folder / "src.py").write_bytes(b"1" * 4096)
    (folder / "big.bin").write_bytes(b"small")
    second = store.capture(folder, WS, "refs/maka/s/r/2", "next")
    assert second.skipped == ("src.py",)
    changes = {c.path: c.change for c in store.changes(WS, snap.tree_id, second.tree_id)}
    assert changes == {"src.py": PathChange.DELETED, "big.bin": PathChange.ADDED}


def test_the_marker_in_either_form_is_outside_every_snapshot_and_every_restore(
    tmp_path: Path,
) -> None:
    """Moving a legacy marker into ``.maka`` changes no snapshot; a restored copy gets a marker
    of its own (a new identity) and never the snapshot's ``.maka`` record or the folder's."""
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "a.txt").write_text("a\n")
    legacy = marker_bytes("0f0e0d0c-1111-4222-8333-444455556666", 1)
    (folder / LEGACY_MARKER_NAME).write_bytes(legacy)
    store = GitCheckpointStore(tmp_path / "data")
    before = store.capture(folder, WS, "refs/maka/s/r/1", "start")
    identity = resolve_workspace_identity(folder)  # the legacy marker moves into .maka
    assert not (folder / LEGACY_MARKER_NAME).exists()
    after = store.observe(folder, WS)
    assert after.tree_id == before.tree_id
    assert store.changes(WS, before.tree_id, after.tree_id) == []
    marker = (folder / MARKER_NAME).read_bytes()
    copy = tmp_path / "copy"
    restored = store.materialize(WS, after.tree_id, copy, "s")
    assert restored != identity.identity
    assert sorted(p.name for p in copy.iterdir()) == [".maka", "a.txt"]
    assert sorted(p.name for p in (copy / ".maka").iterdir()) == [".gitignore", "workspace.json"]
    found = read_workspace_identity(copy)
    assert found is not None and found.identity == restored
    assert (folder / MARKER_NAME).read_bytes() == marker  # the folder's marker untouched


def test_observe_leaves_no_ref_and_keeps_the_index(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "a").write_text("a")
    store = GitCheckpointStore(tmp_path / "data")
    first = store.capture(folder, WS, "refs/maka/s/r/1", "start")
    index_before = store.index_path(WS).read_bytes()
    (folder / "a").write_text("changed")
    seen = store.observe(folder, WS)
    assert seen.commit_id == "" and seen.tree_id != first.tree_id
    assert store.refs(WS) == {"refs/maka/s/r/1": first.commit_id}
    assert store.index_path(WS).read_bytes() == index_before
    assert [(c.path, c.change) for c in store.changes(WS, first.tree_id, seen.tree_id)] == [
        ("a", PathChange.MODIFIED)
    ]
    assert store.has_snapshot(WS, first.commit_id, first.tree_id)
    shutil.rmtree(store.git_dir(WS))
    assert not store.has_snapshot(WS, first.commit_id, first.tree_id)


def test_a_killed_captures_index_lock_does_not_block_the_next(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "a").write_text("a")
    store = GitCheckpointStore(tmp_path / "data")
    store.capture(folder, WS, "refs/maka/s/r/1", "start")
    (store.root / f"{workspace_key(WS)}.index.lock").write_text("left by a SIGKILL")
    (folder / "a").write_text("b")
    assert store.capture(folder, WS, "refs/maka/s/r/2", "next").commit_id


def test_unavailable_modes_name_their_reason(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "a.txt").write_text("x" * 100)
    no_git = GitCheckpointStore(tmp_path / "data", git=None)
    decision = no_git.decide_mode(folder, WS)
    assert decision.reason is CheckpointUnavailableCode.CHECKPOINT_GIT_MISSING
    assert find_git({"PATH": str(tmp_path / "empty")}) is None

    small = GitCheckpointStore(tmp_path / "data", size_budget=50)
    assert small.decide_mode(folder, WS).reason is CheckpointUnavailableCode.CHECKPOINT_TOO_LARGE

    store = GitCheckpointStore(tmp_path / "data")
    (folder / ".gitattributes").write_text("*.psd filter=lfs diff=lfs merge=lfs -text\n")
    lfs = store.decide_mode(folder, WS)
    assert lfs.reason is CheckpointUnavailableCode.CHECKPOINT_LFS_UNSUPPORTED
    (folder / ".gitattributes").unlink()

    nested = folder / "vendor" / "lib"
    nested.mkdir(parents=True)
    _git(nested, "init", "-q")
    (nested / "x").write_text("x")
    decision = store.decide_mode(folder, WS)
    assert decision.reason is CheckpointUnavailableCode.CHECKPOINT_NESTED_REPOSITORY
    assert "vendor/lib" in decision.detail
    with pytest.raises(CheckpointError) as raised:
        store.capture(folder, WS, "refs/maka/s/r/1", "start")
    assert raised.value.code is CheckpointFailureCode.CHECKPOINT_NESTED_REPOSITORY
    # What the nested repository's description advises: a .gitignore rule for it leaves it out.
    (folder / ".gitignore").write_text("vendor/lib/\n")
    assert store.decide_mode(folder, WS).mode is CheckpointMode.GIT_V1
    store.capture(folder, WS, "refs/maka/s/r/1", "start")


def test_the_size_budget_counts_the_files_a_snapshot_takes(tmp_path: Path) -> None:
    """Every file Git lists, whatever its name's bytes, counts once; a file over the size
    limit (left out of snapshots) does not; a ``.gitattributes`` in a subfolder is read."""
    folder = tmp_path / "ws"
    (folder / "sub").mkdir(parents=True)
    (folder / os.fsdecode(b"latin-\xe9.bin")).write_bytes(b"x" * 60)
    (folder / "sub" / "big.bin").write_bytes(b"y" * 500)
    (folder / "sub" / "small.txt").write_bytes(b"z" * 30)
    at = GitCheckpointStore(tmp_path / "at", size_budget=90, max_file_bytes=100)
    assert at.decide_mode(folder, WS).mode is CheckpointMode.GIT_V1
    over = GitCheckpointStore(tmp_path / "over", size_budget=89, max_file_bytes=100)
    decision = over.decide_mode(folder, WS)
    assert decision.reason is CheckpointUnavailableCode.CHECKPOINT_TOO_LARGE
    assert "90 bytes" in decision.detail
    (folder / "sub" / ".gitattributes").write_text("*.bin filter=lfs diff=lfs merge=lfs -text\n")
    lfs = GitCheckpointStore(tmp_path / "lfs").decide_mode(folder, WS)
    assert lfs.reason is CheckpointUnavailableCode.CHECKPOINT_LFS_UNSUPPORTED
    assert lfs.detail == "sub/.gitattributes uses Git LFS filters"


def test_changed_paths_read_well_whatever_their_bytes(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    store = GitCheckpointStore(tmp_path / "data")
    first = store.capture(folder, WS, "refs/maka/s/r/1", "start")
    (folder / "line\nbreak.txt").write_text("x")
    (folder / os.fsdecode(b"latin-\xe9.txt")).write_text("y")
    (folder / "été.md").write_text("z")
    seen = store.observe(folder, WS)
    paths = [c.path for c in store.changes(WS, first.tree_id, seen.tree_id)]
    # A byte that is not UTF-8 is written as a tool's result writes it (\\xNN), not lost.
    assert sorted(paths) == sorted(["line\nbreak.txt", "latin-\\xe9.txt", "été.md"])
    for path in paths:
        path.encode("utf-8")  # printable as JSON, sendable over the bridge
    # A permission change alone on that file is named the same way (it was a lone surrogate,
    # which no event may hold: a resume telling the model of it was refused).
    os.chmod(folder / os.fsdecode(b"latin-\xe9.txt"), 0o600)
    chmodded = store.observe(folder, WS)
    changed = store.changes(WS, seen.tree_id, chmodded.tree_id)
    assert [c.path for c in changed] == ["latin-\\xe9.txt"], changed


def test_no_checkpoint_chains_to_another_whoever_captured_it(tmp_path: Path) -> None:
    """A snapshot stands alone (no parent): retention frees what only a deleted ref reached."""
    folder = tmp_path / "ws"
    folder.mkdir()
    desktop, cli = GitCheckpointStore(tmp_path / "data"), GitCheckpointStore(tmp_path / "data")
    commits = []
    for n, store in enumerate((desktop, cli, desktop, cli), start=1):
        (folder / "a").write_text(str(n))
        commits.append(store.capture(folder, WS, f"refs/maka/s/r/{n}", "c").commit_id)
        if n == 2:
            _git(tmp_path, "--git-dir", str(desktop.git_dir(WS)), "pack-refs", "--all")
    git_dir = str(desktop.git_dir(WS))
    parents = [
        _git(tmp_path, "--git-dir", git_dir, "rev-parse", f"{commit}^@").strip()
        for commit in commits
    ]
    assert parents == ["", "", "", ""]
    assert len(set(commits)) == 4
