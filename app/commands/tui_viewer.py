"""``maka tui`` beside a running host views its session (docs/design/hosts.md section 1).

One session, one driver, many viewers: a turn of the TUI's session driven by another client (a
desktop window, another ``maka run`` or ``maka tui``, Safe resume) is shown here as it happens:
its messages, the model's text as it streams, its tool cards and its ending, under a line saying
who drives it. The TUI cannot drive that turn (Ctrl+C and a new message do not touch it: a
message is refused with ``session_busy`` naming the driver), but it may answer the turn's
permission questions: a question is printed as ``maka run`` prints it, the next line typed is
the answer (``y`` allows, anything else denies), and the first answer anywhere counts. A question
answered elsewhere closes here saying where ("answered in the desktop window: allowed").

The host sends these pushes only to terminals that asked to view the session
(``sessions.watch``) and never to the terminal driving the turn (it hears them as the driver).
They arrive on the connection's reader thread (``HostClient.listen``), while the main thread
waits for the user's next line; output is written under one lock and the prompt said again.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, TextIO

from app.host.terminal_transcript import ALLOW_PROMPT, permission_question_text
from app.host.tui_reads import CONTINUED_MARKER
from app.visible_text import visible
from runtime.ledger.command_words import maka_command

if TYPE_CHECKING:
    from app.bridge_contract import (
        Message,
        PermissionClosedPush,
        PermissionRequestedPush,
        TranscriptItem,
    )
    from app.host.host_client import HostClient, HostConnectionError

_ANSWER = "viewer-answer"
_WATCH = "viewer-watch"
_YES = ("y", "yes", "allow")
_NO = ("n", "no", "deny")
LATE_ANSWER_S = 60.0
"""A ``y``/``n`` typed this long after a question closed elsewhere is taken as a late answer to
it (said so, nothing sent), never as a chat message."""
_FINAL = frozenset({"completed", "failed", "cancelled"})


def _card_words(item: Any) -> str:
    """A card's status as ``/transcript`` and the desktop say it: a call refused because the
    turn was cancelled, or denied, did not fail."""
    from app.host.transcript_items import CANCELLED, PERMISSION_DENIED

    if item.status.value == "failed" and item.park_reason == CANCELLED:
        return "cancelled"
    if item.status.value == "failed" and item.park_reason == PERMISSION_DENIED:
        return "denied"
    return str(item.status.value)


class _Question:
    """What ``permission_question_text`` needs of a question."""

    def __init__(self, push: PermissionRequestedPush) -> None:
        self.tool_name = push.tool_name
        self.summary = push.summary


class TuiViewer:
    """The TUI's view of its session's turns driven by other clients."""

    def __init__(self, host: HostClient, out: TextIO | None = None) -> None:
        self._host = host
        self._out = out or sys.stdout
        self._lock = threading.RLock()
        self.session_id: str | None = None
        self._driving = False
        self._driver: str | None = None
        self._waiting = False  # the main thread waits for the user's next line
        self._prompt_shown = False  # the prompt is the last thing written
        self._mid_line = False
        self._shown: dict[str, str] = {}
        self._cards: dict[str, str] = {}
        self._open: PermissionRequestedPush | None = None
        self._closed_at = 0.0
        self._closed_words = ""

    # ---- the main thread -------------------------------------------------------------------

    def watch(self, session_id: str | None) -> None:
        """View ``session_id`` (the host answers with who drives it now)."""
        from app.bridge_contract import SessionsWatchRequest

        with self._lock:
            if session_id == self.session_id:
                return
            self.session_id = session_id
            self._driver = None
        self._host.send(SessionsWatchRequest(session_id=session_id, correlation_id=_WATCH))

    def driving(self, value: bool) -> None:
        """The TUI runs a turn of its own: its session's pushes are its own turn's."""
        with self._lock:
            self._driving = value

    def prompt(self) -> None:
        """Say ``you> `` (or the open question's ``Allow? [y/N]``) and wait for a line."""
        with self._lock:
            self._waiting = True
            self._show_prompt()

    def line_read(self, line: str | None) -> bool:
        """The user typed ``line``: True when it answered a question of a viewed turn (or was
        a late answer to one already answered elsewhere), so it is not a chat message."""
        from app.bridge_contract import PermissionDecision, PermissionsAnswerRequest

        with self._lock:
            self._waiting = False
            self._prompt_shown = False
            self._mid_line = False
            question, self._open = self._open, None
            if question is None:
                late = (
                    line is not None
                    and line.strip().lower() in _YES + _NO
                    and time.monotonic() - self._closed_at < LATE_ANSWER_S
                )
                if late:
                    self._say(f"(that question was already {self._closed_words}; nothing sent)")
                return late
        if line is None:
            # The end of input (Ctrl+D) ends the chat; the question is not answered here: it
            # stays with the turn's driver and the others viewing it.
            with self._lock:
                self._say("\n(left without answering: the question stays open for the others)")
            return False
        if line.strip().startswith("/"):
            # A command (``/quit``, ``/help``) is no answer: the question stays open (it was
            # denied on the user's behalf); ``/quit`` leaves it to the others viewing it.
            with self._lock:
                self._open = question
            return False
        allow = line.strip().lower() in _YES
        decision = PermissionDecision.ALLOW if allow else PermissionDecision.DENY
        self._host.send(
            PermissionsAnswerRequest(
                session_id=question.session_id,
                request_id=question.request_id,
                decision=decision,
                correlation_id=_ANSWER,
            )
        )
        return True

    def closed_elsewhere(self, words: str) -> None:
        """A question of the TUI's own turn was answered in another client (``words``: where):
        a ``y`` or ``n`` typed soon after is a late answer, never a message."""
        with self._lock:
            self._closed_at = time.monotonic()
            self._closed_words = words

    # ---- the connection's reader thread ----------------------------------------------------

    def stopped(self, error: HostConnectionError) -> None:
        """The host went away: said at once when the chat waits for its user (who would not
        know until the next line), then the chat ends with ``host_stopped``."""
        import os

        from runtime.ledger.codes import HostCode

        with self._lock:
            if not self._waiting:
                return  # a request in flight raises it on the main thread
            self._end_line()
            self._begin_output()  # (off the prompt's line, and what the user typed on it)
            self._out.flush()
            message = error.message
            if error.code == HostCode.HOST_STOPPED:
                # Nothing of this chat's was asked or left: not "run the command again". A turn
                # viewed here (another client's) stopped with the host: said, with how to look.
                viewed = ""
                if self._driver is not None or self._open is not None:
                    who = self._driver or "another client"
                    plan = maka_command(f"plan {self.session_id}") if self.session_id else ""
                    asked = "; its question here was never answered" if self._open else ""
                    look = f" ({plan} says what was recorded)" if plan else ""
                    viewed = f"; the turn driven by {who} stopped with it{asked}{look}"
                message = (
                    "the Maka window or host serving this data folder stopped, so this chat "
                    f"ends; nothing of this chat's own was waiting{viewed} (start "
                    f"{maka_command('tui')} again to go on)"
                )
            from app.cli_errors import say_error

            say_error(error.code, message)
            os._exit(1)

    def take(self, message: Message) -> bool:
        """Offered every push first: True when it is the viewed session's, from a turn this
        TUI does not drive (shown here), or the answer to a viewer's own answer."""
        from app.bridge_contract import (
            ErrorPush,
            PermissionClosedPush,
            PermissionRequestedPush,
            ResumeStartedPush,
            RunStatusPush,
            SessionDriverPush,
            SessionRemovedPush,
            TranscriptItemPush,
        )

        with self._lock:
            if isinstance(message, ErrorPush) and message.correlation_id == _ANSWER:
                self._say(f"answer not recorded [{message.code}]: {message.message}")
                return True
            if getattr(message, "session_id", None) != self.session_id or self.session_id is None:
                return False
            if isinstance(message, SessionDriverPush) and message.correlation_id == _WATCH:
                if message.driver is not None:
                    self._driven_by(message.driver)
                return True
            if isinstance(message, SessionRemovedPush):
                self._say(
                    "[removed] this session was removed by another Maka command or window: its "
                    "record is gone, and a message here can no longer be sent in it (/quit ends "
                    "this chat)"
                )
                return True
            if self._driving:
                return False
            match message:
                case SessionDriverPush():
                    if message.driver is not None:
                        self._driven_by(message.driver)
                case TranscriptItemPush():
                    self._item(message.item)
                case RunStatusPush():
                    if message.status.value in _FINAL:
                        self._ended(message.status.value, message.failure_class)
                case PermissionRequestedPush():
                    self._question(message)
                case PermissionClosedPush():
                    self._question_closed(message)
                case ResumeStartedPush():
                    self._say("[viewing] Safe resume continues this session")
                case _:
                    return False
            return True

    def _driven_by(self, driver: str) -> None:
        self._driver = driver
        self._shown.clear()
        self._cards.clear()
        self._say(
            f"[viewing] a turn driven by {driver} is running in this session: it shows here as "
            "it happens; it is not this terminal's to stop (its questions may be answered here)"
        )

    def _item(self, item: TranscriptItem) -> None:
        from app.bridge_contract import (
            AssistantMessageItem,
            ContinuationMarkerItem,
            NoticeItem,
            ToolCardItem,
            UserMessageItem,
        )

        if isinstance(item, AssistantMessageItem):
            self._streamed(item.item_id, visible(item.text))
        elif isinstance(item, UserMessageItem):
            self._say(f"{self._driver or 'another client'}> {visible(item.text)}")
        elif isinstance(item, ToolCardItem):
            # A call the model asked for is "running" from then on, though it has not started
            # before it is dispatched (``awaiting_permission``: committed, not dispatched): said
            # as not started yet; a question for it, if its mode asks one, follows on its own
            # (a turn that allows every tool asks none, and "waiting for permission" was untrue).
            from app.host.transcript_items import AWAITING_PERMISSION

            waiting = item.park_reason == AWAITING_PERMISSION
            status = "not started yet" if waiting else _card_words(item)
            if self._cards.get(item.item_id) == status:
                return
            self._cards[item.item_id] = status
            args = visible(item.args_summary, strict=True)
            lines = [f"[tool] {visible(item.tool_name)} {args}  ({status})"]
            if item.result_summary and item.status.value != "running":
                lines += [f"  {line}" for line in visible(item.result_summary).splitlines()]
            self._say("\n".join(lines))
        elif isinstance(item, NoticeItem):
            self._say(f"[{item.level.value}] {visible(item.text)}")
        elif isinstance(item, ContinuationMarkerItem):
            self._say(CONTINUED_MARKER)

    def _streamed(self, item_id: str, text: str) -> None:
        """The model's text as it streams: each push carries the whole text so far (the
        replacement rule), so only what is new is written; a text that changed otherwise (the
        committed one replacing the streamed one) is written again on a line of its own."""
        shown = self._shown.get(item_id, "")
        if text == shown or not text:
            return
        self._begin_output()
        if shown and text.startswith(shown) and self._mid_line:
            self._out.write(text[len(shown) :])
        else:
            self._end_line()
            self._out.write(text)
        self._mid_line = not text.endswith("\n")
        self._shown[item_id] = text
        self._out.flush()

    def _question(self, push: PermissionRequestedPush) -> None:
        if self._open is not None and self._open.request_id == push.request_id:
            return
        self._open = push
        width = min(max(shutil.get_terminal_size((100, 24)).columns, 20), 10_000)
        text = permission_question_text(_Question(push), width)  # type: ignore[arg-type]
        self._say(
            text.removesuffix(ALLOW_PROMPT).rstrip("\n")
            + "\n(a question of the turn you are viewing: the first answer counts)",
            prompt=True,
        )

    def _question_closed(self, push: PermissionClosedPush) -> None:
        open_question = self._open
        if open_question is None or open_question.request_id != push.request_id:
            return
        self._open = None
        answer = "allowed" if push.decision.value == "allow" else "denied"
        self._closed_at = time.monotonic()
        self._closed_words = f"answered in {push.answered_in}: {answer}"
        self._say(f"[permission] {self._closed_words}", prompt=True)

    def _ended(self, status: str, failure_class: str | None) -> None:
        why = f" ({failure_class})" if failure_class else ""
        who = self._driver or "another client"
        if self._open is not None:
            # Its question closed unanswered with the turn: a y or n typed for it soon after is
            # a late answer, never a message (the model would read a stray "yes" as the user's).
            self._closed_at = time.monotonic()
            self._closed_words = f"closed unanswered: the turn ended {status}"
        self._open = None
        self._say(f"[viewing] the turn driven by {who} ended {status}{why}", prompt=True)
        self._driver = None

    # ---- output (lock held) ------------------------------------------------------------------

    def _show_prompt(self) -> None:
        self._out.write(ALLOW_PROMPT if self._open is not None else "you> ")
        self._out.flush()
        self._prompt_shown = True

    def _begin_output(self) -> None:
        """Leave the prompt's line: what the viewed turn says goes on lines of its own."""
        if self._prompt_shown:
            self._out.write("\n")
            self._prompt_shown = False

    def _end_line(self) -> None:
        if self._mid_line:
            self._out.write("\n")
            self._mid_line = False

    def _say(self, text: str, *, prompt: bool = False) -> None:
        """Whole lines; with ``prompt`` (the viewed turn ended, or asks, or its question
        closed) the prompt again when the user is being waited for."""
        self._begin_output()
        self._end_line()
        self._out.write(text + "\n")
        if prompt and self._waiting:
            self._show_prompt()
        self._out.flush()
