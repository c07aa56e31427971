"""The real ``maka run`` against a server whose content filter stops the reply: before any
text, the turn ends as an empty reply that says the content filter stopped it; after some, the
turn says the reply was cut off."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.ledger.store_ports import RunStatus
from tests.helpers.chat_server import chat_server, text_reply
from tests.helpers.maka_run import RunResult, committed_runs, maka

pytestmark = pytest.mark.e2e


def _run(tmp_path: Path, text: str) -> RunResult:
    """``maka run`` against a server whose reply is ``text`` and ends ``content_filter``."""
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    with chat_server([text_reply(text, finish="content_filter")]) as server:
        return maka(
            ["run", "--cwd", str(work), "Hello."],
            data,
            env={
                "MAKA_PROVIDER": "openai",
                "MAKA_OPENAI_BASE_URL": server.base_url,
                "MAKA_MODEL": "tiny",
                "MAKA_WORKSPACE_CHECKPOINTS": "off",
            },
        )


def test_a_reply_stopped_by_the_content_filter_says_so(tmp_path: Path) -> None:
    result = _run(tmp_path, "")
    assert result.returncode == 0, result.stderr
    assert "[provider_empty_reply]" in result.stdout
    assert "content filter stopped the reply" in result.stdout + result.stderr
    assert "tool_choice" not in result.stdout + result.stderr
    [(header, events)] = committed_runs(tmp_path / "data")
    assert header.status is RunStatus.COMPLETED
    assert events[-1]["actions"]["stateDelta"]["stopReason"] == "provider_empty_reply"


def test_a_reply_the_content_filter_cut_off_after_some_text_says_so(tmp_path: Path) -> None:
    """Some text, then the filter: the turn completes with that text and says the filter cut
    it off (it ended with stopReason content_filter and nothing said)."""
    result = _run(tmp_path, "Here is the fi")
    assert result.returncode == 0, result.stderr
    said = result.stdout + result.stderr
    assert "Here is the fi" in said
    assert "the server's content filter stopped it before it finished" in said, said
    [(header, events)] = committed_runs(tmp_path / "data")
    assert header.status is RunStatus.COMPLETED
    assert events[-1]["actions"]["stateDelta"]["stopReason"] == "content_filter"
