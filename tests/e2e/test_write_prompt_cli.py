"""A write's permission question says what will happen (the real ``maka run``, asking on the
terminal): target, size, whether it replaces an existing file or creates a new one, a preview."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.agent.write_question import preview, write_question
from tests.helpers.maka_run import maka, scripted_env, write_script

pytestmark = pytest.mark.e2e


def test_the_question_names_size_replacement_and_a_preview(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "hello.txt").write_text("old content here\n")
    asked = maka(
        ["run", "--cwd", str(work), "--permission-mode", "ask", "write hello.txt saying hi there"],
        tmp_path / "data",
        stdin="n\n",
    )
    out = asked.stdout + asked.stderr
    assert "write hello.txt (9 bytes; replaces an existing 17-byte file)" in out
    assert "content:\n      hi there" in out
    assert (work / "hello.txt").read_text() == "old content here\n", "denied: untouched"
    fresh = maka(
        ["run", "--cwd", str(work), "--permission-mode", "ask", "write new.txt saying hello"],
        tmp_path / "data",
        stdin="n\n",
    )
    assert "write new.txt (6 bytes; new file)" in fresh.stdout + fresh.stderr


def test_the_preview_is_short_and_says_how_much_is_left_out(tmp_path: Path) -> None:
    text = "\n".join(f"line {i} " + "x" * 200 for i in range(40))
    shown = preview(text)
    assert shown.count("\n") == 6 and shown.endswith("… (34 more lines)")
    assert all(len(line) < 200 for line in shown.splitlines())
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    edit = write_question(
        "edit_file", {"path": "a.txt", "old_string": "two", "new_string": "2\n3"}, tmp_path
    )
    assert (
        edit
        == "edit a.txt (8 bytes now): replace 1 line with 2 lines\nreplace:\n  two\nwith:\n  2\n  3"
    )
    assert write_question("write_file", {"path": "../out.txt", "content": "x"}, tmp_path) is None
    assert write_question("bash", {"command": "ls"}, tmp_path) is None


def test_a_carriage_return_in_the_content_is_shown_not_taken_for_a_line_break(
    tmp_path: Path,
) -> None:
    """``line1\\r\\x1b[2Kevil``: a terminal showing the file prints only ``evil``. The preview
    keeps it one line with the carriage return named, as a command's prompt does; a Windows
    line ending (CRLF) is still a line break."""
    work = tmp_path / "work"
    work.mkdir()
    content = "line1\r\x1b[2Kevil\nok\r\nend\n"
    script = write_script(
        tmp_path / "script.json",
        [
            [
                {
                    "toolCalls": [
                        {
                            "id": "w1",
                            "name": "write_file",
                            "args": {"path": "notes.txt", "content": content},
                        }
                    ]
                },
                {"text": "done"},
            ]
        ],
    )
    asked = maka(
        ["run", "--cwd", str(work), "--permission-mode", "ask", "write it"],
        tmp_path / "data",
        env=scripted_env(script),
        stdin="n\n",
    )
    out = asked.stdout + asked.stderr
    assert "content:\n      line1<CR><ESC>[2Kevil\n      ok\n      end\n" in out, out
    assert not (work / "notes.txt").exists()
    assert preview("a\r\nb\r\n") == "  a\n  b"
    edit = write_question(
        "edit_file", {"path": "notes.txt", "old_string": "a\rb", "new_string": "c"}, work
    )
    assert edit is not None and "replace 1 line with 1 line" in edit
