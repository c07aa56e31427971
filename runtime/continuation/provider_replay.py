"""Provider replay projection: committed events -> the provider-neutral items a continuation
replays (user/assistant text, thinking, tool calls, tool results), with diagnostics.

Blocking diagnostics make a segment unreplayable; non-blocking ones only explain what was left
out. Calls without a committed result are dropped from the items (``unmatched_tool_call``) and
reported so the segment builder can trim or refuse them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from runtime.ledger.canonical_codec import canonical_json_bytes, sha256_digest
from runtime.ledger.event_model import RuntimeEvent, is_hidden, is_terminal

PROVIDER_PROJECTION_VERSION = 1


class ReplayDiagnosticCode(StrEnum):
    PARTIAL_SKIPPED = "partial_skipped"
    UNMATCHED_TOOL_RESULT = "unmatched_tool_result"
    TOOL_ID_MISMATCH = "tool_id_mismatch"
    UNSUPPORTED_ROLE = "unsupported_role"
    UNSUPPORTED_CONTENT = "unsupported_content"
    MODEL_HIDDEN_SKIPPED = "model_hidden_skipped"
    TERMINAL_FACT_DIAGNOSTIC_ONLY = "terminal_fact_diagnostic_only"
    SYSTEM_RUNTIME_FACT_DIAGNOSTIC_ONLY = "system_runtime_fact_diagnostic_only"
    EMPTY_TEXT_SKIPPED = "empty_text_skipped"
    ERROR_CONTENT_DIAGNOSTIC_ONLY = "error_content_diagnostic_only"
    UNMATCHED_TOOL_CALL = "unmatched_tool_call"


BLOCKING_REPLAY_CODES = frozenset(
    {
        ReplayDiagnosticCode.PARTIAL_SKIPPED,
        ReplayDiagnosticCode.UNMATCHED_TOOL_RESULT,
        ReplayDiagnosticCode.TOOL_ID_MISMATCH,
        ReplayDiagnosticCode.UNSUPPORTED_ROLE,
        ReplayDiagnosticCode.UNSUPPORTED_CONTENT,
    }
)


class ItemKind(StrEnum):
    TEXT = "text"
    THINKING = "thinking"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"


@dataclass(frozen=True, slots=True)
class ProviderItem:
    """One provider-neutral history item, tied to the event it came from."""

    kind: ItemKind
    role: str  # user | assistant | tool
    event_id: str
    text: str = ""
    signature: str | None = None
    call_id: str = ""
    name: str = ""
    args: Any = None
    result: Any = None
    is_error: bool = False

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": self.kind.value,
            "role": self.role,
            "eventId": self.event_id,
        }
        if self.kind in (ItemKind.TEXT, ItemKind.THINKING):
            body["text"] = self.text
            if self.signature is not None:
                body["signature"] = self.signature
        elif self.kind is ItemKind.TOOL_CALL:
            body.update({"callId": self.call_id, "name": self.name, "args": self.args})
        else:
            body.update(
                {
                    "callId": self.call_id,
                    "name": self.name,
                    "result": self.result,
                    "isError": self.is_error,
                }
            )
        return body


@dataclass(frozen=True, slots=True)
class ReplayDiagnostic:
    code: ReplayDiagnosticCode
    event_id: str
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class ProviderProjection:
    items: tuple[ProviderItem, ...]
    diagnostics: tuple[ReplayDiagnostic, ...]
    # unmatched calls: (call id, event index in the input) in ledger order
    unmatched_calls: tuple[tuple[str, int], ...]
    item_positions: tuple[int, ...]  # ledger index of each item

    @property
    def blocking(self) -> tuple[ReplayDiagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.code in BLOCKING_REPLAY_CODES)


def project_provider_items(events: tuple[RuntimeEvent, ...]) -> ProviderProjection:
    """Project one segment's events onto provider items (pure)."""
    diagnostics: list[ReplayDiagnostic] = []
    raw: list[tuple[int, ProviderItem]] = []
    pending_calls: dict[str, tuple[int, str]] = {}  # call id -> (raw index, tool name)
    answered: set[str] = set()
    code = ReplayDiagnosticCode
    for position, event in enumerate(events):
        event_id = event["id"]
        if event["partial"]:
            diagnostics.append(ReplayDiagnostic(code.PARTIAL_SKIPPED, event_id))
            continue
        content = event.get("content")
        if is_hidden(event):
            diagnostics.append(ReplayDiagnostic(code.MODEL_HIDDEN_SKIPPED, event_id))
            continue
        if content is None:
            if is_terminal(event):
                diagnostics.append(ReplayDiagnostic(code.TERMINAL_FACT_DIAGNOSTIC_ONLY, event_id))
            continue
        kind = content["kind"]
        role = event["role"]
        if kind == "error":
            diagnostics.append(ReplayDiagnostic(code.ERROR_CONTENT_DIAGNOSTIC_ONLY, event_id))
        elif kind == "text":
            text = str(content.get("text", ""))
            if role == "system":
                diagnostics.append(
                    ReplayDiagnostic(code.SYSTEM_RUNTIME_FACT_DIAGNOSTIC_ONLY, event_id)
                )
            elif role == "tool":
                diagnostics.append(ReplayDiagnostic(code.UNSUPPORTED_ROLE, event_id))
            elif text == "":
                diagnostics.append(ReplayDiagnostic(code.EMPTY_TEXT_SKIPPED, event_id))
            else:
                item_role = "user" if role == "user" else "assistant"
                raw.append((position, ProviderItem(ItemKind.TEXT, item_role, event_id, text=text)))
        elif kind == "thinking":
            if role != "model":
                diagnostics.append(ReplayDiagnostic(code.UNSUPPORTED_ROLE, event_id))
                continue
            signature = content.get("signature")
            raw.append(
                (
                    position,
                    ProviderItem(
                        ItemKind.THINKING,
                        "assistant",
                        event_id,
                        text=str(content.get("text", "")),
                        signature=signature if isinstance(signature, str) else None,
                    ),
                )
            )
        elif kind == "function_call":
            call_id = str(content.get("id", ""))
            if role != "model":
                diagnostics.append(ReplayDiagnostic(code.UNSUPPORTED_ROLE, event_id, call_id))
                continue
            name = str(content.get("name", ""))
            pending_calls[call_id] = (len(raw), name)
            raw.append(
                (
                    position,
                    ProviderItem(
                        ItemKind.TOOL_CALL,
                        "assistant",
                        event_id,
                        call_id=call_id,
                        name=name,
                        args=content.get("args"),
                    ),
                )
            )
        elif kind == "function_response":
            call_id = str(content.get("id", ""))
            if role != "tool":
                diagnostics.append(ReplayDiagnostic(code.UNSUPPORTED_ROLE, event_id, call_id))
                continue
            name = str(content.get("name", ""))
            pending = pending_calls.get(call_id)
            if pending is None or call_id in answered:
                diagnostics.append(ReplayDiagnostic(code.UNMATCHED_TOOL_RESULT, event_id, call_id))
                continue
            if pending[1] != name:
                diagnostics.append(ReplayDiagnostic(code.TOOL_ID_MISMATCH, event_id, call_id))
                continue
            answered.add(call_id)
            raw.append(
                (
                    position,
                    ProviderItem(
                        ItemKind.TOOL_RESULT,
                        "tool",
                        event_id,
                        call_id=call_id,
                        name=name,
                        result=content.get("result"),
                        is_error=content.get("isError") is True,
                    ),
                )
            )
        else:  # pragma: no cover - the decoder admits no other kind
            diagnostics.append(ReplayDiagnostic(code.UNSUPPORTED_CONTENT, event_id))
    unmatched_indexes = {
        index for call_id, (index, _) in pending_calls.items() if call_id not in answered
    }
    items: list[ProviderItem] = []
    positions: list[int] = []
    unmatched: list[tuple[str, int]] = []
    for index, (position, item) in enumerate(raw):
        if index in unmatched_indexes:
            diagnostics.append(
                ReplayDiagnostic(code.UNMATCHED_TOOL_CALL, item.event_id, item.call_id)
            )
            unmatched.append((item.call_id, position))
            continue
        items.append(item)
        positions.append(position)
    return ProviderProjection(tuple(items), tuple(diagnostics), tuple(unmatched), tuple(positions))


def provider_replay_digest(items: tuple[ProviderItem, ...]) -> str:
    body = {
        "protocol": "provider_replay_plan_v1",
        "providerProjectionVersion": PROVIDER_PROJECTION_VERSION,
        "items": [item.to_json() for item in items],
    }
    return sha256_digest(canonical_json_bytes(body))
