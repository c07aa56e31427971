"""Empty folders are part of a snapshot (docs/design/workspace.md section 1: everything under the
folder): captured, compared (a folder created or removed while stopped is drift) and restored, with
the real ``git``; the folder's own ignore rules still apply."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.ledger.checkpoint_ports import PathChange, TreeChange
from storage.checkpoints.checkpoint_store import GitCheckpointStore
from storage.sessions.workspace_identity import resolve_workspace_identity

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _dirs(folder: Path) -> set[str]:
    return {
        Path(here).relative_to(folder).as_posix()
        for here, _dirs, _files in os.walk(folder)
        if Path(here) != folder
    }


def test_empty_folders_are_captured_compared_and_restored(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "src" / "empty").mkdir(parents=True)
    (work / "only" / "nested" / "deeper").mkdir(parents=True)
    (work / "ignored").mkdir()
    (work / "only" / "nested" / "tmp").mkdir()  # ignored by a pattern, inside a new folder
    (work / "src" / "a.txt").write_text("alpha\n")
    (work / ".gitignore").write_text("ignored/\ntmp/\n")
    identity = resolve_workspace_identity(work).identity
    store = GitCheckpointStore(tmp_path / "data")
    snapshot = store.capture(work, identity, "refs/maka/s/r/1", "m")
    assert store.observe(work, identity).tree_id == snapshot.tree_id  # stable

    copy = tmp_path / "copy"
    store.materialize(identity, snapshot.tree_id, copy, "s")
    # (``.maka``: the copy's own workspace marker, never one from the snapshot.)
    assert _dirs(copy) == {
        ".maka",
        "src",
        "src/empty",
        "only",
        "only/nested",
        "only/nested/deeper",
    }
    assert (copy / "src" / "a.txt").read_text() == "alpha\n"

    # A folder made and one removed while the session was stopped: drift, named as folders.
    (work / "logs").mkdir()
    (work / "src" / "empty").rmdir()
    seen = store.observe(work, identity)
    assert seen.tree_id != snapshot.tree_id
    assert store.changes(identity, snapshot.tree_id, seen.tree_id) == [
        TreeChange("logs/", PathChange.ADDED),
        TreeChange("src/empty/", PathChange.DELETED),
    ]
    # A file put in an empty folder is the file's change only.
    (work / "src" / "empty").mkdir()
    (work / "logs").rmdir()
    (work / "only" / "nested" / "deeper" / "x.txt").write_text("x\n")
    seen = store.observe(work, identity)
    assert store.changes(identity, snapshot.tree_id, seen.tree_id) == [
        TreeChange("only/nested/deeper/x.txt", PathChange.ADDED),
    ]
    # An ignored empty folder is no change.
    (work / "only" / "nested" / "deeper" / "x.txt").unlink()
    (work / "ignored" / "more").mkdir()
    assert store.observe(work, identity).tree_id == snapshot.tree_id


NAMES = st.sampled_from(["a", "b", "c d", "é"])
PATHS = st.lists(NAMES, min_size=1, max_size=3).map("/".join)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(folders=st.sets(PATHS, max_size=5), files=st.sets(PATHS, max_size=3))
def test_any_folder_layout_round_trips(
    tmp_path_factory: pytest.TempPathFactory, folders: set[str], files: set[str]
) -> None:
    root = tmp_path_factory.mktemp("layout")
    work = root / "work"
    work.mkdir()
    for folder in sorted(folders):
        (work / folder).mkdir(parents=True, exist_ok=True)
    for name in sorted(files):
        target = work / name / "f.txt"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(name)
    identity = resolve_workspace_identity(work).identity
    store = GitCheckpointStore(root / "data")
    snapshot = store.capture(work, identity, "refs/maka/s/r/1", "m")
    copy = root / "copy"
    store.materialize(identity, snapshot.tree_id, copy, "s")
    assert _dirs(copy) == _dirs(work)
    assert store.observe(copy, resolve_workspace_identity(copy).identity).tree_id == (
        snapshot.tree_id
    )
