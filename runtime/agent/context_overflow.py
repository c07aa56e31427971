"""The way on after a turn that did not fit the model's context window.

Left alone, the oversized message would stay in the provider history and overflow every later
turn: the session could never continue. So when the server reports an overflow (or accepts the
request and sends no event at all, which is how some servers report one), the run commits
one host notice (role user, author host) before its failed ending. The notice names the run's
model-visible events in ``stateDelta.providerHistoryOmits``; from the next turn on the provider
history leaves those out and shows the notice instead, saying what was left out. The ledger keeps
every event: nothing is deleted, and the decision is a committed fact, the same after a restart.
"""

from __future__ import annotations

from collections.abc import Sequence

from runtime.agent.event_builders import EventBuilder
from runtime.ledger.event_model import RuntimeEvent

_PREVIEW = 120

WAY_ON = (
    "This turn is left out of what the model sees from the next message on (the ledger keeps "
    "it); if a short message fails the same way, the conversation as a whole is too long for "
    "this model: start a new session or give the server a larger context size."
)


def _model_visible(event: RuntimeEvent) -> bool:
    content = event.get("content")
    return (
        content is not None
        and content["kind"] in ("text", "thinking", "function_call", "function_response")
        and not event["partial"]
        and event.get("modelVisibility") != "hidden"
        and event["role"] != "system"
    )


def _describe(events: Sequence[RuntimeEvent]) -> str:
    parts: list[str] = []
    for event in events:
        content = event.get("content")
        if content is not None and content["kind"] == "text" and event["role"] == "user":
            text = content["text"]
            preview = " ".join(text.split())
            if len(preview) > _PREVIEW:
                preview = preview[: _PREVIEW - 1] + "…"
            parts.append(f'the user\'s message ({len(text)} characters, "{preview}")')
    results = sum(
        1
        for event in events
        if (content := event.get("content")) is not None and content["kind"] == "function_response"
    )
    if results:
        parts.append(f"{results} tool result{'s' if results != 1 else ''}")
    return " and ".join(parts) or "its messages"


def unanswered_turn_events(
    run_events: Sequence[RuntimeEvent], already_omitted: frozenset[str] = frozenset()
) -> list[RuntimeEvent]:
    """The model-visible events of a failed turn the model never answered (no text, thinking
    or tool call of the model's own), not already left out. Such a turn stays in the history
    (its message is merged with the next one), so it is the likeliest cause of a later
    overflow: a server that reports an overflow only as an empty stream, or a context size
    configured after the fact, leaves exactly this behind."""
    if any(event["role"] == "model" and _model_visible(event) for event in run_events):
        return []
    return [
        event
        for event in run_events
        if _model_visible(event) and event["id"] not in already_omitted
    ]


def overflow_notice(
    builder: EventBuilder,
    run_events: Sequence[RuntimeEvent],
    ts: int,
    earlier: Sequence[RuntimeEvent] = (),
    *,
    refused: bool = False,
) -> RuntimeEvent | None:
    """The host notice that leaves this run's model-visible events out of later histories, and
    with them ``earlier`` (the messages of earlier turns the model never answered), or None
    when there is nothing to leave out. ``refused``: the server did not say the turn overflowed
    but answered it with no event at all (how some servers report an overflow)."""
    left_out = [event for event in run_events if _model_visible(event)]
    if not left_out and not earlier:
        return None
    why = (
        "the model server refused the previous turn without an answer (most often a prompt "
        "longer than the model's context window)"
        if refused
        else "the previous turn did not fit the model's context window"
    )
    text = (
        f"Note from the host: {why}, so it is left out of this conversation: {_describe(left_out)}."
    )
    if earlier:
        text += (
            f" Also left out, from earlier turns the model never answered: {_describe(earlier)}."
        )
    text += " If it is still needed, ask the user for a shorter version."
    ids = [event["id"] for event in (*earlier, *left_out)]
    return builder.host_notice(text, ts, omitted_event_ids=ids)
