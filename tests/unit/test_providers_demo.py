"""The offline demo provider: fixed rules into real tool calls, then a summary. Not an AI model."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.base.cancel_token import CancelToken
from runtime.providers.offline_demo_provider import (
    NOTICE_ACK,
    OfflineDemoProvider,
    plan_steps,
    plan_tool_call,
    summarize_result,
)
from runtime.providers.provider_port import (
    AssistantText,
    Finished,
    HistoryItem,
    HostNotice,
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
    # A command that exited non-zero has no "error": its code and output, never "None".
    failed = {"exitCode": 3, "output": "hi\n", "durationMs": 4}
    said = summarize_result(ToolResult("c", "bash", failed, True))
    assert said.startswith("The command exited with code 3:") and "hi" in said, said
    assert "None" not in said
    other = summarize_result(ToolResult("c", "glob", {"matches": []}, True))
    assert "did not succeed" in other and "None" not in other


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "write hello.txt saying hi, then show me the folder",
            [("write_file", {"path": "hello.txt", "content": "hi\n"}), ("list_dir", {"path": "."})],
        ),
        (
            "list files; read a.txt and then run wc -l a.txt",
            [
                ("list_dir", {"path": "."}),
                ("read_file", {"path": "a.txt"}),
                ("bash", {"command": "wc -l a.txt"}),
            ],
        ),
        # A command is the rest of the message: its own ";" and "then" belong to it.
        ("run pwd; ls -la", [("bash", {"command": "pwd; ls -la"})]),
        (
            "read a.txt, then run make; then ls -la",
            [("read_file", {"path": "a.txt"}), ("bash", {"command": "make; then ls -la"})],
        ),
        ("Run echo a, then echo b", [("bash", {"command": "echo a, then echo b"})]),
        # A piece that is no step of its own keeps the message whole.
        (
            "write a.txt saying now, then later",
            [("write_file", {"path": "a.txt", "content": "now, then later\n"})],
        ),
        ("tell me a joke, then list files", []),
    ],
)
def test_steps(message: str, expected: list[tuple[str, dict[str, Any]]]) -> None:
    assert plan_steps(message) == expected


def _turn(message: str, results: list[dict[str, Any]]) -> tuple[list[str], str, list[object]]:
    """Play a turn: each call gets the next of ``results``; returns the tools called, all text
    and the last step's events."""
    history: tuple[HistoryItem, ...] = (UserText(message),)
    called: list[str] = []
    text = ""
    while True:
        events = _stream(history)
        text += "".join(event.text for event in events if isinstance(event, TextDelta))
        calls = [event for event in events if isinstance(event, ToolCallReady)]
        if not calls:
            return called, text, events
        (call,) = calls
        called.append(call.name)
        value = results[len(called) - 1]
        result = ToolResult(call.call_id, call.name, value, "error" in value)
        history = (*history, ToolCall(call.call_id, call.name, call.args), result)


def test_a_request_in_steps_makes_one_call_per_step_then_sums_up() -> None:
    written = {"path": "hello.txt", "bytesWritten": 3}
    listing = {"entries": [{"name": "hello.txt"}]}
    called, text, last = _turn(
        "write hello.txt saying hi, then show me the folder", [written, listing]
    )
    assert called == ["write_file", "list_dir"]
    assert "wrote 3 bytes to hello.txt" in text and "Files: hello.txt" in text
    assert last[-1] == Finished("end_turn")


def test_a_failed_step_ends_the_turn() -> None:
    called, text, last = _turn("read nope.txt, then list files", [{"error": "no such file"}])
    assert called == ["read_file"]
    assert "did not succeed" in text and last[-1] == Finished("end_turn")


def test_a_long_command_output_is_summed_up_not_repeated() -> None:
    output = "".join(f"{n}\n" for n in range(1, 3001))
    text = summarize_result(ToolResult("c", "bash", {"exitCode": 0, "output": output}))
    assert text.splitlines()[1:8] == ["```", "1", "2", "3", "4", "5", "```"]
    assert text.endswith("[...] (3000 lines in all)") and len(text.splitlines()) == 9


def test_a_result_the_user_confirmed_is_worded_as_their_confirmation() -> None:
    from runtime.ledger.attestation import Attestation, attestation_result

    attested = Attestation(1_764_606_000_000, 2, "seen")
    ran = summarize_result(ToolResult("c", "bash", attestation_result(True, attested)))
    assert ran.startswith("You confirmed that bash ran;")
    not_run = summarize_result(ToolResult("c", "bash", attestation_result(False, attested), True))
    assert not_run.startswith("You confirmed that bash did not run;")


def _text(events: list[object]) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


def test_a_host_notice_after_the_last_step_is_acknowledged_and_the_turn_ends() -> None:
    # A continuation with the current files ends its history with a host notice after the
    # last tool result (maka resume S --rebaseline after a crash at P8).
    call = ToolCall("c1", "bash", {"command": "echo hi"})
    result = ToolResult("c1", "bash", {"exitCode": 0, "output": "hi\n"}, False)
    notice = HostNotice("Note from the host: 1 file in the folder changed outside your view")
    events = _stream((UserText("run echo hi"), call, result, notice))
    assert events[-1] == Finished("end_turn")
    assert not any(isinstance(event, ToolCallReady) for event in events)
    text = _text(events)
    assert text.startswith(NOTICE_ACK) and "exited with code 0" in text
    answered = _stream((UserText("run echo hi"), call, result, AssistantText("ok"), notice))
    assert answered[-1] == Finished("end_turn") and _text(answered) == NOTICE_ACK


def test_a_host_notice_between_steps_is_acknowledged_and_the_next_step_runs() -> None:
    call = ToolCall("c1", "write_file", {"path": "a.txt", "content": "x\n"})
    result = ToolResult("c1", "write_file", {"bytesWritten": 2, "path": "a.txt"}, False)
    notice = HostNotice("Note from the host: files changed")
    events = _stream((UserText("write a.txt saying x, then list files"), call, result, notice))
    calls = [event for event in events if isinstance(event, ToolCallReady)]
    assert [c.name for c in calls] == ["list_dir"] and events[-1] == Finished("tool_calls")
    assert _text(events).startswith(NOTICE_ACK)
