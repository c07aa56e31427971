"""A reply the server's content filter stopped (``finish_reason: "content_filter"``) with no text
is an empty reply that says the filter stopped it, not a hint about ``tool_choice``."""

from __future__ import annotations

from runtime.base.cancel_token import CancelToken
from runtime.providers.openai_compatible_provider import OpenAICompatibleProvider, OpenAISettings
from runtime.providers.provider_port import (
    Finished,
    ProviderRequest,
    StreamEvent,
    TextDelta,
    ToolSpec,
    UserText,
)
from tests.helpers.chat_server import Reply, chat_server, text_reply

TOOLS = (ToolSpec("read_file", "read a file", {"type": "object"}),)
REQUEST = ProviderRequest("", (UserText("hi"),), TOOLS)


def _events(reply: Reply) -> list[StreamEvent]:
    with chat_server([reply]) as server:
        provider = OpenAICompatibleProvider(
            OpenAISettings(base_url=server.base_url, model="m", read_timeout=5)
        )
        return list(provider.stream(REQUEST, CancelToken()))


def test_an_empty_reply_stopped_by_the_content_filter_says_so() -> None:
    [finished] = _events(text_reply("", finish="content_filter"))
    assert isinstance(finished, Finished)
    assert finished.empty_reply_hint is not None
    assert "content filter stopped the reply" in finished.empty_reply_hint
    assert "tool_choice" not in finished.empty_reply_hint


def test_text_the_filter_let_through_carries_no_empty_reply_hint() -> None:
    events = _events(text_reply("Part of it", finish="content_filter"))
    assert events == [TextDelta("Part of it"), Finished("content_filter")]


def test_an_ordinary_empty_reply_keeps_the_tool_choice_hint() -> None:
    [finished] = _events(text_reply("", finish="stop"))
    assert isinstance(finished, Finished)
    assert finished.empty_reply_hint is not None and "tool_choice" in finished.empty_reply_hint
