"""A command's result in the transcript: its exit code, then its output (the card shows the first
lines and expands); the terminal keeps its one line."""

from __future__ import annotations

from runtime.agent.transcript_projection import OUTPUT_CHARS, summarize_result


def test_the_card_gets_the_exit_code_then_the_output() -> None:
    result = {"exitCode": 0, "output": "".join(f"{n}\n" for n in range(1, 3001))}
    card = summarize_result(result, False, whole_output=True)
    first, rest = card.split("\n", 1)
    assert first == "exit code 0"
    shown, marker = rest.rsplit("\n", 1)
    assert shown.startswith("1\n2\n3\n") and len(shown) <= OUTPUT_CHARS
    numbers = shown.split("\n")
    assert numbers == [str(n) for n in range(1, len(numbers) + 1)]  # whole lines only
    assert marker == f"[{3000 - len(numbers)} more lines not shown here]"
    assert summarize_result(result, False) == "exit code 0: 3000"


def test_output_that_fits_has_no_marker() -> None:
    card = summarize_result({"exitCode": 0, "output": "a\nb\n"}, False, whole_output=True)
    assert card == "exit code 0\na\nb"


def test_a_command_without_output_is_its_exit_code() -> None:
    assert summarize_result({"exitCode": 2, "output": ""}, False, whole_output=True) == (
        "exit code 2"
    )
    assert summarize_result({"exitCode": 2, "output": "\n\n"}, False, whole_output=True) == (
        "exit code 2"
    )


def test_errors_and_other_tools_are_unchanged() -> None:
    assert summarize_result({"error": "boom"}, True, whole_output=True) == "boom"
    wrote = {"bytesWritten": 3, "path": "a.txt"}
    assert summarize_result(wrote, False, whole_output=True) == "wrote 3 bytes to a.txt"


def test_a_command_whose_leftover_processes_were_stopped_says_how_many() -> None:
    result = {"exitCode": 0, "output": "spawned\n", "backgroundStopped": 2}
    card = summarize_result(result, False, whole_output=True)
    assert card == "exit code 0 · 2 background processes stopped\nspawned"
    line = summarize_result({**result, "backgroundStopped": 1}, False)
    assert line == "exit code 0 · 1 background process stopped: spawned"
    assert summarize_result({"exitCode": 0, "output": ""}, False) == "exit code 0"
