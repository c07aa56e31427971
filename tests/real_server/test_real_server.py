"""The real ``maka`` command and the OpenAI-compatible provider against a real model server.

Skipped unless ``MAKA_REAL_SERVER_URL`` names a server's OpenAI-compatible base URL (the part
before ``/chat/completions``, e.g. ``http://127.0.0.1:8080/v1``). ``./dev real-server`` builds
llama.cpp's server (or llama-cpp-python's) with a tiny model made on the spot and prints the
command that runs this suite; see the README and docs/providers.md (which servers were tried,
with which settings). Optional settings:

- ``MAKA_REAL_SERVER_MODEL``: the model name to send (default: the first of ``GET /models``);
- ``MAKA_REAL_SERVER_CONTEXT_TOKENS``: the server's context size, passed to maka as
  ``MAKA_OPENAI_CONTEXT_TOKENS`` so an overflow is caught even on servers that do not report it;
- ``MAKA_REAL_SERVER_OVERFLOW_CHARS``: the size of the prompt that must overflow (default 100000).

What the model says is not checked (a tiny random model says nothing useful); what is checked is
that every request is accepted, that the session goes on after each kind of trouble, and what the
ledger records.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from runtime.base.cancel_token import CancelToken
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import RunHeader, RunStatus
from runtime.providers.openai_compatible_provider import OpenAICompatibleProvider, OpenAISettings
from runtime.providers.provider_port import (
    AssistantText,
    Finished,
    HostNotice,
    ProviderRequest,
    ToolCall,
    ToolResult,
    UserText,
)
from runtime.tools.tool_catalog import default_catalog
from tests.helpers.maka_run import RunResult, committed_runs, maka

URL = os.environ.get("MAKA_REAL_SERVER_URL", "").rstrip("/")

pytestmark = [
    pytest.mark.real_server,
    pytest.mark.skipif(not URL, reason="no real model server (set MAKA_REAL_SERVER_URL)"),
]


def _model() -> str:
    configured = os.environ.get("MAKA_REAL_SERVER_MODEL")
    if configured:
        return configured
    try:
        with urllib.request.urlopen(f"{URL}/models", timeout=10) as answer:
            listing = json.load(answer)
        return str(listing["data"][0]["id"])
    except (OSError, ValueError, KeyError, IndexError):
        return "default"


@pytest.fixture(scope="module")
def model() -> str:
    return _model()


class Session:
    """One data directory and working folder, driven through the real command."""

    def __init__(self, tmp_path: Path, model: str, **env: str) -> None:
        self.data = tmp_path / "data"
        self.work = tmp_path / "work"
        self.work.mkdir()
        (self.work / "readme.txt").write_text("a file to list\n", encoding="utf-8")
        self.env = {
            "MAKA_PROVIDER": "openai",
            "MAKA_OPENAI_BASE_URL": URL,
            "MAKA_MODEL": model,
            "MAKA_OPENAI_TIMEOUT": "120",
            "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1",
        }
        context = os.environ.get("MAKA_REAL_SERVER_CONTEXT_TOKENS")
        if context:
            self.env["MAKA_OPENAI_CONTEXT_TOKENS"] = context
        self.env.update(env)

    def run(self, prompt: str, *, failpoint: str | None = None, **env: str) -> RunResult:
        runs = committed_runs(self.data) if self.data.exists() else []
        where = ["--session", runs[0][0].session_id] if runs else ["--cwd", str(self.work)]
        extra = {"MAKA_FAILPOINT": failpoint} if failpoint else {}
        return maka(
            ["run", *where, "--permission-mode", "auto", prompt],
            self.data,
            env={**self.env, **extra, **env},
            timeout=600,
        )

    def resume(self) -> tuple[int, dict[str, Any]]:
        session = committed_runs(self.data)[0][0].session_id
        result = maka(
            ["resume", session, "--json", "--permission-mode", "auto"],
            self.data,
            env=self.env,
            timeout=600,
        )
        assert result.stdout.strip(), result.stderr
        return result.returncode, json.loads(result.stdout)

    def runs(self) -> list[tuple[RunHeader, list[RuntimeEvent]]]:
        return committed_runs(self.data)


def _kinds(events: list[RuntimeEvent]) -> list[str]:
    return [event["content"]["kind"] for event in events if "content" in event]


def _calls(events: list[RuntimeEvent]) -> list[RuntimeEvent]:
    return [e for e in events if "content" in e and e["content"]["kind"] == "function_call"]


def _said_something(events: list[RuntimeEvent]) -> bool:
    """The model answered: a non-empty text or a tool call (an empty reply completes too, with
    ``provider_empty_reply``, so the status alone proves nothing)."""
    for event in events:
        content = event.get("content")
        if content is None or event["role"] != "model":
            continue
        if content["kind"] == "function_call":
            return True
        if content["kind"] == "text" and content["text"].strip():
            return True
    return False


def test_turns_complete_and_the_session_goes_on(tmp_path: Path, model: str) -> None:
    session = Session(tmp_path, model)
    first = session.run("Say hello.")
    assert first.returncode == 0, first.stderr
    second = session.run("And again, please.")
    assert second.returncode == 0, second.stderr
    runs = session.runs()
    assert [header.status for header, _ in runs] == [RunStatus.COMPLETED] * 2
    # The first turn must get an answer: a text or a tool call (the status alone proves
    # nothing, an empty reply completes too).
    assert _said_something(runs[0][1]), "the model said nothing and called no tool"
    for number, (result, (_, events)) in enumerate(zip((first, second), runs, strict=True)):
        if "provider_empty_reply" in result.stderr or not _said_something(events):
            # A step that said nothing is reported with its code, never silent: the tiny test
            # model answers empty once a tool result is in its context, as some real models
            # do after a tool call.
            assert "[provider_empty_reply]" in result.stdout, (number, result.stdout)
            assert events[-1]["actions"]["stateDelta"]["stopReason"] == "provider_empty_reply"


def test_a_history_with_tool_calls_failed_turns_and_notices_is_accepted(model: str) -> None:
    """What maka sends after a tool call, a failed turn and a host notice: the server must take
    it (an assistant message with only tool calls, no two user messages in a row)."""
    provider = OpenAICompatibleProvider(OpenAISettings(URL, model, read_timeout=120))
    history = (
        UserText("An earlier message whose turn failed."),
        UserText("List the folder."),
        ToolCall("call_1", "list_dir", {"path": "."}),
        ToolResult("call_1", "list_dir", {"entries": [{"name": "readme.txt", "type": "file"}]}),
        AssistantText("There is one file."),
        HostNotice("Note from the host: an earlier turn was interrupted."),
        UserText("Thanks."),
    )
    request = ProviderRequest("Be brief.", history, default_catalog().specs())
    events = list(provider.stream(request, CancelToken()))
    assert isinstance(events[-1], Finished)


def test_a_tool_round_trip(tmp_path: Path, model: str) -> None:
    session = Session(tmp_path, model)
    result = session.run("List the files in this folder.")
    runs = session.runs()
    header, events = runs[-1]
    if not _calls(events):
        pytest.skip("the server's model answered without a tool call")
    assert result.returncode == 0, result.stderr
    assert header.status is RunStatus.COMPLETED
    kinds = _kinds(events)
    assert kinds.count("function_call") == kinds.count("function_response")
    # The model was asked again after the tool's result, and the server accepted that request.
    first_response = kinds.index("function_response")
    assert header.failure_class is None and len(kinds) > first_response


@pytest.mark.parametrize("failpoint", ["P8", "P6"])
def test_a_sigkill_then_safe_resume(tmp_path: Path, model: str, failpoint: str) -> None:
    """P8 kills the process before the run's ending is committed; P6 right after a tool's
    result is committed (only reached when the model calls a tool)."""
    session = Session(tmp_path, model)
    crashed = session.run("List the files in this folder.", failpoint=failpoint)
    if crashed.returncode != -9:
        assert crashed.returncode == 0, crashed.stderr
        pytest.skip(f"the run never reached {failpoint} (the model made no tool call)")
    code, body = session.resume()
    assert code == 0, body
    assert body["started"] is True and body["status"] == "completed"
    runs = session.runs()
    source, target = runs[0], runs[-1]
    assert source[0].failure_class == "app_restarted"
    assert target[0].continuation_source is not None
    assert target[0].status is RunStatus.COMPLETED
    # The session goes on with a new turn after the resume.
    after = session.run("Thanks.")
    assert after.returncode == 0, after.stderr


def test_a_wrong_path_and_a_stopped_server_are_plain_errors(tmp_path: Path, model: str) -> None:
    session = Session(tmp_path, model, MAKA_OPENAI_BASE_URL=f"{URL}/no-such-api")
    wrong = session.run("Hello.")
    assert wrong.returncode == 1
    assert "HTTP 404" in wrong.stderr and "MAKA_OPENAI_BASE_URL" in wrong.stderr
    assert "Traceback" not in wrong.stderr
    (tmp_path / "down").mkdir()
    down = Session(tmp_path / "down", model, MAKA_OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    refused = down.run("Hello.")
    assert refused.returncode == 1 and "connection refused" in refused.stderr


def test_an_oversized_message_is_reported_and_the_session_goes_on(
    tmp_path: Path, model: str
) -> None:
    size = int(os.environ.get("MAKA_REAL_SERVER_OVERFLOW_CHARS", "100000"))
    session = Session(tmp_path, model)
    huge = session.run("word " * (size // 5))
    assert huge.returncode == 1
    assert "Traceback" not in huge.stderr
    overflow = "longer than the model's context window" in huge.stderr
    assert overflow or "sent no events at all" in huge.stderr, huge.stderr
    # Either way the turn is left out of what the model sees from the next message on.
    assert "left out of what the model sees" in huge.stderr
    after = session.run("A short question.")
    assert after.returncode == 0, after.stderr
    failed_events = session.runs()[0][1]
    assert any(event["author"] == "host" for event in failed_events)
    assert failed_events[0]["content"]["kind"] == "text"  # the ledger keeps the message
