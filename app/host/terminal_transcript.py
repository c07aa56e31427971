"""Streaming a run to a terminal, and asking permission questions there (``run`` and ``tui``).

Assistant text streams as it arrives; tool calls print as cards when they commit (``[tool]``),
their results when T2 commits (``[ok]`` / ``[error]``); a run's ending prints a notice. Permission
questions are answered from standard input: on a terminal the user types y or n; with a pipe the
next line is the answer (end of input means deny). Waiting never blocks cancellation.

Nothing from the model or a command reaches the terminal raw: control characters are made visible
(``app.visible_text``), so an escape sequence or a carriage return can neither erase part of
a command being approved nor restyle the terminal. A permission question shows the whole command,
wrapped to the terminal's width (a shortened one says how many characters are left out), and a
command's question says that commands can change files anywhere the user can.
"""

from __future__ import annotations

import queue
import shutil
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TextIO

from app.code_text import describe
from app.visible_text import AUTO_MODE_WARNING, silence, visible
from runtime.agent.permission_policy import Decision, PermissionQuestion
from runtime.agent.transcript_projection import CODED_ENDINGS, summarize_args, summarize_result
from runtime.base.cancel_token import CancelToken
from runtime.ledger.command_words import maka_command
from runtime.ledger.event_model import RuntimeEvent, is_terminal
from runtime.ledger.store_ports import RunStatus
from runtime.ledger.workspace_facts import decision_mark


class TerminalTranscript:
    """A ``RunObserver`` printing to ``out``; thread-safe."""

    def __init__(self, out: TextIO | None = None, *, show_user: bool = False) -> None:
        self._out = out or sys.stdout
        self._lock = threading.Lock()
        self._mid_line = False
        self._show_user = show_user
        self._held = ""
        self._subjects: dict[str, str] = {}  # calls by what they did (``call_subjects``)
        # The calls whose dispatch this turn committed and whose result it has not: what may
        # have done part of its work when the turn stops without a word from the store.
        self._dispatched: dict[str, str] = {}
        # Told once when the reader of ``out`` went away (``maka run ... | head``): the command
        # cancels its turn, so the run ends ``cancelled`` instead of being left running.
        self.on_reader_gone: Callable[[], None] | None = None
        self._gone = False
        self._before_first: Callable[[], None] | None = None

    def name_calls(self, subjects: Mapping[str, str]) -> None:
        """Calls of earlier runs by what they did, for a restored copy's words."""
        with self._lock:
            self._subjects.update(subjects)

    def hold(self, text: str) -> None:
        """Print ``text`` before the first output, not now: what a resume says it will do is
        printed only once it does something (a refusal before that drops it)."""
        with self._lock:
            self._held = text

    def before_first_output(self, say: Callable[[], None]) -> None:
        """Call ``say`` once, just before the first thing printed (the held text included), or
        never when the held text is dropped: the notes a resume makes about its tools (no
        terminal to ask on) are said only when it runs, not before a refusal."""
        with self._lock:
            self._before_first = say

    def _say_before(self) -> None:
        say, self._before_first = self._before_first, None
        if say is not None:
            say()

    def release(self, keep: bool = True) -> None:
        """Print the held text now (``keep``), or drop it (and what was to come before it)."""
        with self._lock:
            held, self._held = self._held, ""
            if not keep:
                self._before_first = None
            elif held:
                self._say_before()
                self._out.write(held)
                self._out.flush()

    def _write(self, text: str) -> None:
        self._say_before()
        if self._held:
            text, self._held = self._held + text, ""
        if self._gone:
            return
        try:
            self._out.write(text)
            self._out.flush()
        except BrokenPipeError:
            self._gone = True
            silence(self._out)
            if self.on_reader_gone is not None:
                self.on_reader_gone()

    def _line(self, text: str) -> None:
        if self._mid_line:
            self._write("\n")
            self._mid_line = False
        self._write(text + "\n")

    def print_line(self, text: str) -> None:
        """One line of its own (a permission question), after any text mid-line."""
        with self._lock:
            self._line(text)

    def prompt(self, text: str) -> None:
        """A question whose answer is typed on the same line (``Allow? [y/N] ``, no newline
        after it), after any text mid-line; ``answered`` once the user's Enter ended the line."""
        with self._lock:
            if self._mid_line:
                self._write("\n")
            self._write(text)
            self._mid_line = True  # (a stop before the answer: the next line starts afresh)

    def answered(self) -> None:
        with self._lock:
            self._mid_line = False

    def text_delta(self, text: str) -> None:
        with self._lock:
            self._write(visible(text))
            self._mid_line = not text.endswith("\n")

    def thinking_delta(self, text: str) -> None:
        del text  # thinking stays collapsed in a terminal

    def committed(self, event: RuntimeEvent) -> None:
        with self._lock:
            self._committed(event)

    def _checkpoint_notes(self, actions: Mapping[str, Any]) -> None:
        """Say when this run has no workspace checkpoints, or one could not be taken
        (docs/design/workspace.md: no pretending)."""
        mode = (actions.get("runtimeProtocol") or {}).get("workspaceCheckpoints")
        code = str(mode.get("reasonCode", "")) if isinstance(mode, Mapping) else ""
        if (
            isinstance(mode, Mapping)
            and mode.get("mode") == "unavailable"
            and code
            not in (
                "checkpoint_turned_off",  # the user's own choice: not repeated at every turn
            )
        ):
            self._line(f"[checkpoints] off for this run [{code}]: {describe(code).sentence}")
        mark = decision_mark(actions, self._subjects)
        if mark is not None:
            self._line(f"[workspace] {visible(mark)}.")
        failed = actions.get("workspaceCheckpointFailed")
        if isinstance(failed, Mapping) and not failed.get("decidedBy"):  # (the mark said it)
            code = str(failed.get("reasonCode", ""))
            said = str(failed.get("message", ""))[:300]  # which file or folder, and why
            self._line(
                f"[checkpoint] not taken [{code}]: {describe(code).sentence}"
                + (f" ({visible(said)})" if said else "")
            )

    def started_without_outcome(self) -> list[str]:
        """The tools of the calls dispatched in this transcript with no result committed yet."""
        with self._lock:
            return list(self._dispatched.values())

    def _committed(self, event: RuntimeEvent) -> None:
        content = event.get("content")
        actions = event.get("actions") or {}
        self._checkpoint_notes(actions)
        dispatch = actions.get("toolDispatch")
        if dispatch is not None:
            self._dispatched[str(dispatch["providerToolCallId"])] = str(dispatch["toolName"])
        if content is not None and content["kind"] == "function_response":
            self._dispatched.pop(str(content["id"]), None)
        if content is not None and content["kind"] == "text" and event["role"] == "model":
            if self._mid_line:
                self._write("\n")
                self._mid_line = False
        elif content is not None and content["kind"] == "text" and event["role"] == "user":
            if self._show_user:
                self._line(f"you> {visible(content['text'])}")
        elif content is not None and content["kind"] == "function_call":
            args = summarize_args(content["name"], content["args"])
            self._line(f"[tool] {visible(content['name'])} {visible(args, strict=True)}")
        elif content is not None and content["kind"] == "function_response":
            is_error = content.get("isError", False)
            mark = "[error]" if is_error else "[ok]"
            self._line(f"  {mark} {visible(summarize_result(content['result'], is_error))}")
        elif "permissionDecision" in actions:
            decision = actions["permissionDecision"]["decision"]
            if event.get("author") == "host":
                # Closed by Maka as the turn stopped (Ctrl+C at the question): nobody answered,
                # as the record and the timeline say; not the user's "deny".
                self._line("  [permission] closed unanswered (the turn was stopped)")
            else:
                self._line(f"  [permission] {decision}")
        elif is_terminal(event) and content is not None and content["kind"] == "error":
            # A turn that completed at its step limit or with an empty reply says so with the
            # code: its work may not be done, so it must not read like an ordinary ending.
            code = content.get("code")
            tag = code if code in CODED_ENDINGS else event.get("status")
            self._line(f"[{tag}] {visible(content['message'])}")

    def run_status(self, run_id: str, status: RunStatus, failure_class: str | None) -> None:
        del run_id, status, failure_class


_CTRL_D = "\x04 (Ctrl+D)"
"""What the input queue holds for a Ctrl+D typed at a terminal (compared by identity: no line
read is this very string object)."""
_GONE_AFTER = 5
_GONE_WITHIN_S = 0.05
"""A terminal whose reads end this many times within this long has gone (hung up): no hand
types Ctrl+D so fast."""


class InputLines:
    """The one reader of an input stream for the whole process: a daemon thread reads lines into
    a queue, and the chat prompt and the permission questions both take their lines from it.

    Why: two readers of one stream lose lines between them. ``input()`` or ``readline()`` pull a
    whole pipe buffer into Python, so an answer that is already there ("y") is invisible to a
    ``select()`` on the descriptor, and a question waited until more input or the end of input
    arrived. A line that arrives while nobody waits stays queued for the next reader; the end of
    input stays the end for every later reader. Waiting never blocks cancellation.
    """

    _by_stream: ClassVar[dict[int, InputLines]] = {}
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        # A line, None (the end of input, for good) or ``_CTRL_D`` (Ctrl+D typed at a
        # terminal: the end of this one read, as a terminal means it; reading goes on).
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._held: list[str] = []  # chat lines set aside for a question (``keep_set_aside``)
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    @classmethod
    def of(cls, stream: TextIO) -> InputLines:
        with cls._guard:
            lines = cls._by_stream.get(id(stream))
            if lines is None or lines._stream is not stream:
                lines = cls._by_stream[id(stream)] = cls(stream)
            return lines

    def typed_ahead(self) -> bool:
        """Whether a line typed earlier (at a terminal, during a turn) waits to be read: shown
        again after the prompt that takes it, so what follows starts its own line."""
        return not self._queue.empty() and _is_terminal(self._stream)

    def listen(self) -> None:
        """Start reading now (a terminal's lines typed from here on are seen as typed, so one
        typed before a question is known to be, and said so)."""
        if _is_terminal(self._stream):
            self._start()

    def set_aside_typed_ahead(self) -> SetAside:
        """Take the lines typed before now out of the way of a question shown now, when the
        stream is a terminal: it is answered only by what is typed after it. A "y" typed while
        a command ran (for a question already answered, or by habit) approved the next
        question before it could be read. What looks like an answer (y, n, an empty line...)
        is dropped; a message typed for the chat is kept, and ``keep_set_aside`` puts it back
        first once the question is answered. From a pipe, lines given ahead are the answers,
        in order: nothing is set aside."""
        if not _is_terminal(self._stream):
            return SetAside()
        ended = False
        lines: list[str] = []
        while True:
            try:
                line = self._queue.get_nowait()
            except queue.Empty:
                break
            if line is None:
                ended = True
            elif line is not _CTRL_D:  # (a Ctrl+D typed ahead answers nothing: dropped)
                lines.append(line)
        answers = ("", "y", "yes", "n", "no", "allow", "deny")
        set_aside = SetAside(
            dropped=tuple(line.strip() for line in lines if line.strip().lower() in answers),
            kept=tuple(line for line in lines if line.strip().lower() not in answers),
        )
        with self._start_lock:
            self._held.extend(set_aside.kept)
        if ended:
            self._queue.put(None)
        return set_aside

    def keep_set_aside(self) -> None:
        """The question was answered: the chat lines set aside for it come first again."""
        with self._start_lock:
            held, self._held = self._held, []
        if not held:
            return
        later: list[str | None] = []
        while True:
            try:
                later.append(self._queue.get_nowait())
            except queue.Empty:
                break
        for line in (*held, *later):
            self._queue.put(line)

    def read_line(self, cancel: CancelToken | None = None, poll_s: float = 0.2) -> str | None:
        """The next line (with its newline), or None at the end of input or once ``cancel``
        is cancelled."""
        self._start()
        while cancel is None or not cancel.is_cancelled():
            try:
                line = self._queue.get(timeout=poll_s)
            except queue.Empty:
                continue
            if line is None:
                self._queue.put(None)  # the end stays the end for the next reader
            if line is _CTRL_D:
                return None  # (this read's end only)
            return line
        return None

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._pump, name="maka-input-lines", daemon=True
                )
                self._thread.start()

    def _pump(self) -> None:
        """Read lines until the end of input. At a terminal, Ctrl+D on an empty line ends one
        read (a permission question's: denied), not the input: the chat goes on after it. A
        terminal that is gone (its reads end at once, again and again) ends it for good."""
        terminal = _is_terminal(self._stream)
        ends: list[float] = []
        try:
            while True:
                line = self._stream.readline()
                if line:
                    ends.clear()
                    self._queue.put(line)
                    continue
                if not terminal:
                    break
                now = time.monotonic()
                ends[:] = [at for at in ends if now - at < _GONE_WITHIN_S] + [now]
                if len(ends) >= _GONE_AFTER:
                    break
                self._queue.put(_CTRL_D)
        except (OSError, ValueError, UnicodeDecodeError):
            pass
        self._queue.put(None)


# A terminal in its usual (canonical) mode holds at most so many BYTES of a line: what is typed
# or pasted beyond that is dropped before any program reads it (Linux's line discipline keeps
# 4,095 bytes and the newline; macOS 1,023). A character such as "é" is two bytes of UTF-8, so a
# line of them is cut at fewer characters, possibly inside one. None: not known here, nothing is
# checked.
TERMINAL_LINE_BYTES: int | None = {"linux": 4095, "darwin": 1023}.get(sys.platform)


def line_bytes(line: str) -> int:
    """How many bytes ``line`` (without its newline) was on the terminal: its UTF-8 length, a
    byte that was not UTF-8 (read with ``surrogateescape``) counted as the one byte it was."""
    text = line.rstrip("\n")
    try:
        return len(text.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:  # a lone surrogate that was no escaped byte
        return len(text.encode("utf-8", "surrogatepass"))


def cut_by_terminal(line: str, stream: TextIO | None = None) -> bool:
    """Whether ``line`` (read from ``stream``, default standard input) may have lost its end to
    the terminal's line limit: it came from a terminal and is that many bytes long."""
    stream = sys.stdin if stream is None else stream
    try:
        interactive = stream.isatty()
    except (AttributeError, ValueError):
        interactive = False
    limit = TERMINAL_LINE_BYTES
    return interactive and limit is not None and line_bytes(line) >= limit


def cut_line_words(session_id: str | None) -> str:
    """Why such a message was not sent, and how to send a long one."""
    where = f"--session {session_id}" if session_id else "--cwd DIR"
    command = maka_command(f'run {where} "$(cat message.txt)"')
    return (
        f"not sent: this message is {TERMINAL_LINE_BYTES or 0:,} bytes long, the most a "
        "terminal line holds (fewer characters when some take more than one byte, as an "
        "accented letter does), so its end may have been cut off before Maka read it. Send a "
        f"longer message from a file: {command}"
    )


class StdinPermissionAsker:
    """Answers permission questions from standard input (terminal or pipe)."""

    def __init__(self, transcript: TerminalTranscript, stream: TextIO | None = None) -> None:
        self._transcript = transcript
        self._stream = stream or sys.stdin
        self._lines = InputLines.of(self._stream)
        self._lines.listen()  # (what is typed before the first question is seen as such)

    def __call__(self, question: PermissionQuestion, cancel: CancelToken) -> Decision | None:
        width = shutil.get_terminal_size((100, 24)).columns
        text = permission_question_text(question, width)
        # Typed at a terminal, the answer goes after ``Allow? [y/N] `` on its line (its Enter
        # ends the line); from a pipe nothing is echoed, so the question is a line of its own.
        typed = _is_terminal(self._stream)
        if typed:
            note = self._lines.set_aside_typed_ahead().note()
            if note:
                self._transcript.print_line(note)
            self._transcript.prompt(text)
        else:
            self._transcript._line(text)
        line = self._read_line(cancel)
        if typed:
            self._lines.keep_set_aside()
            if line is not None:
                self._transcript.answered()
        if line is None:
            return None if cancel.is_cancelled() else "deny"
        return "allow" if line.strip().lower() in ("y", "yes", "allow") else "deny"

    def _read_line(self, cancel: CancelToken) -> str | None:
        return self._lines.read_line(cancel)


@dataclass(frozen=True)
class SetAside:
    """Lines typed before a question: ``dropped`` (answers, typed too early), ``kept`` (chat
    messages, read again once the question is answered)."""

    dropped: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()

    def note(self) -> str:
        """What is said of them, before the question ("" when nothing was typed ahead)."""
        said = []
        if self.dropped:
            said.append(f"not taken as its answer: {_shown_lines(self.dropped)}")
        if self.kept:
            kept = tuple(line.strip() for line in self.kept)
            said.append(f"kept for after it: {_shown_lines(kept)}")
        return f"(typed before this question, {'; '.join(said)})" if said else ""


def _shown_lines(lines: tuple[str, ...]) -> str:
    shown = ", ".join(repr(visible(line)[:40]) for line in lines[:3])
    return shown + (f" and {len(lines) - 3} more" if len(lines) > 3 else "")


ALLOW_PROMPT = "Allow? [y/N] "
"""The last line of a permission question; the answer is typed after it at a terminal."""


def is_a_tty(stream: TextIO | None) -> bool:
    """Whether ``stream`` is a terminal (typed input, echoed by the terminal itself)."""
    return stream is not None and _is_terminal(stream)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def permission_question_text(question: PermissionQuestion, width: int) -> str:
    """The question as printed: the whole request with control characters made visible, each of
    its lines wrapped to ``width`` (continuations indented deeper), the one-line warning for a
    command, then ``Allow? [y/N]``."""
    width = max(width, 40)
    lines = [f"[permission] {visible(question.tool_name)} wants to:"]
    for line in visible(question.summary, strict=True).split("\n"):
        wrapped = textwrap.wrap(
            line,
            width - 1,
            initial_indent="    ",
            subsequent_indent="      ",
            break_long_words=True,
            break_on_hyphens=False,
            drop_whitespace=False,
        )
        lines.extend(wrapped or ["    "])
    if question.tool_name == "bash":
        lines.append(f"  {AUTO_MODE_WARNING}")
    lines.append(ALLOW_PROMPT)
    return "\n".join(lines)


def calls_listed(names: Sequence[str]) -> str:
    """``bash``, ``read_file and bash``, ``read_file, list_dir, bash and 2 more``."""
    if len(names) > 3:
        return f"{', '.join(names[:3])} and {len(names) - 3} more"
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def calls_words(names: Sequence[str]) -> str:
    """``1 tool call (write_file)``, ``2 tool calls (read_file and bash)``."""
    return f"{len(names)} tool call{'' if len(names) == 1 else 's'} ({calls_listed(names)})"


def left_running(transcript: TerminalTranscript, session_id: str) -> str:
    """A turn stopped by its store (the database went away, the disk filled, the lease was
    lost), or ended because a call's outcome could not be committed: the calls it had started
    with no outcome recorded, which may have done part of their work, said as a terminal says
    it when its host stops; "" when none had."""
    running = transcript.started_without_outcome()
    if not running:
        return ""
    return (
        f". {calls_words(running)} had started with no outcome recorded and may have done "
        f"part of its work: look before you run it again ({maka_command(f'plan {session_id}')} "
        "says what was recorded once the database answers)"
    )
