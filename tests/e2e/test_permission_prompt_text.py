"""The terminal's permission question shows the whole command, as it is.

The real ``maka run`` with the scripted provider asks about a long bash command that hides an
erasing escape sequence (``\\r\\x1b[2K``) in the middle: the question must print every character
of it (wrapped), the control characters as visible pictures and no raw escape byte at all, and
say that commands can change files anywhere the user can. ``auto`` mode says so too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.commands.terminal_transcript import permission_question_text
from runtime.agent.permission_policy import PermissionQuestion
from tests.helpers.maka_run import maka, scripted_env, write_script

pytestmark = pytest.mark.e2e

TAIL = "; echo the-very-end-of-the-command"
COMMAND = "echo start " + " ".join(f"word{i:04d}" for i in range(200)) + "\r\x1b[2K" + TAIL
WARNING = "Commands can change files anywhere your user account can."


def _script(tmp_path: Path) -> Path:
    call = {"id": "c1", "name": "bash", "args": {"command": COMMAND}}
    return write_script(tmp_path / "script.json", [[{"toolCalls": [call]}, {"text": "ok"}]])


def _unwrapped(stdout: str) -> str:
    """The question's command lines joined back (wrapping added newlines and indents)."""
    lines = stdout.split("[permission] bash wants to:\n", 1)[1].split("\n")
    body = []
    for line in lines:
        if not line.startswith("    "):
            break
        body.append(line.removeprefix("      ") if line.startswith("      ") else line[4:])
    return "".join(body)


def test_the_terminal_question_shows_the_whole_command_with_visible_controls(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    result = maka(
        ["run", "--cwd", str(workspace), "--permission-mode", "ask", "go"],
        tmp_path / "data",
        env=scripted_env(_script(tmp_path)),
        stdin="n\n",
    )
    assert result.returncode == 0, result.stderr
    assert len(COMMAND) > 1000
    assert "\x1b" not in result.stdout and "\r" not in result.stdout
    shown = _unwrapped(result.stdout)
    assert shown == "run: " + COMMAND.replace("\r", "<CR>").replace("\x1b", "<ESC>")
    assert TAIL in shown.replace("\n", "")
    question = result.stdout.split("[permission] bash wants to:")[1].split("Allow?")[0]
    assert "more character" not in question  # nothing was shortened
    # The card line before it is shortened, and says so.
    assert re.search(r"\[tool\] bash echo start .*… \(\d+ more characters\)\n", result.stdout)
    assert f"  {WARNING}\nAllow? [y/N]" in result.stdout
    assert all(len(line) <= 100 for line in question.splitlines()), "wrapped"


def test_auto_mode_says_commands_can_change_files_anywhere(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    result = maka(
        ["run", "--cwd", str(workspace), "--permission-mode", "auto", "hello"], tmp_path / "data"
    )
    assert result.returncode == 0, result.stderr
    assert len(re.findall(WARNING, result.stderr)) == 1


def test_a_question_wraps_to_the_width_and_marks_continuations() -> None:
    question = PermissionQuestion("p", "s", "r", "bash", "c", "run: " + "x" * 150 + "\nls")
    text = permission_question_text(question, 60)
    lines = text.split("\n")
    assert lines[0] == "[permission] bash wants to:"
    assert lines[1].startswith("    run: xxx") and len(lines[1]) <= 59
    assert lines[2].startswith("      x")  # a continuation of the same command line
    assert "    ls" in lines
    assert lines[-2:] == [f"  {WARNING}", "Allow? [y/N] "]
    other = PermissionQuestion("p", "s", "r", "write_file", "c", "write notes.txt")
    assert WARNING not in permission_question_text(other, 80)


def test_the_terminal_transcript_never_prints_a_raw_escape(tmp_path: Path) -> None:
    """``maka tui``: the streamed turn and ``/transcript`` show the command's and the model's
    control characters by name; none reaches the terminal raw."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    call = {"id": "c1", "name": "bash", "args": {"command": "printf 'a\\033[2Kb'\r\x1b[2Kls"}}
    script = write_script(
        tmp_path / "script.json", [[{"toolCalls": [call]}, {"text": "done\x1b]0;title\x07"}]]
    )
    chat = maka(
        ["tui", "--cwd", str(workspace), "--permission-mode", "auto"],
        tmp_path / "data",
        env=scripted_env(script),
        stdin="go\n/transcript\n/quit\n",
    )
    assert chat.returncode == 0, chat.stderr
    assert "\x1b" not in chat.stdout and "\x07" not in chat.stdout and "\r" not in chat.stdout
    # The streamed card and /transcript's card:
    assert chat.stdout.count("[tool] bash printf 'a\\033[2Kb'<CR><ESC>[2Kls") == 2
    assert "done<ESC>]0;title<BEL>" in chat.stdout
    assert "\x1b" not in chat.stderr
    assert len(re.findall(WARNING, chat.stderr)) == 1
