"""Streaming a run to a terminal, and asking permission questions there (``run`` and ``tui``).

Assistant text streams as it arrives; tool calls print as cards when they commit (``[tool]``),
their results when T2 commits (``[ok]`` / ``[error]``); a run's ending prints a notice. Permission
questions are answered from standard input: on a terminal the user types y or n; with a pipe the
next line is the answer (end of input means deny). Waiting never blocks cancellation.
"""

from __future__ import annotations

import select
import sys
import threading
from typing import TextIO

from runtime.agent.cancel_token import CancelToken
from runtime.agent.permission_policy import Decision, PermissionQuestion
from runtime.agent.transcript_projection import summarize_args, summarize_result
from runtime.ledger.event_model import RuntimeEvent, is_terminal
from runtime.ledger.store_ports import RunStatus


class TerminalTranscript:
    """A ``RunObserver`` printing to ``out``; thread-safe."""

    def __init__(self, out: TextIO | None = None, *, show_user: bool = False) -> None:
        self._out = out or sys.stdout
        self._lock = threading.Lock()
        self._mid_line = False
        self._show_user = show_user

    def _write(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()

    def _line(self, text: str) -> None:
        if self._mid_line:
            self._write("\n")
            self._mid_line = False
        self._write(text + "\n")

    def text_delta(self, text: str) -> None:
        with self._lock:
            self._write(text)
            self._mid_line = not text.endswith("\n")

    def thinking_delta(self, text: str) -> None:
        del text  # thinking stays collapsed in a terminal

    def committed(self, event: RuntimeEvent) -> None:
        with self._lock:
            self._committed(event)

    def _committed(self, event: RuntimeEvent) -> None:
        content = event.get("content")
        actions = event.get("actions") or {}
        if content is not None and content["kind"] == "text" and event["role"] == "model":
            if self._mid_line:
                self._write("\n")
                self._mid_line = False
        elif content is not None and content["kind"] == "text" and event["role"] == "user":
            if self._show_user:
                self._line(f"you> {content['text']}")
        elif content is not None and content["kind"] == "function_call":
            args = summarize_args(content["name"], content["args"])
            self._line(f"[tool] {content['name']} {args}")
        elif content is not None and content["kind"] == "function_response":
            is_error = content.get("isError", False)
            mark = "[error]" if is_error else "[ok]"
            self._line(f"  {mark} {summarize_result(content['result'], is_error)}")
        elif "permissionDecision" in actions:
            decision = actions["permissionDecision"]["decision"]
            self._line(f"  [permission] {decision}")
        elif is_terminal(event) and content is not None and content["kind"] == "error":
            self._line(f"[{event.get('status')}] {content['message']}")

    def run_status(self, run_id: str, status: RunStatus, failure_class: str | None) -> None:
        del run_id, status, failure_class


class StdinPermissionAsker:
    """Answers permission questions from standard input (terminal or pipe)."""

    def __init__(self, transcript: TerminalTranscript, stream: TextIO | None = None) -> None:
        self._transcript = transcript
        self._stream = stream or sys.stdin

    def __call__(self, question: PermissionQuestion, cancel: CancelToken) -> Decision | None:
        self._transcript._line(
            f"[permission] {question.tool_name} wants to {question.summary}. Allow? [y/N] "
        )
        line = self._read_line(cancel)
        if line is None:
            return None if cancel.is_cancelled() else "deny"
        return "allow" if line.strip().lower() in ("y", "yes", "allow") else "deny"

    def _read_line(self, cancel: CancelToken) -> str | None:
        while not cancel.is_cancelled():
            try:
                ready, _, _ = select.select([self._stream], [], [], 0.2)
            except (ValueError, OSError):  # not a selectable stream: read directly
                line = self._stream.readline()
                return line or None
            if ready:
                line = self._stream.readline()
                return line or None
        return None
