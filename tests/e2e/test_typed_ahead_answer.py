"""A line typed at the terminal before a permission question is shown is never taken as its
answer: a "y" typed while a command ran (the habit of answering the last question) approved the
next question in the same instant, before the user could read it (``maka tui``, alone and
through a host, and ``maka run``). It is set aside, said so, and the question waits."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.maka_process import maka_executable
from tests.helpers.maka_run import scripted_env, write_script

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal"),
]

STEPS: list[dict[str, Any]] = [
    {
        "text": "step one",
        "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "sleep 3"}}],
    },
    {
        "text": "step two",
        "toolCalls": [
            {"id": "c2", "name": "write_file", "args": {"path": "ta.txt", "content": "ahead\n"}}
        ],
    },
    {"text": "done"},
]


class _Terminal:
    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the real command on the pseudo-terminal
            os.execve(args[0], args, env)
        self.seen = b""

    @classmethod
    def maka(cls, data: Path, script: dict[str, str], *args: str) -> _Terminal:
        """The real ``maka ARGS`` on a pseudo-terminal, with the data folder and script given."""
        env = dict(os.environ)
        env.pop("MAKA_FAILPOINT", None)
        env.update(script)
        env["MAKA_DATA_DIR"] = str(data)
        return cls([*maka_executable(), *args], env)

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while text.encode() not in self.seen:
            assert time.monotonic() < deadline, self.seen.decode(errors="replace")
            self.read(0.2)

    def read(self, wait: float) -> None:
        ready, _, _ = select.select([self.fd], [], [], wait)
        if ready:
            with contextlib.suppress(OSError):
                self.seen += os.read(self.fd, 65536)

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait_exit(self, timeout: float = 30) -> int:
        """Wait for the command to end by itself, reading what it writes; its exit code."""
        deadline = time.monotonic() + timeout
        while True:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.pid = 0  # (reaped: ``close`` only closes the terminal)
                return os.waitstatus_to_exitcode(status)
            assert time.monotonic() < deadline, self.seen
            self.read(0.2)

    def close(self) -> None:
        if self.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)

    @classmethod
    def napping_tui(cls, tmp_path: Path) -> _Terminal:
        """``maka tui`` whose first turn runs ``sleep 2`` (then says "slept") and whose second
        answers "second answer"."""
        work = tmp_path / "work"
        work.mkdir()
        nap = {"id": "c1", "name": "bash", "args": {"command": "sleep 2"}}
        turns: list[list[dict[str, Any]]] = [
            [{"toolCalls": [nap]}, {"text": "slept"}],
            [{"text": "second answer"}],
        ]
        script = scripted_env(write_script(tmp_path / "script.json", turns))
        return cls.maka(
            tmp_path / "data", script, "tui", "--cwd", str(work), "--permission-mode", "auto"
        )


def test_a_y_typed_while_a_command_runs_does_not_answer_the_next_question(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    terminal = _Terminal.maka(
        tmp_path / "data",
        scripted_env(write_script(tmp_path / "script.json", [STEPS])),
        "run",
        "--cwd",
        str(work),
        "--permission-mode",
        "ask",
        "go",
    )
    try:
        terminal.wait_for("Allow? [y/N]")
        terminal.type("y\n")  # the bash question: allowed
        terminal.wait_for("[tool] bash sleep 3")
        time.sleep(0.5)
        terminal.type("y\n")  # typed ahead, while the command runs
        terminal.wait_for("write_file wants to")
        terminal.wait_for("not taken as its answer: 'y'")
        for _ in range(10):
            terminal.read(0.2)
        assert not (work / "ta.txt").exists(), terminal.seen.decode(errors="replace")
        assert b"[permission] allow" not in terminal.seen.split(b"write_file wants to")[1]
        terminal.type("n\n")
        terminal.wait_for("[permission] deny")
        terminal.wait_for("done")
    finally:
        terminal.close()
    assert not (work / "ta.txt").exists()


def test_through_a_host_the_answer_is_typed_on_the_questions_line_and_not_ahead(
    tmp_path: Path,
) -> None:
    """The same beside a running ``maka host``, whose turn's output the terminal prints: the
    question came with its newline, so the typed answer stood alone under it, and a "y" typed
    ahead answered it."""
    from tests.helpers.maka_process import start_main

    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    script = scripted_env(write_script(tmp_path / "script.json", [STEPS]))
    host = start_main(data, script, "host").wait_ready()
    terminal = _Terminal.maka(
        data, script, "run", "--cwd", str(work), "--permission-mode", "ask", "go"
    )
    try:
        terminal.wait_for("Allow? [y/N]")
        terminal.type("y\n")
        terminal.wait_for("[permission] allow")
        assert b"Allow? [y/N] y" in terminal.seen, terminal.seen  # (the echo, on its line)
        time.sleep(0.5)
        terminal.type("y\n")  # typed ahead
        terminal.wait_for("write_file wants to")
        terminal.wait_for("not taken as its answer: 'y'")
        for _ in range(10):
            terminal.read(0.2)
        assert not (work / "ta.txt").exists(), terminal.seen.decode(errors="replace")
        terminal.type("n\n")
        terminal.wait_for("done")
    finally:
        terminal.close()
        host.stop()
    assert not (work / "ta.txt").exists()


def test_a_message_typed_during_a_turn_is_shown_at_the_prompt_that_takes_it(
    tmp_path: Path,
) -> None:
    """``maka tui``: a message typed while a turn ran is sent once the turn ends, at the next
    ``you>``; it was not shown there, so its turn's output ran on along the prompt's line
    (``you> [offline demo] calling list_dir.``)."""
    terminal = _Terminal.napping_tui(tmp_path)
    try:
        terminal.wait_for("you> ")
        terminal.type("nap\n")
        terminal.wait_for("[tool] bash sleep 2")
        terminal.type("and then\n")  # typed while the command runs
        terminal.wait_for("second answer")
        after = terminal.seen.split(b"slept", 1)[1]
        assert b"you> and then\r\n" in after, after
        assert b"you> second answer" not in after, after
    finally:
        terminal.close()


def test_a_message_typed_before_a_question_is_kept_for_after_it(tmp_path: Path) -> None:
    """``maka tui``: a chat message typed while a command ran, with a question later in that
    turn, was taken out of the way of the question and lost; it is kept, and sent once the
    turn ends."""
    work = tmp_path / "work"
    work.mkdir()
    turns: list[list[dict[str, Any]]] = [STEPS, [{"text": "second answer"}]]
    terminal = _Terminal.maka(
        tmp_path / "data",
        scripted_env(write_script(tmp_path / "script.json", turns)),
        "tui",
        "--cwd",
        str(work),
        "--permission-mode",
        "ask",
    )
    try:
        terminal.wait_for("you> ")
        terminal.type("go\n")
        terminal.wait_for("Allow? [y/N]")
        terminal.type("y\n")
        terminal.wait_for("[permission] allow")
        terminal.type("my next message\n")  # typed while the command runs
        terminal.wait_for("write_file wants to")
        terminal.wait_for("kept for after it: 'my next message'")
        terminal.type("n\n")
        terminal.wait_for("second answer")  # the kept message was sent after the turn
    finally:
        terminal.close()


def test_an_answer_typed_before_the_first_question_is_said_to_be_set_aside(
    tmp_path: Path,
) -> None:
    """``maka run``: a "y" typed while the model thought, before its first question, was
    thrown away with nothing said (the terminal's input was flushed)."""
    work = tmp_path / "work"
    work.mkdir()
    slow: list[dict[str, Any]] = [{"delayMs": 2500, **STEPS[1]}, {"text": "done"}]
    terminal = _Terminal.maka(
        tmp_path / "data",
        scripted_env(write_script(tmp_path / "script.json", [slow])),
        "run",
        "--cwd",
        str(work),
        "--permission-mode",
        "ask",
        "go",
    )
    try:
        terminal.wait_for("permission mode ask")
        time.sleep(0.8)
        terminal.type("y\n")  # before the question
        terminal.wait_for("not taken as its answer: 'y'")
        terminal.wait_for("Allow? [y/N]")
        for _ in range(5):
            terminal.read(0.2)
        assert not (work / "ta.txt").exists()
        terminal.type("n\n")
        terminal.wait_for("done")
    finally:
        terminal.close()


def test_through_a_host_a_message_typed_during_a_turn_is_shown_at_the_prompt_that_takes_it(
    tmp_path: Path,
) -> None:
    """The same in a ``maka tui`` beside a running ``maka host``: the host-attached chat read
    its prompt on its own and left the typed message out."""
    from tests.helpers.maka_process import start_main

    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    nap = {"id": "c1", "name": "bash", "args": {"command": "sleep 2"}}
    turns: list[list[dict[str, Any]]] = [
        [{"toolCalls": [nap]}, {"text": "slept"}],
        [{"text": "second answer"}],
    ]
    script = scripted_env(write_script(tmp_path / "script.json", turns))
    host = start_main(data, script, "host").wait_ready()
    terminal = _Terminal.maka(data, script, "tui", "--cwd", str(work), "--permission-mode", "auto")
    try:
        terminal.wait_for("served by the running Maka")
        terminal.wait_for("you> ")
        terminal.type("nap\n")
        terminal.wait_for("[tool] bash sleep 2")
        terminal.type("and then\n")  # typed while the command runs
        terminal.wait_for("second answer")
        after = terminal.seen.split(b"slept", 1)[1]
        assert b"you> and then\r\n" in after, after
        assert b"you> second answer" not in after, after
    finally:
        terminal.close()
        host.stop()


def test_ctrl_d_at_a_question_denies_it_and_the_chat_goes_on(tmp_path: Path) -> None:
    """``maka tui``: Ctrl+D typed at ``Allow? [y/N]`` ended the whole chat (the end of input
    was the end for every later read); at a terminal it ends that one read: the call is
    denied, and the chat goes on at ``you>``. Ctrl+D at ``you>`` still leaves."""
    work = tmp_path / "work"
    work.mkdir()
    write = {"id": "c1", "name": "write_file", "args": {"path": "d.txt", "content": "x\n"}}
    turns: list[list[dict[str, Any]]] = [
        [{"toolCalls": [write]}, {"text": "asked"}],
        [{"text": "still here"}],
    ]
    terminal = _Terminal.maka(
        tmp_path / "data",
        scripted_env(write_script(tmp_path / "script.json", turns)),
        "tui",
        "--cwd",
        str(work),
        "--permission-mode",
        "ask",
    )
    try:
        terminal.wait_for("you> ")
        terminal.type("write it\n")
        terminal.wait_for("Allow? [y/N]")
        terminal.type("\x04")  # Ctrl+D
        terminal.wait_for("[permission] deny")
        terminal.wait_for("asked")
        terminal.type("again\n")
        terminal.wait_for("still here")
        terminal.wait_for("you> ")
        terminal.type("\x04")
        terminal.wait_exit()
    finally:
        terminal.close()
    assert not (work / "d.txt").exists()


def test_a_y_typed_while_a_command_runs_with_no_question_is_not_sent(tmp_path: Path) -> None:
    """A "y" typed during a turn (the habit of answering) with no question coming was sent
    to the model as the next message; a model reads a bare "yes" as consent to what it
    proposed. It is named and not sent; typed again at the prompt, it is."""
    terminal = _Terminal.napping_tui(tmp_path)
    try:
        terminal.wait_for("you> ")
        terminal.type("nap\n")
        terminal.wait_for("[tool] bash sleep 2")
        terminal.type("y\n")  # typed while the command runs
        terminal.wait_for("type it again to send it as a message")
        for _ in range(10):
            terminal.read(0.2)
        assert b"second answer" not in terminal.seen
        terminal.type("y\n")  # typed now: a message
        terminal.wait_for("second answer")
    finally:
        terminal.close()


def _wait_after(terminal: _Terminal, mark: str, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while text.encode() not in terminal.seen.rsplit(mark.encode(), 1)[-1]:
        assert time.monotonic() < deadline, terminal.seen.decode(errors="replace")
        terminal.read(0.05)


@pytest.mark.parametrize("through_host", [False, True], ids=["alone", "through-a-host"])
def test_a_ctrl_c_that_comes_as_the_turn_ends_does_not_leave_the_chat(
    tmp_path: Path, through_host: bool
) -> None:
    """Ctrl+C pressed to stop a turn that ended in that instant landed at ``you>`` and left
    the TUI without a word. It says the turn had already ended, and the chat goes on; a second
    Ctrl+C leaves."""
    from tests.helpers.maka_process import start_main

    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    script = scripted_env(
        write_script(tmp_path / "script.json", [[{"text": "first answer"}], [{"text": "again"}]])
    )
    host = start_main(data, script, "host").wait_ready() if through_host else None
    terminal = _Terminal.maka(data, script, "tui", "--cwd", str(work), "--permission-mode", "auto")
    try:
        terminal.wait_for("you> ")
        terminal.type("hello\n")
        terminal.wait_for("first answer")
        _wait_after(terminal, "first answer", "you> ")  # the turn has ended
        terminal.type("\x03")  # Ctrl+C, meant for the turn, a moment late
        terminal.wait_for("(the turn had already ended: Ctrl+C cancelled nothing")
        _wait_after(terminal, "cancelled nothing", "you> ")
        assert b"[cancelled]" not in terminal.seen and b"interrupted" not in terminal.seen
        terminal.type("more\n")
        terminal.wait_for("again")
        time.sleep(2)  # (long after the turn's end: Ctrl+C leaves)
        terminal.type("\x03")
        assert terminal.wait_exit() == 0, terminal.seen
    finally:
        terminal.close()
        if host is not None:
            host.stop()
