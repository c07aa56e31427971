"""A checkpoint store whose objects are gone (a manual ``git gc --prune=now`` in it, objects
removed by hand), end to end: a real ``maka run`` with checkpoints at the product default killed
with SIGKILL at a failpoint, the store damaged, then ``maka plan`` / ``maka resume`` (scripted
provider, real tools, real store, the real ``git``). The park names the missing snapshot and
leads on: the user can continue with the current files (docs/design/workspace.md section 4)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from storage.checkpoints.checkpoint_retention import run_retention
from storage.checkpoints.checkpoint_store import GitCheckpointStore
from storage.ledger.ledger_store import open_store
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]

SCRIPT = [
    [
        {
            "text": "Counting.",
            "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "echo x >> count.txt"}}],
        },
        {"text": "Counted once."},
        {"text": "Carried on."},
    ]
]


class Drill:
    def __init__(self, tmp_path: Path) -> None:
        self.data = tmp_path / "data"
        self.work = tmp_path / "work"
        self.work.mkdir(parents=True)
        (self.work / "a.txt").write_text("alpha\n")
        self.env = scripted_env(write_script(tmp_path / "script.json", SCRIPT))
        self.env.pop("MAKA_WORKSPACE_CHECKPOINTS")  # the product's default: on
        self.env["MAKA_RUNTIME_SAFE_BOUNDARY_RESUME"] = "1"

    def run(self, failpoint: str, *args: str) -> None:
        result = maka(
            ["run", *args, "--permission-mode", "auto", "count once"],
            self.data,
            env={**self.env, "MAKA_FAILPOINT": failpoint},
        )
        assert result.returncode == -9, result.stderr

    @property
    def session(self) -> str:
        return committed_runs(self.data)[0][0].session_id

    def remove_every_object(self) -> None:
        [store] = (self.data / "checkpoints").glob("*.git")
        for path in (store / "objects").rglob("*"):
            if path.is_file() and path.parent.name != "info":
                path.unlink()

    def json(self, *args: str) -> tuple[int, dict[str, Any]]:
        result = maka([*args, "--json"], self.data, env=self.env)
        assert result.stdout.strip(), result.stderr
        return result.returncode, json.loads(result.stdout)


def test_a_pruned_store_parks_on_the_missing_snapshot_and_offers_the_current_files(
    tmp_path: Path,
) -> None:
    drill = Drill(tmp_path)
    drill.run("P8", "--cwd", str(drill.work))  # killed at the terminal event's commit
    listed = drill.json("checkpoints", drill.session)[1]
    assert [c["present"] for c in listed["runs"][0]["checkpoints"]] == [True, True]
    drill.remove_every_object()
    (drill.work / "a.txt").write_text("edited while Maka was stopped\n")

    for command in (["plan", drill.session], ["resume", drill.session]):
        code, parked = drill.json(*command)
        assert code == 3, parked
        assert parked["rejectionReasons"] == ["workspace_checkpoint_missing"], parked
        assert parked["workspaceOptions"] == ["rebaseline"]  # no snapshot left to copy
    text = maka(["plan", drill.session], drill.data, env=drill.env).stdout
    assert "The snapshot of the folder taken at the stop is gone or damaged." in text
    assert f"maka resume {drill.session} --rebaseline" in text
    assert "could not be inspected" not in text

    code, body = drill.json("resume", drill.session, "--rebaseline")
    assert code == 0, body
    assert body["status"] == "completed"
    assert body["continuation"]["workspaceDecision"] == "rebaseline"
    # The continuation's own snapshots are whole again.
    listed = drill.json("checkpoints", drill.session)[1]
    source, continuation = listed["runs"]
    assert [c["present"] for c in source["checkpoints"]] == [False, False]
    assert continuation["checkpoints"] and all(c["present"] for c in continuation["checkpoints"])
    assert (drill.work / "a.txt").read_text() == "edited while Maka was stopped\n"

    # Retention drops the refs that name gone commits (Git will not prune while they exist) and
    # keeps the whole ones.
    carrier = GitCheckpointStore(drill.data)
    [repository] = list(carrier.root.glob("*.git"))
    store = open_store(drill.data, read_only=True)
    try:
        result = run_retention(store, carrier)
    finally:
        store.close()
    assert result.errors == [] and result.pruned == [repository.name]
    gone = {c["checkpointRef"] for c in source["checkpoints"]}
    assert gone <= {entry.split(" ", 1)[1] for entry in result.deleted}
    kept = set(carrier.refs_in(repository))
    assert kept == {c["checkpointRef"] for c in continuation["checkpoints"]}


def test_a_new_message_after_the_damage_takes_whole_snapshots_again(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.run("P8", "--cwd", str(drill.work))
    drill.remove_every_object()
    drill.run("P8", "--session", drill.session)  # a new message, killed the same way
    listed = drill.json("checkpoints", drill.session)[1]
    latest = listed["runs"][-1]["checkpoints"]
    assert latest and all(c.get("present") for c in latest), latest
    code, body = drill.json("plan", drill.session)
    assert code == 0, body
    assert "workspace_verified" in [d["code"] for d in body["diagnostics"]]


def test_one_file_removed_from_the_store_parks_and_the_rebaseline_is_whole(
    tmp_path: Path,
) -> None:
    """Only the object of one file of the snapshot was removed by hand (its commit and folders
    are there): the snapshot can be neither compared nor copied, so it is missing; continuing
    with the current files takes a whole snapshot, though the store's index cache named the
    removed object."""
    drill = Drill(tmp_path)
    drill.run("P8", "--cwd", str(drill.work))
    carrier = GitCheckpointStore(drill.data)
    [repository] = list(carrier.root.glob("*.git"))
    newest = drill.json("checkpoints", drill.session)[1]["runs"][-1]["checkpoints"][-1]
    blob = subprocess.run(
        ["git", "--git-dir", str(repository), "rev-parse", f"{newest['treeId']}:a.txt"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (repository / "objects" / blob[:2] / blob[2:]).unlink()

    code, parked = drill.json("plan", drill.session)
    assert code == 3 and parked["rejectionReasons"] == ["workspace_checkpoint_missing"], parked
    assert parked["workspaceOptions"] == ["rebaseline"]
    code, body = drill.json("resume", drill.session, "--rebaseline")
    assert code == 0, body
    runs = committed_runs(drill.data)
    baseline = runs[1][1][0]["actions"]["workspaceBaseline"]
    identity = str(baseline["workspaceIdentity"])
    assert carrier.has_snapshot(identity, baseline["commitId"], baseline["treeId"])
    # The continuation's own snapshots after it are whole too (the index was rebuilt).
    for event in runs[1][1]:
        fact = (event.get("actions") or {}).get("workspaceCheckpoint")
        if fact is not None:
            assert carrier.has_snapshot(identity, fact["commitId"], fact["treeId"])


def test_every_surface_calls_a_snapshot_with_one_file_gone_missing(tmp_path: Path) -> None:
    """One file of the later snapshot (the one the tool call wrote) removed by hand from the
    store: ``maka checkpoints`` (text and JSON), ``maka doctor`` and ``maka plan`` all say
    that snapshot is missing and the earlier one, which never held that file, is present."""
    drill = Drill(tmp_path)
    drill.run("P8", "--cwd", str(drill.work))
    [repository] = list((drill.data / "checkpoints").glob("*.git"))
    listed = drill.json("checkpoints", drill.session)[1]
    rows = listed["runs"][0]["checkpoints"]
    assert [c["present"] for c in rows] == [True, True]
    first, second = rows

    def git(*args: str, input_ids: list[str] | None = None) -> str:
        return subprocess.run(
            ["git", "--git-dir", str(repository), *args],
            input=None if input_ids is None else "".join(f"{i}\n" for i in input_ids),
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def blobs(commit: str) -> set[str]:
        objects = git("rev-list", "--objects", "--no-walk", commit).split("\n")
        ids = [line.split(" ", 1)[0] for line in objects if line]
        kinds = git("cat-file", "--batch-check=%(objectname) %(objecttype)", input_ids=ids)
        return {line.split()[0] for line in kinds.splitlines() if line.endswith(" blob")}

    only_second = blobs(second["commitId"]) - blobs(first["commitId"])
    # (Less the store's record of permission bits, which names the new file too.)
    only_second.discard(git("rev-parse", f"{second['treeId']}:.maka/permissions").strip())
    assert len(only_second) == 1, only_second  # count.txt, written by the tool call
    [blob] = only_second
    (repository / "objects" / blob[:2] / blob[2:]).unlink()
    assert git("cat-file", "-t", second["commitId"]).strip() == "commit"  # commit and tree stay
    assert git("cat-file", "-t", second["treeId"]).strip() == "tree"

    listed = drill.json("checkpoints", drill.session)[1]
    assert [c["present"] for c in listed["runs"][0]["checkpoints"]] == [True, False]
    text = maka(["checkpoints", drill.session], drill.data, env=drill.env).stdout
    [first_line] = [line for line in text.splitlines() if first["checkpointRef"] in line]
    [second_line] = [line for line in text.splitlines() if second["checkpointRef"] in line]
    assert first_line.endswith("present") and second_line.endswith(
        "MISSING from the checkpoint store"
    )

    _, doctor = drill.json("doctor")
    audit = doctor["workspaceCheckpoints"]
    assert audit["facts"] == 2
    assert [m["checkpointRef"] for m in audit["missing"]] == [second["checkpointRef"]]
    problems = [p for p in doctor["problems"] if p["code"] == "workspace_checkpoint_missing"]
    assert len(problems) == 1 and second["checkpointRef"] in problems[0]["message"]

    code, parked = drill.json("plan", drill.session)
    assert code == 3 and parked["rejectionReasons"] == ["workspace_checkpoint_missing"], parked


def test_the_doctor_calls_only_the_newest_lost_snapshot_the_latest(tmp_path: Path) -> None:
    """With every object of the store gone, ``maka doctor`` said of each of a session's lost
    snapshots that "it is the session's latest snapshot"; only the newest is, and the others
    say that every later one is gone too and what a branch from them can take."""
    drill = Drill(tmp_path)
    drill.run("P8", "--cwd", str(drill.work))
    listed = drill.json("checkpoints", drill.session)[1]
    refs = [c["checkpointRef"] for c in listed["runs"][0]["checkpoints"]]
    assert len(refs) == 2, listed
    drill.remove_every_object()

    code, report = drill.json("doctor")
    assert code == 1
    by_ref = {
        ref: p["message"]
        for p in report["problems"]
        if p["code"] == "workspace_checkpoint_missing"
        for ref in refs
        if f"checkpoint {ref} " in p["message"]
    }
    assert sorted(by_ref) == sorted(refs), report["problems"]
    assert "it is the session's latest snapshot" in by_ref[refs[-1]]
    assert "it is the session's latest snapshot" not in by_ref[refs[0]]
    assert "so are those of every later snapshot of the session" in by_ref[refs[0]]
    assert f"maka branch {drill.session} --current-files" in by_ref[refs[0]]
