"""A session folder inside a larger repository: that repository's ignore rules apply to the
snapshots too, read without writing anything of it (docs/design/workspace.md section 1), with the
real ``git``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.checkpoints.checkpoint_enclosing import _moved, enclosing_rules
from storage.checkpoints.checkpoint_store import GitCheckpointStore
from tests.unit.test_checkpoint_store import _tree_state

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
WS = "workspace:v1:2f2f2f2f-1111-2222-3333-444455556666"


def _monorepo(tmp_path: Path) -> tuple[Path, Path]:
    top = tmp_path / "mono"
    package = top / "packages" / "app"
    (package / "node_modules" / "dep").mkdir(parents=True)
    (package / "node_modules" / "dep" / "index.js").write_text("dep\n")
    (package / "dist").mkdir()
    (package / "dist" / "out.js").write_text("built\n")
    (package / "src").mkdir()
    (package / "src" / "main.js").write_text("main\n")
    (package / "keep.log").write_text("kept by a negation\n")
    (package / "debug.log").write_text("log\n")
    (package / "local.tmp").write_text("tmp\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["HOME"] = str(tmp_path)
    subprocess.run(["git", "init", "-q", str(top)], check=True, env=env)
    (top / ".gitignore").write_text(
        "node_modules/\n*.log\n!keep.log\n/packages/*/dist/\n/other/\n# a comment\n"
    )
    (top / "packages" / ".gitignore").write_text("app/local.tmp\n")
    (top / ".git" / "info" / "exclude").write_text("*.swp\n")
    return top, package


def _snapshot_names(tmp_path: Path, package: Path) -> list[str]:
    """The paths of a first snapshot of ``package`` (a store in ``tmp_path / "data"``)."""
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(package, WS, "refs/maka/s/r/1", "m")
    return subprocess.run(
        [
            "git",
            "--git-dir",
            str(store.git_dir(WS)),
            "ls-tree",
            "-r",
            "--name-only",
            snapshot.tree_id,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()


def test_the_rules_of_an_enclosing_repository_apply_read_only(tmp_path: Path) -> None:
    top, package = _monorepo(tmp_path)
    (package / "notes.swp").write_text("swap\n")
    before = _tree_state(top / ".git")
    listed = _snapshot_names(tmp_path, package)
    assert sorted(listed) == [".maka/permissions", "keep.log", "src/main.js"]
    assert _tree_state(top / ".git") == before  # the user's repository is never written


def test_a_rule_that_comes_in_above_the_folder_leaves_the_next_snapshot(tmp_path: Path) -> None:
    top, package = _monorepo(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    store.capture(package, WS, "refs/maka/s/r/1", "m")
    (top / ".gitignore").write_text((top / ".gitignore").read_text() + "src/\n")
    second = store.capture(package, WS, "refs/maka/s/r/2", "m")
    assert store.now_ignored(WS, [second.commit_id]) == {second.commit_id: ["src/main.js"]}


def test_rules_are_moved_to_the_folder_or_left_out() -> None:
    inside = ("packages", "app")
    assert _moved("node_modules/", inside) == "node_modules/"
    assert _moved("**/build", inside) == "**/build"
    assert _moved("/packages/*/dist/", inside) == "/dist/"
    assert _moved("packages/app/src/gen", inside) == "/src/gen"
    assert _moved("/other/", inside) is None
    assert _moved("packages/app", inside) is None  # the folder itself: not inside it
    assert _moved("**/x/y", inside) == "**/x/y"
    assert _moved("packages/**/dist", inside) is None


@given(st.lists(st.text(alphabet="ab*/!#\\ .", max_size=12), max_size=6))
def test_any_rules_read_without_failing(rules: list[str]) -> None:
    from storage.checkpoints.checkpoint_enclosing import _rewritten

    for line in _rewritten(rules, ("a", "b")):
        assert line and "\n" not in line


def test_a_folder_that_is_a_repository_of_its_own_reads_no_rule_from_above(
    tmp_path: Path,
) -> None:
    _top, package = _monorepo(tmp_path)
    assert enclosing_rules(package) != ""
    subprocess.run(["git", "init", "-q", str(package)], check=True, capture_output=True)
    assert enclosing_rules(package) == ""


def test_no_enclosing_repository_adds_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "alone"
    folder.mkdir()
    if any((parent / ".git").exists() for parent in folder.parents):
        pytest.skip("the temporary folder is itself inside a repository")
    assert enclosing_rules(folder) == ""


def test_a_package_of_a_linked_worktree_reads_the_main_repositorys_exclude(
    tmp_path: Path,
) -> None:
    """A linked worktree's ``.git`` is a file; its ``info/exclude`` is the main repository's
    (its common folder), as Git reads it."""
    top, _package = _monorepo(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["HOME"] = str(tmp_path)
    git = ["git", "-C", str(top), "-c", "user.name=u", "-c", "user.email=u@x"]
    subprocess.run([*git, "add", "-A"], check=True, env=env)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True, env=env)
    linked = tmp_path / "linked"
    subprocess.run([*git, "worktree", "add", "-q", str(linked)], check=True, env=env)
    package = linked / "packages" / "app"
    package.mkdir(parents=True, exist_ok=True)
    (package / "notes.swp").write_text("swap\n")
    (package / "kept.txt").write_text("kept\n")
    assert (linked / ".git").is_file()
    assert "*.swp" in enclosing_rules(package)
    listed = _snapshot_names(tmp_path, package)
    assert "notes.swp" not in listed
    assert "kept.txt" in listed


def test_a_git_file_naming_no_folder_or_unreadable_bytes_is_no_repository(
    tmp_path: Path,
) -> None:
    from storage.checkpoints.checkpoint_borrow import user_repository
    from storage.checkpoints.checkpoint_enclosing import git_dirs

    top = tmp_path / "top"
    top.mkdir()
    (top / ".git").write_text("gitdir: nowhere\n")
    assert git_dirs(top) is None
    assert user_repository(top) is None
    named = tmp_path / "named"
    (named / "objects").mkdir(parents=True)
    (named / "commondir").write_bytes(b"\xff\xfe\n")
    (top / ".git").write_text(f"gitdir: {named}\n")
    assert git_dirs(top) is None
    package = top / "pkg"
    package.mkdir()
    (package / "a.txt").write_text("a\n")
    assert enclosing_rules(package) == ""
    store = GitCheckpointStore(tmp_path / "data")
    store.capture(package, WS, "refs/maka/s/r/1", "m")  # captured from scratch, no seed


def test_the_folders_own_info_exclude_applies_and_cannot_undo_the_apps_rules(
    tmp_path: Path,
) -> None:
    """A folder that is a Git repository: what its ``.git/info/exclude`` ignores is out of the
    snapshots, as out of ``git status`` (the rules a repository enclosing it gives were read
    already; its own were not). A rule that comes in later takes the path out of the next
    snapshot, named as now ignored; a negation there never brings in Maka's own files. A
    linked worktree reads the main repository's."""
    from tests.helpers.user_git import user_git

    folder = tmp_path / "repo"
    (folder / "secrets").mkdir(parents=True)
    (folder / "secrets" / "key.pem").write_text("key\n")
    (folder / "scratch.log").write_text("log\n")
    (folder / "notes.txt").write_text("notes\n")
    (folder / "a.txt").write_text("a\n")
    (folder / ".maka-workspace.json").write_text("{}\n")
    user_git(folder, "init", "-q")
    user_git(folder, "add", "a.txt")
    user_git(folder, "commit", "-q", "-m", "one")
    exclude = folder / ".git" / "info" / "exclude"
    exclude.write_text("# mine\nsecrets/\n*.log\n!.maka-workspace.json\n")
    store = GitCheckpointStore(tmp_path / "data")
    first = store.capture(folder, WS, "refs/maka/s/r/1", "m")
    assert _tree_names(store, first.tree_id) == ["a.txt", "notes.txt"]
    status = user_git(folder, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert status == ["?? .maka-workspace.json", "?? notes.txt"]  # the user's view, alike
    exclude.write_text("# mine\nsecrets/\n*.log\n!.maka-workspace.json\nnotes.txt\n")
    second = store.capture(folder, WS, "refs/maka/s/r/2", "m")
    assert _tree_names(store, second.tree_id) == ["a.txt"]
    assert store.now_ignored(WS, [first.commit_id, second.commit_id]) == {
        second.commit_id: ["notes.txt"]
    }
    assert exclude.read_text() == "# mine\nsecrets/\n*.log\n!.maka-workspace.json\nnotes.txt\n"
    # A copy of it ignores what the folder ignores: its rules come along.
    copy = tmp_path / "copy"
    store.materialize(WS, second.tree_id, copy, "s", source=folder)
    (copy / "regenerated.log").write_text("made again in the copy\n")
    status = user_git(copy, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert [line for line in status if ".maka" not in line] == []
    # A linked worktree of it: the main repository's info/exclude, where Git reads it.
    linked = tmp_path / "linked"
    user_git(folder, "worktree", "add", "-q", str(linked))
    (linked / "more.log").write_text("log\n")
    (linked / "b.txt").write_text("b\n")
    other = GitCheckpointStore(tmp_path / "other")
    snapshot = other.capture(linked, WS, "refs/maka/s/r/1", "m")
    assert _tree_names(other, snapshot.tree_id) == ["a.txt", "b.txt"]


def _tree_names(store: GitCheckpointStore, tree: str) -> list[str]:
    listed = subprocess.run(
        ["git", "--git-dir", str(store.git_dir(WS)), "ls-tree", "-r", "--name-only", tree],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [name for name in listed if not name.startswith(".maka/")]


def test_a_copy_of_a_package_keeps_ignoring_what_the_monorepo_ignores(tmp_path: Path) -> None:
    """A package restored or branched beside its monorepo: the copy has no enclosing
    repository to read the rules from, so an ``npm install`` there went into every snapshot
    (and could stop them with ``checkpoint_too_large``). It keeps the rules its snapshot was
    taken under; and so does a copy of the copy."""
    top, package = _monorepo(tmp_path)
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(package, WS, "refs/maka/s/r/1", "m")
    before = _tree_state(top / ".git")
    copy = tmp_path / "mono-packages-app-restored-1"
    identity = store.materialize(WS, snapshot.tree_id, copy, "s", source=package)
    assert _tree_state(top / ".git") == before
    assert store.observe(copy, identity).tree_id == snapshot.tree_id
    (copy / "node_modules" / "dep").mkdir(parents=True)
    (copy / "node_modules" / "dep" / "index.js").write_text("installed in the copy\n")
    (copy / "trace.log").write_text("log\n")
    (copy / "src" / "more.js").write_text("more\n")
    taken = store.capture(copy, identity, "refs/maka/s2/r/1", "m")
    assert _tree_names_of(store, identity, taken.tree_id) == [
        "keep.log",
        "src/main.js",
        "src/more.js",
    ]
    again = tmp_path / "second-copy"
    second = store.materialize(identity, taken.tree_id, again, "s3", source=copy)
    (again / "node_modules").mkdir()
    (again / "node_modules" / "x.js").write_text("x\n")
    assert store.observe(again, second).tree_id == taken.tree_id


def _tree_names_of(store: GitCheckpointStore, identity: str, tree: str) -> list[str]:
    git_dir = str(store.git_dir(identity))
    listed = subprocess.run(
        ["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", tree],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return sorted(name for name in listed if not name.startswith(".maka/"))
