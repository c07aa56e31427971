"""Server-sent events and chat-completion chunks, decoded strictly.

The OpenAI-compatible streaming protocol sends ``data: {json}`` lines separated by blank lines and
ends with ``data: [DONE]``. Servers differ in small ways (comments, ``event:`` lines, CRLF, a
missing ``[DONE]`` after a ``finish_reason``), which this decoder tolerates; what it never tolerates
is a chunk that is not JSON or whose shape is wrong: those raise ``provider_malformed_stream``
with a readable message instead of producing half a tool call.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime.providers.openai_errors import (
    SHOWN_LIMIT,
    error_object_text,
    is_context_overflow,
    quoted,
)
from runtime.providers.provider_port import (
    ProviderError,
    ProviderErrorCode,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallReady,
    Usage,
)
from runtime.providers.secret_redaction import redact_secrets
from runtime.providers.server_text import ledger_count, server_json

DONE = "[DONE]"
CHUNK_QUOTE_LIMIT = 120
"""How much of a chunk that is not JSON an error quotes."""


def _malformed(message: str) -> ProviderError:
    return ProviderError(ProviderErrorCode.MALFORMED_STREAM, message)


def sse_data_payloads(lines: Iterator[bytes]) -> Iterator[str]:
    """Yield the ``data`` payload of each event (multi-line data joined with newlines)."""
    data: list[str] = []
    for raw in lines:
        try:
            line = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            raise _malformed("the stream is not valid UTF-8") from None
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
    if data:
        yield "\n".join(data)


@dataclass(slots=True)
class _PartialCall:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ChunkAssembler:
    """Folds chat-completion chunks into stream events; tool calls are emitted whole at the end.
    ``secrets`` are redacted from any server text an error quotes, before it is cut."""

    secrets: Sequence[str | None] = ()
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    finish_reason: str | None = None
    done: bool = False
    _last: int | None = None
    """The key (in ``calls``) of the call the last tool-call fragment went to."""
    _slots: dict[int, int] = field(default_factory=dict)
    """A server's call index -> the key of the call it names now in ``calls``."""

    def feed(self, payload: str) -> Iterator[StreamEvent]:
        if payload.strip() == DONE:
            self.done = True
            return
        try:
            chunk = server_json(payload)
        except json.JSONDecodeError as error:
            raise _malformed(
                f"a stream chunk is not JSON ({error.msg}): "
                f"{quoted(payload, CHUNK_QUOTE_LIMIT, self.secrets)!r}"
            ) from None
        if not isinstance(chunk, dict):
            raise _malformed("a stream chunk is not a JSON object")
        if chunk.get("error") is not None:
            raise stream_error(chunk, self.secrets)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            yield Usage(
                ledger_count(usage.get("prompt_tokens")),
                ledger_count(usage.get("completion_tokens")),
            )
        choices = chunk.get("choices", [])
        if not isinstance(choices, list):
            raise _malformed("'choices' is not a list")
        for choice in choices:
            yield from self._feed_choice(choice)

    def _feed_choice(self, choice: Any) -> Iterator[StreamEvent]:
        if not isinstance(choice, dict):
            raise _malformed("a choice is not a JSON object")
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            raise _malformed("'delta' is not a JSON object")
        for key in ("reasoning_content", "reasoning"):
            reasoning = delta.get(key)
            if isinstance(reasoning, str) and reasoning:
                yield ThinkingDelta(reasoning)
        content = delta.get("content")
        if content is not None:
            if not isinstance(content, str):
                raise _malformed("'delta.content' is not a string")
            if content:
                yield TextDelta(content)
        tool_calls = delta.get("tool_calls")
        if tool_calls is not None:
            if not isinstance(tool_calls, list):
                raise _malformed("'delta.tool_calls' is not a list")
            for fragment in tool_calls:
                self._feed_call(fragment)
        reason = choice.get("finish_reason")
        if reason is not None:
            if not isinstance(reason, str):
                raise _malformed("'finish_reason' is not a string")
            self.finish_reason = reason

    def _feed_call(self, fragment: Any) -> None:
        if not isinstance(fragment, dict):
            raise _malformed("a tool-call fragment is not a JSON object")
        call_id = fragment.get("id")
        index = fragment.get("index")
        if index is None:
            key = self._unindexed(call_id)
        elif not isinstance(index, int) or isinstance(index, bool):
            raise _malformed("a tool-call fragment has no integer index")
        else:
            key = self._indexed(index, call_id)
        self._last = key
        partial = self.calls.setdefault(key, _PartialCall())
        if isinstance(call_id, str) and call_id:
            partial.call_id = call_id
        function = fragment.get("function") or {}
        if not isinstance(function, dict):
            raise _malformed("a tool-call fragment's 'function' is not an object")
        name = function.get("name")
        if isinstance(name, str) and name and name != partial.name:
            # Most servers send the name once; some repeat it, a few split it into pieces.
            partial.name += name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            partial.arguments.append(arguments)
        elif arguments is not None:
            raise _malformed("tool-call arguments are not a string")

    def _indexed(self, index: int, call_id: Any) -> int:
        """Where a fragment with the server's ``index`` goes: the call that index names, unless
        the fragment carries an id other than that call's (some servers give every parallel
        call index 0, each with its own id): then a new call, which the index names from then
        on."""
        key = self._slots.get(index)
        if key is not None:
            current = self.calls[key].call_id
            if not (isinstance(call_id, str) and call_id and current and call_id != current):
                return key
        key = max(self.calls) + 1 if self.calls else 0
        self._slots[index] = key
        return key

    def _unindexed(self, call_id: Any) -> int:
        """Where a fragment without an ``index`` goes. Some servers stream parallel calls
        without one, each whole in its own chunk with its own id: a fragment with an id other
        than the last call's starts a new call; one without an id continues the last call."""
        if self._last is None:
            return 0
        current = self.calls[self._last].call_id
        if isinstance(call_id, str) and call_id and current and call_id != current:
            return max(self.calls) + 1
        return self._last

    def finish(self) -> list[ToolCallReady]:
        """The assembled tool calls, in index order; malformed arguments are an error."""
        ready: list[ToolCallReady] = []
        for index in sorted(self.calls):
            partial = self.calls[index]
            if not partial.call_id or not partial.name:
                raise _malformed(f"tool call #{index} arrived without an id or a name")
            text = "".join(partial.arguments).strip() or "{}"
            try:
                args = server_json(text)
            except json.JSONDecodeError:
                if self.finish_reason == "length":
                    raise _malformed(
                        f"the reply was cut off by the length limit in the middle of tool call "
                        f"{partial.name} (raise the server's max_tokens)"
                    ) from None
                raise _malformed(
                    f"the arguments of tool call {partial.name} are not valid JSON"
                ) from None
            ready.append(ToolCallReady(partial.call_id, partial.name, args))
        return ready


def stream_error(chunk: dict[str, Any], secrets: Sequence[str | None] = ()) -> ProviderError:
    """An ``error`` object sent inside the stream (after the 200 headers)."""
    text = error_object_text(chunk)
    message = redact_secrets(text, secrets) if text else ""
    message = message or quoted(json.dumps(chunk["error"]), SHOWN_LIMIT, secrets)
    if is_context_overflow(json.dumps(chunk)):
        return ProviderError(
            ProviderErrorCode.CONTEXT_OVERFLOW,
            f"the request is longer than the model's context window (the server said: {message})",
        )
    return ProviderError(ProviderErrorCode.HTTP_ERROR, f"the server reported an error: {message}")
