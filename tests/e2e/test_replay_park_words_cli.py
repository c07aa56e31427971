"""A history the model cannot be handed back parks Safe resume, and the real ``maka plan`` /
``maka resume`` say why in words, with the code: a real ``maka run`` killed with SIGKILL after
its tool call, exported, one of its entries put on the wrong side (a model reply recorded as the
tool's), imported into another data directory and planned there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.code_text import describe
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = pytest.mark.e2e

READ = {"id": "c1", "name": "read_file", "args": {"path": "a.txt"}}


def _tampered_session(tmp_path: Path) -> tuple[Path, str, str, dict[str, str]]:
    """A data directory holding an interrupted session whose model reply is recorded as the
    tool's, the session's id, that reply's event id, and the environment to run ``maka`` in."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    script = write_script(tmp_path / "script.json", [[{"text": "Working.", "toolCalls": [READ]}]])
    env = {**scripted_env(script), "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
    origin = tmp_path / "origin"
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "go"]
    killed = maka(args, origin, env={**env, "MAKA_FAILPOINT": "P6"})
    assert killed.returncode == -9, killed.stderr  # SIGKILL after the tool's result
    session = committed_runs(origin)[0][0].session_id
    exported = tmp_path / "session.jsonl"
    done = maka(["export", session, "-o", str(exported)], origin, env=env)
    assert done.returncode == 0, done.stderr
    lines = exported.read_text(encoding="utf-8").splitlines()
    model = '"role":"model"'
    reply = next(n for n, line in enumerate(lines) if '"text":"Working."' in line and model in line)
    lines[reply] = lines[reply].replace(model, '"role":"tool"')
    exported.write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = tmp_path / "data"
    imported = maka(["import", str(exported)], data, env=env)
    assert imported.returncode == 0, imported.stderr
    return data, session, json.loads(lines[reply])["id"], env


def test_plan_and_resume_say_why_the_history_cannot_be_replayed(tmp_path: Path) -> None:
    data, session, reply, env = _tampered_session(tmp_path)
    sentence = describe("unsupported_role").sentence
    for command in ("plan", "resume"):
        shown = maka([command, session], data, env=env)
        assert shown.returncode == 3, shown.stdout + shown.stderr
        assert "[error] runtime_ledger_unreadable:" in shown.stdout
        assert f"    - unsupported_role (event {reply}): {sentence}" in shown.stdout
        assert "provider replay" not in shown.stdout, "a code is not a reason a person can read"
        assert "Traceback" not in shown.stderr

    # The JSON keeps its fields as they were (the message names the code for tools).
    parked = json.loads(maka(["plan", session, "--json"], data, env=env).stdout)
    [diagnostic] = [d for d in parked["diagnostics"] if d["code"] == "unsupported_role"]
    assert diagnostic == {
        "code": "unsupported_role",
        "message": "generation 1: provider replay: unsupported_role",
        "eventId": reply,
    }
    assert "runtime_ledger_unreadable" in parked["rejectionReasons"]
    assert len(committed_runs(data)) == 1  # nothing was started
