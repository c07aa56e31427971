"""``maka import`` of a session with a Safe resume continuation checks the history the
continuation recorded it followed (its claim's source prefix digest), as it checks a branch's:
an export whose interrupted run was edited afterwards is refused and changes nothing, so no
model is ever given a history the continuation did not follow. The real ``maka`` throughout:
a run killed inside a command, settled, resumed, exported, edited, imported."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_resume_proven_writes import Drill
from tests.helpers.maka_run import maka

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]

BASH = {"id": "b1", "name": "bash", "args": {"command": "echo once >> count.txt"}}
STEPS: list[dict[str, Any]] = [{"text": "Counting.", "toolCalls": [BASH]}, {"text": "Done."}]


def test_an_edited_history_under_a_continuation_is_refused(tmp_path: Path) -> None:
    drill = Drill(tmp_path / "origin", STEPS)
    drill.run("P4")  # the command ran; its outcome was never recorded
    assert maka(["settle", drill.session, "b1", "--ran"], drill.data, env=drill.env).returncode == 0
    code, resumed = drill.resume()
    assert code == 0, resumed
    exported = tmp_path / "session.jsonl"
    args = ["export", drill.session, "-o", str(exported), "--no-checkpoints"]
    assert maka(args, drill.data, env=drill.env).returncode == 0

    intact = maka(["import", str(exported)], tmp_path / "intact", env=drill.env)
    assert intact.returncode == 0, intact.stdout + intact.stderr
    lines = exported.read_text(encoding="utf-8").splitlines()
    said = '"text":"do the work"'  # the interrupted run's user message, under the continuation
    [edited_at] = [i for i, line in enumerate(lines) if said in line]
    lines[edited_at] = lines[edited_at].replace(said, '"text":"do other work"')
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(lines) + "\n", encoding="utf-8")

    refused = maka(["import", str(edited)], tmp_path / "fresh", env=drill.env)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "[import_structure_invalid]" in refused.stderr, refused.stderr
    assert "is not the one the continuation recorded" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (tmp_path / "fresh").exists(), "a refused import changes nothing"
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "keep.txt").write_text("mine\n")
    again = maka(["import", str(edited)], existing, env=drill.env)
    assert again.returncode == 2, again.stderr
    assert sorted(p.name for p in existing.iterdir()) == ["keep.txt"], list(existing.iterdir())
    listed = maka(["sessions", "--json"], tmp_path / "intact")
    assert [s["sessionId"] for s in json.loads(listed.stdout)["sessions"]] == [drill.session]
