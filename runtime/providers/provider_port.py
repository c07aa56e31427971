"""The provider port: what the run loop asks of a model, in provider-neutral terms.

A provider receives a ``ProviderRequest`` (system prompt, history, tool specs) and yields a stream
of ``StreamEvent`` s: text and thinking deltas, complete tool calls, token usage and exactly one
``Finished`` at the end. Any failure is raised as ``ProviderError`` with a stable code and a
sentence a user can read; the run loop turns it into a ``provider_error`` terminal event. A
provider must never hang: network providers bound every read by a timeout and close their
connection when the turn is cancelled.

The history is built from committed events only (``history_projection``), so what a model sees
after a restart is exactly what it saw before.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from runtime.base.cancel_token import CancelToken
from runtime.ledger.coded_error import CodedError


class ProviderErrorCode(StrEnum):
    HTTP_ERROR = "provider_http_error"
    TIMEOUT = "provider_timeout"
    CONNECTION_LOST = "provider_connection_lost"
    MALFORMED_STREAM = "provider_malformed_stream"
    CONFIG_INVALID = "provider_config_invalid"
    SCRIPT_INVALID = "provider_script_invalid"
    SCRIPT_EXHAUSTED = "provider_script_exhausted"
    SCRIPTED_FAILURE = "provider_scripted_failure"
    CANCELLED = "provider_cancelled"
    CONTEXT_OVERFLOW = "provider_context_overflow"
    EMPTY_STREAM = "provider_empty_stream"
    EMPTY_REPLY = "provider_empty_reply"
    """Not a failure: a step that ended with neither text nor a tool call. The turn completes
    with it as its ``stopReason`` and a notice that says so."""


class ProviderError(CodedError):
    """A provider failure: ``code`` is stable, ``message`` is for people."""

    code: ProviderErrorCode

    def __init__(self, code: ProviderErrorCode, message: str) -> None:
        super().__init__(code, message, text=f"{code}: {message}")


# ---- history (provider-neutral) ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UserText:
    text: str


@dataclass(frozen=True, slots=True)
class HostNotice:
    """A host-authored message in the user's seat (for example "this tool's outcome is
    unknown"); never a fabricated tool result."""

    text: str


@dataclass(frozen=True, slots=True)
class AssistantText:
    text: str


@dataclass(frozen=True, slots=True)
class Thinking:
    text: str
    signature: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    call_id: str
    name: str
    args: Any


@dataclass(frozen=True, slots=True)
class ToolResult:
    call_id: str
    name: str
    result: Any
    is_error: bool = False


HistoryItem = UserText | HostNotice | AssistantText | Thinking | ToolCall | ToolResult


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    system_prompt: str
    history: tuple[HistoryItem, ...]
    tools: tuple[ToolSpec, ...] = field(default=())


# ---- the stream -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    text: str
    signature: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCallReady:
    """A complete tool call (streamed argument fragments are assembled by the provider)."""

    call_id: str
    name: str
    args: Any


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int
    output_tokens: int


_CALL_STUB = re.compile(r"\s*functions\.([A-Za-z_][A-Za-z0-9_.-]{0,63}):\s*")


def tool_call_stub(text: str) -> str | None:
    """The tool name when a reply's whole ``text`` is the opening of a tool call written as text,
    ``functions.edit_file:`` with nothing after it, which some servers' function-calling
    templates send instead of a call (nothing is run: it is an empty reply); ``None`` for any
    other text."""
    match = _CALL_STUB.fullmatch(text)
    return None if match is None else match.group(1)


@dataclass(frozen=True, slots=True)
class Finished:
    """The last event of a successful stream. ``reason``: ``end_turn``, ``tool_calls``,
    ``length`` or a provider-specific word. ``empty_reply_hint``: when the reply held neither
    text nor a tool call, what the provider knows about why (for example a request setting some
    servers answer empty to, and how to turn it off); None otherwise."""

    reason: str
    empty_reply_hint: str | None = None


StreamEvent = TextDelta | ThinkingDelta | ToolCallReady | Usage | Finished


class Provider(Protocol):
    """``name`` selects the provider (``--provider``); ``label`` is shown to the user."""

    @property
    def name(self) -> str: ...

    @property
    def label(self) -> str: ...

    def stream(self, request: ProviderRequest, cancel: CancelToken) -> Iterator[StreamEvent]: ...


def history_to_json(items: tuple[HistoryItem, ...]) -> list[dict[str, Any]]:
    """A plain JSON view of a history (for request recordings and debugging)."""
    out: list[dict[str, Any]] = []
    for item in items:
        match item:
            case UserText(text=text):
                out.append({"type": "user", "text": text})
            case HostNotice(text=text):
                out.append({"type": "host_notice", "text": text})
            case AssistantText(text=text):
                out.append({"type": "assistant", "text": text})
            case Thinking(text=text):
                out.append({"type": "thinking", "text": text})
            case ToolCall(call_id=call_id, name=name, args=args):
                out.append({"type": "tool_call", "id": call_id, "name": name, "args": args})
            case ToolResult(call_id=call_id, name=name, result=result, is_error=is_error):
                out.append(
                    {
                        "type": "tool_result",
                        "id": call_id,
                        "name": name,
                        "result": result,
                        "isError": is_error,
                    }
                )
    return out
