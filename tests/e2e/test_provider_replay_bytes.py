"""What the model sees after a crash and Safe resume is byte-identical to what it sees without one.

Two sessions run the same turn with the real ``maka`` command and the OpenAI-compatible provider
against a local chat server: one to its end, one killed with SIGKILL at P7 (the tool's result is
committed, the next model request not yet sent) and then resumed. The request the resumed run
sends, rebuilt from the SQLite ledger, must equal byte for byte the request the uninterrupted run
sent live: same roles (no two user messages in a row), same tool-call arguments and results.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.chat_server import chat_server, text_reply, tool_reply
from tests.helpers.maka_run import committed_runs, maka

pytestmark = pytest.mark.e2e

# Keys out of sorted order: the live run holds them in this order, the ledger sorts them.
ARGUMENTS = '{"path": "notes.txt", "offset": 1, "limit": 2}'


def _env(url: str) -> dict[str, str]:
    return {
        "MAKA_PROVIDER": "openai",
        "MAKA_OPENAI_BASE_URL": url,
        "MAKA_MODEL": "tiny",
        "MAKA_OPENAI_TIMEOUT": "20",
        "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1",
    }


def _workspace(path: Path) -> Path:
    path.mkdir()
    (path / "notes.txt").write_text("alpha\nbeta\ngamma\n", encoding="utf-8")
    return path


def _turn(tmp_path: Path, name: str, failpoint: str | None) -> tuple[list[bytes], Path]:
    data = tmp_path / f"data-{name}"
    work = _workspace(tmp_path / f"work-{name}")
    replies = [tool_reply("call_1", "read_file", ARGUMENTS, text="Reading."), text_reply("Done.")]
    with chat_server(replies) as server:
        env = _env(server.base_url)
        if failpoint:
            env["MAKA_FAILPOINT"] = failpoint
        args = ["run", "--cwd", str(work), "--permission-mode", "auto", "read the notes"]
        result = maka(args, data, env=env)
        if failpoint:
            assert result.returncode == -9, result.stderr
            env.pop("MAKA_FAILPOINT")
            session = committed_runs(data)[0][0].session_id
            resumed = maka(
                ["resume", session, "--json", "--permission-mode", "auto"], data, env=env
            )
            assert resumed.returncode == 0, resumed.stdout + resumed.stderr
            assert json.loads(resumed.stdout)["status"] == "completed"
        else:
            assert result.returncode == 0, result.stderr
        return list(server.bodies), data


def test_the_resumed_request_is_byte_identical_to_the_uninterrupted_one(tmp_path: Path) -> None:
    live, _ = _turn(tmp_path, "live", None)
    replayed, data = _turn(tmp_path, "crashed", "P7")
    assert len(live) == 2 and len(replayed) == 2
    assert replayed[0] == live[0]  # the first request, before any tool ran
    assert replayed[1] == live[1]  # after the crash: rebuilt from the ledger
    second = json.loads(live[1])
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    # The crashed run was recovered and continued as a new run; the tool ran once.
    runs = committed_runs(data)
    assert runs[0][0].failure_class == "app_restarted"
    assert runs[-1][0].continuation_source is not None
