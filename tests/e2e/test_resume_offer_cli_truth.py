"""What the terminal offers after a stop is what the planner decides (the real ``maka``):
``maka tui`` offers ``/resume`` only when Safe resume would continue (a damaged record shows its
park instead), and ``maka resume`` says that tools needing permission are refused without a
terminal only when the continuation is about to run, never above a park."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.park_guidance import DAMAGED_RECORD_REASON
from tests.e2e.test_context_overflow_resume_cli import _overflowed
from tests.e2e.test_damaged_ledger_park_words_cli import _damaged_session, _orphan
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = pytest.mark.e2e

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
NO_TERMINAL_NOTE = "no terminal to ask on"
OFFER = "type /resume"
SCRIPT = [
    [
        {
            "text": "Listing.",
            "toolCalls": [{"id": "c1", "name": "list_dir", "args": {"path": "."}}],
        },
        {"text": "Listed."},
    ]
]


def _killed_after_a_listing(tmp_path: Path) -> tuple[Path, str, dict[str, str]]:
    """A run killed by SIGKILL before its ending was committed (P8): Safe resume continues."""
    work = tmp_path / "work"
    work.mkdir()
    env = {**scripted_env(write_script(tmp_path / "script.json", SCRIPT)), **FLAG}
    data = tmp_path / "data"
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "list"]
    killed = maka(args, data, env={**env, "MAKA_FAILPOINT": "P8"})
    assert killed.returncode == -9, killed.stderr
    return data, committed_runs(data)[0][0].session_id, env


def test_the_tui_on_a_damaged_run_shows_the_park_and_does_not_offer_resume(
    tmp_path: Path,
) -> None:
    data, session, _, env = _damaged_session(tmp_path, _orphan)
    opened = maka(["tui", "--session", session], data, env=env, stdin="/quit\n")
    assert opened.returncode == 0, opened.stderr
    assert OFFER not in opened.stdout, opened.stdout
    assert "Safe resume cannot continue it" in opened.stdout
    assert "dangling_tool_state" in opened.stdout
    assert DAMAGED_RECORD_REASON in opened.stdout
    assert "/settle" not in opened.stdout.split("Safe resume cannot continue it")[1]


def test_the_tui_offers_resume_when_the_planner_would_continue(tmp_path: Path) -> None:
    data, session, env = _killed_after_a_listing(tmp_path)
    opened = maka(["tui", "--session", session], data, env=env, stdin="/quit\n")
    assert opened.returncode == 0, opened.stderr
    assert OFFER in opened.stdout, opened.stdout
    assert "cannot continue it" not in opened.stdout


def test_resume_says_nothing_about_permissions_above_a_park(tmp_path: Path) -> None:
    data, env = _overflowed(tmp_path, None)
    session = committed_runs(data)[0][0].session_id
    parked = maka(["resume", session], data, env=env)
    assert parked.returncode == 3, parked.stderr
    assert NO_TERMINAL_NOTE not in parked.stderr, parked.stderr


def test_resume_says_tools_are_refused_without_a_terminal_when_it_runs(tmp_path: Path) -> None:
    data, session, env = _killed_after_a_listing(tmp_path)
    resumed = maka(["resume", session], data, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert NO_TERMINAL_NOTE in resumed.stderr, resumed.stderr
