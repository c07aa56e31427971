"""``maka run`` at a terminal asks ``Allow? [y/N]`` and the answer is typed after it on the
same line; the question ended with a newline, so the typed answer landed alone on the next line
under it. From a pipe (nothing echoed) the question stays a line of its own."""

from __future__ import annotations

import io
import threading

import pytest

from app.host.terminal_transcript import StdinPermissionAsker, TerminalTranscript
from runtime.agent.permission_policy import PermissionQuestion
from runtime.base.cancel_token import CancelToken

QUESTION = PermissionQuestion("r1", "s1", "run1", "write_file", "c1", "write notes.md (1 line)")


class _Screen(io.StringIO):
    """The terminal's output: tells the keyboard when the question is on it."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = threading.Event()

    def write(self, text: str) -> int:
        written = super().write(text)
        if "Allow? [y/N]" in self.getvalue():
            self.asked.set()
        return written


class _Keyboard(io.StringIO):
    """Typed input: a terminal, whose echo of the answer (and its Enter) is the terminal's;
    the answer is typed once the question is shown (a line typed before it is not one)."""

    def __init__(self, text: str, tty: bool, screen: _Screen) -> None:
        super().__init__(text)
        self._tty = tty
        self._screen = screen

    def isatty(self) -> bool:
        return self._tty

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        self._screen.asked.wait(10)
        return super().readline(-1 if size is None else size)


@pytest.mark.parametrize("tty", [True, False])
def test_the_answer_is_typed_on_the_questions_line(tty: bool) -> None:
    out = _Screen()
    transcript = TerminalTranscript(out)
    asker = StdinPermissionAsker(transcript, _Keyboard("y\n", tty, out))
    assert asker(QUESTION, CancelToken()) == "allow"
    asked = out.getvalue()
    assert asked.endswith("Allow? [y/N] " if tty else "Allow? [y/N] \n"), repr(asked)
    transcript.print_line("[tool] write_file notes.md")
    after = out.getvalue()[len(asked) :]
    # (the terminal echoed "y" and the Enter: what follows starts its own line, no blank one)
    assert after == "[tool] write_file notes.md\n", repr(after)
