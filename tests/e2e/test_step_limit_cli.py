"""The step limit of a turn: a setting of ``maka run`` / ``tui`` / ``resume`` (``--max-steps``),
at least 100 by default, and a turn that reaches it ends with a coded notice, never silently."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers.maka_run import committed_runs, maka, scripted_env, shape, write_script

pytestmark = pytest.mark.e2e


def _listing_steps(count: int) -> list[dict[str, Any]]:
    """``count`` model steps that each list the folder, then a closing text."""
    steps: list[dict[str, Any]] = [
        {"toolCalls": [{"id": f"l{index}", "name": "list_dir", "args": {"path": "."}}]}
        for index in range(count)
    ]
    return [*steps, {"text": "Listed everything."}]


def _model_steps(events: list[Any]) -> int:
    return sum(1 for event in events if shape(event) == "call")


def test_reaching_max_steps_ends_the_turn_with_a_coded_notice(tmp_path: Path) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    script = write_script(tmp_path / "script.json", [_listing_steps(30)])
    result = maka(
        ["run", "--cwd", str(workspace), "--max-steps", "5", "list it all"],
        tmp_path / "data",
        env=scripted_env(script),
    )
    assert result.returncode == 0, result.stderr
    assert "[step_limit] the turn stopped at its step limit of 5 model steps" in result.stdout
    assert "notice [step_limit]" in result.stderr and "--max-steps" in result.stderr
    assert "Listed everything." not in result.stdout
    [(header, events)] = committed_runs(tmp_path / "data")
    assert header.status == "completed"
    assert _model_steps(events) == 5
    terminal = events[-1]
    assert terminal["actions"]["stateDelta"]["stopReason"] == "step_limit"
    content = terminal.get("content")
    assert content is not None and content["kind"] == "error"
    assert content["code"] == "step_limit"


def test_the_default_limit_lets_a_turn_of_120_steps_finish(tmp_path: Path) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    script = write_script(tmp_path / "script.json", [_listing_steps(120)])
    result = maka(
        ["run", "--cwd", str(workspace), "list it all"],
        tmp_path / "data",
        env=scripted_env(script),
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    assert "Listed everything." in result.stdout
    assert "step_limit" not in result.stdout + result.stderr
    [(_header, events)] = committed_runs(tmp_path / "data")
    assert _model_steps(events) == 120
    assert events[-1]["actions"]["stateDelta"].get("stopReason") != "step_limit"


@pytest.mark.parametrize("command", ["run", "tui", "resume"])
@pytest.mark.parametrize("value", ["0", "-3", "100001", "many"])
def test_an_invalid_max_steps_is_a_usage_error(tmp_path: Path, command: str, value: str) -> None:
    extra = {"run": ["--cwd", str(tmp_path), "hi"], "tui": [], "resume": ["sess-x"]}[command]
    result = maka([command, f"--max-steps={value}", *extra], tmp_path / "data")
    assert result.returncode == 2
    assert "[usage_invalid]" in result.stderr and "--max-steps" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "data" / "runtime.sqlite").exists()


def test_tui_applies_max_steps_to_its_turns(tmp_path: Path) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    script = write_script(tmp_path / "script.json", [_listing_steps(10)])
    result = maka(
        ["tui", "--cwd", str(workspace), "--max-steps", "3", "--permission-mode", "auto"],
        tmp_path / "data",
        env=scripted_env(script),
        stdin="list it all\n/quit\n",
    )
    assert result.returncode == 0, result.stderr
    assert "[step_limit]" in result.stdout
    [(_header, events)] = committed_runs(tmp_path / "data")
    assert _model_steps(events) == 3
