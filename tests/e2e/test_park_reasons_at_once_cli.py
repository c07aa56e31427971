"""Every park reason that holds is said at once (docs/design/codes.md, docs/design/recovery.md
section 6), end to end: a real ``maka run`` with checkpoints at the product default killed with
SIGKILL while a tool call ran, the folder changed afterwards, then ``maka plan`` / ``maka resume``
(scripted provider, real tools, real store, the real ``git``). The unknown outcome and the changed
files are listed together, so settling the call is not followed by a second, unannounced park."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


def _script(call: dict[str, Any]) -> list[list[dict[str, Any]]]:
    steps: list[dict[str, Any]] = [{"text": "Working.", "toolCalls": [call]}]
    if call["name"] == "read_file":
        # The run's first snapshot goes on while read-only calls run; a call that may write
        # waits for it, even one refused before it runs (here: its arguments are invalid). So
        # the folder's snapshot is recorded before the read the run is killed in.
        refused = {"id": "c0", "name": "write_file", "args": {}}
        steps.insert(0, {"text": "Preparing.", "toolCalls": [refused]})
    return [[*steps, {"text": "Done."}, {"text": "Onward."}]]


READ = {"id": "c1", "name": "read_file", "args": {"path": "a.txt"}}
WRITE = {"id": "c1", "name": "write_file", "args": {"path": "a.txt", "content": "new\n"}}
BASH = {"id": "c1", "name": "bash", "args": {"command": "echo x >> count.txt"}}


class Drill:
    def __init__(self, tmp_path: Path, call: dict[str, Any], failpoint: str = "P3") -> None:
        self.data = tmp_path / "data"
        self.work = tmp_path / "work"
        self.work.mkdir(parents=True)
        (self.work / "a.txt").write_text("alpha\n")
        (self.work / "b.txt").write_text("beta\n")
        self.env = scripted_env(write_script(tmp_path / "script.json", _script(call)))
        self.env.pop("MAKA_WORKSPACE_CHECKPOINTS")  # the product's default: on
        self.env["MAKA_RUNTIME_SAFE_BOUNDARY_RESUME"] = "1"
        args = ["run", "--cwd", str(self.work), "--permission-mode", "auto", "go"]
        killed = maka(args, self.data, env={**self.env, "MAKA_FAILPOINT": failpoint})
        assert killed.returncode == -9, killed.stderr  # SIGKILL while the call ran
        self.session = committed_runs(self.data)[0][0].session_id

    def json(self, *args: str) -> tuple[int, dict[str, Any]]:
        result = maka([*args, "--json"], self.data, env=self.env)
        assert result.stdout.strip(), result.stderr
        return result.returncode, json.loads(result.stdout)

    def text(self, *args: str) -> str:
        return maka(list(args), self.data, env=self.env).stdout


def test_an_unknown_outcome_and_changed_files_are_said_together(tmp_path: Path) -> None:
    drill = Drill(tmp_path, READ)
    (drill.work / "b.txt").write_text("edited while Maka was stopped\n")

    for command in ("plan", "resume"):
        code, parked = drill.json(command, drill.session)
        assert code == 3, parked
        assert parked["rejectionReasons"] == ["dangling_tool_state", "workspace_drift"]
        drift = [d for d in parked["diagnostics"] if d["code"] == "workspace_drift"]
        assert drift[0]["detail"]["changedPaths"] == [{"path": "b.txt", "change": "modified"}]
        assert "workspaceOptions" not in parked  # the call must be settled first
        assert parked["laterWorkspaceOptions"] == ["isolated_restore", "rebaseline"]
    assert len(committed_runs(drill.data)) == 1  # nothing was started

    text = drill.text("plan", drill.session)
    assert "[warn] dangling_tool_state:" in text and "[warn] workspace_drift:" in text
    assert "modified b.txt" in text
    assert "Safe resume can then continue from there." not in text
    assert "The other reasons above still hold after that." in text
    assert (
        "The folder needs your decision too: once the other reasons above are cleared, continue "
        f"in a restored copy (maka resume {drill.session} --restore-to [DIR]) or with your "
        f"current files (maka resume {drill.session} --rebaseline)."
    ) in text

    # Settling the call leaves exactly the park that was announced, now with its two ways.
    settled = maka(["settle", drill.session, "c1", "--ran"], drill.data, env=drill.env)
    assert settled.returncode == 0, settled.stderr
    code, parked = drill.json("plan", drill.session)
    assert code == 3 and parked["rejectionReasons"] == ["workspace_drift"]
    assert parked["workspaceOptions"] == ["isolated_restore", "rebaseline"]
    code, body = drill.json("resume", drill.session, "--rebaseline")
    assert code == 0, body
    assert body["continuation"]["workspaceDecision"] == "rebaseline"


def test_a_command_cut_short_also_says_the_snapshot_is_stale(tmp_path: Path) -> None:
    """The stale snapshot is said with the unknown outcome. Answering whether the command ran
    also takes the folder as it is now, so no decision about the files is announced for
    later: the answer is the last thing Safe resume needs."""
    drill = Drill(tmp_path, BASH)
    (drill.work / "b.txt").write_text("edited while Maka was stopped\n")
    code, parked = drill.json("plan", drill.session)
    assert code == 3
    assert parked["rejectionReasons"] == ["dangling_tool_state", "workspace_checkpoint_stale"]
    assert "laterWorkspaceOptions" not in parked
    codes = [d["code"] for d in parked["diagnostics"]]
    assert codes[-1] == "workspace_settle_takes_folder"
    text = drill.text("plan", drill.session)
    assert "The folder needs your decision too" not in text
    assert "Safe resume can then continue from there." in text
    assert (
        "Answering also takes the folder as it is now as the new starting point; 1 file "
        "changed since the last snapshot: b.txt."
    ) in text
    # A decision never waives the unknown outcome.
    code, refused = drill.json("resume", drill.session, "--rebaseline")
    assert code == 3 and refused["rejectionReasons"] == ["dangling_tool_state"]
    assert len(committed_runs(drill.data)) == 1

    # As announced: once answered, nothing about the files stands in the way.
    settled = maka(["settle", drill.session, "c1", "--not-run"], drill.data, env=drill.env)
    assert settled.returncode == 0, settled.stderr
    code, body = drill.json("resume", drill.session)
    assert code == 0, body
    assert body["disposition"] == "continue"


def test_the_tui_says_what_answering_does_to_the_folder_when_it_opens(tmp_path: Path) -> None:
    """The TUI's opening description of the park says what /settle also does to the folder
    and that Safe resume can then continue, as /resume and maka plan say it (before, it said
    "The other reasons above still hold after that.", which the answer made untrue)."""
    drill = Drill(tmp_path, BASH)
    (drill.work / "b.txt").write_text("edited while Maka was stopped\n")
    opened = maka(["tui", "--session", drill.session], drill.data, env=drill.env, stdin="/quit\n")
    assert opened.returncode == 0, opened.stderr
    opening = opened.stdout.split("you>")[0]
    assert "ended before it finished, and Safe resume cannot continue it" in opening
    assert "\n  /settle c1 ran\n  /settle c1 not-run\n" in opening, opening
    assert "(a note of yours may follow either on its line). Safe resume can then continue" in (
        opening
    )
    assert "The other reasons above still hold after that." not in opening
    assert (
        "Answering also takes the folder as it is now as the new starting point; 1 file "
        "changed since the last snapshot: b.txt."
    ) in opening


def test_confirming_a_write_that_did_not_happen_says_it_takes_the_folder(tmp_path: Path) -> None:
    """A write killed before it wrote (P2: recovery finds the file as it was) and a file edited
    afterwards: confirming that the write did not happen also takes the folder as it is, so
    maka plan says so and announces no decision about the files; once confirmed, Safe resume
    continues."""
    drill = Drill(tmp_path, WRITE, failpoint="P2")
    (drill.work / "b.txt").write_text("edited while Maka was stopped\n")
    code, parked = drill.json("plan", drill.session)
    assert code == 3
    assert parked["rejectionReasons"] == ["dangling_tool_state", "workspace_drift"]
    assert "laterWorkspaceOptions" not in parked
    text = drill.text("plan", drill.session)
    assert "the write did not happen. Confirm that on the record" in text
    assert (
        "Answering also takes the folder as it is now as the new starting point; 1 file "
        "changed since the last snapshot: b.txt."
    ) in text
    assert "The folder needs your decision too" not in text
    settled = maka(["settle", drill.session, "c1", "--not-run"], drill.data, env=drill.env)
    assert settled.returncode == 0, settled.stderr
    code, body = drill.json("resume", drill.session)
    assert code == 0, body
