"""The offline demo provider: fixed rules into real tool calls, then a summary. Not an AI model."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.agent.cancel_token import CancelToken
from runtime.providers.offline_demo_provider import (
    OfflineDemoProvider,
    plan_tool_call,
    summarize_result,
)
from runtime.providers.provider_port import (
    Finished,
    HistoryItem,
    ProviderRequest,
    TextDelta,
    ToolCall,
    ToolCallReady,
    ToolResult,
    UserText,
)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("write hello.txt saying hi", ("write_file", {"path": "hello.txt", "content": "hi\n"})),
        (
            "Write 'good day' to notes/a.md",
            ("write_file", {"path": "notes/a.md", "content": "good day\n"}),
        ),
        ("read hello.txt", ("read_file", {"path": "hello.txt"})),
        ("run echo one two", ("bash", {"command": "echo one two"})),
        ("list files", ("list_dir", {"path": "."})),
        ("ls src", ("list_dir", {"path": "src"})),
        ("find *.txt", ("glob", {"pattern": "*.txt"})),
        (
            "edit hello.txt replace hi with hello",
            ("edit_file", {"path": "hello.txt", "old_string": "hi", "new_string": "hello"}),
        ),
        ("what is the meaning of life", None),
    ],
)
def test_rules(message: str, expected: tuple[str, dict[str, Any]] | None) -> None:
    assert plan_tool_call(message) == expected


def _stream(history: tuple[HistoryItem, ...]) -> list[object]:
    return list(OfflineDemoProvider().stream(ProviderRequest("", history), CancelToken()))


def test_a_request_becomes_one_tool_call_and_a_result_becomes_a_summary() -> None:
    events = _stream((UserText("run echo hi"),))
    calls = [event for event in events if isinstance(event, ToolCallReady)]
    assert len(calls) == 1 and calls[0].name == "bash"
    assert events[-1] == Finished("tool_calls")
    result = ToolResult(calls[0].call_id, "bash", {"exitCode": 0, "output": "hi\n"})
    history = (UserText("run echo hi"), ToolCall(calls[0].call_id, "bash", calls[0].args), result)
    summary = _stream(history)
    text = "".join(event.text for event in summary if isinstance(event, TextDelta))
    assert "exited with code 0" in text and "hi" in text
    assert summary[-1] == Finished("end_turn")


def test_unknown_requests_get_help_labelled_not_an_ai_model() -> None:
    events = _stream((UserText("tell me a joke"),))
    text = "".join(event.text for event in events if isinstance(event, TextDelta))
    assert "not an AI model" in text
    assert "write hello.txt saying hi" in text
    assert OfflineDemoProvider().label.endswith("not an AI model)")


def test_error_results_are_summarized_honestly() -> None:
    text = summarize_result(ToolResult("c", "read_file", {"error": "no such file"}, True))
    assert "did not succeed" in text and "no such file" in text
