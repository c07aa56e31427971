"""What the real ``maka run`` says when a model server answers with nothing: an empty reply, an
empty stream (a refused prompt), or a server killed with SIGKILL before its first event.
"""

from __future__ import annotations

import json
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from runtime.ledger.store_ports import RunStatus
from tests.helpers.chat_server import chat_server, sse_headers, text_reply
from tests.helpers.maka_run import committed_runs, maka

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def _env(url: str, **extra: str) -> dict[str, str]:
    return {
        "MAKA_PROVIDER": "openai",
        "MAKA_OPENAI_BASE_URL": url,
        "MAKA_MODEL": "tiny",
        "MAKA_OPENAI_TIMEOUT": "60",
        "MAKA_WORKSPACE_CHECKPOINTS": "off",
        **extra,
    }


def _work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


def test_an_empty_reply_is_said_with_its_code_and_the_tool_choice_way_out(tmp_path: Path) -> None:
    data, work = tmp_path / "data", _work(tmp_path)
    with chat_server([text_reply("")]) as server:
        result = maka(["run", "--cwd", str(work), "Hello."], data, env=_env(server.base_url))
    assert result.returncode == 0, result.stderr
    assert "[provider_empty_reply] the model ended its turn" in result.stdout
    assert "maka: notice [provider_empty_reply]" in result.stderr
    assert "MAKA_OPENAI_TOOL_CHOICE=off" in result.stderr
    [(header, events)] = committed_runs(data)
    assert header.status is RunStatus.COMPLETED
    assert events[-1]["actions"]["stateDelta"]["stopReason"] == "provider_empty_reply"


def test_a_reply_that_only_opens_a_tool_call_is_said_as_an_empty_reply(tmp_path: Path) -> None:
    data, work = tmp_path / "data", _work(tmp_path)
    with chat_server([text_reply("functions.edit_file:")]) as server:
        result = maka(["run", "--cwd", str(work), "Fix it."], data, env=_env(server.base_url))
    assert result.returncode == 0, result.stderr
    assert '[provider_empty_reply] the model\'s reply was only "functions.edit_file:"' in (
        result.stdout
    )
    assert "MAKA_OPENAI_TOOL_CHOICE=off" in result.stderr
    [(header, events)] = committed_runs(data)
    assert header.status is RunStatus.COMPLETED
    # The ledger keeps what the model said, word for word; the ending names what it was.
    assert any("functions.edit_file:" in json.dumps(event) for event in events[:-1])
    assert events[-1]["actions"]["stateDelta"]["stopReason"] == "provider_empty_reply"


def _empty_stream(handler: BaseHTTPRequestHandler) -> None:
    sse_headers(handler)


def test_an_empty_stream_then_a_short_message_that_succeeds(tmp_path: Path) -> None:
    data, work = tmp_path / "data", _work(tmp_path)
    huge = "paste " * 4000
    with chat_server([_empty_stream, text_reply("Short is fine.")]) as server:
        env = _env(server.base_url, MAKA_OPENAI_TOOL_CHOICE="off")
        failed = maka(["run", "--cwd", str(work), huge], data, env=env)
        session = committed_runs(data)[0][0].session_id
        after = maka(["run", "--session", session, "A short question."], data, env=env)
        bodies = server.requests()
    assert failed.returncode == 1
    assert "sent no events at all" in failed.stderr and "tool_choice" not in failed.stderr
    assert "left out of what the model sees" in failed.stderr
    assert "Traceback" not in failed.stderr
    assert after.returncode == 0, after.stderr
    assert "Short is fine." in after.stdout
    assert huge.strip() not in str(bodies[1])
    assert [header.status for header, _ in committed_runs(data)] == [
        RunStatus.FAILED,
        RunStatus.COMPLETED,
    ]


def test_a_server_killed_before_its_first_event_is_a_cut_connection(tmp_path: Path) -> None:
    data, work = tmp_path / "data", _work(tmp_path)
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.dying_chat_server"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        url = f"http://127.0.0.1:{port}/v1"
        result = maka(["run", "--cwd", str(work), "Hello."], data, env=_env(url))
        assert server.wait(timeout=60) == -9  # it really was killed with SIGKILL
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        if server.stdout is not None:
            server.stdout.close()
    assert result.returncode == 1
    assert f"the connection to the model server at {url}/chat/completions was cut" in (
        result.stderr
    )
    assert "before it sent any event" in result.stderr
    assert "sent no events at all" not in result.stderr and "tool_choice" not in result.stderr
    assert "Traceback" not in result.stderr
    [(header, _)] = committed_runs(data)
    assert header.status is RunStatus.FAILED


def test_the_tui_says_an_empty_reply_live_and_in_its_transcript(tmp_path: Path) -> None:
    data, work = tmp_path / "data", _work(tmp_path)
    with chat_server([text_reply("")]) as server:
        env = _env(server.base_url, MAKA_OPENAI_TOOL_CHOICE="off")
        result = maka(
            ["tui", "--cwd", str(work)], data, env=env, stdin="Hello.\n/transcript\n/quit\n"
        )
    assert result.returncode == 0, result.stderr
    live = "[provider_empty_reply] the model ended its turn without any text or tool call"
    assert live in result.stdout
    assert "tool_choice" not in result.stdout  # it was not sent
    after_live = result.stdout.split(live, 1)[1]
    assert "empty reply" in after_live, "the /transcript listing shows the notice too"
