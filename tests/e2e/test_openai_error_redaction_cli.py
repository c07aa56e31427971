"""The real ``maka run`` against a server whose error text holds the API key just where the
shown message is cut: no prefix of the key is printed, logged or committed to the ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.chat_server import chat_server, json_error
from tests.helpers.maka_run import committed_runs, maka

pytestmark = pytest.mark.e2e

KEY = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdef"


def test_a_key_across_the_cut_of_an_error_message_is_never_shown_or_stored(
    tmp_path: Path,
) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    message = "x" * 259 + " " + KEY + " is not allowed here"
    with chat_server([json_error(401, {"error": {"message": message}})]) as server:
        result = maka(
            ["run", "--cwd", str(work), "Hello."],
            data,
            env={
                "MAKA_PROVIDER": "openai",
                "MAKA_OPENAI_BASE_URL": server.base_url,
                "MAKA_MODEL": "tiny",
                "MAKA_OPENAI_API_KEY": KEY,
                "MAKA_WORKSPACE_CHECKPOINTS": "off",
            },
        )
    assert result.returncode == 1, result.stderr
    assert "[redacted]" in result.stderr
    [(header, _events)] = committed_runs(data)
    assert header.failure_class == "provider_error"
    stored = b"".join(path.read_bytes() for path in data.rglob("*") if path.is_file())
    prefix = KEY[:8]  # any longer prefix holds this one
    assert prefix not in result.stdout + result.stderr
    assert prefix.encode() not in stored
