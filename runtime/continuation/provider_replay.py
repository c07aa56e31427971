"""Provider replay projection: committed events -> the provider-neutral items a continuation
replays (user/assistant text, thinking, tool calls, tool results), with diagnostics.

Blocking diagnostics make a segment unreplayable; non-blocking ones only explain what was left
out. Calls without a committed result are dropped from the items (``unmatched_tool_call``) and
reported so the segment builder can trim or refuse them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from runtime.ledger.canonical_codec import canonical_json_bytes, sha256_digest
from runtime.ledger.collector_pause import collector_paused
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


@dataclass(slots=True)
class CallBook:
    """The segment's tool calls so far: call id -> (raw item index, tool name), and the ids a
    result has answered."""

    pending: dict[str, tuple[int, str]] = field(default_factory=dict)
    answered: set[str] = field(default_factory=set)


LeftOut = tuple[ReplayDiagnostic, ...]
"""What a gate says about an event it leaves out of the items (maybe nothing)."""

EventGate = Callable[[RuntimeEvent, CallBook], LeftOut | None]
_code = ReplayDiagnosticCode


def _said(code: ReplayDiagnosticCode, event: RuntimeEvent, call_id: str | None = None) -> LeftOut:
    return (ReplayDiagnostic(code, event["id"], call_id),)


def _content(event: RuntimeEvent) -> Mapping[str, Any]:
    content: Mapping[str, Any] = event.get("content") or _NO_CONTENT
    return content


_NO_CONTENT: Mapping[str, Any] = {}


# ---- every event --------------------------------------------------------------------------------


def final(event: RuntimeEvent, calls: CallBook) -> LeftOut | None:
    return _said(_code.PARTIAL_SKIPPED, event) if event["partial"] else None


def model_visible(event: RuntimeEvent, calls: CallBook) -> LeftOut | None:
    return _said(_code.MODEL_HIDDEN_SKIPPED, event) if is_hidden(event) else None


def has_content(event: RuntimeEvent, calls: CallBook) -> LeftOut | None:
    """A fact without content is no history; a terminal one is named, others left silently."""
    if event.get("content") is not None:
        return None
    return _said(_code.TERMINAL_FACT_DIAGNOSTIC_ONLY, event) if is_terminal(event) else ()


# ---- by content kind ----------------------------------------------------------------------------


def error_content(event: RuntimeEvent, calls: CallBook) -> LeftOut | None:
    """An error is a diagnostic only, never history."""
    return _said(_code.ERROR_CONTENT_DIAGNOSTIC_ONLY, event)


def text_not_system(event: RuntimeEvent, calls: CallBook) -> LeftOut | None:
    if event["role"] != "system":
        return None
    return _said(_code.SYSTEM_RUNTIME_FACT_DIAGNOSTIC_ONLY, event)


def text_not_tool(event: RuntimeEvent, calls: CallBook) -> LeftOut | None:
    return _said(_code.UNSUPPORTED_ROLE, event) if event["role"] == "tool" else None


def text_not_empty(event: RuntimeEvent, calls: CallBook) -> LeftOut | None:
    if str(_content(event).get("text", "")) != "":
        return None
    return _said(_code.EMPTY_TEXT_SKIPPED, event)


def thinking_from_model(event: RuntimeEvent, calls: CallBook) -> LeftOut | None:
    return None if event["role"] == "model" else _said(_code.UNSUPPORTED_ROLE, event)


def call_from_model(event: RuntimeEvent, calls: CallBook) -> LeftOut | None:
    if event["role"] == "model":
        return None
    return _said(_code.UNSUPPORTED_ROLE, event, str(_content(event).get("id", "")))


def result_from_tool(event: RuntimeEvent, calls: CallBook) -> LeftOut | None:
    if event["role"] == "tool":
        return None
    return _said(_code.UNSUPPORTED_ROLE, event, str(_content(event).get("id", "")))


def result_answers_a_call(event: RuntimeEvent, calls: CallBook) -> LeftOut | None:
    """A result answers a call of the segment that no result answered yet."""
    call_id = str(_content(event).get("id", ""))
    if call_id in calls.pending and call_id not in calls.answered:
        return None
    return _said(_code.UNMATCHED_TOOL_RESULT, event, call_id)


def result_names_the_calls_tool(event: RuntimeEvent, calls: CallBook) -> LeftOut | None:
    content = _content(event)
    call_id = str(content.get("id", ""))
    if calls.pending[call_id][1] == str(content.get("name", "")):
        return None
    return _said(_code.TOOL_ID_MISMATCH, event, call_id)


def unsupported_content(event: RuntimeEvent, calls: CallBook) -> LeftOut | None:
    return _said(_code.UNSUPPORTED_CONTENT, event)  # pragma: no cover - the decoder admits none


EVENT_GATES: tuple[EventGate, ...] = (final, model_visible, has_content)
"""What every event must pass to become a provider item, in order."""

CONTENT_GATES: Mapping[str, tuple[EventGate, ...]] = {
    "error": (error_content,),
    "text": (text_not_system, text_not_tool, text_not_empty),
    "thinking": (thinking_from_model,),
    "function_call": (call_from_model,),
    "function_response": (result_from_tool, result_answers_a_call, result_names_the_calls_tool),
}
"""Then what its content kind must pass, in order; any other kind is ``unsupported_content``.
The first gate that leaves an event out says why (or nothing)."""


def _left_out(event: RuntimeEvent, calls: CallBook) -> LeftOut | None:
    for gate in EVENT_GATES:
        said = gate(event, calls)
        if said is not None:
            return said
    kind = _content(event)["kind"]
    for gate in CONTENT_GATES.get(kind, (unsupported_content,)):
        said = gate(event, calls)
        if said is not None:
            return said
    return None


def _let_through(event: RuntimeEvent, content: Mapping[str, Any] | None, calls: CallBook) -> bool:
    """Whether every gate lets ``event`` through (``content`` is its content): the verdict of
    ``_left_out(event, calls) is None``, reached without calling the gates one by one. The
    projection asks it of every event of a segment, most of which every gate lets through; the
    gates, which define the verdict, then run only for the events left out, to say why. A
    property test holds the two equal on generated segments."""
    if content is None or event["partial"] or is_hidden(event):
        return False
    kind, role = content["kind"], event["role"]
    if kind == "text":
        return role not in ("system", "tool") and str(content.get("text", "")) != ""
    if kind in ("thinking", "function_call"):
        return role == "model"
    if kind == "function_response" and role == "tool":
        call_id = str(content.get("id", ""))
        call = calls.pending.get(call_id)
        return (
            call is not None
            and call_id not in calls.answered
            and call[1] == str(content.get("name", ""))
        )
    return False


def _item(event: RuntimeEvent, content: Mapping[str, Any]) -> ProviderItem:
    """The provider item of an event every gate let through (``content`` is its content)."""
    event_id, kind = event["id"], content["kind"]
    if kind == "text":
        role = "user" if event["role"] == "user" else "assistant"
        return ProviderItem(ItemKind.TEXT, role, event_id, text=str(content.get("text", "")))
    if kind == "thinking":
        signature = content.get("signature")
        return ProviderItem(
            ItemKind.THINKING,
            "assistant",
            event_id,
            text=str(content.get("text", "")),
            signature=signature if isinstance(signature, str) else None,
        )
    call_id, name = str(content.get("id", "")), str(content.get("name", ""))
    if kind == "function_call":
        return ProviderItem(
            ItemKind.TOOL_CALL,
            "assistant",
            event_id,
            call_id=call_id,
            name=name,
            args=content.get("args"),
        )
    return ProviderItem(
        ItemKind.TOOL_RESULT,
        "tool",
        event_id,
        call_id=call_id,
        name=name,
        result=content.get("result"),
        is_error=content.get("isError") is True,
    )


def project_provider_items(events: tuple[RuntimeEvent, ...]) -> ProviderProjection:
    """Project one segment's events onto provider items (pure). The items are many small
    acyclic objects, made with the cyclic collector paused (``collector_paused``): otherwise
    its collections re-traverse every event of the segment, more than half the cost."""
    with collector_paused():
        return _projection(events)


def _projection(events: tuple[RuntimeEvent, ...]) -> ProviderProjection:
    diagnostics: list[ReplayDiagnostic] = []
    raw: list[tuple[int, ProviderItem]] = []
    calls = CallBook()
    for position, event in enumerate(events):
        content = event.get("content")
        if not _let_through(event, content, calls):
            said = _left_out(event, calls)
            if said is not None:
                diagnostics.extend(said)
                continue
        item = _item(event, content or _NO_CONTENT)
        if item.kind is ItemKind.TOOL_CALL:
            calls.pending[item.call_id] = (len(raw), item.name)
        elif item.kind is ItemKind.TOOL_RESULT:
            calls.answered.add(item.call_id)
        raw.append((position, item))
    unmatched_indexes = {
        index for call_id, (index, _) in calls.pending.items() if call_id not in calls.answered
    }
    items: list[ProviderItem] = []
    positions: list[int] = []
    unmatched: list[tuple[str, int]] = []
    for index, (position, item) in enumerate(raw):
        if index in unmatched_indexes:
            diagnostics.append(
                ReplayDiagnostic(_code.UNMATCHED_TOOL_CALL, item.event_id, item.call_id)
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
