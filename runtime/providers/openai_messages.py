"""Provider history -> chat-completions messages, in the form the widest range of servers accepts.

Three rules keep a session usable on real servers (llama.cpp, vLLM, Ollama, hosted APIs), and the
same code serves a live turn and a history rebuilt from the ledger, so both send the same bytes:

- an assistant message that holds only tool calls has ``"content": ""``: some servers answer
  ``null`` with HTTP 500 and some chat templates break when the key is missing;
- no two adjacent messages share a role (``user, user`` after a failed turn or before a host
  notice): chat templates that require alternating roles refuse such a request, so neighbours are
  merged, keeping every text;
- tool arguments and results are written in canonical JSON (RFC 8785: sorted keys, shortest
  numbers), the form the ledger stores, so what the model sees after a restart is byte-identical
  to what it saw before (and prompt-prefix caches keep working).

Each rule is one small function, so a history built incrementally can apply them per message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from runtime.ledger.canonical_codec import canonical_json_bytes
from runtime.ledger.ledger_errors import CanonicalEncodeError
from runtime.providers.provider_port import (
    AssistantText,
    HistoryItem,
    HostNotice,
    Thinking,
    ToolCall,
    ToolResult,
    UserText,
)

MERGE_SEPARATOR = "\n\n"


def json_text(value: Any) -> str:
    """``value`` as the model sees it: canonical JSON, the same before and after a restart."""
    try:
        return canonical_json_bytes(value).decode("utf-8")
    except (CanonicalEncodeError, TypeError, ValueError):
        # Not storable in the ledger (so never rebuilt from it): a stable form all the same.
        return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def tool_call_json(item: ToolCall) -> dict[str, Any]:
    return {
        "id": item.call_id,
        "type": "function",
        "function": {"name": item.name, "arguments": json_text(item.args)},
    }


def tool_result_message(item: ToolResult) -> dict[str, Any]:
    body = item.result if isinstance(item.result, str) else json_text(item.result)
    if item.is_error:
        body = f"[error] {body}"
    return {"role": "tool", "tool_call_id": item.call_id, "content": body}


def raw_messages(history: Iterable[HistoryItem]) -> list[dict[str, Any]]:
    """One message per run of items: consecutive assistant text and tool calls form one
    assistant message (that is how the model produced them); thinking is not sent back."""
    messages: list[dict[str, Any]] = []
    assistant: dict[str, Any] | None = None
    for item in history:
        if isinstance(item, (AssistantText, ToolCall)):
            if assistant is None:
                assistant = {"role": "assistant", "content": ""}
                messages.append(assistant)
            if isinstance(item, AssistantText):
                # Two texts in a row come from two events (two steps): keep them apart.
                separator = MERGE_SEPARATOR if assistant["content"] else ""
                assistant["content"] += separator + item.text
            else:
                assistant.setdefault("tool_calls", []).append(tool_call_json(item))
            continue
        if isinstance(item, Thinking):
            continue
        assistant = None
        if isinstance(item, (UserText, HostNotice)):
            messages.append({"role": "user", "content": item.text})
        elif isinstance(item, ToolResult):
            messages.append(tool_result_message(item))
    return messages


def merge_into(previous: dict[str, Any], message: dict[str, Any]) -> None:
    """Fold ``message`` into ``previous`` (same role): texts joined by a blank line, tool calls
    kept in order."""
    texts = [text for text in (previous.get("content"), message.get("content")) if text]
    previous["content"] = MERGE_SEPARATOR.join(texts)
    calls = [*previous.get("tool_calls", []), *message.get("tool_calls", [])]
    if calls:
        previous["tool_calls"] = calls


def merge_adjacent_roles(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """No two neighbours with the same role. Tool messages are never merged: each answers its
    own call (``tool, tool`` is what the protocol expects after a step with several calls)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        previous = out[-1] if out else None
        if previous is not None and previous["role"] == message["role"] != "tool":
            merge_into(previous, message)
        else:
            out.append(dict(message))
    return out


def messages_from_history(system_prompt: str, history: tuple[HistoryItem, ...]) -> list[Any]:
    """The chat-completions ``messages`` of a request."""
    head: list[dict[str, Any]] = []
    if system_prompt:
        head.append({"role": "system", "content": system_prompt})
    return merge_adjacent_roles([*head, *raw_messages(history)])
