"""``maka sessions`` names ``maka resume`` for a session it would carry on only while Safe resume
is on (the variable, else the desktop's setting): off, ``maka resume`` can only refuse, and the
listing says once that Safe resume is off instead. The real command on a real data directory
holding a run killed with SIGKILL after its tool call, then recovered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.commands.sessions_cmd import SAFE_RESUME_OFF
from tests.helpers.maka_run import maka

pytestmark = pytest.mark.e2e

FLAG = "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME"


def interrupted_session(tmp_path: Path) -> tuple[Path, str]:
    """A data directory whose one session ``maka resume`` would carry on, and its id."""
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "write hello.txt saying hi"]
    killed = maka(args, data, env={"MAKA_FAILPOINT": "P6", "MAKA_WORKSPACE_CHECKPOINTS": "off"})
    assert killed.returncode == -9, killed.stderr
    [row] = json.loads(maka(["sessions", "--json"], data).stdout)["sessions"]
    session = str(row["sessionId"])
    maka(["plan", session], data)  # owns the data directory: startup recovery ends the run
    [row] = json.loads(maka(["sessions", "--json"], data).stdout)["sessions"]
    assert row["resumable"] is True, row
    return data, session


@pytest.mark.parametrize(
    ("variable", "setting", "on"),
    [
        (None, None, False),
        ("0", None, False),
        ("1", None, True),
        (None, "1", True),
        (None, "0", False),
        ("0", "1", False),  # the variable, when set, wins
        ("1", "0", True),
    ],
)
def test_the_resume_hint_follows_safe_resume(
    tmp_path: Path, variable: str | None, setting: str | None, on: bool
) -> None:
    data, session = interrupted_session(tmp_path)
    if setting is not None:
        (data / "settings.json").write_text(json.dumps({"safe_resume": setting}))
    env = {FLAG: variable} if variable is not None else {}
    listed = maka(["sessions"], data, env=env)
    assert listed.returncode == 0, listed.stderr
    hint = f"(maka resume {session} continues it or says what holds it)"
    assert (hint in listed.stdout) is on, listed.stdout
    assert (SAFE_RESUME_OFF in listed.stdout) is not on, listed.stdout
    # ... and maka resume agrees: it refuses exactly when the listing says Safe resume is off.
    planned = maka(["plan", session, "--json"], data, env=env)
    refused = "resume_feature_disabled" in json.loads(planned.stdout)["rejectionReasons"]
    assert refused is not on


def test_no_word_about_safe_resume_when_nothing_could_be_resumed(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    assert maka(["run", "--cwd", str(work), "list files"], data).returncode == 0
    listed = maka(["sessions"], data)
    assert "completed" in listed.stdout
    assert "Safe resume" not in listed.stdout and "maka resume" not in listed.stdout


def test_the_hint_does_not_promise_a_continuation_the_resume_parks(tmp_path: Path) -> None:
    """A command killed before its result was recorded (P3): maka resume parks on its unknown
    outcome, so the listing may not say that maka resume continues the session, only that it
    is the command to try (it says what holds the session)."""
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    script = tmp_path / "script.json"
    call = {"id": "c1", "name": "bash", "args": {"command": "echo x >> count.txt"}}
    script.write_text(json.dumps({"turns": [[{"text": "Counting.", "toolCalls": [call]}]]}))
    env = {"MAKA_PROVIDER": "scripted", "MAKA_SCRIPT_FILE": str(script), FLAG: "1"}
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "count"]
    assert maka(args, data, env={**env, "MAKA_FAILPOINT": "P3"}).returncode == -9
    [row] = json.loads(maka(["sessions", "--json"], data).stdout)["sessions"]
    session = str(row["sessionId"])
    resumed = maka(["resume", session], data, env=env)
    assert resumed.returncode == 3, resumed.stdout + resumed.stderr
    assert "dangling_tool_state" in resumed.stdout
    listed = maka(["sessions"], data, env=env)
    assert f"(maka resume {session} continues it)" not in listed.stdout, listed.stdout
    assert f"(maka resume {session} continues it or says what holds it)" in listed.stdout


def test_the_tui_says_recovery_closed_the_run_before_what_it_found(tmp_path: Path) -> None:
    """A TUI opened on a session killed mid-turn: its own start closes the run, and says so
    before it describes the interrupted turn that closing left (not after, as if later)."""
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "write hello.txt saying hi"]
    killed = maka(args, data, env={"MAKA_FAILPOINT": "P6"})
    assert killed.returncode == -9, killed.stderr
    [row] = json.loads(maka(["sessions", "--json"], data).stdout)["sessions"]
    opened = maka(
        ["tui", "--session", str(row["sessionId"])],
        data,
        env={"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"},
        stdin="/quit\n",
    )
    assert opened.returncode == 0, opened.stderr
    out = opened.stdout
    closed = out.index("startup recovery closed 1 interrupted run(s)")
    assert closed < out.index("This session was interrupted"), out
    assert out.count("startup recovery closed") == 1
