"""The real ``maka run`` against a local server that sends values no ledger event may hold: a
usage count above 2^53-1 and lone surrogates (``"\\ud800"``) in the reply and its reasoning. The
turn completes, the text is recorded with U+FFFD in place of each lone surrogate, and nothing
crashes.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from runtime.ledger.store_ports import RunStatus
from tests.helpers.chat_server import chat_server, send_data, sse_headers
from tests.helpers.maka_run import committed_runs, maka

pytestmark = pytest.mark.e2e

LONE = "\\ud800"


def _env(url: str) -> dict[str, str]:
    return {
        "MAKA_PROVIDER": "openai",
        "MAKA_OPENAI_BASE_URL": url,
        "MAKA_MODEL": "tiny",
        "MAKA_OPENAI_TIMEOUT": "60",
        "MAKA_WORKSPACE_CHECKPOINTS": "off",
    }


def _hostile(handler: BaseHTTPRequestHandler) -> None:
    sse_headers(handler)
    send_data(
        handler,
        '{"choices": [{"index": 0, "delta": {"role": "assistant", '
        f'"reasoning_content": "think{LONE}", "content": "Hello{LONE} there"}}}}]}}',
    )
    send_data(handler, '{"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}')
    send_data(
        handler,
        '{"choices": [], "usage": {"prompt_tokens": 100000000000000000000, '
        '"completion_tokens": 7}}',
    )
    send_data(handler, "[DONE]")


def test_a_huge_usage_count_and_lone_surrogates_never_crash_the_turn(tmp_path: Path) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    with chat_server([_hostile]) as server:
        result = maka(["run", "--cwd", str(work), "Hello."], data, env=_env(server.base_url))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "event_schema_invalid" not in result.stdout + result.stderr
    assert "Hello\ufffd there" in result.stdout
    [(header, events)] = committed_runs(data)
    assert header.status is RunStatus.COMPLETED
    recorded = json.dumps(events, ensure_ascii=False)
    assert "Hello\ufffd there" in recorded
    assert "think\ufffd" in recorded
    actions = [event.get("actions", {}) for event in events]
    usages = [action["tokenUsage"] for action in actions if "tokenUsage" in action]
    assert usages == [{"input": 0, "output": 7}]
