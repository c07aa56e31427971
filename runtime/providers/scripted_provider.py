"""The scripted provider: plays a JSON script of model steps (tests, demos, crash drills).

Script format (a JSON object)::

    {"turns": [                      # one list of steps per user turn
       [ {"text": "...", "thinking": "...", "toolCalls": [{"id": "c1", "name": "bash",
                                                           "args": {...}}],
          "usage": {"input": 10, "output": 3}, "delayMs": 0, "chunks": 1},
         {"text": "done"} ],
       [ ... ]
    ]}

``{"steps": [...]}`` is shorthand for a single turn. A step may instead be
``{"error": {"message": "..."}}`` (the provider fails; with ``"code":
"provider_context_overflow"`` it fails as a server does when the history does not fit the
model's context window, with ``"provider_empty_stream"`` as one that answers a request with no
event at all) or ``{"hang": true}`` (it waits until the turn is cancelled: used to
test cancellation).

The provider is *stateless*: the turn is the number of user messages in the request history and
the step is the number of model steps since the last user message. A new ``maka run`` process, a
continuation after a crash and an in-process loop therefore all pick the same next step from the
same committed history.

With ``record_path`` every request is appended to a JSON-lines file, so tests can check that no
request ever held an unpaired tool call.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from runtime.base.cancel_token import CancelToken
from runtime.ledger.canonical_codec import deeper_than
from runtime.providers.history_projection import unpaired_tool_calls
from runtime.providers.provider_port import (
    AssistantText,
    Finished,
    HistoryItem,
    HostNotice,
    ProviderError,
    ProviderErrorCode,
    ProviderRequest,
    StreamEvent,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolCall,
    ToolCallReady,
    ToolResult,
    Usage,
    UserText,
    history_to_json,
)

_STEP_KEYS = frozenset({"text", "thinking", "toolCalls", "usage", "delayMs", "chunks"})


def _invalid(message: str) -> ProviderError:
    return ProviderError(ProviderErrorCode.SCRIPT_INVALID, message)


def _check_step(step: Any, where: str) -> dict[str, Any]:
    if not isinstance(step, dict):
        raise _invalid(f"{where}: a step must be a JSON object")
    if "error" in step or "hang" in step:
        if len(step) != 1:
            raise _invalid(f"{where}: 'error' and 'hang' steps take no other keys")
        return step
    unknown = set(step) - _STEP_KEYS
    if unknown:
        raise _invalid(f"{where}: unknown keys {sorted(unknown)}")
    calls = step.get("toolCalls", [])
    if not isinstance(calls, list):
        raise _invalid(f"{where}.toolCalls: must be a list")
    for index, call in enumerate(calls):
        if (
            not isinstance(call, dict)
            or set(call) != {"id", "name", "args"}
            or not isinstance(call["id"], str)
            or not isinstance(call["name"], str)
            or not call["id"]
        ):
            raise _invalid(f"{where}.toolCalls[{index}]: needs exactly id, name and args")
    if not isinstance(step.get("text", ""), str) or not isinstance(step.get("thinking", ""), str):
        raise _invalid(f"{where}: text and thinking must be strings")
    if not _whole(step.get("chunks", 1)):
        raise _invalid(f"{where}.chunks: must be a whole number")
    delay = step.get("delayMs", 0)
    if not _whole(delay) or not 0 <= delay <= _MAX_DELAY_MS:
        raise _invalid(f"{where}.delayMs: must be a whole number from 0 to {_MAX_DELAY_MS}")
    usage = step.get("usage", {})
    if not isinstance(usage, dict) or not all(_whole(usage.get(k, 0)) for k in ("input", "output")):
        raise _invalid(f"{where}.usage: must be an object of whole numbers 'input' and 'output'")
    return step


_MAX_DELAY_MS = 3_600_000
"""The longest delay a step may ask for (an hour, as long as a ``hang`` step waits)."""


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_script(value: Any) -> tuple[tuple[dict[str, Any], ...], ...]:
    """Validate a script document; returns the steps of each turn."""
    if not isinstance(value, dict):
        raise _invalid("the script must be a JSON object with 'turns' or 'steps'")
    if set(value) == {"steps"}:
        turns_value: Any = [value["steps"]]
    elif set(value) == {"turns"}:
        turns_value = value["turns"]
    else:
        raise _invalid("the script must have exactly one key: 'turns' or 'steps'")
    if not isinstance(turns_value, list) or not all(isinstance(t, list) for t in turns_value):
        raise _invalid("'turns' must be a list of step lists")
    return tuple(
        tuple(_check_step(step, f"turns[{t}][{s}]") for s, step in enumerate(turn))
        for t, turn in enumerate(turns_value)
    )


_SCRIPTABLE_FAILURES = (ProviderErrorCode.CONTEXT_OVERFLOW, ProviderErrorCode.EMPTY_STREAM)
"""The provider failures a script's error step may name (any other is a scripted failure)."""

MAX_SCRIPT_BYTES = 64 << 20
"""The largest script read (64 MiB): far more than any test script, so a larger file (or an
endless one, ``/dev/zero``) is refused after reading at most this much."""

MAX_SCRIPT_DEPTH = 64
"""The deepest nesting of arrays and objects a script may hold (a tool call's ``args`` sit 5
levels down): a deeper one is refused, before anything walks it."""


def load_script(path: Path) -> tuple[tuple[dict[str, Any], ...], ...]:
    try:
        with path.open("rb") as file:
            data = file.read(MAX_SCRIPT_BYTES + 1)
    except OSError as error:
        raise _invalid(f"cannot read script {path}: {error.strerror or error}") from None
    if len(data) > MAX_SCRIPT_BYTES:
        raise _invalid(f"script {path} is larger than {MAX_SCRIPT_BYTES >> 20} MiB")
    too_deep = f"script {path} nests arrays and objects deeper than {MAX_SCRIPT_DEPTH} levels"
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise _invalid(f"script {path} is not UTF-8 text: {error.reason}") from None
    except json.JSONDecodeError as error:
        raise _invalid(f"script {path} is not JSON: {error}") from None
    except RecursionError:
        raise _invalid(too_deep) from None
    if isinstance(value, dict | list) and deeper_than(value, MAX_SCRIPT_DEPTH):
        raise _invalid(too_deep)
    return parse_script(value)


def script_position(history: tuple[HistoryItem, ...]) -> tuple[int, int]:
    """(turn index, step index) for the next model step of ``history``."""
    turn = -1
    steps = 0
    in_model_step = False
    for item in history:
        if isinstance(item, (UserText, HostNotice)):
            if isinstance(item, UserText):
                turn += 1
                steps = 0
            in_model_step = False
        elif isinstance(item, (AssistantText, Thinking, ToolCall)):
            if not in_model_step:
                steps += 1
                in_model_step = True
        elif isinstance(item, ToolResult):
            in_model_step = False
    return max(turn, 0), steps


class ScriptedProvider:
    def __init__(
        self,
        turns: tuple[tuple[dict[str, Any], ...], ...],
        record_path: Path | None = None,
    ) -> None:
        self._turns = turns
        self._record_path = record_path
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return "scripted"

    @property
    def label(self) -> str:
        return "scripted provider (plays a test script; not an AI model)"

    def _record(self, request: ProviderRequest) -> None:
        if self._record_path is None:
            return
        line = {
            "history": history_to_json(request.history),
            "tools": [tool.name for tool in request.tools],
            "unpairedToolCalls": unpaired_tool_calls(request.history),
        }
        with self._lock, self._record_path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(line, sort_keys=True) + "\n")

    def stream(self, request: ProviderRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        self._record(request)
        turn, step_index = script_position(request.history)
        if turn >= len(self._turns) or step_index >= len(self._turns[turn]):
            raise ProviderError(
                ProviderErrorCode.SCRIPT_EXHAUSTED,
                f"the script has no step {step_index + 1} for turn {turn + 1}",
            )
        step = self._turns[turn][step_index]
        if "error" in step:
            detail = step["error"]
            message = detail.get("message", "scripted failure") if isinstance(detail, dict) else ""
            named = detail.get("code") if isinstance(detail, dict) else None
            code = next((code for code in _SCRIPTABLE_FAILURES if code == named), None)
            raise ProviderError(code or ProviderErrorCode.SCRIPTED_FAILURE, str(message))
        if "hang" in step:
            cancel.wait(3600.0)
            raise ProviderError(ProviderErrorCode.CANCELLED, "the turn was cancelled")
        delay = step.get("delayMs", 0)
        if isinstance(delay, int) and delay > 0 and cancel.wait(delay / 1000):
            raise ProviderError(ProviderErrorCode.CANCELLED, "the turn was cancelled")
        if step.get("thinking"):
            yield ThinkingDelta(step["thinking"])
        text = step.get("text", "")
        chunks = max(1, int(step.get("chunks", 1)))
        size = max(1, -(-len(text) // chunks))
        for start in range(0, len(text), size):
            yield TextDelta(text[start : start + size])
        for call in step.get("toolCalls", []):
            yield ToolCallReady(call["id"], call["name"], call["args"])
        usage = step.get("usage")
        if isinstance(usage, dict):
            yield Usage(int(usage.get("input", 0)), int(usage.get("output", 0)))
        yield Finished("tool_calls" if step.get("toolCalls") else "end_turn")
