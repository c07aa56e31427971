"""Two restores into one folder at the same moment (two ``maka branch --to DIR`` or ``maka resume
--restore-to DIR`` of two sessions, from two processes of one data folder): one makes its copy,
the other is refused with ``workspace_restore_target_not_empty``, and the copy holds the
winner's files and repository only. Real processes, real Git."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage.checkpoints.checkpoint_store import GitCheckpointStore
from tests.helpers.user_git import user_git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

_RESTORE = """
import json, os, sys, time
from pathlib import Path
from runtime.ledger.checkpoint_ports import CheckpointError
from storage.checkpoints.checkpoint_store import GitCheckpointStore
data, ws, tree, target, source, go = sys.argv[1:]
store = GitCheckpointStore(Path(data))
while not os.path.exists(go):
    time.sleep(0.001)
try:
    store.materialize(ws, tree, Path(target), "s-" + ws[-4:], source=Path(source))
except CheckpointError as error:
    print(json.dumps({"code": str(error.code)}))
else:
    print(json.dumps({"code": None}))
"""


def _repository(folder: Path, name: str) -> None:
    folder.mkdir()
    user_git(folder, "init", "-q")
    (folder / f"{name}.txt").write_text(f"{name}\n" * 2000)
    for index in range(40):
        (folder / f"{name}-{index}.txt").write_text(f"{name} {index}\n")
    user_git(folder, "add", ".")
    user_git(folder, "commit", "-q", "-m", f"commit of {name}")
    (folder / f"{name}.txt").write_text("changed\n")


def test_two_restores_into_one_empty_folder_never_mix(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = GitCheckpointStore(data)
    sources = {}
    for name, identity in (
        ("left", "workspace:v1:4a4a4a4a-1111-2222-3333-44445555aaaa"),
        ("right", "workspace:v1:4a4a4a4a-1111-2222-3333-44445555bbbb"),
    ):
        _repository(tmp_path / name, name)
        snapshot = store.capture(tmp_path / name, identity, f"refs/maka/{name}/r/1", "m")
        sources[name] = (identity, snapshot.tree_id)
    for round_ in range(4):
        target = tmp_path / f"copy{round_}"
        if round_ % 2:
            target.mkdir()  # an empty folder the user picked, as well as a new one
        go = tmp_path / f"go{round_}"
        racers = {
            name: subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _RESTORE,
                    str(data),
                    identity,
                    tree,
                    str(target),
                    str(tmp_path / name),
                    str(go),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name, (identity, tree) in sources.items()
        }
        time.sleep(1.0)  # both are waiting for the go
        go.write_text("")
        said = {}
        for name, racer in racers.items():
            out, err = racer.communicate(timeout=120)
            assert racer.returncode == 0, err
            said[name] = json.loads(out)["code"]
        winners = [name for name, code in said.items() if code is None]
        assert len(winners) == 1, said
        [loser] = [name for name in said if name not in winners]
        assert said[loser] == "workspace_restore_target_not_empty", said
        winner = winners[0]
        names = sorted(p.name for p in target.iterdir() if p.name not in (".git", ".maka"))
        assert names == sorted(p.name for p in (tmp_path / winner).iterdir() if p.name != ".git")
        assert (target / f"{winner}.txt").read_text() == "changed\n"
        assert user_git(target, "log", "--format=%s") == f"commit of {winner}\n"
