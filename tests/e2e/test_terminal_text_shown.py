"""What ``maka`` prints to a terminal shows control characters by name instead of acting on
them (app/visible_text.py, ``VisibleStream``): a file name in the user's folder, a message of
the record and a path in an error cannot retitle the terminal or erase what was printed. JSON
output is left as it is (its strings escape control characters themselves), and ``maka
timeline`` on a terminal keeps its own colours. Each case is the real command."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_workspace_checkpoints_cli import FLAG, Drill
from tests.helpers.maka_process import maka_executable
from tests.helpers.maka_run import maka

pytestmark = pytest.mark.e2e

TITLE = "bad\x1b]0;pwned\x07name"  # an OSC sequence: sets the terminal's title


def test_a_drifted_file_name_is_shown_not_sent_to_the_terminal(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.run("P8")
    (drill.work / TITLE).write_text("x")
    result = maka(["plan", drill.session], drill.data, env={**drill.env, **FLAG})
    assert result.returncode == 3, result.stderr
    assert "\x1b" not in result.stdout + result.stderr and "\x07" not in result.stdout
    # A name that does not print is quoted, its escapes written out (one line, nothing sent).
    assert "added    'bad\\x1b]0;pwned\\x07name'" in result.stdout, result.stdout

    as_json = maka(["plan", drill.session, "--json"], drill.data, env={**drill.env, **FLAG})
    diagnostics = json.loads(as_json.stdout)["diagnostics"]
    [drift] = [d for d in diagnostics if d["code"] == "workspace_drift"]
    assert drift["detail"]["changedPaths"] == [{"path": TITLE, "change": "added"}]


def test_a_path_in_an_error_is_shown_not_sent_to_the_terminal(tmp_path: Path) -> None:
    result = maka(["import", str(tmp_path / "x\x1b[2Jy.jsonl")], tmp_path / "data")
    assert result.returncode == 2
    assert "\x1b" not in result.stderr and "x<ESC>[2Jy.jsonl" in result.stderr, result.stderr
    assert "[import_file_unreadable]" in result.stderr


def _on_a_terminal(args: list[str], data: Path, env: dict[str, str]) -> str:
    """``maka ARGS`` with its standard output on a pseudo-terminal; what it wrote there."""
    leader, follower = pty.openpty()
    environment = {**os.environ, **env, "MAKA_DATA_DIR": str(data), "NO_COLOR": ""}
    environment.pop("NO_COLOR")
    child = subprocess.Popen(
        [*maka_executable(), *args], stdout=follower, stderr=subprocess.PIPE, env=environment
    )
    os.close(follower)
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([leader], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed its end (EIO on Linux)
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    _, errors = child.communicate(timeout=30)
    assert child.returncode == 0, errors
    return b"".join(chunks).decode()


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pseudo-terminal")
def test_the_timeline_on_a_terminal_keeps_its_colours_and_shows_a_message(
    tmp_path: Path,
) -> None:
    drill = Drill(tmp_path)
    args = ["run", "--cwd", str(drill.work), "--permission-mode", "auto", "\x1b[2Jcount once"]
    result = maka(args, drill.data, env=drill.env)
    assert result.returncode == 0, result.stderr
    shown = _on_a_terminal(["timeline", drill.session], drill.data, drill.env)
    assert "\x1b[1mrun " in shown, shown  # its own colour codes still work
    assert "user: <ESC>[2Jcount once" in shown and "\x1b[2J" not in shown, shown
