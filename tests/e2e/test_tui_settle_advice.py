"""The TUI's /settle advice after a crash is paste-safe: each command is whole on a line of its
own (pasting the old "/settle c1 ran (or not-run) [NOTE]" recorded "ran" with the permanent
note "(or not-run) [NOTE]"), and /settle refuses a note that is the form's placeholder text,
recording nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = pytest.mark.e2e

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
SCRIPT: list[list[dict[str, Any]]] = [
    [
        {
            "text": "Counting.",
            "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "echo x >> count.txt"}}],
        },
        {"text": "Counted once."},
    ],
]


def _crashed_session(tmp_path: Path) -> tuple[Path, dict[str, str], str]:
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    env = {**scripted_env(write_script(tmp_path / "script.json", SCRIPT)), **FLAG}
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "count once"]
    assert maka(args, data, env={**env, "MAKA_FAILPOINT": "P4"}).returncode == -9
    return data, env, committed_runs(data)[0][0].session_id


def _attested(data: Path) -> bool:
    return any(
        "attestedAt" in (event.get("actions") or {}).get("toolRecovery", {}).get("payload", {})
        for _, events in committed_runs(data)
        for event in events
    )


def test_the_advice_lines_paste_as_they_are_and_placeholders_are_refused(tmp_path: Path) -> None:
    data, env, _session = _crashed_session(tmp_path)
    pasted = [
        "/settle c1 ran (or not-run) [NOTE]",  # the advice as it was printed
        "/settle c1 ran [NOTE]",
        "/settle c1 not-run [NOTE] checked",
    ]
    result = maka(
        ["tui", "--session", committed_runs(data)[0][0].session_id, "--permission-mode", "auto"],
        data,
        env=env,
        stdin="/resume\n" + "\n".join(pasted) + "\n/quit\n",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # The commands to paste, each whole on a line of its own (opening and /resume both say it).
    assert lines.count("  /settle c1 ran") == 2 and lines.count("  /settle c1 not-run") == 2
    assert "a note of yours may follow either on its line" in result.stdout
    assert "[NOTE]" not in result.stdout.split("not recorded")[0]
    assert result.stdout.count("is the form's placeholder, not a note of yours") == len(pasted)
    assert "recorded: you confirmed" not in result.stdout
    assert not _attested(data)  # nothing recorded


def test_a_note_of_ones_own_is_recorded(tmp_path: Path) -> None:
    data, env, session = _crashed_session(tmp_path)
    result = maka(
        ["tui", "--session", session, "--permission-mode", "auto"],
        data,
        env=env,
        stdin="/settle c1 ran count.txt has [NOTE] in it\n/quit\n",
    )
    assert result.returncode == 0, result.stderr
    assert "recorded: you confirmed that bash c1 ran" in result.stdout
    assert _attested(data)
