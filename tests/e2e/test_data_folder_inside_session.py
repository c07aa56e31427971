"""Maka's data folder inside the session folder (``MAKA_DATA_DIR=mdata`` in the project, or a
session in the home folder with the default data folder) stays out of the snapshots: every
capture copied the ledger and the snapshot store into the store itself, which grew without
bound, and a crash always parked on drift (the ledger had changed). The real ``maka``, a Git
repository with uncommitted work, snapshots on."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.checkpoints.checkpoint_store import data_folder_rule
from tests.helpers.maka_run import maka
from tests.helpers.user_git import user_git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git")


def _repository(work: Path) -> None:
    work.mkdir()
    (work / "app.py").write_text("print(1)\n")
    user_git(work, "init", "-q")
    user_git(work, "add", "app.py")
    user_git(work, "commit", "-qm", "first")
    (work / "app.py").write_text("print(2)\n")  # uncommitted work
    (work / "draft.txt").write_text("draft\n")


def _snapshot_paths(data: Path) -> set[str]:
    paths: set[str] = set()
    for store in (data / "checkpoints").glob("*.git"):
        refs = user_git(store, "for-each-ref", "--format=%(refname)").split()
        for ref in refs:
            listed = user_git(store, "ls-tree", "-r", "-z", "--name-only", ref)
            paths.update(name for name in listed.split("\0") if name)
    return paths


@pytest.mark.e2e
def test_a_data_folder_inside_the_session_folder_is_left_out(tmp_path: Path) -> None:
    work = tmp_path / "work"
    _repository(work)
    data = work / "mdata"
    on = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1", "MAKA_WORKSPACE_CHECKPOINTS": "on"}
    first = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "write a.md saying 1"],
        data,
        env=on,
    )
    assert first.returncode == 0, first.stderr
    session = json.loads(maka(["sessions", "--json"], data).stdout)["sessions"][0]["sessionId"]
    again = ["run", "--session", session, "--permission-mode", "auto"]
    assert maka([*again, "write b.md saying 2"], data, env=on).returncode == 0
    paths = _snapshot_paths(data)
    assert {"a.md", "b.md", "app.py", "draft.txt"} <= paths, paths
    assert not [path for path in paths if path.startswith("mdata/")], sorted(paths)[:5]
    # A crash after a write's outcome is committed: nothing outside the data folder changed,
    # so Safe resume continues (the ledger's own change was drift, and it always parked).
    killed = maka([*again, "write c.md saying 3"], data, env={**on, "MAKA_FAILPOINT": "P5"})
    assert killed.returncode == -9, killed.stderr
    plan = maka(["plan", session, "--json"], data, env=on)
    body = json.loads(plan.stdout)
    assert body["disposition"] == "continue", plan.stdout
    assert "workspace_drift" not in plan.stdout
    status = user_git(work, "status", "--porcelain").splitlines()
    assert status[:2] == [" M app.py", "?? a.md"]
    # The data folder Maka made ignores itself, as a virtualenv does: the ledger (prompts,
    # tools' output) is not one `git add -A` away from a commit.
    assert not [line for line in status if "mdata" in line], status
    assert (data / ".gitignore").read_text() == "*\n"


def _ignored(folder: Path, rule: str, path: str) -> bool:
    """Whether ``git check-ignore`` in a repository at ``folder`` with ``rule`` as its only
    exclude rule ignores ``path`` (a folder made there)."""
    (folder / ".git" / "info" / "exclude").write_text(
        rule, encoding="utf-8", errors="surrogateescape"
    )
    done = subprocess.run(
        ["git", "check-ignore", "-q", "--no-index", "--", path],
        cwd=folder,
        capture_output=True,
        check=False,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(folder.parent)},
    )
    return done.returncode == 0


_NAME = st.text(
    st.characters(codec="utf-8", exclude_characters="/\0\n\r"),
    min_size=1,
    max_size=12,
).filter(lambda name: name not in (".", "..", ".git"))


@settings(max_examples=40, deadline=None)
@given(parts=st.lists(_NAME, min_size=1, max_size=3), sibling=_NAME)
def test_the_rule_ignores_the_data_folder_and_nothing_beside_it(
    tmp_path_factory: pytest.TempPathFactory, parts: list[str], sibling: str
) -> None:
    folder = tmp_path_factory.mktemp("f")
    user_git(folder, "init", "-q")
    data = folder.joinpath(*parts)
    data.mkdir(parents=True, exist_ok=True)
    rule = data_folder_rule(folder, data)
    assert rule.startswith("/") and rule.endswith("/\n")
    relative = "/".join(parts)
    assert _ignored(folder, rule, relative + "/runtime.sqlite")
    # A name beside it (a different last part, the same parent) is not ignored.
    beside = [*parts[:-1], parts[-1] + sibling]
    (folder.joinpath(*beside)).mkdir(parents=True, exist_ok=True)
    assert not _ignored(folder, rule, "/".join(beside) + "/x")
    # Nothing when the data folder is not strictly inside the folder.
    assert data_folder_rule(data, folder) == ""
    # The data folder is the folder itself: its own entries, nothing of the user's.
    same = data_folder_rule(folder, folder)
    for own in ("runtime.sqlite", "runtime.sqlite-wal", "checkpoints/x.git/HEAD", "logs/a.log"):
        assert _ignored(folder, same, own), own
    assert not _ignored(folder, same, "app.py")


def test_the_data_folders_own_entries_are_the_ones_maka_writes() -> None:
    """The rules for a data folder that is the session folder itself name every entry Maka
    keeps at the top of its data folder (a new one must be added there too)."""
    from app.host.ipc_endpoint import IPC_DIR_NAME
    from app.host.resume_verdicts import VERDICTS_FILE
    from runtime.continuation.lifecycle_log import LIFECYCLE_LOG
    from runtime.tools.process_tree import BACKGROUND_SHELLS_FILE
    from storage.checkpoints.checkpoint_store import CHECKPOINTS_DIR
    from storage.instance_lock import LOCK_FILE_NAME
    from storage.ledger.database_choice import SETTINGS_FILE
    from storage.ledger.sqlite_connection import DATABASE_NAME

    rules = data_folder_rule(Path("/x"), Path("/x")).splitlines()
    for name in (
        f"/{IPC_DIR_NAME}/",
        f"/{VERDICTS_FILE}",
        f"/{LIFECYCLE_LOG.parts[0]}/",
        f"/{BACKGROUND_SHELLS_FILE}",
        f"/{CHECKPOINTS_DIR}/",
        f"/{LOCK_FILE_NAME}",
        f"/{SETTINGS_FILE}",
        f"/{DATABASE_NAME}",
    ):
        assert name in rules, name
