"""The scripted provider picks its step from the committed history alone and records requests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.base.cancel_token import CancelToken
from runtime.providers.provider_port import (
    AssistantText,
    Finished,
    ProviderError,
    ProviderErrorCode,
    ProviderRequest,
    TextDelta,
    ToolCall,
    ToolCallReady,
    ToolResult,
    Usage,
    UserText,
)
from runtime.providers.scripted_provider import (
    ScriptedProvider,
    load_script,
    parse_script,
    script_position,
)

SCRIPT = {
    "turns": [
        [
            {
                "text": "writing",
                "toolCalls": [{"id": "c1", "name": "write_file", "args": {"path": "a"}}],
                "usage": {"input": 5, "output": 2},
            },
            {"text": "done", "chunks": 2},
        ],
        [{"error": {"message": "server on fire"}}],
    ]
}


def _run(provider: ScriptedProvider, *history: object) -> list[object]:
    request = ProviderRequest("", tuple(history))  # type: ignore[arg-type]
    return list(provider.stream(request, CancelToken()))


def test_plays_steps_in_order_determined_by_the_history(tmp_path: Path) -> None:
    record = tmp_path / "requests.jsonl"
    provider = ScriptedProvider(parse_script(SCRIPT), record)
    first = _run(provider, UserText("go"))
    assert first == [
        TextDelta("writing"),
        ToolCallReady("c1", "write_file", {"path": "a"}),
        Usage(5, 2),
        Finished("tool_calls"),
    ]
    second = _run(
        provider,
        UserText("go"),
        AssistantText("writing"),
        ToolCall("c1", "write_file", {"path": "a"}),
        ToolResult("c1", "write_file", {"ok": True}),
    )
    assert second == [TextDelta("do"), TextDelta("ne"), Finished("end_turn")]
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(lines) == 2
    assert lines[1]["history"][2] == {
        "type": "tool_call",
        "id": "c1",
        "name": "write_file",
        "args": {"path": "a"},
    }
    assert all(line["unpairedToolCalls"] == [] for line in lines)


def test_a_new_process_with_the_same_history_plays_the_same_step() -> None:
    history = (UserText("a"), AssistantText("x"), UserText("b"))
    assert script_position(history) == (1, 0)
    assert script_position((UserText("a"), ToolCall("c", "n", {}), ToolResult("c", "n", 1))) == (
        0,
        1,
    )


def test_error_step_and_exhausted_script_are_provider_errors() -> None:
    provider = ScriptedProvider(parse_script(SCRIPT))
    with pytest.raises(ProviderError) as caught:
        _run(provider, UserText("1"), AssistantText("done"), UserText("2"))
    assert caught.value.code == ProviderErrorCode.SCRIPTED_FAILURE
    assert "server on fire" in caught.value.message
    with pytest.raises(ProviderError) as caught:
        _run(provider, UserText("1"), UserText("2"), UserText("3"))
    assert caught.value.code == ProviderErrorCode.SCRIPT_EXHAUSTED


def test_hang_step_waits_for_cancellation() -> None:
    provider = ScriptedProvider(parse_script({"steps": [{"hang": True}]}))
    cancel = CancelToken()
    cancel.cancel()
    with pytest.raises(ProviderError) as caught:
        list(provider.stream(ProviderRequest("", (UserText("x"),)), cancel))
    assert caught.value.code == ProviderErrorCode.CANCELLED


@pytest.mark.parametrize(
    "script",
    [
        [],
        {"steps": [{"text": 3}]},
        {"steps": [{"bogus": 1}]},
        {"steps": [{"toolCalls": [{"id": "", "name": "x", "args": {}}]}]},
        {"steps": [{"error": {}, "text": "x"}]},
        {"turns": {}},
        {"steps": [], "turns": []},
    ],
)
def test_invalid_scripts_are_refused_with_a_code(script: object) -> None:
    with pytest.raises(ProviderError) as caught:
        parse_script(script)
    assert caught.value.code == ProviderErrorCode.SCRIPT_INVALID


def test_unreadable_or_non_json_script_file(tmp_path: Path) -> None:
    with pytest.raises(ProviderError):
        load_script(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ProviderError) as caught:
        load_script(bad)
    assert "not JSON" in caught.value.message
