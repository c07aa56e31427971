"""The scripted provider's script file: read at most ``MAX_SCRIPT_BYTES`` (an endless file such as
``/dev/zero`` is refused after that much), nested no deeper than ``MAX_SCRIPT_DEPTH``, UTF-8, and
a step's numbers whole: each mistake is ``provider_script_invalid``, never a traceback."""

from __future__ import annotations

import json
import os
import resource
from pathlib import Path

import pytest

from runtime.base.cancel_token import CancelToken
from runtime.providers.provider_port import (
    ProviderError,
    ProviderErrorCode,
    ProviderRequest,
    UserText,
)
from runtime.providers.scripted_provider import (
    MAX_SCRIPT_BYTES,
    MAX_SCRIPT_DEPTH,
    ScriptedProvider,
    load_script,
    parse_script,
)


def _refused(path: Path) -> str:
    with pytest.raises(ProviderError) as caught:
        load_script(path)
    assert caught.value.code == ProviderErrorCode.SCRIPT_INVALID
    return caught.value.message


def _script(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "script.json"
    if isinstance(text, str):
        path.write_text(text)
    else:
        path.write_bytes(text)
    return path


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_an_endless_file_is_refused_after_the_limit() -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert "larger than 64 MiB" in _refused(Path("/dev/zero"))
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 4 * (MAX_SCRIPT_BYTES >> 10)


def test_a_file_one_byte_over_the_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    with path.open("wb") as file:  # sparse: no disk written
        file.truncate(MAX_SCRIPT_BYTES + 1)
    assert MAX_SCRIPT_BYTES == 64 << 20
    assert "larger than 64 MiB" in _refused(path)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 3000 + "]" * 3000,
        '{"a":' * 3000 + "1" + "}" * 3000,
        '{"steps": [{"toolCalls": [{"id": "c", "name": "x", "args": '
        + '{"a":' * 900
        + "1"
        + "}" * 900
        + "}]}]}",
        '{"steps": ' + "[" * (MAX_SCRIPT_DEPTH + 1) + "]" * (MAX_SCRIPT_DEPTH + 1) + "}",
    ],
    ids=["arrays", "objects", "deep-args", "just-over"],
)
def test_deep_nesting_is_refused(tmp_path: Path, text: str) -> None:
    message = _refused(_script(tmp_path, text))
    assert f"deeper than {MAX_SCRIPT_DEPTH} levels" in message


def test_nesting_up_to_the_limit_is_read(tmp_path: Path) -> None:
    args_depth = MAX_SCRIPT_DEPTH - 5  # script, steps, step, toolCalls, call
    args = '{"a":' * args_depth + "1" + "}" * args_depth
    text = '{"steps": [{"toolCalls": [{"id": "c", "name": "x", "args": ' + args + "}]}]}"
    (steps,) = load_script(_script(tmp_path, text))
    assert steps[0]["toolCalls"][0]["id"] == "c"


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    assert "not UTF-8" in _refused(_script(tmp_path, b'{"steps": [{"text": "\xff"}]}'))


@pytest.mark.parametrize(
    "step",
    [
        {"text": "hi", "chunks": "x"},
        {"text": "hi", "chunks": 2.5},
        {"text": "hi", "chunks": True},
        {"usage": {"input": "x"}},
        {"usage": {"output": 1.5}},
        {"usage": 3},
        {"delayMs": -1},
        {"delayMs": 10**30},
        {"delayMs": "1"},
    ],
)
def test_a_step_whose_numbers_are_not_whole_is_refused(tmp_path: Path, step: object) -> None:
    key = next(iter(step)) if isinstance(step, dict) and "text" not in step else "chunks"
    assert key in _refused(_script(tmp_path, json.dumps({"steps": [step]})))


def test_whole_numbers_still_play() -> None:
    provider = ScriptedProvider(
        parse_script(
            {"steps": [{"text": "hello", "chunks": 2, "delayMs": 0, "usage": {"input": 1}}]}
        )
    )
    events = list(provider.stream(ProviderRequest("", (UserText("x"),)), CancelToken()))
    assert "".join(getattr(event, "text", "") for event in events) == "hello"
