"""The offline demo provider: a deterministic rule-based agent. It is NOT an AI model.

It exists so that a new user (and the end-to-end tests) can try every tool, permission and recovery
path on a machine without network access. It reads the latest user message, recognises a few
phrasings and turns them into real tool calls; after the tool result it answers with a short
summary and ends the turn. Anything else gets a help text listing what it understands.

Rules (case-insensitive):

- ``write FILE saying TEXT`` / ``write TEXT to FILE``  -> ``write_file``
- ``read FILE`` / ``show FILE`` / ``cat FILE``         -> ``read_file``
- ``edit FILE replace OLD with NEW``                   -> ``edit_file``
- ``run COMMAND``                                      -> ``bash`` (COMMAND: the rest of the
  message, ``;`` and ``then`` included: ``run pwd; ls -la`` is one command)
- ``list files`` / ``ls`` / ``list DIR`` /
  ``show me the folder``                               -> ``list_dir``
- ``find PATTERN`` / ``glob PATTERN``                  -> ``glob``

Steps joined by ``, then`` / ``and then`` / ``; `` (``write hello.txt saying hi, then show me the
folder``) run one after the other (a ``run`` step is the last: its command is the rest), one
tool call per step, when every step is one of the above;
otherwise the whole message is read as one request (so ``write a.txt saying now, then later``
still writes ``now, then later``). A step that fails ends the turn with its summary.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from typing import Any

from runtime.base.cancel_token import CancelToken
from runtime.providers.provider_port import (
    Finished,
    HistoryItem,
    HostNotice,
    ProviderRequest,
    StreamEvent,
    TextDelta,
    ToolCallReady,
    ToolResult,
    UserText,
)

LABEL = "offline demo (rule-based, not an AI model)"

NOTICE_ACK = (
    "Noted the host's message: I will not rely on what I saw earlier of the files it names."
)

HELP_TEXT = (
    "I am the offline demo agent: a few fixed rules, not an AI model. I understand:\n"
    "  write hello.txt saying hi\n"
    "  read hello.txt\n"
    "  edit hello.txt replace hi with hello\n"
    "  run <any shell command>\n"
    "  list files\n"
    "  find *.txt\n"
    "and several of these joined with ', then' (write hello.txt saying hi, then list files).\n"
    "Configure an OpenAI-compatible provider (MAKA_PROVIDER=openai) for a real model."
)

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"^(?:write|create)\s+(?P<path>\S+)\s+(?:saying|with|containing)\s+(?P<text>.+)$",
            re.I | re.S,
        ),
        "write",
    ),
    (re.compile(r"^write\s+(?P<text>.+?)\s+(?:to|into)\s+(?P<path>\S+)$", re.I | re.S), "write"),
    (
        re.compile(
            r"^edit\s+(?P<path>\S+)\s+replace\s+(?P<old>.+?)\s+with\s+(?P<new>.+)$", re.I | re.S
        ),
        "edit",
    ),
    (re.compile(r"^(?:read|show|cat|open)\s+(?P<path>\S+)$", re.I), "read"),
    (re.compile(r"^run\s+(?P<command>.+)$", re.I | re.S), "run"),
    (
        re.compile(r"^(?:show|list)(?:\s+me)?\s+(?:the\s+)?(?:folder|files|directory)$", re.I),
        "list",
    ),
    (
        re.compile(r"^(?:list(?:\s+(?:the\s+)?files)?|ls)(?:\s+(?:in\s+)?(?P<path>\S+))?$", re.I),
        "list",
    ),
    (re.compile(r"^(?:find|glob)\s+(?P<pattern>\S+)$", re.I), "glob"),
)


def _strip_quotes(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def plan_tool_call(message: str) -> tuple[str, dict[str, Any]] | None:
    """The tool call the demo makes for ``message``, or None when no rule matches."""
    text = message.strip().rstrip(".!")
    for pattern, kind in _RULES:
        match = pattern.match(text)
        if match is None:
            continue
        groups = match.groupdict()
        if kind == "write":
            body = _strip_quotes(groups["text"])
            return "write_file", {"path": groups["path"], "content": body + "\n"}
        if kind == "edit":
            return "edit_file", {
                "path": groups["path"],
                "old_string": _strip_quotes(groups["old"]),
                "new_string": _strip_quotes(groups["new"]),
            }
        if kind == "read":
            return "read_file", {"path": groups["path"]}
        if kind == "run":
            return "bash", {"command": groups["command"].strip()}
        if kind == "list":
            return "list_dir", {"path": groups.get("path") or "."}
        return "glob", {"pattern": groups["pattern"]}
    return None


_STEP_SEPARATOR = re.compile(r"\s*(?:,\s*(?:and\s+)?then|;\s*(?:then)?|\s+and\s+then)\s+", re.I)


_RUN_STEP = re.compile(r"^run\s", re.I)


def _split_steps(text: str) -> list[str]:
    """``text`` cut at the step separators, except that a step starting with ``run`` takes
    the rest of the text (a shell command has its own ``;``)."""
    steps: list[str] = []
    start = 0
    for separator in [*_STEP_SEPARATOR.finditer(text), None]:
        end = len(text) if separator is None else separator.start()
        if _RUN_STEP.match(text[start:end]):
            steps.append(text[start:])
            break
        steps.append(text[start:end])
        if separator is not None:
            start = separator.end()
    return [step for step in steps if step.strip()]


def plan_steps(message: str) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls the demo makes for ``message``, in order: one per step when the message
    joins recognised steps with ``, then`` / ``and then`` / ``;``, else at most one. A ``run``
    step takes the rest of the message as its command."""
    steps = _split_steps(message.strip())
    if len(steps) > 1:
        planned = [plan_tool_call(step) for step in steps]
        if all(call is not None for call in planned):
            return [call for call in planned if call is not None]
    whole = plan_tool_call(message)
    return [whole] if whole is not None else []


def _excerpt(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[:limit] + " [...]"


def _quoted(text: str) -> str:
    """Output or file content as a fenced block (the window shows it in the monospace font)."""
    return f"```\n{text}\n```"


def summarize_result(result: ToolResult) -> str:
    """A short, honest summary of a tool result."""
    value = result.result
    if isinstance(value, dict) and value.get("attestation") in ("ran", "not_run"):
        # A call settled on the user's word (docs/design/recovery.md section 8): say so,
        # and no more.
        what = "ran" if value["attestation"] == "ran" else "did not run"
        return (
            f"You confirmed that {result.name} {what}; its output was not recorded, so I will "
            "not assume anything beyond that."
        )
    failed_command = result.name == "bash" and isinstance(value, dict) and "error" not in value
    if result.is_error and not failed_command:  # (a command that exited non-zero: below)
        detail = value.get("error", json.dumps(value)) if isinstance(value, dict) else value
        return f"{result.name} did not succeed: {_excerpt(str(detail))}"
    if not isinstance(value, dict):
        return f"{result.name} returned: {_excerpt(json.dumps(value))}"
    if result.name in ("write_file", "edit_file"):
        return (
            f"Done: {result.name} wrote {value.get('bytesWritten')} bytes to {value.get('path')}."
        )
    if result.name == "read_file":
        content = _excerpt(str(value.get("content", ""))).rstrip("\n")
        return f"{value.get('path')} contains:\n{_quoted(content)}"
    if result.name == "bash":
        output = str(value.get("output", "")).rstrip()
        lines = output.splitlines()
        if len(lines) > 6:  # the card above shows the output; the answer only sums it up
            head = _excerpt(chr(10).join(lines[:5]))
            shown = f":\n{_quoted(head)}\n[...] ({len(lines)} lines in all)"
        else:
            shown = f":\n{_quoted(_excerpt(output))}" if output else " with no output."
        return f"The command exited with code {value.get('exitCode')}{shown}"
    if result.name == "list_dir":
        names = [str(entry.get("name")) for entry in value.get("entries", [])]
        return "Files: " + (", ".join(names) if names else "(the folder is empty)")
    if result.name == "glob":
        matches = [str(match) for match in value.get("matches", [])]
        return "Matches: " + (", ".join(matches) if matches else "(none)")
    return f"{result.name} returned: {_excerpt(json.dumps(value, sort_keys=True))}"


def _call_id(history: tuple[HistoryItem, ...], name: str, args: dict[str, Any]) -> str:
    """Deterministic and unique within a session: derived from the position in the history."""
    seed = json.dumps([len(history), name, args], sort_keys=True).encode("utf-8")
    return "demo_" + hashlib.sha256(seed).hexdigest()[:16]


class OfflineDemoProvider:
    @property
    def name(self) -> str:
        return "demo"

    @property
    def label(self) -> str:
        return LABEL

    def stream(self, request: ProviderRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        del cancel  # every step is instantaneous
        history = request.history
        position, last_user = -1, ""
        for index in range(len(history) - 1, -1, -1):
            item = history[index]
            if isinstance(item, UserText):
                position, last_user = index, item.text
                break
        steps = plan_steps(last_user)
        # One tool call per step: the results since the user's message tell which step is next.
        done = [item for item in history[position + 1 :] if isinstance(item, ToolResult)]
        # A host notice may end the history (a continuation with the current files tells the
        # model which files changed): acknowledge it, then go on as if it were not there.
        noticed = 0
        while noticed < len(history) - position - 1 and isinstance(
            history[-1 - noticed], HostNotice
        ):
            noticed += 1
        before = history[: len(history) - noticed]
        ack = NOTICE_ACK + "\n" if noticed else ""
        if before and isinstance(before[-1], ToolResult):
            latest: list[ToolResult] = []
            for item in reversed(before):
                if not isinstance(item, ToolResult):
                    break
                latest.append(item)
            text = ack + "\n".join(summarize_result(item) for item in reversed(latest))
            if len(done) >= len(steps) or any(item.is_error for item in latest):
                yield from _words(text)
                yield Finished("end_turn")
                return
            yield from _words(text + "\n")
        elif not steps:
            yield from _words(ack + HELP_TEXT)
            yield Finished("end_turn")
            return
        elif len(done) >= len(steps):  # every step ran and was summed up before the notice
            yield from _words(ack.rstrip("\n"))
            yield Finished("end_turn")
            return
        else:
            yield from _words(ack)
        name, args = steps[len(done)]
        yield TextDelta(f"[offline demo] calling {name}.\n")
        yield ToolCallReady(_call_id(history, name, args), name, args)
        yield Finished("tool_calls")


def _words(text: str) -> Iterator[TextDelta]:
    for match in re.finditer(r"\S+\s*|\s+", text):
        yield TextDelta(match.group(0))
